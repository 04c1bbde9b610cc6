"""Separable test problems with vector smoothness ``L`` and separable noise of scale ``sigma``.

The objective is ``f(x) = sum_i L_i h(x_i)`` with ``h`` one of

- ``"quadratic"``: ``h(z) = z^2 / 2`` (``h'' = 1``), the paper's toy problems;
- ``"logcosh"``: ``h(z) = log cosh z`` (``h'' = sech^2 z`` in (0, 1]), a smooth Huber-like
  function: quadratic near 0, linear (gradient bounded by ``L_i``) far away.

Both have ``0 <= h'' <= 1``, so coordinate ``i`` is ``L_i``-smooth and the whole function is
l_inf-smooth with ``L_inf = ||L||_1`` (paper, "separable smoothness implies l_inf smoothness").
The minimiser is ``x = 0`` with ``f* = 0``, so ``Delta = f(x0)``.

A stochastic gradient is ``g = grad f(x) + sigma * xi`` with ``xi`` i.i.d. per coordinate,
standard Gaussian or Student-t with ``df`` degrees of freedom scaled to unit variance
(``t * sqrt((df - 2) / df)``), so ``E|g_i - grad_i f|^2 = sigma_i^2`` exactly in both cases.

Multiplicities. Each stored coordinate carries a weight ``mult_i`` (default 1): it stands for
``mult_i`` identical coordinates of the full problem. The dynamics of SGD, SignSGD and Signum are
coordinate-wise and the noise is independent across coordinates, so a run on the stored
coordinates gives an unbiased estimate of ``E||grad f||_1 = sum_i mult_i E|grad_i f|`` of the
full ``d = sum_i mult_i`` dimensional problem (the per-run value of ``||grad f||_1`` has a larger
spread than the full problem's, its expectation is the same). With ``mult = 1`` the problem is
stored in full. The norms below (``||sigma||_1``, ``phi``, ``L_inf``) are those of the full
problem. :func:`sgd_hard_instance` uses this to reach ``d = 10^5`` and beyond cheaply; the tests
check the reduced and the full simulation agree.
"""

from __future__ import annotations

import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "SeparableProblem",
    "separable_problem",
    "l1_norm",
    "l2_norm",
    "noise_density",
    "l_inf_smoothness",
    "sparse_sigma",
    "matched_l1_pair",
    "sigma_with_phi",
    "sgd_hard_instance",
    "fixed_curvature_instance",
    "sample_noise",
    "KINDS",
    "NOISES",
]

Kind = Literal["quadratic", "logcosh"]
Noise = Literal["gaussian", "student_t"]
KINDS = ("quadratic", "logcosh")
NOISES = ("gaussian", "student_t")


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def _check_vector(name: str, x, *, nonneg: bool = True, positive: bool = False) -> None:
    if not _is_concrete(x):
        return
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"{name} has shape {a.shape}: expected a vector (d,)")
    if a.shape[0] < 1:
        raise ValueError(f"{name} has d={a.shape[0]} coordinates: expected d >= 1")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}={a}: expected finite values")
    if positive and np.any(a <= 0):
        raise ValueError(f"{name} has entries <= 0 (min {a.min()}): expected > 0")
    if nonneg and np.any(a < 0):
        raise ValueError(f"{name} has negative entries (min {a.min()}): expected >= 0")


def sample_noise(key, shape, noise: str = "gaussian", df: float = 4.0, dtype=jnp.float32):
    """Unit-variance i.i.d. noise: standard Gaussian, or Student-t(df) times sqrt((df-2)/df)."""
    if noise == "gaussian":
        return jax.random.normal(key, shape, dtype)
    if noise == "student_t":
        return jax.random.t(key, df, shape, dtype) * jnp.asarray(math.sqrt((df - 2.0) / df), dtype)
    raise ValueError(f"noise={noise!r}: expected one of {NOISES}")


