"""Checks of config values, shared by every experiment's ``validate`` (no JAX, no NumPy: they
run at ``--help`` and before a run folder exists).

Each raises one ``ValueError`` whose message starts ``field=value: expected ...``; a tuple field
is checked entry by entry. Fields of nested configs are named with their prefix through
:func:`nested` (``train.model.dropout=...``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "is_number",
    "check_ints",
    "check_positive",
    "check_nonnegative",
    "check_range",
    "check_nonempty",
    "check_tuples",
    "check_names",
    "check_one_of",
    "nested",
]


def is_number(x: Any) -> bool:
    """A real number (int or float), not a bool."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _entries(v: Any) -> tuple:
    return v if isinstance(v, tuple) else (v,)


def check_ints(cfg: Any, *names: str, minimum: int = 1) -> None:
    """Each field (or tuple entry) is an int >= ``minimum``."""
    for n in names:
        v = getattr(cfg, n)
        for x in _entries(v):
            if isinstance(x, bool) or not isinstance(x, int) or x < minimum:
                raise ValueError(f"{n}={v!r}: expected integers >= {minimum}")


def check_positive(cfg: Any, *names: str) -> None:
    """Each field (or tuple entry) is a finite number > 0."""
    for n in names:
        v = getattr(cfg, n)
        for x in _entries(v):
            if not (is_number(x) and math.isfinite(x) and x > 0):
                raise ValueError(f"{n}={v!r}: expected finite values > 0")


def check_nonnegative(cfg: Any, *names: str) -> None:
    """Each field (or tuple entry) is a finite number >= 0."""
    for n in names:
        v = getattr(cfg, n)
        for x in _entries(v):
            if not (is_number(x) and math.isfinite(x) and x >= 0):
                raise ValueError(f"{n}={v!r}: expected finite values >= 0")


def check_range(
    cfg: Any, name: str, low: float, high: float, *, low_open: bool = False,
    high_open: bool = False,
) -> None:  # fmt: skip
    """The field (or each tuple entry) is finite and inside ``[low, high]`` (``(`` / ``)``
    where open)."""
    v = getattr(cfg, name)
    for x in _entries(v):
        ok = is_number(x) and math.isfinite(x)
        above = ok and (x > low if low_open else x >= low)
        if not (above and (x < high if high_open else x <= high)):
            lo, hi = "(" if low_open else "[", ")" if high_open else "]"
            raise ValueError(f"{name}={v!r}: expected finite values in {lo}{low:g}, {high:g}{hi}")


def check_nonempty(cfg: Any, *names: str) -> None:
    """Each tuple field holds at least one value (e.g. not ``--dims`` given without values)."""
    for n in names:
        v = getattr(cfg, n)
        if len(v) == 0:
            raise ValueError(f"{n}={v!r}: expected at least one value")


def check_tuples(cfg: Any, *names: str) -> None:
    """Each tuple field holds at least one value and no value twice."""
    check_nonempty(cfg, *names)
    for n in names:
        v = getattr(cfg, n)
        if len(set(v)) != len(v):
            raise ValueError(f"{n}={v!r}: expected distinct values")


def check_names(cfg: Any, name: str, known: Iterable[str]) -> None:
    """The field is a non-empty tuple of distinct names from ``known``."""
    v, known = getattr(cfg, name), tuple(known)
    if not isinstance(v, tuple) or not v or any(x not in known for x in v) or len(set(v)) != len(v):
        raise ValueError(f"{name}={v!r}: expected distinct names from {known}, at least one")


def check_one_of(cfg: Any, name: str, known: Iterable[str]) -> None:
    """The field is one of ``known``."""
    v, known = getattr(cfg, name), tuple(known)
    if v not in known:
        raise ValueError(f"{name}={v!r}: expected one of {known}")


def nested(prefix: str, check: Callable[..., None], obj: Any, *args: Any, **kw: Any) -> None:
    """Run ``check(obj, *args, **kw)`` on a nested config, naming its fields ``prefix.field``."""
    try:
        check(obj, *args, **kw)
    except ValueError as e:
        raise ValueError(f"{prefix.rstrip('.')}.{e}") from None
