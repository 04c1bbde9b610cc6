"""NorMuon: Muon's orthogonalised update normalised neuron by neuron (Li et al. 2025,
arXiv 2510.05491; in the modded-nanogpt records and nanochat).

Muon's ``O = msign(M)`` has equal singular values but its rows (neurons) can have very
different norms. NorMuon keeps, per neuron, an exponential average of the mean square of its
entries of ``O`` and divides by its square root, then rescales the whole matrix back to the
Frobenius norm ``O`` had, so only the distribution over neurons changes:

    v     <- beta2 v + (1 - beta2) mean_j O_ij^2          (one value per neuron i)
    O'    =  O / (sqrt(v) + eps)
    O''   =  O' * ||O||_F / (||O'||_F + eps)

(no bias correction, as the reference). The neurons are indexed by ``neuron_axis`` and the
mean runs over the other matrix axis: ``-1`` for the ``(d_in, d_out)`` kernels of flax and of
geomopt's GPT-2 (the output units are columns), ``-2`` for PyTorch's ``(d_out, d_in)``.
Because ``O''`` does not depend on a constant factor of ``O``, the transformation may follow
Muon's shape scaling; in :func:`geomopt.optim.muon` it does (``normuon=True``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from geomopt.optim._validate import check_momentum

__all__ = ["NorMuonState", "scale_by_normuon"]


class NorMuonState(NamedTuple):
    """Per-neuron second moments of the orthogonalised updates."""

    nu: optax.Updates


def scale_by_normuon(
    beta2: float = 0.95, eps: float = 1e-10, neuron_axis: int = -1
) -> optax.GradientTransformation:
    """The NorMuon normalisation (module doc) of every leaf, a matrix or a stack of them."""
    check_momentum("beta2", beta2)
    if neuron_axis not in (-1, -2):
        raise ValueError(f"neuron_axis={neuron_axis!r}: expected -1 (columns) or -2 (rows)")
    over = -2 if neuron_axis == -1 else -1  # the axis the mean runs over

    def init_fn(params):
        def zeros(p):
            shape = list(p.shape)
            shape[over] = 1
            return jnp.zeros(shape, p.dtype)

        return NorMuonState(nu=jax.tree.map(zeros, params))

    def update_fn(updates, state, params=None):
        del params

        def one(o, nu):
            nu = beta2 * nu + (1 - beta2) * jnp.mean(jnp.square(o), axis=over, keepdims=True)
            scaled = o / (jnp.sqrt(nu) + eps)
            norm = jnp.sqrt(jnp.sum(jnp.square(o), axis=(-2, -1), keepdims=True))
            new = jnp.sqrt(jnp.sum(jnp.square(scaled), axis=(-2, -1), keepdims=True))
            return (scaled * (norm / (new + eps))).astype(o.dtype), nu

        leaves, treedef = jax.tree.flatten(updates)
        pairs = [one(o, nu) for o, nu in zip(leaves, treedef.flatten_up_to(state.nu), strict=True)]
        out = treedef.unflatten([p[0] for p in pairs])
        return out, NorMuonState(nu=treedef.unflatten([p[1] for p in pairs]))

    return optax.GradientTransformation(init_fn, update_fn)
