"""Point-cloud families of controlled intrinsic dimension ``k`` in any ambient dimension ``d``.

Class ``c`` has a template cloud ``T_c`` (``P`` points uniform in ``[0.2, 0.8]^d``) and ``k``
smooth deformation fields ``phi_j(x) = a_j sin(2 pi <w_j, x> + b_j)`` (``a_j`` a random unit
vector, ``w_j`` a random frequency vector with entries ``N(0, freq^2 / d)`` so ``|w_j|`` is about
``freq`` in every ``d``, ``b_j`` a random phase), all drawn once from ``class_seed``. A cloud of
class ``c`` is

    X = T_c + amplitude * sum_j theta_j phi_j(T_c),    theta ~ U[-1, 1]^k,

with its points then put in a uniformly random order. The map ``theta -> X`` is smooth, so a
class is a ``k``-dimensional family of clouds (up to the point order) whatever ``d`` is: the
covering number of the clouds under an invariant distance grows like ``eps^-k``, and the
nearest-neighbour distance among ``n`` clouds falls like ``n^(-1/k)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["deformed_template_clouds"]


def deformed_template_clouds(
    n_clouds: int,
    n_points: int,
    d: int,
    k: int,
    n_classes: int,
    *,
    seed: int,
    class_seed: int = 1234,
    amplitude: float = 0.1,
    freq: float = 2.0,
    shuffle: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, y, theta)``: float32 clouds ``(n_clouds, n_points, d)``, balanced labels in random
    order, and the parameters ``(n_clouds, k)`` (see module doc; ``shuffle`` randomises the point
    order of every cloud)."""
    for name, v in (("n_clouds", n_clouds), ("n_points", n_points), ("d", d), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name}={v!r}: expected a positive integer")
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 1:
        raise ValueError(f"n_classes={n_classes!r}: expected a positive integer")
    if not (np.isfinite(amplitude) and amplitude > 0):
        raise ValueError(f"amplitude={amplitude!r}: expected a finite value > 0")
    crng = np.random.default_rng([class_seed, d, k])
    templates = crng.uniform(0.2, 0.8, size=(n_classes, n_points, d))
    a = crng.standard_normal((n_classes, k, d))
    a /= np.linalg.norm(a, axis=-1, keepdims=True)
    w = crng.standard_normal((n_classes, k, d)) * (freq / np.sqrt(d))
    b = crng.uniform(0, 2 * np.pi, size=(n_classes, k))
    rng = np.random.default_rng([seed, d, k])
    y = np.arange(n_clouds) % n_classes
    rng.shuffle(y)
    theta = rng.uniform(-1, 1, size=(n_clouds, k))
    t = templates[y]  # (n, P, d)
    phase = np.einsum("npd,nkd->npk", t, w[y]) * 2 * np.pi + b[y][:, None, :]
    field = np.einsum("npk,nkd->npd", np.sin(phase) * theta[:, None, :], a[y])
    x = t + amplitude * field
    if shuffle:
        order = np.argsort(rng.random((n_clouds, n_points)), axis=1)
        x = np.take_along_axis(x, order[..., None], axis=1)
    return x.astype(np.float32), y.astype(np.int32), theta
