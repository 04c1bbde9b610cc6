"""Score-field diagnostics along an endpoint pair: what force a denoiser exerts on the straight
path between two points, at which noise level, and in which direction.

The force is the official one, ``F(z, sigma) = (D(z, sigma) - z) / sigma``, which by Tweedie's
formula is ``sigma * s(z, sigma)`` with ``s`` the score of the data smoothed at ``sigma``; a
model with a ``score(x, sigma)`` method (every denoiser and exact potential of
:mod:`geomopt.diffusion`, the latent shape and digits denoisers) or a plain callable
``(x, sigma) -> score`` is accepted. Three diagnostics, as the official score diagnostics:

1. :attr:`ScoreDiagnostics.force_norm` — ``|F(z, sigma)|`` at ``n_points`` points of the straight
   path ``(1 - a) x0 + a x1`` for every ``sigma`` of ``sigmas`` (a heat map over ``a`` and sigma).
2. :attr:`ScoreDiagnostics.tangential` / :attr:`ScoreDiagnostics.normal` — the force at
   ``sigma`` split into its component along the path direction ``e1 = (x1 - x0) / |x1 - x0|``
   (signed here; the official plot shows its magnitude: speeding up or slowing down the path) and
   the norm of the rest (the part that bends the path towards the data).
3. :attr:`ScoreDiagnostics.plane` — the force at ``sigma`` on a ``grid_size x grid_size`` grid of
   the plane through the pair's midpoint spanned by ``e1`` and a random unit ``e2`` orthogonal to
   it, in coordinates of half the pair's distance (the endpoints at ``(-1, 0)`` and ``(1, 0)``),
   each force projected onto ``(e1, e2)`` and its full norm.

Everything is evaluated in one vectorised call per diagnostic (no Python loop over points).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "DEFAULT_DIAGNOSTIC_SIGMAS",
    "PlaneField",
    "ScoreDiagnostics",
    "plot_diagnostics",
    "score_diagnostics",
    "score_force",
]

DEFAULT_DIAGNOSTIC_SIGMAS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""The official heat map's noise levels."""


def _score_fn(model) -> Callable:
    if hasattr(model, "score"):
        return model.score
    if callable(model):
        return model
    raise TypeError(
        f"model must have .score(x, sigma) or be a callable (x, sigma) -> score, got "
        f"{type(model).__name__}"
    )


def score_force(model, x, sigma) -> jax.Array:
    """``F(x, sigma) = sigma * s(x, sigma)`` (``= (D(x, sigma) - x) / sigma``) at one point
    ``(d,)`` or a batch ``(..., d)``."""
    fn = _score_fn(model)
    x = jnp.asarray(x)
    flat = x.reshape(-1, x.shape[-1])
    s = jax.vmap(lambda p: fn(p, jnp.asarray(sigma, p.dtype)))(flat).astype(flat.dtype)
    return (jnp.asarray(sigma, flat.dtype) * s).reshape(x.shape)


@dataclasses.dataclass(frozen=True)
class PlaneField:
    """The force in the plane of the pair and a random direction (grids ``(G, G)``, index
    ``[i, j]`` at ``(u[i], v[j])``)."""

    u: np.ndarray
    """Grid coordinate along ``e1`` (units of half the pair's distance), ``(G,)``."""
    v: np.ndarray
    """Grid coordinate along ``e2``, ``(G,)``."""
    points: np.ndarray
    """The grid's points in the data space, ``(G, G, d)``."""
    f_u: np.ndarray
    """Force component along ``e1``."""
    f_v: np.ndarray
    """Force component along ``e2``."""
    f_norm: np.ndarray
    """Full force norm (also the part outside the plane)."""
    e1: np.ndarray
    e2: np.ndarray


