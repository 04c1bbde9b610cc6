"""The official GFM latent pipeline (3-D shape and image latents) and its baselines.

A latent is an array of any shape ``latent_shape`` (e.g. ``(512, 8)`` for the shape VAE, or
``(4, 64, 64)`` for an image latent). Every function here acts on ONE pair of latents; the
callables it takes act on ONE latent:

- ``denoiser(z, sigma) -> z_hat``: the EDM denoiser ``D(z, sigma)`` on one latent (shape
  ``latent_shape``) and a scalar ``sigma`` array. Class conditioning is the caller's closure
  (``functools.partial(net, label=c)`` or an Equinox module holding the label). The force is the
  score ``(D(z, sigma) - z) / sigma^2``.
- ``decode(z) -> anything``: optional, applied to each denoised waypoint on the host.

Pipeline (:func:`interpolate`, the official ``optim_path.py`` for the GFM/"EL" method):

1. noise both endpoints, ``z + sigma N(0, I)`` (sigma 0.3 for shapes; :func:`noise_endpoints`);
2. solve the path of ``n_points`` waypoints (10, endpoints included) between the noisy endpoints
   with the score at ``sigma`` as the force (``lam`` 1), hypersphere-projected residual, SLERP
   initialisation: by the matrix-free Levenberg-Marquardt (:func:`geomopt.gfm.solve_matrix_free`,
   ``method="gfm"``) or the official Adam (lr 0.01, eps 1e-5, 500 iterations, no clipping,
   force detached; :func:`official_adam`, ``method="gfm_adam"``);
3. denoise every waypoint, endpoints included, with the EDM Heun sampler from ``sigma`` to
   0.002 (rho 7, 5 noise levels, then the final Euler step to 0; :func:`heun_denoise`);
4. decode.

Also :func:`sequential_warm_start` (the official ``SeqELInterpolator``: frames placed one by
one, then a global Euclidean EL refinement), and the baselines :func:`linear_path`,
:func:`slerp_path` and :func:`mccann_path` (McCann displacement interpolation through one
entropic OT map, for latents that are sets of vectors, with ``ott-jax``).

Example (shapes)::

    from geomopt.gfm import latent
    out = latent.interpolate(z_a, z_b, denoiser=partial(edm, label=3), method="gfm",
                             key=jax.random.key(0), decode=decoder)
    out.clean    # (10, 512, 8) denoised waypoints; out.decoded: list of decoder outputs
    out.report   # MatrixFreeReport: converged / iterations / residual
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ._init import slerp
from ._matrix_free import gfm_residual, solve_matrix_free
from ._status import MatrixFreeReport

__all__ = [
    "METHODS",
    "LatentPath",
    "FlatScore",
    "noise_endpoints",
    "heun_sigmas",
    "heun_denoise",
    "denoise_path",
    "linear_path",
    "slerp_path",
    "mccann_path",
    "official_adam",
    "official_adam_path",
    "sequential_warm_start",
    "solve_latent",
    "interpolate",
]

METHODS = ("gfm", "gfm_adam", "seq_gfm", "linear", "slerp", "mccann")


def _check_pair(x0, x1):
    """Host-side checks of an endpoint pair; returns NumPy arrays of one float dtype."""
    a0, a1 = np.asarray(x0), np.asarray(x1)
    for name, a in (("x0", a0), ("x1", a1)):
        if not np.issubdtype(a.dtype, np.floating) or a.dtype == np.float16:
            raise TypeError(f"latent {name} has dtype {a.dtype}; expected float32 or float64")
        if a.ndim == 0 or a.size == 0:
            raise ValueError(f"latent {name} has shape {a.shape}; expected a non-empty array")
    if a0.shape != a1.shape:
        raise ValueError(f"latents have shapes {a0.shape} and {a1.shape}; expected equal shapes")
    if a0.dtype != a1.dtype:
        raise TypeError(f"latents have dtypes {a0.dtype} and {a1.dtype}; expected one dtype")
    for name, a in (("x0", a0), ("x1", a1)):
        if not np.isfinite(a).all():
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
            raise ValueError(f"latent {name} has a non-finite entry {a[bad]} at index {bad}")
    return a0, a1


def _check_sigma(sigma, name="sigma"):
    s = float(sigma)
    if not (np.isfinite(s) and s > 0):
        raise ValueError(f"{name}={sigma!r}: expected a finite number > 0")
    return s


def noise_endpoints(x0, x1, sigma, *, key):
    """``(x0 + sigma n0, x1 + sigma n1)`` with independent standard normal ``n0``, ``n1``."""
    a0, a1 = _check_pair(x0, x1)
    sigma = _check_sigma(sigma)
    k0, k1 = jax.random.split(key)
    n0 = jax.random.normal(k0, a0.shape, a0.dtype)
    n1 = jax.random.normal(k1, a1.shape, a1.dtype)
    return jnp.asarray(a0) + sigma * n0, jnp.asarray(a1) + sigma * n1


class FlatScore(eqx.Module):
    """``x -> (D(x.reshape(shape), sigma) - x) / sigma^2`` flattened: the score of a latent
    denoiser as a function of the flattened latent (what the solvers take). ``sigma`` is an
    array field (a new noise level does not recompile)."""

    denoiser: Callable
    sigma: jax.Array = eqx.field(converter=jnp.asarray)
    shape: tuple[int, ...] = eqx.field(static=True)

    def __call__(self, x):
        z = x.reshape(self.shape)
        s = self.sigma.astype(x.dtype)
        out = jnp.asarray(self.denoiser(z, s))
        if out.shape != z.shape:
            raise ValueError(f"denoiser returned shape {out.shape}, expected {z.shape}")
        return ((out.astype(x.dtype) - z) / s**2).reshape(-1)


def heun_sigmas(sigma_start, num_steps: int = 5, sigma_min: float = 0.002, rho: float = 7.0):
    """EDM's noise levels from ``sigma_start`` to ``sigma_min`` (``num_steps`` of them, eq. 5),
    followed by 0: ``(num_steps + 1,)``."""
    if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 2:
        raise ValueError(f"num_steps={num_steps!r}: expected an int >= 2")
    if not 0 < sigma_min < sigma_start:
        raise ValueError(
            f"sigma_start={sigma_start!r}, sigma_min={sigma_min!r}: expected 0 < min < start"
        )
    i = np.arange(num_steps) / (num_steps - 1)
    lo, hi = sigma_min ** (1 / rho), sigma_start ** (1 / rho)
    return np.concatenate([(hi + i * (lo - hi)) ** rho, [0.0]])


def heun_denoise(denoiser: Callable, z, sigmas):
    """EDM Heun sampler (deterministic, no churn) started AT noise level ``sigmas[0]`` from the
    latent ``z`` (the official ``edm_sampler(..., init_at_sigma=True)``): for each step
    ``d = (z - D(z, t)) / t``, Euler to ``t_next``, then Heun's correction except on the last step
    to ``sigma = 0`` (which is ``z <- D(z, sigma_min)``). ``sigmas``: :func:`heun_sigmas`.
    Traceable; one latent. The official code runs in float64; this runs in ``z``'s dtype."""
    sigmas = jnp.asarray(sigmas, z.dtype)
    n = sigmas.shape[0] - 1

    def step(i, x):
        t, t_next = sigmas[i], sigmas[i + 1]
        d_cur = (x - denoiser(x, t)) / t
        x_euler = x + (t_next - t) * d_cur
        t_safe = jnp.where(t_next > 0, t_next, 1.0)
        d_new = (x_euler - denoiser(x_euler, t_safe)) / t_safe
        x_heun = x + (t_next - t) * 0.5 * (d_cur + d_new)
        return jnp.where(i < n - 1, x_heun, x_euler)

    return jax.lax.fori_loop(0, n, step, z)


