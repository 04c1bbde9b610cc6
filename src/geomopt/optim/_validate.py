"""Argument checks shared by the optimisers and schedules.

Values that are traced (inside ``jit``/``vmap``) or callables (schedules) cannot be checked
eagerly and are passed through; concrete Python or NumPy/JAX scalars are checked here.
"""

import math

import jax
import numpy as np


def concrete_float(value) -> float | None:
    """``value`` as a float when it is a concrete scalar; None if traced, an array or callable."""
    if callable(value) or isinstance(value, jax.core.Tracer):
        return None
    try:
        arr = np.asarray(value)
    except Exception:  # noqa: BLE001 - anything not convertible is simply not checked here
        return None
    if arr.ndim != 0 or not np.issubdtype(arr.dtype, np.number):
        return None
    return float(arr)


def check_learning_rate(name: str, value) -> None:
    """Learning rates (floats) must be finite and >= 0; schedules and traced arrays pass."""
    v = concrete_float(value)
    if v is not None and (not math.isfinite(v) or v < 0):
        raise ValueError(f"{name}={value!r}: expected a finite learning rate >= 0 (or a schedule)")


def check_nonnegative(name: str, value) -> None:
    v = concrete_float(value)
    if v is not None and (not math.isfinite(v) or v < 0):
        raise ValueError(f"{name}={value!r}: expected a finite value >= 0")


def check_momentum(name: str, value) -> None:
    v = concrete_float(value)
    if v is not None and not (0.0 <= v < 1.0):
        raise ValueError(f"{name}={value!r}: expected a momentum in [0, 1)")


def is_zero(value) -> bool:
    """True only for a concrete 0 (so a traced weight decay keeps its transform in the chain)."""
    v = concrete_float(value)
    return v is not None and v == 0.0