@dataclasses.dataclass(frozen=True)
class ScoreDiagnostics:
    """What :func:`score_diagnostics` measured on one pair (module doc)."""

    alphas: np.ndarray
    """Positions ``a`` on the straight path, ``(K,)``."""
    sigmas: np.ndarray
    """Noise levels of the heat map, ``(S,)``."""
    forces: np.ndarray
    """``F((1 - a) x0 + a x1, sigma)`` for every ``sigma`` of ``sigmas``, ``(S, K, d)``."""
    force_norm: np.ndarray
    """``|F((1 - a) x0 + a x1, sigma)|``, ``(S, K)``."""
    sigma: float
    """Noise level of the decomposition and the plane field."""
    path_force: np.ndarray
    """The force at ``sigma`` on the straight path, ``(K, d)``."""
    tangential: np.ndarray
    """Its signed component along ``e1``, ``(K,)``."""
    normal: np.ndarray
    """The norm of the rest, ``(K,)``."""
    total: np.ndarray
    """``|F|`` at ``sigma``, ``(K,)``."""
    plane: PlaneField

    @property
    def normal_fraction(self) -> float:
        """``sum normal^2 / sum total^2`` over the path: the share of the force's energy that
        bends the straight path (1: all normal, 0: all along it)."""
        tot = float(np.sum(self.total**2))
        return float(np.sum(self.normal**2) / tot) if tot > 0 else float("nan")