@eqx.filter_jit
def _denoise_path(denoiser, path, sigmas):
    return jax.vmap(lambda z: heun_denoise(denoiser, z, sigmas))(path)


def denoise_path(denoiser: Callable, path, sigma_start, *, num_steps=5, sigma_min=0.002, rho=7.0):
    """Denoise every waypoint of ``path`` ``(n_points, *latent_shape)`` (endpoints included)
    with :func:`heun_denoise` from ``sigma_start`` (official: the solve's sigma, 5 steps,
    to 0.002, rho 7). Jitted with ``eqx.filter_jit``: an Equinox-module denoiser's arrays are
    traced (new weights do not recompile); a plain function is part of the compiled code."""
    path = jnp.asarray(path)
    sigmas = heun_sigmas(_check_sigma(sigma_start, "sigma_start"), num_steps, sigma_min, rho)
    return _denoise_path(denoiser, path, sigmas)


def linear_path(x0, x1, n_points: int = 10):
    """``(1 - t) x0 + t x1`` at ``n_points`` equally spaced ``t``: ``(n_points, *shape)``."""
    a0, a1 = _check_pair(x0, x1)
    t = np.linspace(0.0, 1.0, n_points, dtype=a0.dtype).reshape((-1,) + (1,) * a0.ndim)
    return jnp.asarray(a0[None] * (1.0 - t) + a1[None] * t)


