"""Stability of a permutation canonization under small perturbations: how often, how far it jumps.

Every permutation canonization ``C`` of clouds in ``R^d`` (``d >= 2``) is discontinuous: it is
locally constant as a permutation away from a set of codimension one (ties of the first
coordinate for ``lex``; quantisation-cell faces, where a point's curve key changes, for
``hilbert`` / ``morton``), and jumps across it. So for a perturbation of size ``eps``:

(a) ``P(order changes)`` grows linearly in ``eps`` while it is small (log-log slope 1: the
    chance that a point lies within ``eps`` of a codimension-one set), then saturates at 1,
    close to ``1 - exp(-c eps)``; measured at ``d = 3`` with 64 points, linear only below about
    ``eps = 1e-4`` (lex) / ``1e-3`` (hilbert, morton), saturated by ``1e-2``
    (``experiments/canon/README.md``);
(b) conditioned on a change, the canonical form moves by a jump that does **not** shrink with
    ``eps``: displacement / Wasserstein distance grows like ``1/eps`` (slope -1). The jump size
    is the distance between the points that trade places: for ``lex`` two points with nearly
    equal first coordinate but arbitrary other coordinates (growing like ``sqrt(d - 1)``), for a
    curve order two points adjacent along the curve, whose distance the curve's Hoelder bound
    ties to their key gap (see :mod:`geomopt.canon._holder`).

:func:`stability_probe` measures both on given clouds. Perturbation: every point moves by
exactly ``eps`` in a uniformly random direction, so the Wasserstein-1 distance (mean matched
point distance) between ``X`` and ``X'`` is at most ``eps``. It equals ``eps`` exactly when the
cloud's smallest point separation is at least ``2 eps`` (any other matching pays at least
``sep - eps >= eps`` per moved point), and is otherwise computed by exact assignment.
"""

from __future__ import annotations

import numpy as np

__all__ = ["STABILITY_ORDERS", "perturb", "stability_probe", "summarise_stability"]

STABILITY_ORDERS: tuple[str, ...] = ("lex", "hilbert", "morton")


def perturb(x: np.ndarray, eps: float, rng) -> np.ndarray:
    """``x + eps * u`` with ``u`` an independent uniform unit vector per point."""
    g = rng.standard_normal(x.shape)
    g /= np.linalg.norm(g, axis=-1, keepdims=True)
    return x + eps * g


def _order_fn(order: str, bits: int):
    import functools

    import jax

    from geomopt.canon._orders import get_order

    fn = get_order(order)
    kw = {"bits": bits} if order in ("hilbert", "morton") else {}
    return jax.jit(functools.partial(fn, **kw))


def _min_separation(x: np.ndarray) -> np.ndarray:
    """The smallest distance between two points of each cloud of ``x (n, P, d)``."""
    p = x.shape[1]
    diff = x[:, :, None, :] - x[:, None, :, :]
    return np.sqrt((diff * diff).sum(-1) + np.where(np.eye(p, dtype=bool), np.inf, 0.0)).min((1, 2))


def _row(order: str, d: int, eps: float, ch, disp, move, ratio) -> dict:
    """One row of :func:`stability_probe` from the changed mask ``ch`` and the per-changed-cloud
    displacements, largest moves and ratios (NaN where there are none)."""
    nan = float("nan")
    return {
        "order": order,
        "d": d,
        "eps": eps,
        "changed": float(ch.mean()),
        "n_changed": int(ch.sum()),
        "disp": float(np.mean(disp)) if disp else nan,
        "max_move": float(np.mean(move)) if move else nan,
        "ratio": float(np.mean(ratio)) if ratio else nan,
    }