def _check(x0, x1, sigma, sigmas, n_points, grid_size, extent):
    x0, x1 = np.asarray(x0), np.asarray(x1)
    if x0.ndim != 1 or x0.shape != x1.shape:
        raise ValueError(f"x0 {x0.shape}, x1 {x1.shape}: expected two points of one shape (d,)")
    if not (np.all(np.isfinite(x0)) and np.all(np.isfinite(x1))):
        raise ValueError("x0 / x1: expected finite points")
    if not np.any(x0 != x1):
        raise ValueError("x0 == x1: expected two distinct points (the path direction is x1 - x0)")
    for name, v in (("sigma", sigma), *((f"sigmas[{i}]", s) for i, s in enumerate(sigmas))):
        if not (np.isfinite(v) and v > 0):
            raise ValueError(f"{name}={v!r}: expected a positive noise level")
    if len(sigmas) == 0:
        raise ValueError("sigmas=(): expected at least one noise level")
    for name, v in (("n_points", n_points), ("grid_size", grid_size)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 2:
            raise ValueError(f"{name}={v!r}: expected an integer >= 2")
    if not (np.isfinite(extent) and extent > 0):
        raise ValueError(f"extent={extent!r}: expected a positive half-width")
    return x0, x1


def _heat(fn, pts, sigmas):
    """The force ``sigma * s(x, sigma)`` at every point for every sigma, ``(S, K, d)``."""

    def at(s):
        return s * jax.vmap(lambda p: fn(p, s))(pts)

    return jax.vmap(at)(sigmas)


def score_diagnostics(
    model,
    x0,
    x1,
    *,
    sigma: float,
    sigmas: Sequence[float] = DEFAULT_DIAGNOSTIC_SIGMAS,
    n_points: int = 20,
    grid_size: int = 15,
    extent: float = 1.5,
    key: jax.Array | int = 0,
) -> ScoreDiagnostics:
    """The three official diagnostics of ``model``'s force field for the pair ``x0``, ``x1``
    (module doc). ``sigma`` is the level of the decomposition and the plane field, ``sigmas``
    the heat map's; ``key`` (or an integer seed) draws the plane's second direction (in 2-D it
    is the orthogonal direction with a random sign). Defaults are the official ones."""
    x0, x1 = _check(x0, x1, sigma, tuple(sigmas), n_points, grid_size, extent)
    fn = _score_fn(model)
    dtype = jnp.result_type(float)
    a = jnp.linspace(0.0, 1.0, n_points, dtype=dtype)
    p0, p1 = jnp.asarray(x0, dtype), jnp.asarray(x1, dtype)
    pts = (1 - a)[:, None] * p0[None, :] + a[:, None] * p1[None, :]
    sig = jnp.asarray(tuple(sigmas), dtype)
    heat = _heat(fn, pts, sig)
    f = score_force(fn, pts, sigma)
    e1 = (p1 - p0) / jnp.linalg.norm(p1 - p0)
    tan = f @ e1
    nor = jnp.linalg.norm(f - tan[:, None] * e1[None, :], axis=-1)
    key = jax.random.key(key) if isinstance(key, (int, np.integer)) else key
    r = jax.random.normal(key, p0.shape, dtype)
    r = r - (r @ e1) * e1
    if float(jnp.linalg.norm(r)) < 1e-12:  # d = 1: no second direction
        raise ValueError("x0, x1 of dimension 1: the plane field needs d >= 2")
    e2 = r / jnp.linalg.norm(r)
    s = jnp.linspace(-extent, extent, grid_size, dtype=dtype)
    half = 0.5 * jnp.linalg.norm(p1 - p0)
    centre = 0.5 * (p0 + p1)
    grid = centre[None, None, :] + half * (s[:, None, None] * e1[None, None, :]
                                          + s[None, :, None] * e2[None, None, :])  # (G, G, d)
    fg = score_force(fn, grid, sigma)
    return ScoreDiagnostics(
        alphas=np.asarray(a),
        sigmas=np.asarray(sig),
        forces=np.asarray(heat),
        force_norm=np.asarray(jnp.linalg.norm(heat, axis=-1)),
        sigma=float(sigma),
        path_force=np.asarray(f),
        tangential=np.asarray(tan),
        normal=np.asarray(nor),
        total=np.asarray(jnp.linalg.norm(f, axis=-1)),
        plane=PlaneField(
            u=np.asarray(s), v=np.asarray(s), points=np.asarray(grid),
            f_u=np.asarray(fg @ e1), f_v=np.asarray(fg @ e2),
            f_norm=np.asarray(jnp.linalg.norm(fg, axis=-1)), e1=np.asarray(e1),
            e2=np.asarray(e2),
        ),  # fmt: skip
    )


def plot_diagnostics(diag: ScoreDiagnostics, axes, *, label: str = "") -> None:
    """Draw one :class:`ScoreDiagnostics` on three matplotlib axes: the heat map (sigma vs
    ``a``), the decomposition at ``diag.sigma`` and the plane field (unit arrows coloured by
    ``|F|``, the pair and its straight path)."""
    ax0, ax1, ax2 = axes
    im = ax0.imshow(diag.force_norm, aspect="auto", origin="lower", cmap="viridis",
                    extent=(0, 1, 0, len(diag.sigmas)), interpolation="nearest")  # fmt: skip
    ax0.set_yticks(np.arange(len(diag.sigmas)) + 0.5)
    ax0.set_yticklabels([f"{s:g}" for s in diag.sigmas], fontsize=6)
    ax0.set_xlabel("a (0: x0, 1: x1)")
    ax0.set_ylabel("sigma")
    ax0.set_title(f"|F| on the straight path {label}".strip(), fontsize=8)
    ax0.figure.colorbar(im, ax=ax0)
    ax1.plot(diag.alphas, diag.total, "k-", label="|F|")
    ax1.plot(diag.alphas, np.abs(diag.tangential), "b--", label="|F tangential|")
    ax1.plot(diag.alphas, diag.normal, "r-", label="|F normal|")
    ax1.set_xlabel("a")
    ax1.set_title(f"decomposition, sigma = {diag.sigma:g}", fontsize=8)
    ax1.legend(fontsize=6)
    pl = diag.plane
    uu, vv = np.meshgrid(pl.u, pl.v, indexing="ij")
    n = np.hypot(pl.f_u, pl.f_v) + 1e-12
    ax2.quiver(uu, vv, pl.f_u / n, pl.f_v / n, pl.f_norm, cmap="magma")
    ax2.plot([-1, 1], [0, 0], "g-", lw=2, alpha=0.6)
    ax2.plot([-1], [0], "go")
    ax2.plot([1], [0], "rs")
    ax2.set_aspect("equal")
    ax2.set_xlabel("e1 (x0 -> x1)")
    ax2.set_ylabel("e2")
    ax2.set_title(f"field in the pair's plane, sigma = {diag.sigma:g}", fontsize=8)
