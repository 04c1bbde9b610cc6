"""One figure style and one save helper, used by every ``plot.py``.

Figures are made from saved results only. :func:`figure` opens a styled figure;
:func:`save` writes PNG (and PDF when asked) atomically and closes the figure.
Colours are fixed per method name so the same optimiser or model has the same colour everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from geomopt.experiment import atomic_write_bytes  # noqa: E402

__all__ = ["STYLE", "color", "figure", "save", "band"]

STYLE = {
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.5,
}

_PALETTE = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
]  # fmt: skip

_FIXED = {
    "sgd": "#1f77b4",
    "signsgd": "#d62728",
    "sign_sgd": "#d62728",
    "signum": "#ff7f0e",
    "muon": "#2ca02c",
    "muon-svd": "#2ca02c",
    "muon-ns": "#9467bd",
    "adamw": "#8c564b",
    "gfm": "#d62728",
    "linear": "#7f7f7f",
    "hilbert": "#d62728",
    "lex": "#1f77b4",
    "morton": "#2ca02c",
}


def color(name: str) -> str:
    """A stable colour for a method name (fixed for known names, hashed otherwise)."""
    key = name.lower()
    if key in _FIXED:
        return _FIXED[key]
    return _PALETTE[sum(key.encode()) % len(_PALETTE)]


def figure(ncols: int = 1, nrows: int = 1, *, width: float = 3.6, height: float = 2.8, **kw):
    """``plt.subplots`` with the project style and a per-panel size in inches."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **kw
        )
    fig.set_layout_engine("constrained")
    for ax in axes.flat:
        ax.grid(True, alpha=STYLE["grid.alpha"], linewidth=STYLE["grid.linewidth"])
        ax.spines["top"].set_visible(False)
        ax.spines["right"].set_visible(False)
    return fig, (axes[0, 0] if nrows == ncols == 1 else axes)


def band(ax, x, lo, hi, *, label_color: str, alpha: float = 0.2):
    """Shade a percentile band between ``lo`` and ``hi``."""
    ax.fill_between(x, lo, hi, color=label_color, alpha=alpha, linewidth=0)


def save(fig, path: str | os.PathLike, *, pdf: bool = False, formats: Sequence[str] = ()) -> Path:
    """Save ``fig`` to ``path`` (``.png`` added if missing), plus ``.pdf`` when ``pdf`` is True.

    Files are written atomically and the figure is closed. Returns the PNG path.
    """
    import io

    path = Path(path)
    if path.suffix.lower() != ".png":
        path = path.with_suffix(".png")
    exts = ["png"] + (["pdf"] if pdf else []) + [f for f in formats if f not in ("png", "pdf")]
    with plt.rc_context(STYLE):
        for ext in exts:
            buf = io.BytesIO()
            fig.savefig(buf, format=ext)
            atomic_write_bytes(path.with_suffix("." + ext), buf.getvalue())
    plt.close(fig)
    return path
