"""The figures of a ``canon/covering`` run (:mod:`geomopt.canon.exp_covering`): ``covering.png``
(slopes vs ``d`` and ``k``, ratios to Hungarian; for digits the proxies vs ``n``) and
``covering_modelnet.png``, with the colours and labels of the four distances.

Module-level imports are light (no NumPy, no matplotlib).
"""

from __future__ import annotations

from pathlib import Path

from geomopt.canon._exp_covering_summary import KINDS, mean_ci
from geomopt.experiment import figure_path

LABELS = {"l2": "no reordering", "lex": "lex sort", "hilbert": "Hilbert sort", "wass": "Hungarian"}
COLORS = {"l2": "#7f7f7f", "lex": "#1f77b4", "hilbert": "#d62728", "wass": "#2ca02c"}


def _errorbar(ax, x, head: dict, key: str, *, offset: float = 0.0, **kw) -> None:
    """Mean and 95 % interval of headline ``key`` (``{}`` filled with each x), drawn at
    ``x + offset`` (so the orders' bars do not hide each other)."""
    import numpy as np

    m, lo, hi = (np.array([float(head.get(key.format(v) + suffix, "nan")) for v in x])
                 for suffix in ("", "/ci_lo", "/ci_hi"))  # fmt: skip
    ax.errorbar(np.asarray(x, float) + offset, m, yerr=np.stack([m - lo, hi - m]), fmt="o-",
                capsize=2, ms=3, **kw)  # fmt: skip


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``covering.png``: NN distance vs training clouds per d and per k, and proxy / Hungarian
    vs d (mean and 95 % t-interval over data seeds); for a digits run the proxies and their
    ratios vs n; ``covering_modelnet.png`` when the run measured ModelNet."""

    from geomopt import plotting
    from geomopt.experiment import read_run

    record = read_run(run_dir)
    cfg = record.config_values
    head = record.headline
    n_seeds = cfg.get("n_data_seeds", 1)
    if cfg.get("data", "families") == "digits":
        figures = [_plot_digits(record, figure_path(run_dir, out, "covering"))]
    else:
        rows = [r for r in record.metrics if r.get("data") == "synthetic"]
        fig, axes = plotting.figure(3, 1, width=3.5, height=2.9)
        a, b, c = axes.flat
        sizes = sorted({r["n_train"] for r in rows})
        shift = {kind: 0.06 * (i - 1.5) for i, kind in enumerate(KINDS)}
        # (a) slopes vs d at fixed k
        for kind in KINDS:
            _errorbar(a, cfg["dims"], head, f"slope/d{{}}/{kind}", offset=shift[kind],
                      color=COLORS[kind], label=LABELS[kind])  # fmt: skip
        a.axhline(-1 / cfg["k"], color="k", ls="--", lw=1, label=f"-1/k (k = {cfg['k']})")
        a.set_xticks(cfg["dims"])
        a.set_xlabel("point dimension d")
        a.set_ylabel("slope of NN distance vs n (log-log)")
        a.set_title(f"intrinsic dim. k = {cfg['k']}; {n_seeds} data seeds, 95 % CI")
        # (b) slopes vs k at fixed d
        ks = sorted(int(key.split("/")[1][1:]) for key in head
                    if key.startswith("slope/k") and key.endswith("/wass"))  # fmt: skip
        for kind in KINDS:
            _errorbar(b, ks, head, f"slope/k{{}}/{kind}", offset=shift[kind],
                      color=COLORS[kind], label=LABELS[kind])  # fmt: skip
        b.plot(ks, [-1 / k for k in ks], "k--", lw=1, label="-1/k")
        b.set_xticks(ks)
        b.set_xlabel("intrinsic dimension k")
        b.set_title(f"d = {cfg['k_dim']}")
        # (c) ratio to Hungarian at the largest n vs d
        for kind in ("l2", "lex", "hilbert"):
            _errorbar(c, cfg["dims"], head, f"ratio/d{{}}/{kind}", offset=shift[kind],
                      color=COLORS[kind], label=LABELS[kind])  # fmt: skip
        c.set_yscale("log")
        c.set_xticks(cfg["dims"])
        c.set_xlabel("point dimension d")
        c.set_ylabel(f"proxy / Hungarian at n = {max(sizes)}")
        handles, labels = a.get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
        figures = [plotting.save(fig, figure_path(run_dir, out, "covering"))]
    mn = [r for r in record.metrics if r.get("data") == "modelnet"]
    if mn:
        fig, ax = plotting.figure(1, 1, width=4.0, height=3.0)
        for kind in KINDS:
            sel = [r for r in mn if r["kind"] == kind]
            ax.plot([r["n_train"] for r in sel], [float(r["proxy"]) for r in sel], "o-",
                    color=COLORS[kind], label=LABELS[kind])  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sorted({r["n_train"] for r in mn}))
        ax.set_xticklabels([str(n) for n in sorted({r["n_train"] for r in mn})])
        ax.set_xlabel("training clouds")
        ax.set_ylabel("covering proxy (mean NN distance)")
        ax.set_title(f"ModelNet, {cfg['modelnet_points']} points")
        ax.legend(loc="best")
        figures.append(plotting.save(fig, figure_path(run_dir, out, "covering_modelnet")))
    return figures


def _plot_digits(record, path: Path) -> Path:
    """Proxy vs n and proxy / Hungarian vs n on the digits, mean and 95 % t-interval over
    data seeds (computed from the logged rows)."""
    import numpy as np

    from geomopt import plotting

    rows = [r for r in record.metrics if r.get("data") == "digits"]
    cfg = record.config_values
    sizes = sorted({r["n_train"] for r in rows})
    seeds = sorted({r["data_seed"] for r in rows})
    proxy = {(r["data_seed"], r["kind"], r["n_train"]): float(r["proxy"]) for r in rows}
    fig, axes = plotting.figure(2, 1, width=3.6, height=2.9)
    a, b = axes.flat
    for kind in KINDS:
        p = np.array([[proxy[(s, kind, n)] for n in sizes] for s in seeds])
        m, lo, hi = np.array([mean_ci(col) for col in p.T]).T
        a.plot(sizes, m, "o-", ms=3, color=COLORS[kind], label=LABELS[kind])
        plotting.band(a, sizes, lo, hi, label_color=COLORS[kind])
        if kind == "wass":
            continue
        r = p / np.array([[proxy[(s, "wass", n)] for n in sizes] for s in seeds])
        m, lo, hi = np.array([mean_ci(col) for col in r.T]).T
        b.plot(sizes, m, "o-", ms=3, color=COLORS[kind], label=LABELS[kind])
        plotting.band(b, sizes, lo, hi, label_color=COLORS[kind])
    for ax in (a, b):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(n) for n in sizes])
        ax.set_xlabel("training clouds n")
    a.set_yscale("log")
    a.set_ylabel("covering proxy (mean NN distance)")
    a.set_title(f"8x8 digits, {cfg['n_points']} points; {len(seeds)} data seeds, 95 % CI")
    b.set_yscale("log")
    b.set_ylabel("proxy / Hungarian")
    handles, labels = a.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
    return plotting.save(fig, path)