def slerp_path(x0, x1, n_points: int = 10):
    """SLERP of the flattened latents (:func:`geomopt.gfm.slerp`): ``(n_points, *shape)``."""
    a0, a1 = _check_pair(x0, x1)
    return slerp(jnp.asarray(a0.reshape(-1)), jnp.asarray(a1.reshape(-1)), n_points).reshape(
        (n_points,) + a0.shape
    )


def mccann_path(x0, x1, n_points: int = 10, *, eps_scale=0.05, threshold=1e-6, max_iters=200):
    """McCann displacement interpolation between two latents that are sets of vectors.

    ``x0``, ``x1``: ``(N, C)`` (N vectors in R^C, equal weights; for an image latent
    ``(C, H, W)`` pass ``z.reshape(C, -1).T``). One entropic OT solve between them with
    ``ott-jax`` (squared Euclidean cost, ``epsilon = eps_scale * median(cost)``, as the official
    ``mccann.py``), barycentric map ``T(x_i) = N sum_j P_ij y_j``, then
    ``Z_alpha = (1 - alpha) X + alpha T(X)``; the endpoints are set exactly to ``x0``/``x1`` (the
    official convention; ``T(X)`` is an entropic blur of ``x1``). ``threshold`` is ott's marginal
    error tolerance (the official code checks the largest row-sum error against 1e-6).
    Returns ``(n_points, N, C)``.
    """
    a0, a1 = _check_pair(x0, x1)
    if a0.ndim != 2:
        raise ValueError(f"mccann_path: latents of shape {a0.shape}; expected (N, C) sets")
    # ott broadcasts by rank promotion internally; allow it for this call only.
    with jax.numpy_rank_promotion("allow"):
        return _mccann(
            jnp.asarray(a0), jnp.asarray(a1), n_points, eps_scale, threshold, int(max_iters)
        )


@partial(jax.jit, static_argnums=(2, 5))
def _mccann(x, y, n_points, eps_scale, threshold, max_iters):
    from ott.geometry import pointcloud
    from ott.problems.linear import linear_problem
    from ott.solvers.linear import sinkhorn

    cost = jnp.maximum(jnp.sum(x**2, 1)[:, None] + jnp.sum(y**2, 1)[None, :] - 2.0 * x @ y.T, 0.0)
    eps = eps_scale * jnp.maximum(jnp.median(cost), 1e-8)
    geom = pointcloud.PointCloud(x, y, epsilon=eps)
    solver = sinkhorn.Sinkhorn(threshold=threshold, max_iterations=max_iters)
    out = solver(linear_problem.LinearProblem(geom))
    t_x = x.shape[0] * out.matrix @ y
    alpha = jnp.linspace(0.0, 1.0, n_points, dtype=x.dtype)[:, None, None]
    path = (1.0 - alpha) * x[None] + alpha * t_x[None]
    return path.at[0].set(x).at[-1].set(y)


def _official_loss(inner, x0, x1, score, lam, kind):
    path = jnp.concatenate([x0[None], inner, x1[None]], axis=0)
    w = gfm_residual(path, lam=lam, score=lambda x: jax.lax.stop_gradient(score(x)), kind=kind)
    return jnp.mean(w**2), w