def stability_probe(
    clouds: np.ndarray,
    orders,
    eps_values,
    *,
    n_perturb: int = 4,
    bits: int = 12,
    seed: int = 0,
    max_ratio_clouds: int | None = None,
) -> list[dict]:
    """Rows ``{order, eps, changed, n_changed, disp, max_move, ratio}`` for clouds ``(n, P, d)``.

    Per order and ``eps``, over ``n * n_perturb`` perturbed clouds ``X'`` (:func:`perturb`):

    - ``changed``: fraction whose canonical permutation differs from that of ``X``;
    - ``disp``: mean over changed clouds of ``(1/P) sum_i |C(X)[i] - C(X')[i]|``;
    - ``max_move``: mean over changed clouds of ``max_i |C(X)[i] - C(X')[i]|`` (the jump in
      point units: about the distance between the points that traded places);
    - ``ratio``: mean over changed clouds of ``disp / W(X, X')`` (``W`` exact, see the module
      doc); with ``max_ratio_clouds`` over the first that many changed clouds only (an unbiased
      subsample that bounds the assignment solves at large ``P``).

    Orders use their own quantisation (global normalisation, ``bits`` per axis for
    ``hilbert``/``morton``): the grid is min-max normalised per cloud, so a perturbation that
    moves the cloud's bounding box moves every point's grid coordinates. NaN where no cloud
    changed.
    """
    from geomopt.canon._covering import assignment_distance

    x = np.asarray(clouds, np.float64)
    if x.ndim != 3 or not np.isfinite(x).all():
        raise ValueError(f"clouds of shape {x.shape}: expected finite (n, P, d)")
    eps_values = [float(e) for e in eps_values]
    if not eps_values or min(eps_values) <= 0:
        raise ValueError(f"eps {eps_values}: expected positive values")
    rng = np.random.default_rng(seed)
    n, p, d = x.shape
    pert = np.stack([perturb(np.broadcast_to(x, (n_perturb, n, p, d)), e, rng) for e in eps_values])
    flat = pert.reshape(-1, p, d).astype(np.float32)
    base32 = x.astype(np.float32)
    w_cache: dict[int, float] = {}
    sep = _min_separation(x)
    rows = []
    for order in orders:
        fn = _order_fn(order, bits)
        both = np.asarray(fn(np.concatenate([base32, flat])))  # one shape: one compilation
        base_perm = both[:n]
        perm = both[n:].reshape(len(eps_values), n_perturb, n, p)
        base = np.take_along_axis(x, base_perm[..., None], axis=1)
        for j, eps in enumerate(eps_values):
            ch = (perm[j] != base_perm[None]).any(-1)  # (n_perturb, n)
            disp, move, ratio = [], [], []
            for a, c in zip(*np.nonzero(ch), strict=True):
                moved = np.take_along_axis(pert[j, a, c], perm[j, a, c][:, None], axis=0)
                dist = np.linalg.norm(moved - base[c], axis=-1)
                disp.append(dist.mean())
                move.append(dist.max())
                if max_ratio_clouds is not None and len(ratio) >= max_ratio_clouds:
                    continue
                key = (j * n_perturb + a) * n + c
                if key not in w_cache:
                    w_cache[key] = (
                        eps if sep[c] >= 2 * eps else assignment_distance(x[c], pert[j, a, c])
                    )
                ratio.append(dist.mean() / max(w_cache[key], 1e-300))
            rows.append(_row(order, d, eps, ch, disp, move, ratio))
    return rows


def summarise_stability(rows: list[dict], *, saturate: float = 0.5) -> dict[str, float]:
    """Fitted numbers of one order at one ``d`` from its rows (sorted by ``eps``):

    - ``change_slope``: log-log slope of ``changed`` vs ``eps`` over the rows with
      ``0 < changed < saturate`` (theory: 1); NaN with fewer than two such rows;
    - ``ratio_slope``: log-log slope of ``ratio`` vs ``eps`` over the same rows (over every row
      with a change if fewer than two; theory: -1, a jump that does not shrink);
    - ``jump``: mean ``max_move`` over the rows with ``0 < changed < saturate`` (a single swap
      regime), else over every row with a change.
    """
    from geomopt.canon._covering import fit_exponent

    rows = sorted(rows, key=lambda r: r["eps"])
    low = [r for r in rows if 0 < r["changed"] < saturate]
    some = [r for r in rows if r["changed"] > 0]
    fit = low if len(low) >= 2 else some
    nan = float("nan")
    out = {
        "change_slope": fit_exponent([r["eps"] for r in low], [r["changed"] for r in low])
        if len(low) >= 2
        else nan,
        "ratio_slope": fit_exponent([r["eps"] for r in fit], [r["ratio"] for r in fit])
        if len(fit) >= 2
        else nan,
        "jump": float(np.mean([r["max_move"] for r in (low or some)])) if some else nan,
    }
    return out
