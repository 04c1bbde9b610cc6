"""Every GFM experiment refuses every bad config value before a run folder exists: parsed from
the command line as a user gives it, ``validate`` raises one ``ValueError`` naming the field."""

import re

import pytest

from geomopt.experiment import parse
from geomopt.gfm import exp_paths, exp_sigma_sweep, exp_torus_metrics, exp_train_score
from geomopt.latent import exp_digits, exp_shapes

TRAIN = exp_train_score.EXPERIMENT
PATHS = exp_paths.EXPERIMENT
SWEEP = exp_sigma_sweep.EXPERIMENT
TORUS = exp_torus_metrics.EXPERIMENT
SHAPES = exp_shapes.EXPERIMENT
DIGITS = exp_digits.EXPERIMENT

RUN_A = ["A", "0.05", "0.5", "20", "0.001"]
SHAPES_COUNTS = (
    "n_shapes n_reference n_cloud n_query ae_width ae_steps ae_batch edm_width edm_steps n_pairs "
    "denoise_steps n_eval_points rbf_centers adam_iters rbf_iters land_iters rbf_fit_iters n_seeds"
).split()
DIGITS_COUNTS = (
    "edm_width edm_steps classifier_steps n_pairs adam_iters rbf_iters land_iters rbf_centers "
    "denoise_steps n_test rbf_fit_iters n_seeds"
).split()

