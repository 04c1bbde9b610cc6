"""Next-token cross-entropy through the tied output head, without the full ``B x T x V`` logits.

:func:`chunked_cross_entropy` takes the final hidden states ``x_BxTxD`` and the token table
``w_VxD`` and walks over the sequence in chunks of ``c = chunk // B`` positions of every row
(``lax.scan``; the batch axis stays whole, so a batch sharded over devices stays sharded): each
step forms its ``B x c x V`` float32 logits, their log-sum-exp, loss and argmax, and drops
them. The backward pass is a ``jax.custom_vjp`` whose forward rule computes the gradients in
the same pass (softmax minus one-hot, times ``1/(B T)``, then ``dx = dlogits w`` and
``dw += dlogits^T x``), so the logits are formed once per chunk, never stored, and never
recomputed: three matmuls per chunk, as in the unchunked loss, and the logits memory is
``chunk x V`` instead of ``B T x V`` (measured in ``benchmarks/bench_lm_memory.py``).

The result equals ``optax.softmax_cross_entropy_with_integer_labels(x @ w.T, t).mean()`` and
its gradients up to float32 rounding (the tests require 1e-5).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["chunked_cross_entropy", "dense_cross_entropy"]


def dense_cross_entropy(x_NxD, w_VxD, targets_N):
    """Mean cross-entropy and accuracy through the full ``N x V`` float32 logits (reference)."""
    logits = jnp.dot(x_NxD, w_VxD.T, preferred_element_type=jnp.float32).astype(jnp.float32)
    lse = jax.nn.logsumexp(logits, axis=-1)
    tgt = jnp.take_along_axis(logits, targets_N[:, None], axis=-1)[:, 0]
    correct = (jnp.argmax(logits, axis=-1) == targets_N).astype(jnp.float32)
    return jnp.mean(lse - tgt), jnp.mean(correct)


def _forward(x_BxTxD, w_VxD, targets_BxT, chunk_t: int, with_grads: bool):
    """Scan over time chunks of ``chunk_t`` positions of every sequence; the batch axis stays
    whole in each step, so a batch sharded over devices stays sharded (no gather)."""
    B, T, D = x_BxTxD.shape
    n = B * T
    nc = -(-T // chunk_t)
    pad = nc * chunk_t - T
    xs = jnp.pad(x_BxTxD, ((0, 0), (0, pad), (0, 0))).reshape(B, nc, chunk_t, D)
    xs = xs.transpose(1, 0, 2, 3)
    ts = jnp.pad(targets_BxT, ((0, 0), (0, pad))).reshape(B, nc, chunk_t).transpose(1, 0, 2)
    vs = (jnp.arange(nc * chunk_t) < T).reshape(nc, chunk_t)

    def body(carry, inp):
        loss_sum, correct_sum, dw = carry
        x_BxCxD, t_BxC, v_C = inp
        logits = jnp.dot(x_BxCxD, w_VxD.T, preferred_element_type=jnp.float32)
        logits = logits.astype(jnp.float32)
        lse = jax.nn.logsumexp(logits, axis=-1)
        tgt = jnp.take_along_axis(logits, t_BxC[..., None], axis=-1)[..., 0]
        vf = jnp.broadcast_to(v_C[None, :], t_BxC.shape).astype(jnp.float32)
        loss_sum = loss_sum + jnp.sum((lse - tgt) * vf)
        correct = (jnp.argmax(logits, axis=-1) == t_BxC).astype(jnp.float32)
        correct_sum = correct_sum + jnp.sum(correct * vf)
        if not with_grads:
            return (loss_sum, correct_sum, dw), None
        p = jnp.exp(logits - lse[..., None])
        onehot = jax.nn.one_hot(t_BxC, logits.shape[-1], dtype=jnp.float32)
        dlogits = ((p - onehot) * (vf / n)[..., None]).astype(x_BxCxD.dtype)
        dx = jnp.dot(dlogits, w_VxD, preferred_element_type=jnp.float32)
        # dw^T (D x V) accumulates x^T dlogits: both operands contracted on their leading
        # (token) axes, which XLA:CPU does without transposing the large C x V dlogits
        dw = dw + jnp.einsum("bcd,bcv->dv", x_BxCxD, dlogits, preferred_element_type=jnp.float32)
        return (loss_sum, correct_sum, dw), dx.astype(x_BxCxD.dtype)

    zero = jnp.zeros((), jnp.float32)
    dw0 = jnp.zeros(w_VxD.shape[::-1], jnp.float32) if with_grads else zero
    (loss_sum, correct_sum, dw), dxs = jax.lax.scan(body, (zero, zero, dw0), (xs, ts, vs))
    out = (loss_sum / n, correct_sum / n)
    if not with_grads:
        return out, None
    dx = dxs.transpose(1, 0, 2, 3).reshape(B, nc * chunk_t, D)[:, :T]
    return out, (dx, dw.T.astype(w_VxD.dtype))


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _chunked(x_BxTxD, w_VxD, targets_BxT, chunk_t):
    return _forward(x_BxTxD, w_VxD, targets_BxT, chunk_t, with_grads=False)[0]


def _chunked_fwd(x_BxTxD, w_VxD, targets_BxT, chunk_t):
    out, grads = _forward(x_BxTxD, w_VxD, targets_BxT, chunk_t, with_grads=True)
    return out, (grads, targets_BxT)


def _chunked_bwd(chunk_t, res, cotangents):
    (dx, dw), targets_BxT = res
    g_loss = cotangents[0]  # the accuracy output is piecewise constant: no gradient
    zero_t = np.zeros(targets_BxT.shape, jax.dtypes.float0)
    return (g_loss * dx).astype(dx.dtype), (g_loss * dw).astype(dw.dtype), zero_t


_chunked.defvjp(_chunked_fwd, _chunked_bwd)


def chunked_cross_entropy(x_BxTxD, w_VxD, targets_BxT, *, chunk: int):
    """Mean next-token cross-entropy and accuracy of the logits ``x @ w_VxD.T``, computed about
    ``chunk`` tokens at a time (see the module docstring); ``chunk <= 0`` or ``chunk >= B T``
    falls back to :func:`dense_cross_entropy`.

    ``x_BxTxD`` (or ``x_NxD``, treated as one sequence) is in the compute dtype (float32 or
    bfloat16), ``w_VxD`` is cast to it; logits, log-sum-exp and the loss are float32. Each step
    takes ``max(1, chunk // B)`` positions of every sequence, so the batch axis (and its
    sharding over devices) is kept. Differentiable in ``x`` and ``w`` (the accuracy has zero
    gradient). Returns ``(loss, accuracy)`` as float32 scalars.
    """
    squeeze = x_BxTxD.ndim == 2
    if squeeze:
        x_BxTxD, targets_BxT = x_BxTxD[None], targets_BxT[None]
    if x_BxTxD.ndim != 3 or w_VxD.ndim != 2 or targets_BxT.shape != x_BxTxD.shape[:2]:
        raise ValueError(
            f"chunked_cross_entropy: x {x_BxTxD.shape}, w {w_VxD.shape}, targets "
            f"{targets_BxT.shape}: expected (B, T, D) or (N, D), (V, D) and (B, T) or (N,)"
        )
    w_VxD = w_VxD.astype(x_BxTxD.dtype)
    B, T, D = x_BxTxD.shape
    if chunk <= 0 or chunk >= B * T:
        return dense_cross_entropy(x_BxTxD.reshape(B * T, D), w_VxD, targets_BxT.reshape(B * T))
    chunk_t = max(1, chunk // B)
    return _chunked(x_BxTxD, w_VxD, targets_BxT.astype(jnp.int32), int(chunk_t))
