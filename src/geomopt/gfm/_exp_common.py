"""What the ``gfm/paths`` and ``gfm/sigma_sweep`` experiments share, below both (neither imports
the other): the GFM initialisations they offer and the config checks common to both."""

from __future__ import annotations

from geomopt.checks import check_ints, check_nonnegative, check_one_of, check_positive
from geomopt.gfm.exp_train_score import validate_spec

__all__ = ["INITS", "check_common"]

INITS = ("denoised", "chord", "slerp")


def check_common(cfg) -> None:
    """Checks shared by gfm/paths and gfm/sigma_sweep; ``ValueError`` names the field."""
    check_positive(cfg, *(n for n in ("sigma", "on_manifold_tol", "check_sigma")
                          if hasattr(cfg, n)))  # fmt: skip
    check_nonnegative(cfg, "lam")
    check_one_of(cfg, "gfm_solver", ("default", "action", "lm"))
    if hasattr(cfg, "potential"):
        check_one_of(cfg, "potential", ("trained", "analytic"))
    check_ints(cfg, "n_pairs")
    check_ints(cfg, "pair_seed", minimum=0)
    check_ints(cfg, "n_points", minimum=4)
    validate_spec(cfg.denoiser)
