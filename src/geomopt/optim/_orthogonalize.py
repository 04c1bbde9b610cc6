"""The matrix sign msign(G) = U V^T (the orthogonal polar factor) of a stack of matrices.

Methods to compute it over the last two axes of a ``(..., m, n)`` array:

- ``"svd"``: exact, from the thin SVD (the theory's Muon). Directions with zero singular value map
  to zero, the matrix analogue of sign(0) = 0.
- ``"newton_schulz"``: the odd quintic iteration ``X <- a X + b (X X^T) X + c (X X^T)^2 X`` after
  normalising by the Frobenius norm (so every singular value lies in (0, 1]); each step maps
  every singular value ``s -> a s + b s^3 + c s^5``, pushing it towards 1 without an SVD. The
  iteration runs on the wide orientation (``m <= n``), so the Gram matrix ``X X^T`` is the small
  ``m x m`` one.
- ``"gram_newton_schulz"``: the same polynomial map, iterated on the ``m x m`` Gram matrix. Every
  iterate is ``X_k = Q_k X_0`` with ``Q_k`` a polynomial in ``A_0 = X_0 X_0^T``, so
  ``P_k = a I + b A_{k-1} + c A_{k-1}^2``, ``Q_k = P_k Q_{k-1}``, ``A_k = P_k A_{k-1} P_k`` and
  only the last step touches the ``m x n`` matrix again. For ``n`` well above ``m`` this needs
  ``4 m^2 n + 34 m^3`` flops for 5 steps instead of ``5 (4 m^2 n + 2 m^3)`` (about 0.55x for a
  768 x 3072 matrix); for square matrices it is more expensive, so square inputs take the
  plain path. Equal to ``"newton_schulz"`` in exact arithmetic; in float32 the two agree to
  about 1e-6 absolute (1e-5 relative) on GPT-2 shapes. In bfloat16 the plain Gram recursion
  is unstable: rounding errors in ``A_k`` feed every later step. ``restart=r`` forms the
  iterate again every ``r`` steps and restarts the recursion from its own Gram matrix
  (Dao-AILab's restarted Gram Newton-Schulz), which stops the compounding. Measured on GPT-2
  124M's shapes (768 x 2304, 768 x 3072, 3072 x 768) with a decaying spectrum
  ``s_i = exp(-i / 60) + 1e-3``, bfloat16 compute, 5 quintic steps, against the same
  polynomial in float32: plain Gram max error 0.029-0.031 with singular values up to 1.69-1.71
  (float32: 1.20); restarted every 3 steps 0.0047-0.0051, singular values up to 1.20; the plain
  (non-Gram) iteration in bfloat16 0.011-0.012. On Gaussian matrices all three are within
  0.007. Smaller matrices with faster decay (128 x 512) send the plain Gram form to singular
  values of 20 (restarted: 1.20). With ``s_i = exp(-i / 10) + 1e-3`` on 768 x 2304 and
  768 x 3072 (``benchmarks/bench_muon_bf16.py``, 3 seeds): plain Gram 0.062-0.10, singular
  values 2.9; restarted 0.0060-0.0077; plain iteration 0.013-0.016; against the SVD polar
  factor ``U V^T`` the restarted and plain bfloat16 forms stay at the float32 polynomial's own
  distance (0.064-0.084), the plain Gram form does not (up to 0.11). So in bfloat16 the Gram
  form runs restarted every 3 steps.
- ``"auto"``: ``"gram_newton_schulz"`` when it needs fewer flops (for any number of steps that is
  ``max(m, n) > 1.5 min(m, n)``), restarted every 3 steps when the compute dtype is narrower
  than 32 bits (unless ``restart`` is given), else ``"newton_schulz"``.

How the input is scaled before the iteration (``preconditioning``; the choices of
``optax.contrib.muon``, tested against it):

- ``"frobenius"``: ``X_0 = G / (||G||_F + eps)`` (every singular value in (0, 1]).
- ``"spectral"``: ``X_0 = G / (||G||_2 + eps)``: the largest singular value at 1 (one SVD).
- ``"aol"``: the "almost orthogonal layer" rescaling of Turbo-Muon: with ``A = G G^T`` on the
  wide orientation, row ``i`` is scaled by ``1 / sqrt(sum_j |A_ij|)`` (Gershgorin: every
  singular value then lies in (0, 1], and the rescaled matrix is already closer to
  orthogonal, which is what lets the iteration drop a step).
- ``"schatten"``: ``X_0 = G / sqrt(||G G^T||_F)``, the Schatten-4 norm (at least the spectral
  norm, at most the Frobenius norm).

``optax`` folds the AOL and Schatten rescalings into its first Newton-Schulz step; scaling first
and then iterating is the same computation, so every method below takes them.

Coefficient presets for the Newton-Schulz methods (``coeffs``):

- ``"quintic"``: (3.4445, -4.7750, 2.0315) every step (Jordan's Muon; optax's default). It
  maximises the slope at 0 and does not converge to 1: after 5 steps singular values of a
  well-conditioned input land in about [0.68, 1.13].
- ``"polar_express"``: the per-step schedule of Amsel et al. 2025 (The Polar Express, the
  greedy minimax odd quintics for the interval [1e-3, 1]). We checked the table rather than
  trusting it: composing its 5 polynomials maps every s in [1e-3, 1] into [0.859, 1.141], and the
  extremes are symmetric about 1 (equioscillation, as a minimax composite must be; see the
  tests). Steps beyond the table use (15/8, -10/8, 3/8), the classical quintic Newton-Schulz
  step, which converges to 1 from anywhere in (0, sqrt(7/3)).
- a tuple ``(a, b, c)`` repeated ``steps`` times, or a sequence of ``steps`` such tuples.
"""

