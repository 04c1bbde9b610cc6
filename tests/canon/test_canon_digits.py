"""scikit-learn's 8x8 digits as 2-D point clouds."""

import numpy as np
import pytest

from geomopt.canon import digits_clouds


@pytest.fixture(scope="module")
def images():
    from sklearn.datasets import load_digits

    return load_digits().images


def test_shapes_dtypes_and_labels(images):
    x, y = digits_clouds(16, seed=0)
    assert x.shape == (len(images), 16, 2) and x.dtype == np.float32
    assert y.shape == (len(images),) and y.dtype == np.int32
    counts = np.bincount(y)
    assert len(counts) == 10 and counts.min() >= 170 and counts.max() <= 190
    assert ((x >= 0) & (x < 1)).all()


def test_every_point_lies_in_an_ink_pixel_cell(images):
    x, _ = digits_clouds(64, seed=1)
    col = np.floor(x[..., 0] * 8).astype(int)
    row = 7 - np.floor(x[..., 1] * 8).astype(int)  # y is flipped: row 0 is the top
    ink = np.take_along_axis(images.reshape(len(images), 64), row * 8 + col, axis=1)
    assert (ink > 0).all()


def test_points_follow_the_ink_and_the_digit_is_upright(images):
    """Many points from one image: pixel frequencies match the intensities, and a 7's ink
    (its bar on top) lies mostly in the upper half."""
    x, y = digits_clouds(4000, seed=2)
    cell = (7 - np.floor(x[0, :, 1] * 8).astype(int)) * 8 + np.floor(x[0, :, 0] * 8).astype(int)
    freq = np.bincount(cell, minlength=64) / x.shape[1]
    p = images[0].ravel() / images[0].sum()
    np.testing.assert_allclose(freq, p, atol=0.02)  # sd <= 0.004 per pixel
    sevens = x[y == 7][:20]
    assert (sevens[..., 1] > 0.5).mean() > 0.5
    top = images[y == 7][:20, :4].sum() / images[y == 7][:20].sum()
    assert (sevens[..., 1] > 0.5).mean() == pytest.approx(top, abs=0.02)


def test_continuous_coordinates_and_no_ties():
    x, _ = digits_clouds(32, seed=3)
    for cloud in x[:50]:
        assert len(np.unique(cloud[:, 0])) == 32 and len(np.unique(cloud[:, 1])) == 32


def test_deterministic_per_seed():
    a, ya = digits_clouds(8, seed=5)
    b, yb = digits_clouds(8, seed=5)
    c, yc = digits_clouds(8, seed=6)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ya, yc)  # labels keep scikit-learn's order
    assert (np.abs(a - c) > 0).mean() > 0.9


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_bad_point_count(bad):
    with pytest.raises(ValueError, match=rf"^n_points={bad!r}: expected an integer >= 1"):
        digits_clouds(bad, seed=0)