class SeparableProblem(eqx.Module):
    """``f(x) = sum_i L_i h(x_i)`` with separable noise ``sigma``; see the module docstring.

    Build with :func:`separable_problem` (which checks the input). Every array field is a leaf,
    so problems can be stacked and vmapped; ``kind``, ``noise`` and ``df`` are static.
    """

    L: jax.Array
    sigma: jax.Array
    x0: jax.Array
    mult: jax.Array
    kind: str = eqx.field(static=True, default="quadratic")
    noise: str = eqx.field(static=True, default="gaussian")
    df: float = eqx.field(static=True, default=4.0)

    def h(self, z):
        if self.kind == "quadratic":
            return 0.5 * z * z
        a = jnp.abs(z)
        return a + jnp.log1p(jnp.exp(-2.0 * a)) - jnp.log(jnp.asarray(2.0, z.dtype))

    def dh(self, z):
        return z if self.kind == "quadratic" else jnp.tanh(z)

    def value(self, x):
        """``f(x) = sum_i mult_i L_i h(x_i)``."""
        return jnp.sum(self.mult * self.L * self.h(x))

    def grad(self, x):
        """Per-coordinate gradient ``L_i h'(x_i)`` (= ``jax.grad(value)`` when ``mult = 1``)."""
        return self.L * self.dh(x)

    def stochastic_grad(self, x, key):
        """``grad f(x) + sigma * xi`` with unit-variance noise ``xi`` (one draw per coordinate)."""
        xi = sample_noise(key, x.shape, self.noise, self.df, x.dtype)
        return self.grad(x) + self.sigma * xi

    def grad_l1(self, x):
        """``||grad f(x)||_1`` of the full problem (multiplicity-weighted)."""
        return jnp.sum(self.mult * jnp.abs(self.grad(x)))

    def stationarity(self, x):
        """The paper's stationarity measure for vector problems: ``||grad f(x)||_1``."""
        return self.grad_l1(x)

    @property
    def d(self):
        return jnp.sum(self.mult)

    @property
    def sigma_l1(self):
        return l1_norm(self.sigma, self.mult)

    @property
    def sigma_l2(self):
        return l2_norm(self.sigma, self.mult)

    @property
    def phi(self):
        return noise_density(self.sigma, self.mult)

    @property
    def l_inf(self):
        return l_inf_smoothness(self.L, self.mult)

    @property
    def delta(self):
        """``f(x0) - f*`` (``f* = 0``)."""
        return self.value(self.x0)


