"""Real 2-D point clouds with no download: scikit-learn's 8x8 handwritten digits as clouds.

Point-cloud MNIST (each image a set of points drawn from its ink) at 8x8 resolution. The
images are ``sklearn.datasets.load_digits`` (shipped inside scikit-learn: the 1,797 test images
of the UCI optical-digits set, 13 writers, classes 0-9 with 174-183 images each). A pixel's
value ``v`` in 0..16 counts the ink pixels of a 4x4 block of the original 32x32 bitmap, so
drawing pixels with probability ``v / sum(v)`` and a uniform position inside the pixel is close
to drawing ink pixels of the 32x32 bitmap uniformly.

Cloud of an image (pixel ``(r, c)``, row ``r`` from the top, column ``c`` from the left):

- ``n_points`` pixels drawn independently (with replacement) with probability proportional to
  their value, so the points come in a random order and a pixel can hold several points;
- each point uniform in its pixel's cell of the unit square, with the y-axis flipped so that
  the digit is upright: ``x in [c/8, (c+1)/8)``, ``y in [(7-r)/8, (8-r)/8)``. The coordinates
  are continuous, so two points share a coordinate with probability ~0 (no ties in a lex sort).
"""

from __future__ import annotations

import numpy as np

__all__ = ["DIGITS_SIZE", "digits_clouds"]

DIGITS_SIZE = 8
"""Side of the digit images in pixels."""


def digits_clouds(n_points: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)``: float32 clouds ``(1797, n_points, 2)`` in ``[0, 1)^2`` and int32 labels
    ``(1797,)``, one cloud per image of ``sklearn.datasets.load_digits`` in scikit-learn's order
    (see module doc). Deterministic for a ``seed`` (``np.random.default_rng(seed)``).

    There is no official split of these 1,797 images: callers draw their own (e.g. a random
    permutation of the indices from their own seed).
    """
    if isinstance(n_points, bool) or not isinstance(n_points, (int, np.integer)) or n_points < 1:
        raise ValueError(f"n_points={n_points!r}: expected an integer >= 1")
    from sklearn.datasets import load_digits

    data = load_digits()
    pixels = data.images.reshape(len(data.images), -1).astype(np.int64)  # (N, 64), row-major
    total = pixels.sum(axis=1)  # 185 to 433 ink units per image
    # an ink unit r uniform in [0, total) of its image, found in the flattened running count
    # of all images' ink (integers, so exact): pixel j is hit with probability v_j / total
    n_pixels = pixels.shape[1]
    count = np.cumsum(pixels.ravel())
    start = np.concatenate([[0], count[n_pixels - 1 :: n_pixels][:-1]])
    rng = np.random.default_rng(seed)
    unit = start[:, None] + rng.integers(0, total[:, None], size=(len(pixels), n_points))
    pick = np.searchsorted(count, unit, side="right") - n_pixels * np.arange(len(pixels))[:, None]
    row, col = np.divmod(pick, DIGITS_SIZE)
    low = np.stack([col, DIGITS_SIZE - 1 - row], axis=-1).astype(np.float64)
    x = ((low + rng.random(low.shape)) / DIGITS_SIZE).astype(np.float32)
    # float32 rounding can land a point on its cell's upper edge; keep the cells half-open
    top = ((low + 1) / DIGITS_SIZE).astype(np.float32)
    x = np.where(x < top, x, np.nextafter(top, np.float32(0)))
    return x, data.target.astype(np.int32)
