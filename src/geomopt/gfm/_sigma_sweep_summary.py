"""The summary of ``gfm/sigma_sweep`` (:mod:`geomopt.gfm.exp_sigma_sweep`): the per-pair rows and
the table row of each solve, the markdown table, and the headline keys from the rows (success per
method, the support flag against the truth, the fitted support threshold). Module-level imports
are light.
"""

from __future__ import annotations

from geomopt.gfm._sigma_sweep_solve import GFM_VARIANTS

TABLE_COLUMNS = ("manifold", "potential", "denoiser", "sigma", "method", "n", "reachable",
                 "converged", "on_surface", "converged_on", "flag_on", "error_mean",
                 "seconds")  # fmt: skip


def _markdown(table: list[dict]) -> str:
    """One line per solve: pairs, how many are on one component (``reachable``), converged,
    on the surface (waypoints and midpoints), both, flagged on by the support check."""
    lines = ["| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * 5 + "---:|" * 8]
    for r in table:
        vals = [f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c]) for c in TABLE_COLUMNS]
        lines.append("| " + " | ".join(vals) + " |")
    return "\n".join(lines)


def _record(rows, table, base, same, out, seconds):
    """Append one row per pair of one solve and its table row."""
    import numpy as np

    n = len(same)
    for i in range(n):
        rows.append(dict(base, pair=i, same_component=bool(same[i]),
                         **{k: _py(v[i]) for k, v in out.items()}))  # fmt: skip
    r = rows[-n:]
    table.append(dict(
        base, n=n, converged=int(sum(x["converged"] for x in r)),
        on_surface=int(sum(x["on_surface"] for x in r)),
        converged_on=float(np.mean([x["converged"] and x["on_surface"] for x in r])),
        reachable=int(np.sum(same)),
        flag_on=int(np.nansum([x["flag_on"] for x in r])),
        error_mean=float(np.nanmean([x["error_mean"] for x in r])),
        seconds=seconds,
    ))  # fmt: skip


def _py(v):
    import numpy as np

    return np.asarray(v).item()


def _summarise(cfg, rows, headline, run, flag_errors, choose_threshold):
    """The headline from the per-pair rows (module doc). A rate with nothing to count (no pair
    off the surface for a false-negative rate, no shortcut) is left out; its count is there."""
    import numpy as np

    _method_keys(rows, headline)
    # the support flag against the truth, over every GFM solve that ran the check
    checked = [r for r in rows if r["method"] in GFM_VARIANTS + ("reference",)
               and np.isfinite(r["flag_on"])]  # fmt: skip
    by: dict[tuple, list] = {}
    for r in checked:
        by.setdefault((r["manifold"], r["potential"], r["sigma"]), []).append(r)
    for (m, p, s), rs in by.items():
        _put_errors(
            headline,
            f"{m}/{p}/support/sigma={s:g}",
            flag_errors([r["flag_on"] > 0.5 for r in rs], [r["on_surface"] for r in rs]),
        )
    _threshold_keys(cfg, checked, headline, run, flag_errors, choose_threshold)


def _success(rs):
    import numpy as np

    return float(np.mean([r["converged"] and r["on_surface"] for r in rs]))


def _method_keys(rows, headline):
    """Per manifold, score, method and sigma: the success rate (pooled, on the reachable pairs,
    per denoiser), the mean error; for the reference, the shortcuts and their action gap."""
    import numpy as np

    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r["manifold"], r["potential"], r["method"], r["sigma"]), []).append(r)
    for (m, p, method, s), rs in groups.items():
        key = f"{m}/{p}/{method}/sigma={s:g}"
        if method == "reference":
            headline[f"{key}/converged_on"] = _success(rs)
            short = [r for r in rs if r["converged"] and r["on_surface"]
                     and not r["gfm_on_surface"]]  # fmt: skip
            gaps = [r["action_gfm_minus_reference"] for r in short]
            k = f"{m}/{p}/shortcut/sigma={s:g}"
            headline[f"{k}/n"] = float(len(short))
            if gaps:
                headline[f"{k}/lower_action"] = float(np.mean([g < 0 for g in gaps]))
                headline[f"{k}/median_action_gap"] = float(np.median(gaps))
            continue
        headline[f"{key}/converged_on"] = _success(rs)
        reach = [r for r in rs if r["same_component"]]
        if len(reach) < len(rs) and reach:
            headline[f"{key}/converged_on_reachable"] = _success(reach)
        err = [r["error_mean"] for r in rs if np.isfinite(r["error_mean"])]
        if err:
            headline[f"{key}/error"] = float(np.mean(err))
        if p == "trained":
            for d in sorted({r["denoiser"] for r in rs}):
                headline[f"{key}/converged_on/denoiser={d}"] = _success(
                    [r for r in rs if r["denoiser"] == d]
                )


def _put_errors(headline, prefix, e):
    """The counts and the finite rates of one ``flag_errors`` result under ``prefix``."""
    import numpy as np

    headline[f"{prefix}/n_on"] = float(e["n_on"])
    headline[f"{prefix}/n_off"] = float(e["n_off"])
    for k in ("false_positive", "false_negative", "error"):
        if np.isfinite(e[k]):
            headline[f"{prefix}/{k}"] = e[k]


def _threshold_keys(cfg, checked, headline, run, flag_errors, choose_threshold):
    """The support threshold fitted on the even pairs at sigma <= ``support_fit_max_sigma`` and
    the held-out rates of it and of the default on the odd ones."""
    import numpy as np

    from geomopt.gfm._support import DEFAULT_SUPPORT_THRESHOLD

    fit_rows = [r for r in checked if r["sigma"] <= cfg.support_fit_max_sigma]
    if not fit_rows:
        return
    fit = [r for r in fit_rows if r["pair"] % 2 == 0]
    test = [r for r in fit_rows if r["pair"] % 2 == 1] or fit
    grid = np.round(np.arange(0.5, 8.001, 0.25), 2)
    thr, _ = choose_threshold([r["support_max"] for r in fit], [r["on_surface"] for r in fit],
                              grid)  # fmt: skip
    headline["support/threshold_fit"] = thr
    headline["support/threshold_default"] = DEFAULT_SUPPORT_THRESHOLD
    for label, t in (("fit", thr), ("default", DEFAULT_SUPPORT_THRESHOLD)):
        for scope in sorted({r["manifold"] for r in test}) + ["all"]:
            rs = [r for r in test if scope in ("all", r["manifold"])]
            _put_errors(
                headline,
                f"{scope}/support/heldout/{label}",
                flag_errors([r["support_max"] <= t for r in rs], [r["on_surface"] for r in rs]),
            )
    on = [r["support_max"] for r in fit_rows if r["on_surface"]]
    off = [r["support_max"] for r in fit_rows if not r["on_surface"]]
    run.details["support_fit"] = dict(
        threshold=thr, n_fit=len(fit), n_test=len(test),
        on_max=float(max(on)) if on else None, off_min=float(min(off)) if off else None,
    )  # fmt: skip
