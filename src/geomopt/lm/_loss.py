"""Next-token cross-entropy through the tied output head, without the full ``B x T x V`` logits.

:func:`chunked_cross_entropy` takes the final hidden states ``x_NxD`` and the token table
``w_VxD`` and walks over the ``N`` tokens in chunks of ``chunk`` rows (``lax.scan``): each
chunk forms its ``chunk x V`` float32 logits, its log-sum-exp, loss and argmax, and is then
dropped. The backward pass is a ``jax.custom_vjp`` whose forward rule computes the gradients in
the same pass (softmax minus one-hot, times ``1/N``, then ``dx = dlogits w`` and
``dw += dlogits^T x``), so the logits are formed once per chunk, never stored, and never
recomputed: three matmuls per chunk, as in the unchunked loss, and peak memory grows with
``chunk x V`` instead of ``N x V`` (measured in ``benchmarks/bench_lm_memory.py``).

The result equals ``optax.softmax_cross_entropy_with_integer_labels(x @ w.T, t).mean()`` and
its gradients up to float32 rounding (the tests require 1e-5).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

__all__ = ["chunked_cross_entropy", "dense_cross_entropy"]


def dense_cross_entropy(x_NxD, w_VxD, targets_N):
    """Mean cross-entropy and accuracy through the full ``N x V`` float32 logits (reference)."""
    logits = jnp.dot(x_NxD, w_VxD.T, preferred_element_type=jnp.float32).astype(jnp.float32)
    lse = jax.nn.logsumexp(logits, axis=-1)
    tgt = jnp.take_along_axis(logits, targets_N[:, None], axis=-1)[:, 0]
    correct = (jnp.argmax(logits, axis=-1) == targets_N).astype(jnp.float32)
    return jnp.mean(lse - tgt), jnp.mean(correct)


def _chunks(x_NxD, targets_N, chunk: int):
    """Rows padded to a multiple of ``chunk`` and reshaped to ``(n_chunks, chunk, ...)``, with a
    validity mask for the padding rows."""
    n = x_NxD.shape[0]
    n_chunks = -(-n // chunk)
    pad = n_chunks * chunk - n
    valid = jnp.arange(n_chunks * chunk) < n
    x = jnp.pad(x_NxD, ((0, pad), (0, 0)))
    t = jnp.pad(targets_N, (0, pad))
    d = x_NxD.shape[1]
    return (
        x.reshape(n_chunks, chunk, d),
        t.reshape(n_chunks, chunk),
        valid.reshape(n_chunks, chunk),
    )


def _chunk_logits(x_CxD, w_VxD):
    return jnp.dot(x_CxD, w_VxD.T, preferred_element_type=jnp.float32).astype(jnp.float32)


def _forward(x_NxD, w_VxD, targets_N, chunk: int, with_grads: bool):
    n = x_NxD.shape[0]
    xs, ts, vs = _chunks(x_NxD, targets_N, chunk)

    def body(carry, inp):
        loss_sum, correct_sum, dw = carry
        x_CxD, t_C, v_C = inp
        logits = _chunk_logits(x_CxD, w_VxD)
        lse = jax.nn.logsumexp(logits, axis=-1)
        tgt = jnp.take_along_axis(logits, t_C[:, None], axis=-1)[:, 0]
        vf = v_C.astype(jnp.float32)
        loss_sum = loss_sum + jnp.sum((lse - tgt) * vf)
        correct = (jnp.argmax(logits, axis=-1) == t_C).astype(jnp.float32)
        correct_sum = correct_sum + jnp.sum(correct * vf)
        if not with_grads:
            return (loss_sum, correct_sum, dw), None
        p = jnp.exp(logits - lse[:, None])
        onehot = jax.nn.one_hot(t_C, logits.shape[-1], dtype=jnp.float32)
        dlogits = ((p - onehot) * (vf / n)[:, None]).astype(x_CxD.dtype)
        dx = jnp.dot(dlogits, w_VxD, preferred_element_type=jnp.float32)
        dw = dw + jnp.dot(dlogits.T, x_CxD, preferred_element_type=jnp.float32)
        return (loss_sum, correct_sum, dw), dx.astype(x_CxD.dtype)

    zero = jnp.zeros((), jnp.float32)
    dw0 = jnp.zeros(w_VxD.shape, jnp.float32) if with_grads else zero
    (loss_sum, correct_sum, dw), dxs = jax.lax.scan(body, (zero, zero, dw0), (xs, ts, vs))
    out = (loss_sum / n, correct_sum / n)
    if not with_grads:
        return out, None
    dx = dxs.reshape(-1, x_NxD.shape[1])[:n]
    return out, (dx, dw.astype(w_VxD.dtype))


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _chunked(x_NxD, w_VxD, targets_N, chunk):
    return _forward(x_NxD, w_VxD, targets_N, chunk, with_grads=False)[0]


def _chunked_fwd(x_NxD, w_VxD, targets_N, chunk):
    out, grads = _forward(x_NxD, w_VxD, targets_N, chunk, with_grads=True)
    return out, (grads, targets_N)


def _chunked_bwd(chunk, res, cotangents):
    (dx, dw), targets_N = res
    g_loss = cotangents[0]  # the accuracy output is piecewise constant: no gradient
    zero_t = jnp.zeros(targets_N.shape, jax.dtypes.float0)
    return (g_loss * dx).astype(dx.dtype), (g_loss * dw).astype(dw.dtype), zero_t


_chunked.defvjp(_chunked_fwd, _chunked_bwd)


def chunked_cross_entropy(x_NxD, w_VxD, targets_N, *, chunk: int):
    """Mean next-token cross-entropy and accuracy of the logits ``x_NxD @ w_VxD.T``, computed
    ``chunk`` tokens at a time (see the module docstring); ``chunk <= 0`` or ``chunk >= N``
    falls back to :func:`dense_cross_entropy`.

    ``x_NxD`` is in the compute dtype (float32 or bfloat16), ``w_VxD`` is cast to it; logits,
    log-sum-exp and the loss are float32. Differentiable in ``x_NxD`` and ``w_VxD`` (the
    accuracy has zero gradient). Returns ``(loss, accuracy)`` as float32 scalars.
    """
    if x_NxD.ndim != 2 or w_VxD.ndim != 2 or targets_N.shape != x_NxD.shape[:1]:
        raise ValueError(
            f"chunked_cross_entropy: x {x_NxD.shape}, w {w_VxD.shape}, targets "
            f"{targets_N.shape}: expected (N, D), (V, D) and (N,)"
        )
    w_VxD = w_VxD.astype(x_NxD.dtype)
    if chunk <= 0 or chunk >= x_NxD.shape[0]:
        return dense_cross_entropy(x_NxD, w_VxD, targets_N)
    return _chunked(x_NxD, w_VxD, targets_N.astype(jnp.int32), int(chunk))
