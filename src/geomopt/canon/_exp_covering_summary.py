"""The headline of a ``canon/covering`` run (:mod:`geomopt.canon.exp_covering`): from every data
seed's slopes and proxies, the means with 95 % t-intervals over data seeds (:func:`mean_ci`), the
slope differences, the ratios to Hungarian and their growth in ``d``, the frequency of the
hierarchy (:data:`ORDER`), and why a headline number is NaN.

Module-level imports are light (no NumPy).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from geomopt.canon.exp_covering import CoveringConfig


KINDS = ("l2", "lex", "hilbert", "wass")
ORDER = ("wass", "hilbert", "lex", "l2")
"""The hierarchy whose frequency over data seeds is reported, smallest proxy first."""
SLOPE_PAIRS = (("hilbert", "lex"), ("lex", "wass"), ("hilbert", "wass"))
"""Orders whose slopes are compared seed by seed (``slope_diff/.../a_vs_b`` = slope a - b)."""


def mean_ci(values) -> tuple[float, float, float]:
    """``(mean, lo, hi)`` over data seeds: :func:`geomopt.stats.mean_ci` (95 % Student-t),
    except that a seed whose value is NaN (no slope or ratio to fit, see ``_nan_reason``) makes
    all three NaN, so the run still reports and says why."""
    import numpy as np

    from geomopt.stats import mean_ci as t_interval

    if not np.isfinite(np.asarray(values, float)).all():
        return float("nan"), float("nan"), float("nan")
    return t_interval(values)


def _put(headline: dict, key: str, values) -> None:
    m, lo, hi = mean_ci(values)
    headline.update({key: m, f"{key}/ci_lo": lo, f"{key}/ci_hi": hi})


def _ordered(proxy: dict[str, float]) -> bool:
    """Hungarian < Hilbert < lex < no reordering (strictly)."""
    return all(proxy[a] < proxy[b] for a, b in itertools.pairwise(ORDER))


def _families_headline(cfg: CoveringConfig, res: dict) -> dict[str, float]:
    """Headline from ``res[(seed, d, k)][kind] = (slope, proxy at the largest n)``."""
    import numpy as np

    seeds, headline = cfg.data_seeds, {}

    def per_seed(d, k, kind, i):
        return [res[(s, d, k)][kind][i] for s in seeds]

    for d in cfg.dims:
        for kind in KINDS:
            _put(headline, f"slope/d{d}/{kind}", per_seed(d, cfg.k, kind, 0))
        for a, b in SLOPE_PAIRS:
            diff = np.subtract(per_seed(d, cfg.k, a, 0), per_seed(d, cfg.k, b, 0))
            _put(headline, f"slope_diff/d{d}/{a}_vs_{b}", diff)
    ks = sorted({k for _, d, k in res if d == cfg.k_dim})
    for k in ks:
        for kind in KINDS:
            _put(headline, f"slope/k{k}/{kind}", per_seed(cfg.k_dim, k, kind, 0))
    ratio = {}  # kind -> (n_seeds, n_dims)
    for kind in ("l2", "lex", "hilbert"):
        ratio[kind] = np.array(
            [[res[(s, d, cfg.k)][kind][1] / res[(s, d, cfg.k)]["wass"][1] for d in cfg.dims]
             for s in seeds]
        )  # fmt: skip
        for j, d in enumerate(cfg.dims):
            _put(headline, f"ratio/d{d}/{kind}", ratio[kind][:, j])
        if len(cfg.dims) > 1:
            x = np.asarray(cfg.dims, float)
            _put(headline, f"growth/{kind}/exp_rate",
                 [_fit(x, r) for r in ratio[kind]])  # fmt: skip
            _put(headline, f"growth/{kind}/poly_degree",
                 [_fit(np.log(x), r) for r in ratio[kind]])  # fmt: skip
    holds = {(d, k): [_ordered({kind: res[(s, d, k)][kind][1] for kind in KINDS}) for s in seeds]
             for (_, d, k) in res}  # fmt: skip
    for d in cfg.dims:
        headline[f"order/d{d}"] = float(np.mean(holds[(d, cfg.k)]))
    headline["order/all_d"] = float(np.mean(np.all([holds[(d, cfg.k)] for d in cfg.dims], 0)))
    for k in ks:
        headline[f"order/k{k}"] = float(np.mean(holds[(cfg.k_dim, k)]))
    return headline


def _fit(x, ratio) -> float:
    """Slope of ``log ratio`` vs ``x`` (NaN if a ratio is not finite and positive)."""
    import numpy as np

    r = np.asarray(ratio, float)
    if not (np.isfinite(r) & (r > 0)).all():
        return float("nan")
    return float(np.polyfit(x, np.log(r), 1)[0])


def _digits_headline(cfg: CoveringConfig, res: dict) -> dict[str, float]:
    """Headline from ``res[seed][kind] = (slope, proxy at the largest n)``."""
    import numpy as np

    seeds, headline = cfg.data_seeds, {}
    for kind in KINDS:
        _put(headline, f"digits/slope/{kind}", [res[s][kind][0] for s in seeds])
    for a, b in SLOPE_PAIRS:
        _put(headline, f"digits/slope_diff/{a}_vs_{b}",
             [res[s][a][0] - res[s][b][0] for s in seeds])  # fmt: skip
    for kind in ("l2", "lex", "hilbert"):
        _put(headline, f"digits/ratio/{kind}",
             [res[s][kind][1] / res[s]["wass"][1] for s in seeds])  # fmt: skip
    headline["digits/order"] = float(
        np.mean([_ordered({kind: res[s][kind][1] for kind in KINDS}) for s in seeds])
    )
    return headline


def _nan_reason(key: str, sizes) -> str:
    """Why headline ``key`` came out NaN."""
    if len(sizes) < 2 and "slope" in key:
        return f"one training-set size (n_train={sizes}): no slope to fit"
    if "slope" in key:
        return (
            "in some data seed fewer than two training-set sizes with a finite positive proxy: "
            "no slope to fit"
        )
    return (
        "in some data seed the Hungarian proxy is 0 or not finite (no same-class training "
        "cloud): no ratio"
    )