@eqx.filter_jit
def _adam_jit(path0, score, lam, lr, eps, iters, kind):
    opt = optax.adam(lr, eps=eps)
    x0, x1 = path0[0], path0[-1]

    def step(carry, _):
        inner, state = carry
        (_, w), g = jax.value_and_grad(_official_loss, has_aux=True)(
            inner, x0, x1, score, lam, kind
        )
        upd, state = opt.update(g, state, inner)
        rms = jnp.sqrt(jnp.mean(jnp.sum(w**2, axis=-1)))
        return (optax.apply_updates(inner, upd), state), rms

    inner0 = path0[1:-1]
    (inner, _), hist = jax.lax.scan(step, (inner0, opt.init(inner0)), None, length=iters)
    path = jnp.concatenate([x0[None], inner, x1[None]], axis=0)
    w = gfm_residual(path, lam=lam, score=score, kind=kind)
    return path, hist, jnp.sqrt(jnp.mean(jnp.sum(w**2, axis=-1)))


def official_adam(
    x0, x1, *, score, n_points=10, lam=1.0, lr=0.01, eps=1e-5, iters=500, residual="hypersphere"
):
    """The official GFM latent solver: SLERP init, Adam (lr 0.01, eps 1e-5, no clipping) on
    ``mean((P a_i + lam P s(x_i))^2)`` over all entries, the force detached, a fixed number of
    iterations (500 for shapes), no early stop. ``x0``, ``x1`` flattened ``(d,)``.

    Returns ``(path, rms_history, final_rms)``: ``rms_history[k]`` is ``sqrt(mean_i |r_i|^2)``
    before update ``k``. The official loss also averages over a batch of pairs (16 in the shape
    runs), which scales the gradient relative to ``eps``; here the mean is per pair.
    """
    a0, a1 = _check_pair(x0, x1)
    if a0.ndim != 1:
        raise ValueError(f"official_adam: latents of shape {a0.shape}; expected flat (d,)")
    path0 = slerp(jnp.asarray(a0), jnp.asarray(a1), n_points)
    return _adam_jit(
        path0,
        score,
        jnp.asarray(lam, a0.dtype),
        jnp.asarray(lr, a0.dtype),
        jnp.asarray(eps, a0.dtype),
        int(iters),
        residual,
    )


def official_adam_path(
    path0, *, score, lam=1.0, lr=0.01, eps=1e-5, iters=500, residual="hypersphere"
):
    """:func:`official_adam` from a given initial path ``path0`` ``(n_points, d)`` (its first
    and last rows are the endpoints, kept fixed) and without the host-side checks of the
    endpoints, so it traces: call it inside ``jit`` / ``vmap`` (``iters`` and ``residual`` are
    static). Returns ``(path, rms_history, final_rms)`` as :func:`official_adam` does."""
    dtype = path0.dtype
    return _adam_jit(
        path0,
        score,
        jnp.asarray(lam, dtype),
        jnp.asarray(lr, dtype),
        jnp.asarray(eps, dtype),
        int(iters),
        residual,
    )


@eqx.filter_jit
def _seq_warmup(x0, x1, score, lam, lr, warmup_iters, n_points):
    dt = 1.0 / (n_points - 1)
    opt = optax.adamw(0.5 * lr, weight_decay=0.01)  # torch.optim.AdamW defaults otherwise
    v_expected = (x1 - x0) / (n_points - 1)

    def frame(carry, i):
        prev_prev, prev, current = carry
        z0 = current + (x1 - current) / (n_points - i)

        def loss(z):
            # Official: the force comes from a no-grad call, so its term has no gradient.
            force = jax.lax.stop_gradient(score(z))
            acc = jnp.where(i >= 2, (z - 2.0 * prev + prev_prev) / dt**2, z - x0 - v_expected)
            return jnp.mean(force**2) + lam * jnp.mean(acc**2)

        def inner(c, _):
            z, st = c
            g = jax.grad(loss)(z)
            upd, st = opt.update(g, st, z)
            return (optax.apply_updates(z, upd), st), None

        (z, _), _ = jax.lax.scan(inner, (z0, opt.init(z0)), None, length=warmup_iters)
        return (prev, z, z), z

    _, frames = jax.lax.scan(frame, (x0, x0, x0), jnp.arange(1, n_points - 1))
    return jnp.concatenate([x0[None], frames, x1[None]], axis=0)


