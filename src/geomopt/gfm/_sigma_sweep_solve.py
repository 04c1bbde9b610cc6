"""The solves of ``gfm/sigma_sweep`` (:mod:`geomopt.gfm.exp_sigma_sweep`): the GFM variants, the
score-based baselines and the on-surface reference at one noise level, and each one's per-pair
outcome against the true manifold. Module-level imports are light.
"""

from __future__ import annotations

GFM_VARIANTS = ("gfm", "gfm@chord", "gfm+refine", "gfm+continuation")
"""GFM by ``gfm.solve``'s default solver: from ``gfm_init`` (``gfm``), from the chord
(``gfm@chord``), and two remedies that need no true manifold: ``gfm+refine`` (where the
support check says off, a waypoint inserted in every segment and the path solved again at
``2K - 1`` waypoints, so the potential is felt where the check saw the gap) and
``gfm+continuation`` (solved at ``continuation_sigmas`` above ``sigma`` first, each level
starting from the last)."""


def _levels(cfg, sigma):
    return sorted({s for s in cfg.continuation_sigmas if s > sigma}, reverse=True) + [sigma]


def _solve_gfm(cfg, x0, x1, model, sigma, init, n_points=None):
    """``gfm.solve`` (the sweep's solver) from ``init`` (a name or paths): ``(paths, report)``."""
    import numpy as np

    from geomopt import gfm
    from geomopt.gfm._exp_protocol import initial_paths

    k = cfg.n_points if n_points is None else n_points
    path0 = initial_paths(init, x0, x1, k, model=model) if isinstance(init, str) else init
    kw = {} if cfg.gfm_solver == "default" else dict(method=cfg.gfm_solver)
    paths, rep = gfm.solve(x0, x1, score=gfm.ScoreAt(model, sigma), lam=cfg.lam, n_points=k,
                           init=path0, **kw)  # fmt: skip
    return np.asarray(paths), rep


def _outcome(manifold, paths, report, tol):
    """Per-pair truth and flag of solved paths."""
    import numpy as np

    from geomopt.gfm._adherence import distance_profile

    prof = distance_profile(manifold, paths)
    dmax = prof.max(-1)
    on = np.nan_to_num(dmax, nan=np.inf) <= tol
    if report is None:
        conv = np.zeros(len(paths), bool)
        flag, smax = np.full(len(paths), np.nan), np.full(len(paths), np.nan)
    else:
        conv = np.asarray(report.converged, bool)
        flag = (np.asarray(report.on_support, float) if report.on_support is not None
                else np.full(len(paths), np.nan))  # fmt: skip
        smax = (np.asarray(report.support_max, float) if report.support_max is not None
                else np.full(len(paths), np.nan))  # fmt: skip
    return dict(
        max_distance=dmax, error_mean=prof[:, ::2].mean(-1), on_surface=on, converged=conv,
        flag_on=flag, support_max=smax,
    )  # fmt: skip


def _gfm_variant(cfg, method, x0, x1, model, sigma, base):
    """Paths and report of one GFM variant; ``base`` is the ``gfm`` solve ``(paths, report)``
    (``gfm+refine`` starts from it)."""
    import numpy as np

    from geomopt.gfm._adherence import insert_midpoints

    if method == "gfm":
        return base
    if method == "gfm@chord":
        return _solve_gfm(cfg, x0, x1, model, sigma, "chord")
    if method == "gfm+continuation":
        paths = cfg.gfm_init
        for s in _levels(cfg, sigma):
            paths, rep = _solve_gfm(cfg, x0, x1, model, s, paths)
        return paths, rep
    if method == "gfm+refine":
        paths, rep = base
        off = ~np.asarray(rep.on_support, bool)
        if not off.any():
            return paths, rep
        fine, frep = _solve_gfm(
            cfg,
            x0[off],
            x1[off],
            model,
            sigma,
            insert_midpoints(paths[off]),
            n_points=2 * cfg.n_points - 1,
        )
        return (paths, rep), (off, fine, frep)
    raise ValueError(f"method {method!r}: not a GFM variant")