from collections.abc import Sequence

import jax
import jax.numpy as jnp

QUINTIC = (3.4445, -4.7750, 2.0315)
POLAR_EXPRESS = (
    (8.156554524902461, -22.48329292557795, 15.878769915207462),
    (4.042929935166739, -2.808917465908714, 0.5000178451051316),
    (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
    (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
    (2.3465413258596377, -1.7097828382687081, 0.42323551169305323),
)
NEWTON_SCHULZ_QUINTIC = (15 / 8, -10 / 8, 3 / 8)
METHODS = ("newton_schulz", "gram_newton_schulz", "auto", "svd")
PRECONDITIONINGS = ("frobenius", "spectral", "aol", "schatten")
BF16_RESTART = 3
"""Steps between restarts of the Gram recursion in 16-bit compute (module doc: measured)."""

Coeffs = str | tuple[float, float, float] | Sequence[tuple[float, float, float]]


def ns_coefficients(coeffs: Coeffs = "quintic", steps: int = 5) -> tuple[tuple[float, ...], ...]:
    """The per-step (a, b, c) of a preset name, a single tuple or a sequence of tuples."""
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps={steps!r}: expected an int >= 1")
    if isinstance(coeffs, str):
        if coeffs == "quintic":
            return (QUINTIC,) * steps
        if coeffs == "polar_express":
            extra = max(0, steps - len(POLAR_EXPRESS))
            return POLAR_EXPRESS[:steps] + (NEWTON_SCHULZ_QUINTIC,) * extra
        raise ValueError(f"coeffs={coeffs!r}: expected 'quintic', 'polar_express' or tuples")
    try:
        arr = [tuple(float(v) for v in row) for row in coeffs]  # sequence of tuples
    except TypeError:
        arr = [tuple(float(v) for v in coeffs)]  # a single (a, b, c)
        if len(arr[0]) == 3:
            return tuple(arr) * steps
    if any(len(row) != 3 for row in arr):
        raise ValueError(f"coeffs={coeffs!r}: expected (a, b, c) or a sequence of (a, b, c)")
    if len(arr) != steps:
        raise ValueError(f"coeffs has {len(arr)} (a, b, c) tuples but steps={steps}")
    return tuple(arr)


def _check_matrix(g) -> None:
    if g.ndim < 2:
        raise ValueError(f"orthogonalize: shape {g.shape}, expected (..., m, n) with ndim >= 2")
    if not jnp.issubdtype(g.dtype, jnp.floating):
        raise ValueError(f"orthogonalize: dtype {g.dtype}, expected a floating dtype")


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _svd_sign(g, dtype):
    work = jnp.promote_types(dtype, jnp.float32)
    x = g.astype(work)
    u, s, vt = jnp.linalg.svd(x, full_matrices=False)
    tol = max(g.shape[-2:]) * jnp.finfo(work).eps * jnp.max(s, axis=-1, keepdims=True)
    keep = (s > tol).astype(work)
    return (u * keep[..., None, :]) @ vt


def _loop(body, lo: int, hi: int, steps, carry):
    """``carry = body(carry, a, b, c)`` for the steps ``lo..hi-1`` as a ``fori_loop`` (one copy
    of the body in the program, so compile time does not grow with the number of steps)."""
    if hi - lo <= 0:
        return carry
    if hi - lo == 1:
        return body(carry, *steps[lo])
    table = jnp.asarray(steps[lo:hi], dtype=jnp.float32)

    def loop_body(i, carry):
        a, b, c = (table[i, j].astype(carry[0].dtype) for j in range(3))
        return body(carry, a, b, c)

    return jax.lax.fori_loop(0, hi - lo, loop_body, carry)


def _plain_ns(x, steps):
    def body(carry, a, b, c):
        (x,) = carry
        gram = x @ _mT(x)
        return (a * x + (b * gram + c * (gram @ gram)) @ x,)

    return _loop(body, 0, len(steps), steps, (x,))[0]


def _gram_ns(x, steps, restart: int | None = None):
    """The Gram form; with ``restart`` the ``m x n`` iterate is formed again every ``restart``
    steps and the recursion restarted from its own Gram matrix (Dao-AILab's restarted Gram
    Newton-Schulz), so rounding errors of ``A_k`` stop compounding."""
    if restart is not None and restart < len(steps):
        for lo in range(0, len(steps), restart):
            x = _gram_ns(x, steps[lo : lo + restart])
        return x
    m = x.shape[-2]
    gram = x @ _mT(x)
    eye = jnp.broadcast_to(jnp.eye(m, dtype=x.dtype), gram.shape)

    def poly(gram, a, b, c):
        return a * eye + b * gram + c * (gram @ gram)

    def middle(carry, a, b, c):
        gram, q = carry
        p = poly(gram, a, b, c)
        return p @ (gram @ p), p @ q

    p = poly(gram, *steps[0])
    if len(steps) == 1:
        return p @ x
    gram, q = p @ (gram @ p), p
    gram, q = _loop(middle, 1, len(steps) - 1, steps, (gram, q))
    return (poly(gram, *steps[-1]) @ q) @ x


def precondition(x, preconditioning: str = "frobenius", eps: float = 1e-7):
    """``x`` (wide: ``(..., m, n)`` with ``m <= n``) scaled for the Newton-Schulz iteration as
    ``preconditioning`` says (module doc); in ``x``'s dtype."""
    if preconditioning == "frobenius":
        return x / (jnp.sqrt(jnp.sum(jnp.square(x), axis=(-2, -1), keepdims=True)) + eps)
    if preconditioning == "spectral":
        top = jnp.linalg.svd(x, compute_uv=False)[..., :1]
        return x / (top[..., None] + eps)
    gram = x @ _mT(x)
    if preconditioning == "aol":
        rows = jnp.maximum(jnp.sum(jnp.abs(gram), axis=-1), eps)
        return x * jax.lax.rsqrt(rows)[..., :, None]
    if preconditioning == "schatten":
        s4 = jnp.maximum(jnp.sqrt(jnp.sum(jnp.square(gram), axis=(-2, -1), keepdims=True)), eps)
        return x * jax.lax.rsqrt(s4)
    raise ValueError(f"preconditioning={preconditioning!r}: expected one of {PRECONDITIONINGS}")


def orthogonalize(
    g,
    method: str = "newton_schulz",
    steps: int = 5,
    coeffs: Coeffs = "quintic",
    dtype=None,
    eps: float = 1e-7,
    preconditioning: str = "frobenius",
    restart: int | None = None,
):
    """msign(G) = U V^T over the last two axes of ``g`` (shape ``(..., m, n)``).

    Args:
        g: a matrix or a stack of matrices; every leading axis is a batch axis and the whole
            stack is processed by one batched matmul per product.
        method: ``"svd"`` (exact), ``"newton_schulz"``, ``"gram_newton_schulz"`` or ``"auto"``
            (module doc).
        steps: Newton-Schulz iterations.
        coeffs: ``"quintic"``, ``"polar_express"``, ``(a, b, c)`` or a sequence of them.
        dtype: compute dtype (e.g. ``jnp.bfloat16`` on accelerators); the Frobenius
            normalisation is done in ``g``'s dtype and the result is cast back to it.
        eps: added to the Frobenius norm, ``X_0 = G / (||G||_F + eps)`` (the floor of the
            other preconditionings' norms).
        preconditioning: ``"frobenius"``, ``"spectral"``, ``"aol"`` or ``"schatten"``
            (module doc); not used by ``"svd"``.
        restart: for ``"gram_newton_schulz"``, form the iterate again and restart the Gram
            recursion every ``restart`` steps (None: never).
    """
    g = jnp.asarray(g)
    _check_matrix(g)
    if method not in METHODS:
        raise ValueError(f"method={method!r}: expected one of {METHODS}")
    if preconditioning not in PRECONDITIONINGS:
        raise ValueError(
            f"preconditioning={preconditioning!r}: expected one of {PRECONDITIONINGS}"
        )
    work = jnp.dtype(g.dtype if dtype is None else dtype)
    if method == "svd":
        return _svd_sign(g, work).astype(g.dtype)
    schedule = ns_coefficients(coeffs, steps)
    m, n = g.shape[-2:]
    tall = m > n
    x = _mT(g) if tall else g
    x = precondition(x, preconditioning, eps).astype(work)
    if method == "auto":
        wide_enough = max(m, n) > 1.5 * min(m, n)
        method = "gram_newton_schulz" if wide_enough else "newton_schulz"
        if work.itemsize < 4 and restart is None:
            restart = BF16_RESTART
    if restart is not None and (not isinstance(restart, int) or restart < 1):
        raise ValueError(f"restart={restart!r}: expected an integer >= 1 or None")
    if method == "gram_newton_schulz" and m != n:
        x = _gram_ns(x, schedule, restart)
    else:
        x = _plain_ns(x, schedule)
    x = _mT(x) if tall else x
    return x.astype(g.dtype)
