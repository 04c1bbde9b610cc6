"""The methods the signsgd experiments compare, by name, without importing JAX: the paper's
names (:data:`geomopt.problems.OPTIMIZERS`), their legend labels, and the check of a config's
method names (the paper's, or any name of :data:`geomopt.optim.OPTIMIZERS`)."""

from __future__ import annotations

from typing import Any

__all__ = ["PAPER_METHODS", "LABELS", "label", "check_methods"]

PAPER_METHODS = ("sgd", "signsgd", "signum", "muon_svd", "muon_ns")
"""The names of ``geomopt.problems.OPTIMIZERS`` (kept here so validation needs no JAX)."""

LABELS = {
    "sgd": "SGD",
    "signsgd": "SignSGD",
    "signum": "Signum",
    "muon_svd": "Muon (SVD)",
    "muon_ns": "Muon (Newton-Schulz)",
}
"""Legend names of the paper's methods; any other method is labelled with its name."""


def label(name: str) -> str:
    return LABELS.get(name, name)


def check_methods(cfg: Any, field: str, paper: tuple[str, ...] = PAPER_METHODS) -> None:
    """``cfg.<field>`` is a non-empty tuple of distinct names from ``paper`` or registered in
    :data:`geomopt.optim.OPTIMIZERS` (imported, with JAX, only for a name outside ``paper``)."""
    names = getattr(cfg, field)
    if not isinstance(names, tuple) or not names:
        raise ValueError(f"{field}={names!r}: expected at least one method name")
    if len(set(names)) != len(names):
        raise ValueError(f"{field}={names!r}: expected distinct names")
    unknown = [m for m in names if m not in paper]
    if unknown:
        from geomopt.optim import OPTIMIZERS

        bad = [m for m in unknown if m not in OPTIMIZERS]
        if bad:
            raise ValueError(
                f"{field} {bad}: expected names from {paper} or registered in "
                f"geomopt.optim.OPTIMIZERS {sorted(OPTIMIZERS)}"
            )