def _variant_outcome(cfg, method, manifold, x0, x1, model, sigma, base):
    """The per-pair outcome of one GFM variant (``gfm+refine``: the refined pairs' outcome in
    place of the base solve's)."""
    import numpy as np

    res = _gfm_variant(cfg, method, x0, x1, model, sigma, base)
    if method == "gfm+refine" and isinstance(res[1], tuple):
        (paths, rep0), (off, fine, frep) = res
        out = _outcome(manifold, paths, rep0, cfg.on_manifold_tol)
        new = _outcome(manifold, fine, frep, cfg.on_manifold_tol)
        for k in out:
            out[k] = np.array(out[k])
            out[k][off] = new[k]
        return out
    return _outcome(manifold, res[0], res[1], cfg.on_manifold_tol)


def _baseline_outcome(cfg, method, manifold, x0, x1, model, sigma):
    """The per-pair outcome of one score-based baseline and its seconds."""
    from geomopt.gfm._exp_protocol import evaluate, solve_method

    res = solve_method(method, x0, x1, model=model, sigma=sigma,
                       lam=cfg.lam, n_points=cfg.n_points)  # fmt: skip
    out = _outcome(manifold, res["paths"], None, cfg.on_manifold_tol)
    out["converged"] = res["status"] != "diverged"  # fixed budget
    ev = evaluate(res["paths"], manifold=manifold, model=model,
                  sigma=sigma, lam=cfg.lam, check_sigma=cfg.check_sigma,
                  tol=cfg.on_manifold_tol)  # fmt: skip
    out["displacement_max"] = ev["displacement_max"]
    return out, res["seconds"]


def _reference_outcome(cfg, manifold, x0, x1, model, sigma, base):
    """The outcome of the solve from the true surface's intrinsic-coordinate line, with the
    action gap to the ``gfm`` solve ``base`` and whether that one stayed on the surface."""
    import numpy as np

    from geomopt import gfm
    from geomopt.gfm._adherence import action_difference

    init = np.asarray(gfm.coordinate_linear(manifold, x0, x1, cfg.n_points))
    ref = _solve_gfm(cfg, x0, x1, model, sigma, init)
    rout = _outcome(manifold, ref[0], ref[1], cfg.on_manifold_tol)
    gout = _outcome(manifold, base[0], base[1], cfg.on_manifold_tol)
    gap = action_difference(base[0], ref[0], gfm.ScoreAt(model, sigma), cfg.lam)
    rout["action_gfm_minus_reference"] = gap
    rout["gfm_on_surface"] = gout["on_surface"]
    return rout


def _solve_level(cfg, manifold, x0, x1, model, sigma, label, bar, record):
    """Every method of ``cfg`` (and the reference) on the pairs at one sigma;
    ``record(method, out, seconds=...)`` keeps each solve's per-pair outcome."""
    import time

    base = None
    if any(m in GFM_VARIANTS for m in cfg.methods):
        bar.set_description(f"{label}, gfm")
        t0 = time.perf_counter()
        base = _solve_gfm(cfg, x0, x1, model, sigma, cfg.gfm_init)
        base_seconds = time.perf_counter() - t0
    for method in cfg.methods:
        bar.set_description(f"{label}, {method}")
        t0 = time.perf_counter()
        if method in GFM_VARIANTS:
            out = _variant_outcome(cfg, method, manifold, x0, x1, model, sigma, base)
            secs = base_seconds if method == "gfm" else time.perf_counter() - t0
        else:
            out, secs = _baseline_outcome(cfg, method, manifold, x0, x1, model, sigma)
        record(method, out, seconds=secs)
    if cfg.reference and base is not None:
        bar.set_description(f"{label}, reference")
        record("reference", _reference_outcome(cfg, manifold, x0, x1, model, sigma, base))
