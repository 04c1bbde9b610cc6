"""The one-axis device mesh, the parameter shardings (replicated or FSDP: the largest axis
divisible by the device count) and the token batches assembled onto the mesh from each
process's rows."""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from geomopt.lm._data import BatchLoader

__all__ = ["make_mesh", "stacked_batches", "state_shardings", "train_batch"]


def make_mesh(n_devices: int = 0) -> jax.sharding.Mesh:
    """A one-axis ``data`` mesh over the first ``n_devices`` devices (0: all)."""
    n = n_devices or jax.device_count()
    if n > jax.device_count():
        raise ValueError(f"n_devices={n}: only {jax.device_count()} devices are visible")
    return jax.make_mesh((n,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))


def _fsdp_spec(shape, n: int) -> P:
    axes = sorted(range(len(shape)), key=lambda a: -shape[a])
    for a in axes:
        if shape[a] % n == 0 and shape[a] >= n:
            spec = [None] * len(shape)
            spec[a] = "data"
            return P(*spec)
    return P()


def state_shardings(tree, mesh, fsdp: bool):
    n = mesh.shape["data"]

    def one(x):
        shape = getattr(x, "shape", ())
        spec = _fsdp_spec(shape, n) if fsdp and len(shape) >= 1 else P()
        return NamedSharding(mesh, spec)

    return jax.tree.map(one, tree)


def _assemble(local: np.ndarray, mesh, shape) -> jax.Array:
    sharding = NamedSharding(mesh, P(None, "data", None))
    return jax.make_array_from_process_local_data(sharding, local, shape)


def stacked_batches(loader: BatchLoader, steps: list[int], mesh) -> jax.Array:
    """The batches of loader steps ``steps`` as one ``(len(steps), batch, T+1)`` global array
    sharded over ``data`` on axis 1 (each process supplies its rows)."""
    pid, pcount = jax.process_index(), jax.process_count()
    local = np.stack([loader.local_batch(s, pid, pcount) for s in steps])
    return _assemble(local, mesh, (len(steps), loader.batch_size, loader.seq_len + 1))


def train_batch(loader: BatchLoader, step: int, grad_accum: int, mesh) -> jax.Array:
    """The global batch of ``step`` split into ``grad_accum`` micro-batches: the rows, hence
    the accumulated gradient, do not depend on ``grad_accum`` or the number of processes."""
    pid, pcount = jax.process_index(), jax.process_count()
    micro = loader.batch_size // grad_accum
    per = micro // pcount
    parts = [
        loader.rows(step, i * micro + pid * per, i * micro + (pid + 1) * per)
        for i in range(grad_accum)
    ]
    return _assemble(np.stack(parts), mesh, (grad_accum, micro, loader.seq_len + 1))
