"""Preset-based command lines shared by every entry point.

``preset_cli(PRESETS, default="quick")`` wraps :func:`tyro.extras.overridable_config_cli`:
the first positional argument names a preset (``smoke``, ``quick``, ``paper`` ...), and any
field can then be overridden (``--optim.lr 1e-3``). With no preset named, ``default`` is used,
so ``uv run experiments/x.py`` runs the quick settings and ``... x.py paper`` the paper's.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TypeVar

import tyro

T = TypeVar("T")

__all__ = ["preset_cli", "resolve_preset"]


def resolve_preset(presets: Mapping[str, tuple[str, T]], name: str) -> T:
    """Return the config of preset ``name``, or raise naming the known presets."""
    if name not in presets:
        raise ValueError(f"unknown preset {name!r}; expected one of {sorted(presets)}")
    return presets[name][1]


def preset_cli(
    presets: Mapping[str, tuple[str, T]],
    *,
    default: str,
    args: Sequence[str] | None = None,
    description: str | None = None,
) -> T:
    """Parse ``[PRESET] [--field value ...]`` into a config; ``PRESET`` defaults to ``default``."""
    if default not in presets:
        raise ValueError(f"default preset {default!r} not in {sorted(presets)}")
    argv = list(sys.argv[1:] if args is None else args)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = [default, *argv]
    elif not argv[0].startswith("-") and argv[0] not in presets:
        raise SystemExit(f"unknown preset {argv[0]!r}; expected one of {sorted(presets)}")
    return tyro.extras.overridable_config_cli(dict(presets), args=argv, description=description)