ROWS = [
    # gfm/train_score (and the nested DenoiserSpec every GFM experiment shares)
    (TRAIN, ["--manifolds"], "manifolds"),
    (TRAIN, ["--manifolds", "klein"], "manifolds"),
    (TRAIN, ["--manifolds", "torus", "torus"], "manifolds"),
    (TRAIN, ["--denoiser.width", "0"], "denoiser.width"),
    (TRAIN, ["--denoiser.n-blocks", "0"], "denoiser.n_blocks"),
    (TRAIN, ["--denoiser.n-data", "-1"], "denoiser.n_data"),
    (TRAIN, ["--denoiser.steps", "0"], "denoiser.steps"),
    (TRAIN, ["--denoiser.batch-size", "0"], "denoiser.batch_size"),
    (TRAIN, ["--denoiser.log-every", "0"], "denoiser.log_every"),
    (TRAIN, ["--denoiser.n-samples", "0"], "denoiser.n_samples"),
    (TRAIN, ["--denoiser.embed-dim", "15"], "denoiser.embed_dim"),
    (TRAIN, ["--denoiser.lr", "0"], "denoiser.lr"),
    (TRAIN, ["--denoiser.lr", "nan"], "denoiser.lr"),
    (TRAIN, ["--denoiser.seed", "-1"], "denoiser.seed"),
    # gfm/paths
    (PATHS, ["--manifolds"], "manifolds"),
    (PATHS, ["--manifolds", "circle"], "manifolds"),
    (PATHS, ["--methods"], "methods"),
    (PATHS, ["--methods", "gfm", "magic"], "methods"),
    (PATHS, ["--gfm-inits"], "gfm_inits"),
    (PATHS, ["--gfm-inits", "chord", "chord"], "gfm_inits"),
    (PATHS, ["--sigma", "0"], "sigma"),
    (PATHS, ["--sigma", "inf"], "sigma"),
    (PATHS, ["--lam", "-1"], "lam"),
    (PATHS, ["--lam", "nan"], "lam"),
    (PATHS, ["--n-pairs", "0"], "n_pairs"),
    (PATHS, ["--n-seeds", "0"], "n_seeds"),
    (PATHS, ["--pair-seed", "-1"], "pair_seed"),
    (PATHS, ["--n-points", "3"], "n_points"),
    (PATHS, ["--metric-data", "1000"], "metric_data"),
    (PATHS, ["--rbf-centers", "0"], "rbf_centers"),
    (PATHS, ["--rbf-kappa", "-3"], "rbf_kappa"),
    (PATHS, ["--rbf-fit-iters", "0"], "rbf_fit_iters"),
    (PATHS, ["--land-fit-iters", "0"], "land_fit_iters"),
    (PATHS, ["--on-manifold-tol", "0"], "on_manifold_tol"),
    (PATHS, ["--check-sigma", "-0.05"], "check_sigma"),
    (PATHS, ["--denoiser.width", "0"], "denoiser.width"),
    # gfm/sigma_sweep
    (SWEEP, ["--sigmas"], "sigmas"),
    (SWEEP, ["--sigmas", "0.1", "-1"], "sigmas"),
    (SWEEP, ["--sigmas", "0.1", "inf"], "sigmas"),
    (SWEEP, ["--sigmas", "0.1", "0.1"], "sigmas"),
    (SWEEP, ["--methods"], "methods"),
    (SWEEP, ["--methods", "rbf"], "methods"),
    (SWEEP, ["--lam", "-0.5"], "lam"),
    (SWEEP, ["--n-pairs", "0"], "n_pairs"),
    (SWEEP, ["--pair-seed", "-3"], "pair_seed"),
    (SWEEP, ["--n-points", "2"], "n_points"),
    (SWEEP, ["--n-denoisers", "0"], "n_denoisers"),
    (SWEEP, ["--potentials", "learned"], "potentials"),
    (SWEEP, ["--manifolds", "klein"], "manifolds"),
    (SWEEP, ["--continuation-sigmas", "0.2", "-1"], "continuation_sigmas"),
    (SWEEP, ["--on-manifold-tol", "nan"], "on_manifold_tol"),
    (SWEEP, ["--check-sigma", "0"], "check_sigma"),
    (SWEEP, ["--denoiser.lr", "-1"], "denoiser.lr"),
    # gfm/torus_metrics
    (TORUS, ["--runs"], "runs"),
    (TORUS, ["--runs", "A", "0.05", "-0.5", "20", "0.001"], "runs"),
    (TORUS, ["--runs", "A", "nan", "0.5", "20", "0.001"], "runs"),
    (TORUS, ["--runs", "A", "0.05", "0.5", "3", "0.001"], "runs"),
    (TORUS, ["--runs", "A", "0.05", "0.5", "20", "0"], "runs"),
    (TORUS, ["--runs", *RUN_A, *RUN_A], "runs"),
    (TORUS, ["--gamma", "0"], "gamma"),
    (TORUS, ["--sigma", "-0.1"], "sigma"),
    (TORUS, ["--lam", "inf"], "lam"),
    (TORUS, ["--solvers"], "solvers"),
    (TORUS, ["--solvers", "newton"], "solvers"),
    (TORUS, ["--continuation-sigmas", "0.2", "0.3"], "continuation_sigmas"),
    (TORUS, ["--continuation-sigmas", "0.3", "0.05"], "continuation_sigmas"),
    (TORUS, ["--continuation-sigmas", "inf", "0.2"], "continuation_sigmas"),
    (TORUS, ["--solvers", "lm_continuation", "--continuation-sigmas"], "continuation_sigmas"),
    (TORUS, ["--adam-iters", "0"], "adam_iters"),
    (TORUS, ["--on-manifold-tol", "-1"], "on_manifold_tol"),
    (TORUS, ["--denoiser.steps", "0"], "denoiser.steps"),
    # gfm/shapes
    *[(SHAPES, [f"--{f.replace('_', '-')}", "0"], f) for f in SHAPES_COUNTS],
    (SHAPES, ["--seed", "-1"], "seed"),
    (SHAPES, ["--latent-dim", "1"], "latent_dim"),
    (SHAPES, ["--mesh-res", "10"], "mesh_res"),
    (SHAPES, ["--decode-res", "1"], "decode_res"),
    (SHAPES, ["--n-surface", "4", "--n-eval-points", "4"], "n_surface"),
    (SHAPES, ["--n-points", "2"], "n_points"),
    (SHAPES, ["--eval-steps"], "eval_steps"),
    (SHAPES, ["--eval-steps", "0", "3"], "eval_steps"),
    (SHAPES, ["--eval-steps", "9"], "eval_steps"),
    (SHAPES, ["--eval-steps", "3", "3"], "eval_steps"),
    (SHAPES, ["--sigma", "0"], "sigma"),
    (SHAPES, ["--lr", "nan"], "lr"),
    (SHAPES, ["--lam", "-1"], "lam"),
    (SHAPES, ["--methods"], "methods"),
    (SHAPES, ["--methods", "gfm", "magic"], "methods"),
    (SHAPES, ["--n-eval-points", "300"], "n_eval_points"),
    (SHAPES, ["--rbf-centers", "17"], "rbf_centers"),
    (SHAPES, ["--rbf-kappa", "0"], "rbf_kappa"),
    # gfm/digits
    *[(DIGITS, [f"--{f.replace('_', '-')}", "0"], f) for f in DIGITS_COUNTS],
    (DIGITS, ["--seed", "-1"], "seed"),
    (DIGITS, ["--n-points", "2"], "n_points"),
    (DIGITS, ["--n-test", "3"], "n_test"),
    (DIGITS, ["--n-test", "1001"], "n_test"),
    (DIGITS, ["--rbf-centers", "1758"], "rbf_centers"),
    (DIGITS, ["--sigma", "-0.5"], "sigma"),
    (DIGITS, ["--lr", "0"], "lr"),
    (DIGITS, ["--lam", "nan"], "lam"),
    (DIGITS, ["--methods"], "methods"),
    (DIGITS, ["--methods", "gfm", "gfm"], "methods"),
    (DIGITS, ["--rbf-kappa", "-1"], "rbf_kappa"),
]


@pytest.mark.parametrize(
    ("exp", "argv", "field"),
    ROWS,
    ids=[f"{e.name}:{' '.join(a)}" for e, a, _ in ROWS],
)
def test_bad_value_is_refused_naming_the_field(exp, argv, field):
    for preset in exp.presets.values():  # the presets themselves pass
        exp.validate(preset)
    _, cfg, _ = parse(exp, ["smoke", *argv])
    with pytest.raises(ValueError, match=rf"^{re.escape(field)}=.*: expected "):
        exp.validate(cfg)
