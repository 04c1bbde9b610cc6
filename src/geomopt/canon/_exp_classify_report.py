"""The summary of a ``canon/classify`` run (:mod:`geomopt.canon.exp_classify`): per-data-seed
reductions of the metrics rows, the headline numbers with their 95 % intervals over data seeds
(:func:`summarise`) and the markdown table of the run (:func:`contrast_table`).

Module-level imports are light (no JAX, no NumPy).
"""

from __future__ import annotations

CONTRAST = ("lex", "hilbert")
"""The pre-stated contrast: lex minus Hilbert."""


def per_data_seed(rows, kind, d, stride, key) -> dict[int, float]:
    """Per data seed: ``key`` averaged over the model seeds of the (kind, d, stride) row."""
    return {
        r.get("data_seed", 0): float(r[key + "_mean"])
        for r in rows
        if r["kind"] == kind and r["d"] == d and r["stride"] == stride
    }


def slopes_per_data_seed(rows, kind, dims, stride, key) -> dict[int, float]:
    """Per data seed: the least-squares slope in d of ``key`` (model-seed mean) at ``stride``."""
    from geomopt.stats import ols_slope

    by_d = [per_data_seed(rows, kind, d, stride, key) for d in dims]
    common = sorted(set.intersection(*(set(b) for b in by_d)))
    return {s: ols_slope(list(dims), [b[s] for b in by_d]) for s in common}


def _ci_keys(out: dict, name: str, values) -> None:
    """``name`` = mean over replications, ``name/ci_lo`` / ``name/ci_hi`` its 95 % t-interval."""
    from geomopt.stats import mean_ci

    vals = [v for v in values if v == v]
    if not vals:
        out[name] = out[name + "/ci_lo"] = out[name + "/ci_hi"] = float("nan")
        return
    out[name], out[name + "/ci_lo"], out[name + "/ci_hi"] = mean_ci(vals)


def _difference(a: dict, b: dict) -> list[float]:
    return [a[s] - b[s] for s in sorted(set(a) & set(b))]


def summarise(rows, kinds, dims, scarce: int) -> dict[str, float]:
    """The headline: per kind and d, accuracy and gap averaged over data seeds; per kind, the gap
    slope in d with its interval over data seeds; the lex-minus-Hilbert contrasts."""
    import numpy as np

    from geomopt.stats import min_detectable_effect

    out: dict[str, float] = {}
    for kind in kinds:
        for d in dims:
            for name, stride, key in (
                ("acc", 1, "test_acc"), ("gap", 1, "gap"), ("train_acc", 1, "train_acc"),
                ("gap_scarce", scarce, "gap"), ("acc_scarce", scarce, "test_acc"),
            ):  # fmt: skip
                if name.endswith("scarce") and scarce == 1:
                    continue
                v = per_data_seed(rows, kind, d, stride, key)
                out[f"{name}/{kind}/d{d}"] = float(np.mean(list(v.values()))) if v else np.nan
        if len(dims) > 1:
            slopes = slopes_per_data_seed(rows, kind, dims, 1, "gap").values()
            _ci_keys(out, f"gap_slope/{kind}", slopes)
    fits = [(t, c) for r in rows for t, c in zip(r["train_acc"], r["loss_change"], strict=True)]
    if fits:
        t, c = np.asarray(fits, float).T
        out["fits/share_train_acc_ge_0.95"] = float((t >= 0.95).mean())
        out["fits/min_train_acc"] = float(t.min())
        below = c[t < 0.95]
        out["fits/max_loss_change_below_0.95"] = float(np.max(np.abs(below))) if below.size else 0.0
    lex, hil = CONTRAST
    if not (lex in kinds and hil in kinds):
        return out
    out["contrast/n_data_seeds"] = float(len({r.get("data_seed", 0) for r in rows}))
    out["contrast/n_model_seeds"] = float(len(rows[0]["gap"]))
    if len(dims) > 1:
        name = "contrast/gap_slope/lex_minus_hilbert"
        diff = _difference(*(slopes_per_data_seed(rows, k, dims, 1, "gap") for k in CONTRAST))
        _ci_keys(out, name, diff)
        sd = float(np.std(diff, ddof=1)) if len(diff) > 1 else np.nan
        out[name + "/mde80"] = min_detectable_effect(sd, len(diff))
    if scarce > 1 and len(dims) > 1:
        for key, label in (("gap", "gap_slope_scarce"), ("test_acc", "acc_slope_scarce")):
            diff = _difference(
                *(slopes_per_data_seed(rows, k, dims, scarce, key) for k in CONTRAST)
            )
            _ci_keys(out, f"contrast/{label}/lex_minus_hilbert", diff)
    for d in dims:
        for key, label, stride in (("gap", "gap", 1), ("test_acc", "acc_scarce", scarce)):
            if label == "acc_scarce" and scarce == 1:
                continue
            diff = _difference(*(per_data_seed(rows, k, d, stride, key) for k in CONTRAST))
            _ci_keys(out, f"contrast/{label}/lex_minus_hilbert/d{d}", diff)
    return out


def _fmt(out: dict, name: str, digits: int = 3) -> str:
    m, lo, hi = (out.get(name + sfx, float("nan")) for sfx in ("", "/ci_lo", "/ci_hi"))
    if lo != lo:
        return f"{m:+.{digits}f}"
    return f"{m:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def contrast_table(rows, kinds, dims, scarce: int, out: dict) -> str:
    """Markdown: per kind and d the accuracies and gaps (means over data seeds), then the
    contrasts with their 95 % intervals over data seeds."""
    lines = [
        "| model | d | train acc. | test acc. | gap | gap at 1/" + str(scarce)
        + " | test acc. at 1/" + str(scarce) + " |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for kind in kinds:
        for d in dims:
            vals = [out.get(f"{n}/{kind}/d{d}", float("nan"))
                    for n in ("train_acc", "acc", "gap", "gap_scarce", "acc_scarce")]  # fmt: skip
            lines.append(f"| {kind} | {d} | " + " | ".join(f"{v:.3f}" for v in vals) + " |")
    lines += ["", "| quantity (lex minus Hilbert, 95 % CI over data seeds) | value |", "|---|---:|"]
    for label in ("gap_slope", "gap_slope_scarce", "acc_slope_scarce"):
        key = f"contrast/{label}/lex_minus_hilbert"
        if key in out:
            lines.append(f"| {key.split('/')[1]} (per unit d) | {_fmt(out, key, 4)} |")
    for d in dims:
        for lab in ("gap", "acc_scarce"):
            key = f"contrast/{lab}/lex_minus_hilbert/d{d}"
            if key in out:
                lines.append(f"| {lab}, d = {d} | {_fmt(out, key)} |")
    if "contrast/gap_slope/lex_minus_hilbert/mde80" in out:
        lines.append(
            f"| smallest gap-slope contrast detected with 80 % power | "
            f"{out['contrast/gap_slope/lex_minus_hilbert/mde80']:.4f} |"
        )
    if "contrast/n_data_seeds" in out:
        lines.append(
            f"| data seeds x model seeds | {int(out['contrast/n_data_seeds'])} x "
            f"{int(out['contrast/n_model_seeds'])} |"
        )
    for kind in kinds if len(dims) > 1 else ():
        lines.append(f"| gap slope of {kind} (per unit d) | {_fmt(out, f'gap_slope/{kind}', 4)} |")
    return "\n".join(lines)
