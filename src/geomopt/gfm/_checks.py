"""Config checks shared by the GFM experiments (``exp_*.py``); no heavy imports.

Each raises one ``ValueError`` of the form ``"{field}={value!r}: expected ..."``, like
:func:`geomopt.experiment.check_ints` and :func:`geomopt.experiment.check_positive`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

__all__ = ["check_names", "check_nonnegative", "check_one_of", "check_nested", "is_number"]


def is_number(x: Any) -> bool:
    """A real number (int or float), not a bool."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def check_names(cfg: Any, name: str, known: Iterable[str]) -> None:
    """Field ``name`` must be a non-empty tuple of distinct names from ``known``."""
    v, known = getattr(cfg, name), tuple(known)
    if not isinstance(v, tuple) or not v or any(x not in known for x in v) or len(set(v)) != len(v):
        raise ValueError(f"{name}={v!r}: expected distinct names from {known}, at least one")


def check_one_of(cfg: Any, name: str, known: Iterable[str]) -> None:
    """Field ``name`` must be one of ``known``."""
    v, known = getattr(cfg, name), tuple(known)
    if v not in known:
        raise ValueError(f"{name}={v!r}: expected one of {known}")


def check_nonnegative(cfg: Any, *names: str) -> None:
    """Each field (or tuple entry) must be a finite number >= 0."""
    for n in names:
        v = getattr(cfg, n)
        for x in v if isinstance(v, tuple) else (v,):
            if not (is_number(x) and math.isfinite(x) and x >= 0):
                raise ValueError(f"{n}={v!r}: expected finite values >= 0")


def check_nested(prefix: str, check, *args, **kwargs) -> None:
    """Run ``check`` (e.g. :func:`check_ints` on a nested config) and prefix the field name in
    its message with ``prefix`` (``"denoiser."``)."""
    try:
        check(*args, **kwargs)
    except ValueError as e:
        raise ValueError(f"{prefix}{e}") from None
