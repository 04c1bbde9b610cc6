"""Muon's orthogonalisation spread over devices: every matrix is orthogonalised once, on one
device, and the results are shared (as distributed Muon in Dion / Moonlight does).

With the parameters sharded (FSDP) the plain update has every device run Newton-Schulz on every
(gathered) matrix, so the per-device work does not fall with the device count. Here the matrices
of one shape are stacked, the stack is split over the ``axis`` devices of ``mesh`` (padded with
zero matrices to a multiple of their number; a zero matrix orthogonalises to zero), each device
orthogonalises its share inside ``shard_map`` and an all-gather hands every device the whole
result. The per-device Newton-Schulz work is ``ceil(k / n_devices)`` matrices of each shape
instead of ``k``; the all-gather moves each result once. The arithmetic per matrix is that of
:func:`geomopt.optim.orthogonalize`, so the update equals the one-device update to float
rounding (tested on 8 CPU devices).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from geomopt.optim._orthogonalize import orthogonalize

__all__ = ["orthogonalize_sharded"]


def orthogonalize_sharded(stacked, mesh: Mesh, axis: str = "data", **orth_kwargs):
    """``orthogonalize`` of a stack ``(k, m, n)``, the ``k`` matrices split over the ``axis``
    devices of ``mesh`` and the results all-gathered (module doc); same shape and dtype."""
    n_dev = mesh.shape[axis]
    k = stacked.shape[0]
    per = math.ceil(k / n_dev)
    pad = per * n_dev - k
    if pad:
        stacked = jnp.concatenate([stacked, jnp.zeros((pad,) + stacked.shape[1:], stacked.dtype)])

    def local(x):  # this device's ``per`` matrices
        out = orthogonalize(x, **orth_kwargs)
        return jax.lax.all_gather(out, axis, axis=0, tiled=True)

    spec = P(axis, *([None] * (stacked.ndim - 1)))
    out = jax.shard_map(local, mesh=mesh, in_specs=spec, out_specs=P(), check_vma=False)(stacked)
    return out[:k]


def sharded_orth(mesh: Mesh, axis: str = "data") -> Any:
    """The ``orth`` argument of :func:`geomopt.optim.orthogonalize_grouped` that spreads each
    shape's stack over the devices."""

    def orth(stacked, **kw):
        return orthogonalize_sharded(stacked, mesh, axis, **kw)

    return orth
