"""Template families of intrinsic dimension k."""

import numpy as np
import pytest

from geomopt.canon._families import deformed_template_clouds


def test_family_is_k_dimensional_and_shuffled():
    x, y, theta = deformed_template_clouds(6, 20, 5, 2, 2, seed=0)
    assert x.shape == (6, 20, 5) and theta.shape == (6, 2) and sorted(set(y.tolist())) == [0, 1]
    # unshuffled clouds are an affine function of theta (the fields are fixed per class)
    xs, ys, th = deformed_template_clouds(40, 20, 5, 2, 1, seed=1, shuffle=False)
    flat = xs.reshape(40, -1).astype(np.float64)
    design = np.concatenate([np.ones((40, 1)), th], 1)
    coef, *_ = np.linalg.lstsq(design, flat, rcond=None)
    np.testing.assert_allclose(design @ coef, flat, atol=1e-5)
    assert np.linalg.matrix_rank(flat - flat.mean(0), tol=1e-4) == 2
    # shuffling only reorders points
    xp, _, _ = deformed_template_clouds(40, 20, 5, 2, 1, seed=1, shuffle=True)
    np.testing.assert_allclose(np.sort(xp, axis=1), np.sort(xs, axis=1))
    assert not np.allclose(xp, xs)


def test_family_errors():
    with pytest.raises(ValueError, match="k=0"):
        deformed_template_clouds(2, 4, 2, 0, 1, seed=0)
    with pytest.raises(ValueError, match="amplitude"):
        deformed_template_clouds(2, 4, 2, 1, 1, seed=0, amplitude=-1.0)