def separable_problem(
    L,
    sigma,
    x0,
    *,
    mult=None,
    kind: Kind = "quadratic",
    noise: Noise = "gaussian",
    df: float = 4.0,
    dtype=jnp.float32,
) -> SeparableProblem:
    """A checked :class:`SeparableProblem`: ``L``, ``sigma``, ``x0`` (and ``mult``) are vectors
    of one length ``>= 1``; ``L``, ``sigma`` finite and ``>= 0``; ``mult >= 0`` with a positive
    sum; ``kind`` in {quadratic, logcosh}; ``noise`` in {gaussian, student_t}; ``df > 2``."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}: expected one of {KINDS}")
    if noise not in NOISES:
        raise ValueError(f"noise={noise!r}: expected one of {NOISES}")
    if not (isinstance(df, (int, float)) and math.isfinite(df) and df > 2):
        raise ValueError(f"df={df!r}: expected a finite number > 2 (finite noise variance)")
    _check_vector("L", L)
    _check_vector("sigma", sigma)
    _check_vector("x0", x0, nonneg=False)
    if mult is None:
        mult = jnp.ones(np.shape(L), dtype)
    _check_vector("mult", mult)
    shapes = {n: np.shape(v) for n, v in (("L", L), ("sigma", sigma), ("x0", x0), ("mult", mult))}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"mismatched shapes {shapes}: expected all equal")
    if _is_concrete(mult) and float(np.sum(mult)) <= 0:
        raise ValueError(f"mult sums to {float(np.sum(mult))}: expected > 0")
    as_arr = lambda v: jnp.asarray(v, dtype)
    return SeparableProblem(
        as_arr(L), as_arr(sigma), as_arr(x0), as_arr(mult), kind=kind, noise=noise, df=float(df)
    )


def _weights(x, mult):
    return jnp.ones_like(x) if mult is None else jnp.asarray(mult, x.dtype)


def l1_norm(sigma, mult=None):
    """``||sigma||_1 = sum_i mult_i |sigma_i|``."""
    sigma = jnp.asarray(sigma)
    return jnp.sum(_weights(sigma, mult) * jnp.abs(sigma))


def l2_norm(sigma, mult=None):
    """``||sigma||_2 = sqrt(sum_i mult_i sigma_i^2)``."""
    sigma = jnp.asarray(sigma)
    return jnp.sqrt(jnp.sum(_weights(sigma, mult) * sigma * sigma))


def noise_density(sigma, mult=None):
    """``phi(sigma) = ||sigma||_1^2 / (d ||sigma||_2^2)`` in ``[1/d, 1]`` (paper's noise density).

    ``1/d`` for one noisy coordinate, 1 for equal noise on every coordinate; NaN for sigma = 0.
    """
    sigma = jnp.asarray(sigma)
    w = _weights(sigma, mult)
    return l1_norm(sigma, mult) ** 2 / (jnp.sum(w) * l2_norm(sigma, mult) ** 2)


def l_inf_smoothness(L, mult=None):
    """``L_inf = ||L||_1``: separable smoothness ``L`` implies l_inf smoothness with it."""
    return l1_norm(L, mult)


def _check_dim(d) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d={d!r}: expected an integer >= 1")
    return int(d)


def _check_count(s, d) -> int:
    if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 1 <= s <= d:
        raise ValueError(f"s={s!r}: expected an integer number of noisy coordinates in [1, d={d}]")
    return int(s)


def _check_positive(name, v) -> float:
    if not isinstance(v, (int, float, np.floating, np.integer)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"{name}={v!r}: expected a finite number >= 0")
    return float(v)


def sparse_sigma(d: int, s: int, l1: float) -> np.ndarray:
    """``s`` equal noisy coordinates (the first ``s``) with ``||sigma||_1 = l1``; ``phi = s/d``."""
    d = _check_dim(d)
    s = _check_count(s, d)
    l1 = _check_positive("l1", l1)
    sigma = np.zeros(d)
    sigma[:s] = l1 / s
    return sigma


def matched_l1_pair(d: int, l1: float, s: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``(sparse, dense)`` noise scales with the same ``||sigma||_1 = l1``: ``s`` noisy
    coordinates (``phi = s/d``) and all ``d`` coordinates equally noisy (``phi = 1``)."""
    return sparse_sigma(d, s, l1), sparse_sigma(_check_dim(d), _check_dim(d), l1)


def sigma_with_phi(d: int, phi: float, l1: float = 1.0) -> np.ndarray:
    """A noise scale with exactly ``phi(sigma) = phi`` and ``||sigma||_1 = l1``.

    One coordinate of size ``a`` and ``d - 1`` of size ``t a`` (``0 <= t <= 1``):
    ``phi(t) = (1 + u t)^2 / (d (1 + u t^2))`` with ``u = d - 1`` rises from ``1/d`` (t = 0) to 1
    (t = 1); ``t`` solves ``u (u - phi d) t^2 + 2 u t + (1 - phi d) = 0`` (closed form).
    """
    d = _check_dim(d)
    l1 = _check_positive("l1", l1)
    if not isinstance(phi, (int, float, np.floating)) or not (1.0 / d - 1e-12 <= phi <= 1 + 1e-12):
        raise ValueError(f"phi={phi!r}: expected a noise density in [1/d, 1] = [{1.0 / d:g}, 1]")
    if d == 1:
        return np.array([l1])
    u = float(d - 1)
    a2, a1, a0 = u * (u - phi * d), 2.0 * u, 1.0 - phi * d
    if abs(a2) < 1e-12 * u * u:
        t = -a0 / a1
    else:
        disc = max(a1 * a1 - 4 * a2 * a0, 0.0)
        roots = [(-a1 + sgn * math.sqrt(disc)) / (2 * a2) for sgn in (1.0, -1.0)]
        t = min((r for r in roots if -1e-9 <= r <= 1 + 1e-9), key=lambda r: abs(r - 0.5))
    t = min(max(t, 0.0), 1.0)
    sigma = np.full(d, t)
    sigma[0] = 1.0
    return sigma * (l1 / sigma.sum())


def sgd_hard_instance(
    d: int,
    s: int,
    sigma_l1: float,
    *,
    l_inf: float = 1.0,
    delta: float = 0.5,
    reduced: bool = False,
    levels: int = 8,
    kind: Kind = "quadratic",
    noise: Noise = "gaussian",
    df: float = 4.0,
    dtype=jnp.float32,
) -> SeparableProblem:
    """The quadratic on which SGD pays for sparse noise, with fixed ``L_inf``, ``Delta``,
    ``||sigma||_1`` as ``d`` grows (our construction for the scaling experiment).

    ``s`` coordinates are noisy with ``sigma_i = sigma_l1 / s``; half of the smoothness budget
    sits where the noise is and half is spread over all coordinates:
    ``L_i = l_inf / (2 s) + l_inf / (2 d)`` on noisy coordinates, ``l_inf / (2 d)`` on the rest,
    so ``||L||_1 = l_inf`` and ``phi = s / d``. The quiet coordinates start at ``c q_j`` with
    ``levels`` evenly spaced ``q_j`` in ``(0.5, 1.5)`` cycled over them, the noisy ones likewise
    with ``min(s, levels)`` levels (one noisy coordinate starts at ``c``); the spread keeps
    SignSGD from landing on the optimum of every coordinate at once in lockstep;
    ``c`` makes ``f(x0) = delta`` exactly for the quadratic (for logcosh ``f(x0)`` is smaller;
    read it off ``problem.delta``).

    Why it separates the methods (quadratic, batch 1, constant step eta): SGD's step is capped by
    the stiff noisy coordinates (their stationary ``E|grad|`` grows like ``sqrt(eta L) sigma``),
    while the ``d - s`` flat ones decay like ``exp(-eta l_inf t / (2 d))``; balancing gives
    ``T_SGD ~ (d / s) ||sigma||_1^2 / eps^2 = ||sigma||_1^2 / (phi eps^2)`` (up to logs). SignSGD
    moves every coordinate by ``eta`` whatever its curvature, and the noise-to-signal ratio of a
    noisy coordinate, ``(sigma_l1 / s) / (L_i x_i)``, does not depend on ``s`` or ``d``, so
    ``T_SignSGD`` depends on neither ``d`` nor ``phi``.

    ``reduced=False`` stores all ``d`` coordinates. ``reduced=True`` stores ``levels``
    representatives of the noisy class and one per level of the quiet class, with multiplicities
    ``s / levels`` and ``(d - s) / levels`` (module docstring); the shapes then depend on neither
    ``d`` nor ``s``, and when ``levels`` divides ``d - s`` the expectations equal the full
    problem's exactly (for the noisy class: when ``s = 1`` or ``levels`` divides ``s``).
    """
    d = _check_dim(d)
    s = _check_count(s, d)
    sigma_l1 = _check_positive("sigma_l1", sigma_l1)
    if _check_positive("l_inf", l_inf) <= 0 or _check_positive("delta", delta) <= 0:
        raise ValueError(f"l_inf={l_inf!r}, delta={delta!r}: expected both > 0")
    if isinstance(levels, bool) or not isinstance(levels, int) or levels < 1:
        raise ValueError(f"levels={levels!r}: expected an integer >= 1")
    q = 0.5 + (np.arange(levels) + 0.5) / levels
    n_noisy = min(s, levels)
    q_noisy = 0.5 + (np.arange(n_noisy) + 0.5) / n_noisy
    l_noisy = l_inf / (2 * s) + l_inf / (2 * d)
    l_quiet = l_inf / (2 * d)
    if reduced:
        L = np.concatenate([np.full(levels, l_noisy), np.full(levels, l_quiet)])
        sigma = np.concatenate([np.full(levels, sigma_l1 / s), np.zeros(levels)])
        mult = np.concatenate([np.full(levels, s / levels), np.full(levels, (d - s) / levels)])
        shape = np.concatenate([q_noisy[np.arange(levels) % len(q_noisy)], q])
    else:
        L = np.full(d, l_quiet)
        L[:s] = l_noisy
        sigma = sparse_sigma(d, s, sigma_l1)
        mult = np.ones(d)
        shape = np.concatenate([q_noisy[np.arange(s) % len(q_noisy)], q[np.arange(d - s) % levels]])
    c = math.sqrt(2.0 * delta / float(np.sum(mult * L * shape * shape)))
    return separable_problem(
        L, sigma, c * shape, mult=mult, kind=kind, noise=noise, df=df, dtype=dtype
    )


def fixed_curvature_instance(
    d: int,
    phi: float,
    sigma_l1: float,
    *,
    l_inf: float = 1.0,
    delta: float = 0.5,
    reduced: bool = False,
    levels: int = 8,
    kind: Kind = "quadratic",
    noise: Noise = "gaussian",
    df: float = 4.0,
    dtype=jnp.float32,
) -> SeparableProblem:
    """One curvature for every noise: the curvature and start of ``sgd_hard_instance(d, 1)``
    (one stiff coordinate, ``L_0 = l_inf / 2 + l_inf / (2 d)``, the rest ``l_inf / (2 d)``;
    ``||L||_1 = l_inf``, ``f(x0) = delta``) with the noise ``sigma_with_phi(d, phi, sigma_l1)``
    (the largest entry on the stiff coordinate, the others equal): ``phi = 1/d`` puts all the
    noise on the stiff coordinate, ``phi = 1`` spreads it equally, ``sigma_l1 = 0`` switches it
    off. Sparse noise, dense noise, the ``phi`` sweep and the noise-free control are then the
    same quadratic, so a difference in complexity comes from the noise alone.

    Why SGD pays ``1/phi`` here (quadratic, constant step ``eta``): the stationary noise floor of
    ``E||grad f||_1`` is about ``sqrt(eta) sum_i sqrt(L_i) sigma_i``, the flat coordinates need
    ``T ~ 1 / (eta l_inf / (2 d))`` steps, so the noise-limited step gives
    ``T_noise ~ (2 d / l_inf) (sum_i sqrt(L_i) sigma_i)^2 / eps^2``, within a factor 2 of
    ``||sigma||_1^2 / (phi eps^2)`` on this family (by Cauchy-Schwarz), against
    ``T_det ~ d`` without noise: the noise term dominates when
    ``||sigma||_1^2 / (phi d eps^2) >> 1``, the same ratio as the paper's two terms. SignSGD's
    step moves each coordinate by ``eta`` whatever ``L_i``, so neither ``d`` nor ``phi``
    enters. (This is the
    mechanism on one instance, not the paper's lower bound, whose ``eps^-4`` comes from a worst
    case over instances.)

    ``reduced=True`` stores ``levels`` representatives of the stiff coordinate (multiplicity
    ``1 / levels`` each) and of the flat class (``(d - 1) / levels`` each), as
    :func:`sgd_hard_instance` does, so the shapes do not depend on ``d`` or ``phi``.
    """
    base = sgd_hard_instance(d, 1, 0.0, l_inf=l_inf, delta=delta, reduced=reduced,
                             levels=levels, kind=kind, noise=noise, df=df, dtype=dtype)  # fmt: skip
    full = sigma_with_phi(d, phi, sigma_l1)
    if reduced:
        quiet = full[-1] if d > 1 else 0.0
        sigma = np.concatenate([np.full(levels, full[0]), np.full(levels, quiet)])
    else:
        sigma = full
    return separable_problem(base.L, sigma, base.x0, mult=base.mult, kind=kind, noise=noise,
                             df=df, dtype=dtype)  # fmt: skip
