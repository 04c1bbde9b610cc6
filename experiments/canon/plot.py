"""Figures of the canon experiments from saved run folders only.

uv run experiments/canon/plot.py [--root results] [--name quick] [--out experiments/canon/figures]
"""

import argparse
from pathlib import Path

import numpy as np

from geomopt.plotting import color, figure, save
from geomopt.runs import load_run

LABELS = {"l2": "no reordering", "lex": "lex sort", "hilbert": "Hilbert sort", "wass": "Hungarian"}
COLORS = {"l2": "#7f7f7f", "wass": "#2ca02c"}


def _file(kind: str, name: str) -> str:
    """``covering.png`` for the quick run, ``covering_<name>.png`` for any other run."""
    return f"{kind}.png" if name == "quick" else f"{kind}_{name}.png"


def plot_covering(root: Path, out: Path, name: str = "quick") -> list[Path]:
    path = root / "canon" / "covering" / name
    if not path.exists():
        return []
    _, rows, summary = load_run(path)
    fig, axes = figure(2, 1, width=3.6, height=2.8)
    a, b = axes.flat
    for sweep, ax, key in (("dim", a, "d"), ("n_train", b, "n_train")):
        sel = [r for r in rows if r["sweep"] == sweep]
        xs = [r[key] for r in sel]
        for k, label in LABELS.items():
            ax.plot(xs, [r[k] for r in sel], "o-", label=label, color=COLORS.get(k, color(k)))
        ax.set_yscale("log")
        ax.set_xlabel("point dimension d" if sweep == "dim" else "training clouds")
    if sweep == "n_train":
        b.set_xscale("log", base=2)
    a.set_ylabel("covering proxy (mean NN distance)")
    a.legend()
    if summary:
        a.set_title(
            f"log-ratio slope vs d: lex {summary['lex_exp_rate']:.2f}, "
            f"Hilbert {summary['hilbert_exp_rate']:.2f}",
            fontsize=8,
        )
    return [save(fig, out / _file("covering", name))]


def plot_regularity(root: Path, out: Path, name: str = "quick") -> list[Path]:
    path = root / "canon" / "regularity" / name
    if not path.exists():
        return []
    cfg, rows, summary = load_run(path)
    orders = cfg["probe"]["orders"] if "probe" in cfg else cfg["orders"]
    dims = sorted({r["d"] for r in rows})
    fig, axes = figure(2, 1, width=3.6, height=2.8)
    a, b = axes.flat
    for order in orders:
        exps = [summary[f"{order}_d{d}_exponent"] for d in dims]
        a.plot(dims, exps, "o-", label=order, color=color(order))
        eps_small = min(r["eps"] for r in rows)
        ratio = [np.mean([r["ratio"] for r in rows if r["d"] == d and r["order"] == order
                          and r["eps"] == eps_small]) for d in dims]  # fmt: skip
        b.plot(dims, ratio, "o-", label=order, color=color(order))
    a.plot(dims, [1 / d for d in dims], "k--", label="1/d")
    a.set_xlabel("point dimension d")
    a.set_ylabel("fitted exponent of displacement vs eps")
    a.legend()
    b.set_yscale("log")
    b.set_xlabel("point dimension d")
    b.set_ylabel("displacement / W at smallest eps")
    return [save(fig, out / _file("regularity", name))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--root", type=Path, default=Path("results"))
    p.add_argument("--name", default="quick")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "figures")
    args = p.parse_args()
    for f in plot_covering(args.root, args.out, args.name) + plot_regularity(
        args.root, args.out, args.name
    ):
        print(f)


if __name__ == "__main__":
    main()