@eqx.filter_jit
def _adamw_refine(path0, score, lam, lr, iters):
    opt = optax.adamw(0.2 * lr, weight_decay=0.01)
    x0, x1 = path0[0], path0[-1]

    def step(carry, _):
        inner, st = carry
        g = jax.grad(lambda z: _official_loss(z, x0, x1, score, lam, "euclidean")[0])(inner)
        upd, st = opt.update(g, st, inner)
        return (optax.apply_updates(inner, upd), st), None

    inner0 = path0[1:-1]
    (inner, _), _ = jax.lax.scan(step, (inner0, opt.init(inner0)), None, length=iters)
    return jnp.concatenate([x0[None], inner, x1[None]], axis=0)


def sequential_warm_start(
    x0, x1, *, score, n_points=10, lam=1.0, lr=0.01, max_iters=500, refine="adamw", tol=None
):
    """The official sequential warm-start interpolator (``SeqELInterpolator``), flat ``(d,)``.

    Warm-up: frame ``i = 1 .. n-2`` starts at ``prev + (x1 - prev) / (n - i)`` and is optimised
    by AdamW (lr ``lr/2``, weight decay 0.01, ``max_iters // 10`` steps) on
    ``mean(s(z)^2) + lam mean(acc^2)``, ``acc = (z - 2 prev + prev_prev) / dt^2`` (for ``i = 1``:
    ``z - x0`` against the straight-line velocity). As in the official code the force is computed
    without gradient, so its term does not move the frame. Refinement (``refine="adamw"``):
    AdamW (lr ``lr/5``) for ``max_iters`` steps on the Euclidean EL loss
    ``mean((a_i + lam s(x_i))^2)``, force detached; ``refine="matrix_free"`` refines by
    :func:`geomopt.gfm.solve_matrix_free` (Euclidean residual) instead.

    Returns ``(path, report)``; ``report`` is None for AdamW, a :class:`MatrixFreeReport` else.
    """
    a0, a1 = _check_pair(x0, x1)
    if a0.ndim != 1:
        raise ValueError(f"sequential_warm_start: latents of shape {a0.shape}; expected (d,)")
    if refine not in ("adamw", "matrix_free"):
        raise ValueError(f"refine {refine!r}: expected 'adamw' or 'matrix_free'")
    dtype = a0.dtype
    lam_a, lr_a = jnp.asarray(lam, dtype), jnp.asarray(lr, dtype)
    path = _seq_warmup(
        jnp.asarray(a0), jnp.asarray(a1), score, lam_a, lr_a, max(1, max_iters // 10), n_points
    )
    if refine == "adamw":
        return _adamw_refine(path, score, lam_a, lr_a, int(max_iters)), None
    return solve_matrix_free(
        a0, a1, score=score, lam=lam, n_points=n_points, residual="euclidean", init=path, tol=tol
    )


def solve_latent(
    x0,
    x1,
    *,
    score,
    method: str = "gfm",
    n_points: int = 10,
    lam=1.0,
    residual: str = "hypersphere",
    tol=None,
    max_iters=None,
    lr=0.01,
):
    """Solve a path between two latents (any shape) with one of :data:`METHODS`; no noising or
    denoising. ``score`` acts on the FLATTENED latent (e.g. :class:`FlatScore`); unused by
    linear / slerp / mccann. Returns ``(path (n_points, *shape), report or None)``.

    ``max_iters``: LM iterations for ``"gfm"`` (default 50), Adam iterations for ``"gfm_adam"``
    and ``"seq_gfm"`` (default 500, the official shape setting).
    """
    a0, a1 = _check_pair(x0, x1)
    if method not in METHODS:
        raise ValueError(f"method {method!r}: expected one of {METHODS}")
    shape = a0.shape
    f0, f1 = a0.reshape(-1), a1.reshape(-1)
    unflat = lambda p: jnp.reshape(p, (n_points,) + shape)  # noqa: E731
    if method == "linear":
        return linear_path(a0, a1, n_points), None
    if method == "slerp":
        return slerp_path(a0, a1, n_points), None
    if method == "mccann":
        return mccann_path(a0, a1, n_points), None
    if method == "gfm":
        path, rep = solve_matrix_free(
            f0,
            f1,
            score=score,
            lam=lam,
            n_points=n_points,
            residual=residual,
            tol=tol,
            max_iters=50 if max_iters is None else max_iters,
        )
        return unflat(path), rep
    iters = 500 if max_iters is None else max_iters
    if method == "gfm_adam":
        path, _, _ = official_adam(
            f0, f1, score=score, n_points=n_points, lam=lam, lr=lr, iters=iters, residual=residual
        )
        return unflat(path), None
    path, rep = sequential_warm_start(
        f0, f1, score=score, n_points=n_points, lam=lam, lr=lr, max_iters=iters
    )
    return unflat(path), rep


@dataclasses.dataclass(frozen=True)
class LatentPath:
    """Result of :func:`interpolate`.

    Attributes:
        endpoints: the (noised) endpoints the path was solved between, ``(2, *shape)``.
        path: the solved path before denoising, ``(n_points, *shape)``.
        clean: the denoised path (equal to ``path`` when not denoised).
        decoded: ``[decode(z) for z in clean]``, or None without a decoder.
        report: the solver's report (:class:`MatrixFreeReport`) or None.
        method: the method used.
    """

    endpoints: Any
    path: Any
    clean: Any
    decoded: list | None
    report: MatrixFreeReport | None
    method: str


def interpolate(
    x0,
    x1,
    *,
    denoiser: Callable,
    method: str = "gfm",
    sigma=0.3,
    n_points: int = 10,
    lam=1.0,
    key=None,
    noise: bool | None = None,
    denoise_steps: int = 5,
    decode: Callable | None = None,
    residual: str = "hypersphere",
    tol=None,
    max_iters=None,
    lr=0.01,
) -> LatentPath:
    """The official latent pipeline: noise, solve, denoise, decode (see the module docstring).

    Args:
        x0, x1: clean endpoint latents of one shape and float dtype.
        denoiser: ``D(z, sigma)`` on one latent.
        method: one of :data:`METHODS` (``"gfm"``: matrix-free LM; ``"gfm_adam"``: official Adam;
            ``"seq_gfm"``: official sequential warm start; baselines ``"linear"``, ``"slerp"``,
            ``"mccann"`` (latent ``(N, C)``)).
        sigma: noise level of the endpoints, of the force and where denoising starts (0.3).
        n_points: waypoints including the endpoints (10).
        key: PRNG key for the endpoint noise (required when noising).
        noise: noise the endpoints and denoise the path; default True for the GFM methods and
            False for the baselines (the official code noises only the score-based methods).
        denoise_steps: EDM Heun noise levels from ``sigma`` to 0.002 (5).
        decode: optional decoder applied to each clean waypoint.
        residual, tol, max_iters, lr: passed to :func:`solve_latent`.
    """
    a0, a1 = _check_pair(x0, x1)
    sigma = _check_sigma(sigma)
    if method not in METHODS:
        raise ValueError(f"method {method!r}: expected one of {METHODS}")
    if not callable(denoiser):
        raise TypeError(f"denoiser must be a callable D(z, sigma), got {type(denoiser).__name__}")
    if noise is None:
        noise = method in ("gfm", "gfm_adam", "seq_gfm")
    if noise:
        if key is None:
            raise ValueError("interpolate: noise=True needs a PRNG `key`")
        e0, e1 = noise_endpoints(a0, a1, sigma, key=key)
    else:
        e0, e1 = jnp.asarray(a0), jnp.asarray(a1)
    score = FlatScore(denoiser, sigma, a0.shape)
    path, report = solve_latent(
        e0,
        e1,
        score=score,
        method=method,
        n_points=n_points,
        lam=lam,
        residual=residual,
        tol=tol,
        max_iters=max_iters,
        lr=lr,
    )
    clean = denoise_path(denoiser, path, sigma, num_steps=denoise_steps) if noise else path
    decoded = None if decode is None else [decode(z) for z in clean]
    return LatentPath(jnp.stack([e0, e1]), path, clean, decoded, report, method)
