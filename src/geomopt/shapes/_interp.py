"""Every interpolation method of the latent experiments, with the official pipeline.

Following the official ``optim_path.py`` (GFM-release):

- ``gfm``, ``gfm_adam``, ``jacobian``, ``stein`` work at noise level ``sigma``: both endpoints are
  noised (``x + sigma N(0, I)``, one draw shared by these methods), the path is optimised against
  the denoiser's score at ``sigma``, and EVERY waypoint (endpoints included) is then denoised by
  the EDM Heun sampler from ``sigma`` to ``sigma_min`` (``num_steps`` levels, ``rho`` 7, a final
  Euler step to 0; official: 5 steps, 0.3 -> 0.002) — :func:`heun_denoise`.
- ``rbf``, ``land`` optimise their metric energies between the CLEAN endpoints from the straight
  line (Adam, lr 0.01, 2000 / 400 iterations), no noise, no denoising.
- ``linear``, ``slerp``: plain interpolation of the clean endpoints (not in ``optim_path.py``;
  treated like rbf/land).

Solvers: ``gfm`` is :func:`geomopt.gfm.solve` (Levenberg-Marquardt, exact Jacobian) with the
``residual`` chosen (official latents: ``"hypersphere"``) from the SLERP path; ``gfm_adam`` is
the official optimiser (Adam lr 0.01, eps 1e-5, no clipping, 500 iterations, force detached).
``jacobian`` (score-Jacobian energy, gradients through the network) and ``stein`` (score at the
midpoints detached, lambda 1000) use Adam with cosine decay to 0.1 lr from the SLERP path, as
the official ``ScoreBasedInterpolator`` / ``SteinScoreInterpolator``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from geomopt.diffusion import edm_sigma_steps
from geomopt.gfm import ScoreAt, solve
from geomopt.gfm import baselines as bl

__all__ = ["METHODS", "NOISED", "slerp", "heun_denoise", "adam_energy", "interpolate_all"]

METHODS: tuple[str, ...] = (
    "gfm",
    "gfm_adam",
    "jacobian",
    "stein",
    "rbf",
    "land",
    "linear",
    "slerp",
)
NOISED = frozenset({"gfm", "gfm_adam", "jacobian", "stein"})


@eqx.filter_jit
def _heun(denoiser, x, sigmas):
    def d(x, s):
        return jax.vmap(lambda v: denoiser(v, s))(x)

    n = sigmas.shape[0]

    def body(i, x):
        t, t_next = sigmas[i], sigmas[i + 1]
        slope = (x - d(x, t)) / t
        x_euler = x + (t_next - t) * slope
        slope2 = (x_euler - d(x_euler, t_next)) / t_next
        return x + (t_next - t) * 0.5 * (slope + slope2)

    x = jax.lax.fori_loop(0, n - 1, body, x)
    return d(x, sigmas[-1])  # the Euler step from sigma_min to 0


def heun_denoise(
    denoiser: Callable, x, sigma: float, *, num_steps: int = 5, sigma_min: float = 0.002,
    rho: float = 7.0,
):  # fmt: skip
    """EDM's deterministic Heun sampler started AT noise level ``sigma`` (``x`` is taken as
    already noisy, as the official ``init_at_sigma=True``): levels ``sigma = t_0 > ... >
    t_{N-1} = sigma_min`` (EDM eq. 5), a Heun step between consecutive levels and the final
    Euler step to 0 (``x <- D(x, sigma_min)``). ``x`` is ``(B, d)``."""
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"x of shape {x.shape}: expected (B, d)")
    sigmas = edm_sigma_steps(num_steps, sigma_min, float(sigma), rho).astype(x.dtype)
    return _heun(denoiser, x, sigmas)


def slerp(x0, x1, n_points: int) -> np.ndarray:
    """Batched SLERP about the origin, ``(B, d) -> (B, n_points, d)``: the direction follows the
    great circle, the norm is interpolated linearly (the official ``slerp_interpolate``; nearly
    parallel endpoints fall back to the normalised straight line). Same as
    :func:`geomopt.gfm.baselines.spherical`, for batches."""
    x0, x1 = np.asarray(x0, np.float64), np.asarray(x1, np.float64)
    t = np.linspace(0.0, 1.0, n_points)[None, :, None]
    n0 = np.linalg.norm(x0, axis=-1)[:, None, None]
    n1 = np.linalg.norm(x1, axis=-1)[:, None, None]
    if (n0 == 0).any() or (n1 == 0).any():
        raise ValueError("SLERP needs endpoints away from the origin")
    u0, u1 = x0[:, None] / n0, x1[:, None] / n1
    cos = np.clip(np.sum(u0 * u1, axis=-1, keepdims=True), -1.0, 1.0)
    omega = np.arccos(cos)
    so = np.sin(omega)
    small = so < 1e-8
    safe = np.where(small, 1.0, so)
    direction = (np.sin((1 - t) * omega) * u0 + np.sin(t * omega) * u1) / safe
    line = (1 - t) * u0 + t * u1
    line = line / np.linalg.norm(line, axis=-1, keepdims=True)
    direction = np.where(small, line, direction)
    return (direction * ((1 - t) * n0 + t * n1)).astype(np.float32)


class _Detached(eqx.Module):
    score: Callable

    def __call__(self, x):
        return jax.lax.stop_gradient(self.score(x))


@eqx.filter_jit
def _adam_core(energy, path0, lr, iters, cosine):
    inner0 = path0[:, 1:-1]
    sched = optax.cosine_decay_schedule(lr, iters, alpha=0.1) if cosine else lr
    opt = optax.adam(sched)

    def loss(inner):
        path = jnp.concatenate([path0[:, :1], inner, path0[:, -1:]], axis=1)
        return jnp.sum(jax.vmap(lambda p: bl.path_energy(energy, p))(path))

    def step(carry, _):
        inner, state = carry
        g = jax.grad(loss)(inner)
        upd, state = opt.update(g, state, inner)
        return (optax.apply_updates(inner, upd), state), None

    (inner, _), _ = jax.lax.scan(step, (inner0, opt.init(inner0)), None, length=iters)
    return jnp.concatenate([path0[:, :1], inner, path0[:, -1:]], axis=1)


def adam_energy(energy: bl.PathEnergy, path0, *, lr: float, iters: int, cosine: bool):
    """Adam (PyTorch defaults but ``lr``; cosine decay to 0.1 lr if ``cosine``) for ``iters``
    iterations on ``sum_pairs path_energy`` over the interior waypoints of ``path0 (B, K, d)``.
    Pairs are independent (Adam is elementwise, so one summed loss = separate runs)."""
    return _adam_core(energy, jnp.asarray(path0), float(lr), int(iters), bool(cosine))


def interpolate_all(
    x0,
    x1,
    *,
    denoiser,
    data,
    methods: tuple[str, ...] = METHODS,
    key,
    n_points: int = 10,
    sigma: float = 0.3,
    lam: float = 1.0,
    residual: str = "hypersphere",
    lr: float = 0.01,
    adam_iters: int = 500,
    rbf_iters: int = 2000,
    land_iters: int = 400,
    rbf_centers: int = 64,
    denoise_steps: int = 5,
    on_method: Callable | None = None,
) -> dict[str, dict]:
    """Paths ``(B, n_points, d)`` between clean endpoints ``x0, x1 (B, d)`` for every method.

    ``denoiser``: ``D(x, sigma)`` with a ``score`` method (an :class:`EDMDenoiser`); ``data``
    ``(n, d)``: the points rbf / land are fitted to. Returns ``{method: {"path", "noisy_path"
    (before denoising, noised methods), "seconds", "iterations", "converged"}}``;
    ``on_method(name)`` is called after each method.
    """
    x0 = np.asarray(x0, np.float32)
    x1 = np.asarray(x1, np.float32)
    if x0.shape != x1.shape or x0.ndim != 2:
        raise ValueError(f"endpoints of shapes {x0.shape}, {x1.shape}: expected equal (B, d)")
    for name, x in (("x0", x0), ("x1", x1)):
        if not np.isfinite(x).all():
            raise ValueError(f"endpoints {name} have non-finite values")
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise ValueError(f"methods {bad}: expected some of {METHODS}")
    noise = sigma * np.asarray(jax.random.normal(key, (2,) + x0.shape), np.float32)
    n0, n1 = x0 + noise[0], x1 + noise[1]
    score = ScoreAt(denoiser, jnp.asarray(sigma, jnp.float32))
    slerp_noisy = slerp(n0, n1, n_points)
    out: dict[str, dict] = {}
    for m in methods:
        t0 = time.perf_counter()
        its = conv = None
        if m == "gfm" or m == "gfm_adam":
            kw = (
                dict(method="adam", lr=lr, max_iters=adam_iters, clip=np.inf)
                if m == "gfm_adam"
                else {}
            )
            path, rep = solve(
                n0, n1, score=score, lam=lam, n_points=n_points, residual=residual,
                init=slerp_noisy, **kw,
            )  # fmt: skip
            its, conv = np.asarray(rep.iterations), np.asarray(rep.converged)
        elif m == "jacobian":
            path = adam_energy(
                bl.ScoreEnergy(score), slerp_noisy, lr=lr, iters=adam_iters, cosine=True
            )
        elif m == "stein":
            path = adam_energy(
                bl.SteinEnergy(_Detached(score)), slerp_noisy, lr=lr, iters=adam_iters, cosine=True
            )
        elif m == "rbf":
            energy = bl.fit_rbf(data, n_centers=rbf_centers)
            energy = jax.tree.map(lambda a: a.astype(jnp.float32) if eqx.is_array(a) else a, energy)
            path = adam_energy(energy, np.asarray(bl.linear(x0, x1, n_points)), lr=lr,
                               iters=rbf_iters, cosine=False)  # fmt: skip
        elif m == "land":
            energy = bl.fit_land(data)
            energy = jax.tree.map(lambda a: a.astype(jnp.float32) if eqx.is_array(a) else a, energy)
            path = adam_energy(energy, np.asarray(bl.linear(x0, x1, n_points)), lr=lr,
                               iters=land_iters, cosine=False)  # fmt: skip
        elif m == "linear":
            path = bl.linear(x0, x1, n_points)
        else:
            path = slerp(x0, x1, n_points)
        path = np.asarray(jax.block_until_ready(path))
        entry = {"seconds": 0.0, "iterations": its, "converged": conv}
        if m in NOISED:
            b, k, d = path.shape
            entry["noisy_path"] = path
            flat = heun_denoise(denoiser, path.reshape(b * k, d), sigma, num_steps=denoise_steps)
            path = np.asarray(flat).reshape(b, k, d)
        if not np.isfinite(path).all():
            raise FloatingPointError(f"method {m} produced non-finite waypoints")
        entry["path"] = path
        entry["seconds"] = time.perf_counter() - t0
        out[m] = entry
        if on_method is not None:
            on_method(m)
    return out
