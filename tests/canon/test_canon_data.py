"""Synthetic point clouds and the ModelNet HDF5 loaders (official preprocessing)."""

import h5py
import numpy as np
import pytest

from geomopt.canon import (
    farthest_point_sample,
    load_modelnet,
    load_modelnet_covering,
    load_modelnet_h5,
    subsample_points,
    synthetic_clouds,
)
from geomopt.canon._data import modelnet_files, random_point_subset


def test_synthetic_shapes_balance_and_determinism():
    x, y = synthetic_clouds(12, 20, 5, 3, seed=0)
    assert x.shape == (12, 20, 5) and x.dtype == np.float32
    assert np.bincount(y).tolist() == [4, 4, 4]
    x2, y2 = synthetic_clouds(12, 20, 5, 3, seed=0)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    means = np.stack([x[y == c].mean(axis=(0, 1)) for c in range(3)])
    assert np.linalg.norm(means[0] - means[1]) > 0.05
    with pytest.raises(ValueError, match="d 0"):
        synthetic_clouds(2, 3, 0, 2, seed=0)


def _write(path, x, y):
    with h5py.File(path, "w") as f:
        f["data"] = x
        f["label"] = y


@pytest.fixture
def modelnet_dir(tmp_path):
    rng = np.random.default_rng(0)
    folder = tmp_path / "modelnet40_ply_hdf5_2048"
    folder.mkdir()
    for split, n in (("train", 2), ("test", 1)):
        for k in range(n):
            x = rng.random((3, 16, 3)).astype(np.float32) * 5 - 1
            _write(folder / f"ply_data_{split}{k}.h5", x, np.array([[k], [k + 1], [k + 2]], "u1"))
    return tmp_path


def test_official_stride_rule():
    x = np.arange(2048 * 3, dtype=np.float32).reshape(1, 2048, 3)
    sub = subsample_points(x, 1024)
    np.testing.assert_array_equal(sub, x[:, ::2][:, :1024])
    np.testing.assert_array_equal(subsample_points(x, 600), x[:, ::3][:, :600])
    assert subsample_points(x, 2048) is x


def test_loader_layout_splits_and_stride(modelnet_dir):
    xtr, ytr, xte, yte = load_modelnet(modelnet_dir, "modelnet40", n_points=8)
    assert xtr.shape == (6, 8, 3) and xte.shape == (3, 8, 3)
    assert ytr.tolist() == [0, 1, 2, 1, 2, 3] and ytr.dtype == np.int32
    raw, _ = load_modelnet_h5(modelnet_dir / "modelnet40_ply_hdf5_2048" / "ply_data_train0.h5")
    np.testing.assert_array_equal(xtr[:3], raw[:, ::2])
    with pytest.raises(FileNotFoundError, match="prepare_modelnet.py --dataset modelnet10"):
        load_modelnet(modelnet_dir, "modelnet10")
    with pytest.raises(ValueError, match="sampling"):
        load_modelnet(modelnet_dir, "modelnet40", sampling="random")


def test_fps_each_point_is_farthest_from_those_before():
    x = np.random.default_rng(1).random((3, 40, 3))
    out = farthest_point_sample(x, 10, seed=0)
    for cloud, picked in zip(x, out, strict=True):
        for i in range(1, 10):
            dist = np.min(((cloud[:, None] - picked[None, :i]) ** 2).sum(-1), axis=1)
            assert ((picked[i] - picked[:i]) ** 2).sum(-1).min() == pytest.approx(dist.max())


def test_covering_clouds_use_global_scalar_normalisation(modelnet_dir):
    xtr, _, xte, _ = load_modelnet_covering(modelnet_dir, "modelnet40", n_points=4)
    assert xtr.shape == (6, 4, 3)
    for c in np.concatenate([xtr, xte]):
        assert c.min() == pytest.approx(0.0) and c.max() == pytest.approx(1.0)
        # one scalar shift and scale: the per-axis minima are not all zero
    assert (xtr.min(axis=1) > 1e-6).any()


def test_covering_points_are_a_seeded_random_subset_in_drawn_order(modelnet_dir):
    raw_tr, _ = load_modelnet_h5(modelnet_files(modelnet_dir, "modelnet40", "train"))
    xtr, _, _, _ = load_modelnet_covering(modelnet_dir, "modelnet40", n_points=6, seed=3)
    sub = random_point_subset(raw_tr, 6, seed=3)  # drawn first, then normalised (official)
    z = sub - sub.min(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(xtr, z / z.max(axis=(1, 2), keepdims=True), rtol=1e-6)
    for cloud, points in zip(raw_tr, sub, strict=True):
        idx = [int(np.flatnonzero((cloud == q).all(1))[0]) for q in points]
        assert len(set(idx)) == 6  # distinct points of the cloud
    assert not np.array_equal(sub, subsample_points(raw_tr, 6))  # not the stride rule
    again, _, _, _ = load_modelnet_covering(modelnet_dir, "modelnet40", n_points=6, seed=3)
    other, _, _, _ = load_modelnet_covering(modelnet_dir, "modelnet40", n_points=6, seed=4)
    np.testing.assert_array_equal(again, xtr)
    assert not np.array_equal(other, xtr)


def test_random_subset_is_uniform_like_iid_surface_samples():
    """The official covering clouds are i.i.d. draws (PyG SamplePoints), in the order drawn; a
    uniform random subset in drawn order puts every stored point at every position with the
    same probability 1/P, with no point twice."""
    n_clouds, p, n = 16000, 8, 3
    x = np.broadcast_to(np.arange(p, dtype=np.float32)[None, :, None], (n_clouds, p, 1))
    idx = random_point_subset(x, n, seed=0)[..., 0].astype(int)
    assert (np.sort(idx, axis=1)[:, 1:] != np.sort(idx, axis=1)[:, :-1]).all()
    counts = np.stack([np.bincount(idx[:, j], minlength=p) for j in range(n)])
    expected = n_clouds / p  # 2000 per (position, point); binomial sd about 33
    assert np.abs(counts - expected).max() < 6 * np.sqrt(expected)
    # in drawn order, not sorted or file order: a later position is as often smaller as larger
    assert abs((idx[:, 1] > idx[:, 0]).mean() - 0.5) < 0.02
    np.testing.assert_array_equal(
        random_point_subset(x, n, seed=0), random_point_subset(x, n, seed=0)
    )
    with pytest.raises(ValueError, match="n_points 9"):
        random_point_subset(x, 9)


def test_loader_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad.h5"
    with h5py.File(bad, "w") as f:
        f["points"] = np.zeros((1, 2, 3))
    with pytest.raises(KeyError, match="data"):
        load_modelnet_h5(bad)
    nan = tmp_path / "nan.h5"
    _write(nan, np.full((1, 4, 3), np.nan, np.float32), np.zeros(1, "u1"))
    with pytest.raises(ValueError, match="non-finite"):
        load_modelnet_h5(nan)
