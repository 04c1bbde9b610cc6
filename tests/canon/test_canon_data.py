"""Synthetic point clouds and the ModelNet40 HDF5 loader."""

import h5py
import numpy as np
import pytest

from geomopt.canon import load_modelnet_h5, synthetic_clouds


def test_synthetic_shapes_balance_and_determinism():
    x, y = synthetic_clouds(12, 20, 5, 3, seed=0)
    assert x.shape == (12, 20, 5) and x.dtype == np.float32
    assert np.bincount(y).tolist() == [4, 4, 4]
    x2, y2 = synthetic_clouds(12, 20, 5, 3, seed=0)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    # classes differ: class means are farther apart than clouds within a class
    means = np.stack([x[y == c].mean(axis=(0, 1)) for c in range(3)])
    assert np.linalg.norm(means[0] - means[1]) > 0.05
    with pytest.raises(ValueError, match="d 0"):
        synthetic_clouds(2, 3, 0, 2, seed=0)


def test_modelnet_loader(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for k in range(2):
        p = tmp_path / f"ply_data_train{k}.h5"
        with h5py.File(p, "w") as f:
            f["data"] = rng.random((3, 16, 3)).astype(np.float32)
            f["label"] = np.array([[k], [k + 1], [k + 2]], np.uint8)
        paths.append(p)
    x, y = load_modelnet_h5(paths, n_points=8)
    assert x.shape == (6, 8, 3) and y.tolist() == [0, 1, 2, 1, 2, 3]
    bad = tmp_path / "bad.h5"
    with h5py.File(bad, "w") as f:
        f["points"] = np.zeros((1, 2, 3))
    with pytest.raises(KeyError, match="data"):
        load_modelnet_h5(bad)
    with pytest.raises(ValueError, match="n_points 32"):
        load_modelnet_h5(paths[0], n_points=32)
