"""``gfm/shapes``: 3-D shape interpolation in a learned latent space, with ground truth.

A parametric family of solids (superquadrics, tori, capsules, rounded boxes;
:mod:`geomopt.shapes`) replaces ShapeNet (no download here). A point-cloud encoder / SDF decoder
is trained on family members, an unconditional EDM denoiser on their standardised latents, and
pairs of clean model samples are interpolated by every method with the official pipeline
(:mod:`geomopt.latent._interp`: noise at sigma 0.3, solve, 5 Heun steps to 0.002, the clean
endpoints pinned for every method, decode, marching cubes). The inner waypoints (steps 3-6 of
10) are scored against reference family shapes with the official set-level metrics (CD, HD,
F-score, COV), and every decoded shape gets a ground-truth off-family distance: the RMS SDF of
the closest family member (fitted class, parameters and translation) at its surface points,
divided by the shape's radius (the normalised frame of the metrics). This file only declares
the comparison (:func:`_study`); :mod:`geomopt.latent._study` runs it over ``n_seeds`` seeds
(models, pairs and noise each) and reports means with 95 % intervals over seeds. The models of a
seed are trained (or loaded) by :mod:`geomopt.latent._shapes_models`, the figures drawn by
:mod:`geomopt.latent._shapes_figures`.

    uv run experiments/gfm/shapes.py [smoke|quick|paper] [--field value ...]
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

from geomopt.checks import check_ints, check_names, check_nonnegative, check_one_of, check_positive
from geomopt.experiment import Experiment, Run
from geomopt.latent._shapes_figures import LABELS, plot  # noqa: F401 (LABELS: re-exported)
from geomopt.latent._shapes_models import _models

ALL_METHODS = ("gfm", "gfm_adam", "jacobian", "stein", "rbf", "land", "linear", "slerp")


@dataclasses.dataclass(frozen=True)
class ShapesConfig:
    """3-D shape interpolation on the parametric family (models cached under ``_cache``)."""

    n_shapes: int = 256
    """Training shapes of the autoencoder (classes balanced, parameters uniform)."""
    n_reference: int = 64
    """Reference shapes (fresh family members) the generated shapes are scored against."""
    mesh_res: int = 40
    """Marching-cubes grid of the ground-truth meshes."""
    n_cloud: int = 256
    """Surface points fed to the encoder."""
    n_query: int = 1024
    """SDF query points stored per training shape."""
    latent_dim: int = 32
    """Latent size (the paper: 512 x 8)."""
    ae_width: int = 96
    """Hidden width of encoder and decoder."""
    ae_steps: int = 1500
    """Autoencoder Adam steps."""
    ae_batch: int = 16
    """Shapes per autoencoder step (128 SDF queries each)."""
    edm_width: int = 256
    """Hidden width of the latent EDM denoiser."""
    edm_steps: int = 3000
    """Latent EDM Adam steps (batch 256)."""
    n_pairs: int = 64
    """Endpoint pairs per seed (clean model samples; the paper: 200)."""
    n_points: int = 10
    """Waypoints including the endpoints (official 10)."""
    eval_steps: tuple[int, ...] = (3, 4, 5, 6)
    """Waypoints scored (official: steps 3-6)."""
    sigma: float = 0.3
    """Noise level of endpoints, score and denoising start (official 0.3)."""
    lam: float = 1.0
    """Potential weight lambda of GFM (official 1)."""
    residual: Literal["hypersphere", "euclidean"] = "hypersphere"
    """GFM residual (official for latents: hypersphere)."""
    lr: float = 0.01
    """Adam learning rate of gfm_adam / jacobian / stein / rbf / land (official 0.01)."""
    adam_iters: int = 500
    """Adam iterations of gfm_adam / jacobian / stein (official 500)."""
    rbf_iters: int = 2000
    """Adam iterations of rbf (official 2000)."""
    land_iters: int = 400
    """Adam iterations of land (official 400)."""
    rbf_centers: int = 64
    """k-means centres of the RBF metric (official 2000 on ShapeNet's far larger latent set)."""
    rbf_kappa: float = 2.0
    """RBF bandwidth factor kappa (official training script: 2)."""
    rbf_fit_iters: int = 30_000
    """Adam iterations of the RBF weights (official 30,000, batch 128, lr 1e-3)."""
    denoise_steps: int = 5
    """EDM Heun levels from sigma to 0.002 (official 5)."""
    decode_res: int = 32
    """Decoding grid over [-1, 1]^3 (official 129)."""
    n_surface: int = 4096
    """Points sampled on each surface before FPS (official 16,384)."""
    n_eval_points: int = 1024
    """Points after farthest-point sampling (official 4,096)."""
    methods: tuple[str, ...] = ALL_METHODS
    """Interpolation methods."""
    ablations: tuple[str, ...] = ()
    """GFM again with one setting changed, on the same models, pairs and noise draw, as rows
    ``gfm@<spec>`` with paired differences to ``gfm`` (``field=value``, field one of sigma,
    lam, residual; :mod:`geomopt.latent._study`). The ``ablate`` preset runs a set of them."""
    seed: int = 0
    """First seed of shapes, training, references, endpoint samples and noise."""
    n_seeds: int = 3
    """Seeds ``seed, seed + 1, ...``, each with its own models, pairs and noise; every
    headline number is their mean with a 95 % t-interval (``/ci_lo``, ``/ci_hi``)."""
    family_fit_max: int = 256
    """At most this many of a row's decoded shapes get the off-family fit: a random subset,
    drawn from the seed (:func:`geomopt.latent._study.fit_subset`), the same pair and waypoint
    indices for every method of a seed; ``family_dist`` is then the mean over that subset (an
    approximation of the mean over all, whose sampling spread is inside the interval over
    seeds). The set metrics always use every shape. Quick: 64 pairs x 4 waypoints = 256, all."""
    quality_factor: float = 2.0
    """Quality bar: the latent EDM's samples (the clean endpoints, decoded) must lie within this
    factor of the data's own distance to the family (the autoencoder's reconstructions of
    training shapes): ``quality/sample_ratio <= quality_factor``, reported as ``quality/ok``
    (the run is not refused when the bar is missed)."""


def validate(cfg: ShapesConfig) -> None:
    check_ints(cfg, "n_shapes", "n_reference", "n_cloud", "n_query", "ae_width", "ae_steps",
               "ae_batch", "edm_width", "edm_steps", "n_pairs", "denoise_steps", "n_eval_points",
               "rbf_centers", "adam_iters", "rbf_iters", "land_iters", "rbf_fit_iters",
               "n_seeds", "family_fit_max")  # fmt: skip
    check_ints(cfg, "seed", minimum=0)
    check_ints(cfg, "latent_dim", minimum=2)  # a 1-d hypersphere residual or SLERP cannot turn
    check_ints(cfg, "mesh_res", minimum=12)  # coarser grids miss thin family members (tori)
    check_ints(cfg, "decode_res", minimum=2)  # marching cubes needs 2 points per axis
    check_ints(cfg, "n_surface", minimum=8)  # the family fit needs 8 surface points
    check_ints(cfg, "n_points", minimum=3)
    steps = cfg.eval_steps
    ok = all(isinstance(s, int) and not isinstance(s, bool) and 0 < s < cfg.n_points - 1
             for s in steps)  # fmt: skip
    if not steps or not ok or len(set(steps)) != len(steps):
        raise ValueError(
            f"eval_steps={steps!r}: expected distinct inner waypoints 1..{cfg.n_points - 2} of "
            f"n_points={cfg.n_points}, at least one"
        )
    check_positive(cfg, "sigma", "lr", "rbf_kappa", "quality_factor")
    check_nonnegative(cfg, "lam")
    check_one_of(cfg, "residual", ("hypersphere", "euclidean"))
    check_names(cfg, "methods", ALL_METHODS)
    from geomopt.latent._study import check_ablations  # NumPy only

    check_ablations(cfg)
    if cfg.n_eval_points > cfg.n_surface:
        raise ValueError(
            f"n_eval_points={cfg.n_eval_points!r}: expected at most n_surface={cfg.n_surface} "
            "(they are chosen among those points)"
        )
    if cfg.n_cloud > cfg.n_surface:
        raise ValueError(
            f"n_cloud={cfg.n_cloud!r}: expected at most n_surface={cfg.n_surface} (held-out "
            "reconstructions encode that many of a reference shape's surface points)"
        )
    if cfg.rbf_centers > cfg.n_shapes:
        raise ValueError(
            f"rbf_centers={cfg.rbf_centers!r}: expected at most n_shapes={cfg.n_shapes} "
            "(k-means on the training latents)"
        )


def _nanmean(x) -> float:
    import numpy as np

    x = np.asarray(x, float)
    return float(np.mean(x[np.isfinite(x)])) if np.isfinite(x).any() else math.nan


def _score_shapes(clouds, ok, ref_clouds, cfg: ShapesConfig, seed: int) -> dict[str, float]:
    """Official set metrics of ``clouds`` against ``ref_clouds`` (both (B, n_surface, 3)), the
    mean off-family distance of the decoded shapes among the seed's fit subset (``family_n``
    of them; NaN if none decoded) and the share of failed decodes."""
    import numpy as np

    from geomopt.latent._study import fit_subset
    from geomopt.shapes import chamfer_matrix, fit_family, prepare_clouds, set_metrics

    gen = prepare_clouds(clouds, cfg.n_eval_points, seed=seed)
    m = set_metrics(chamfer_matrix(gen, ref_clouds))
    fitted = fit_subset(len(clouds), cfg.family_fit_max, seed)
    fam_d = np.full(len(clouds), np.nan)
    for i in fitted[ok[fitted]]:
        _, _, rms = fit_family(clouds[i])
        radius = np.linalg.norm(clouds[i] - clouds[i].mean(0), axis=1).max()
        fam_d[i] = rms / radius
    return {**m, "family_dist": _nanmean(fam_d), "family_n": float(np.isfinite(fam_d).sum()),
            "failed": float((~ok).mean())}  # fmt: skip


def _heldout_reconstruction(ae, ref_meshes, ref_raw, cfg: ShapesConfig, seed: int) -> dict:
    """The autoencoder on held-out shapes (the reference set, never trained on): encode
    ``n_cloud`` of each shape's surface points ``ref_raw``, decode, and take the Chamfer
    distance (square root of the official squared CD, normalised frame) to the true surface;
    its mean over the decoded shapes (``ae_heldout_cd``), the share that failed to decode, and
    the metric's own floor at these sizes (``ae_heldout_floor``: the same distance between two
    independent samplings of the true surfaces ``ref_meshes``)."""
    import numpy as np

    from geomopt.shapes import (
        chamfer_pairs,
        decode_meshes,
        encode,
        prepare_clouds,
        sample_surface,
        surface_clouds,
    )

    again = np.stack([sample_surface(m, cfg.n_surface, seed=len(ref_meshes) + i)
                      for i, m in enumerate(ref_meshes)])  # fmt: skip
    true = prepare_clouds(ref_raw, cfg.n_eval_points, seed=seed)
    resampled = prepare_clouds(again, cfg.n_eval_points, seed=seed)
    floor = np.sqrt(chamfer_pairs(resampled, true))

    z = encode(ae, ref_raw[:, : cfg.n_cloud])
    meshes = decode_meshes(ae, z, cfg.decode_res)
    clouds, ok = surface_clouds(meshes, cfg.n_surface, seed=seed)
    cd = np.full(len(z), np.nan)
    if ok.any():
        rec = prepare_clouds(clouds[ok], cfg.n_eval_points, seed=seed)
        cd[ok] = np.sqrt(chamfer_pairs(rec, true[ok]))
    return {"ae_heldout_cd": _nanmean(cd), "ae_heldout_floor": float(floor.mean()),
            "ae_heldout_failed": float((~ok).mean())}  # fmt: skip


def _study(cfg: ShapesConfig, run: Run):
    """The comparison of :mod:`geomopt.latent._study`, declared for shapes."""
    import jax
    import numpy as np

    from geomopt.diffusion import sample_pf_ode
    from geomopt.latent._study import Study, Trial, quality_ratio
    from geomopt.shapes import (
        decode_meshes,
        prepare_clouds,
        random_shapes,
        sample_surface,
        shape_mesh,
        surface_clouds,
    )

    def prepare(seed: int) -> Trial:
        ae, edm, lat = _models(cfg, run, seed)
        # reference set: fresh family members, exact meshes
        refs = random_shapes(cfg.n_reference, seed + 1)
        ref_meshes = [shape_mesh(s, cfg.mesh_res) for s in refs]
        ref_raw = np.stack([sample_surface(m, cfg.n_surface, seed=i)
                            for i, m in enumerate(ref_meshes)])  # fmt: skip
        ref_clouds = prepare_clouds(ref_raw, cfg.n_eval_points, seed=seed + 1)
        k_end, k_noise = jax.random.split(jax.random.key(seed + 7))
        ends, _ = sample_pf_ode(edm, k_end, 2 * cfg.n_pairs, cfg.latent_dim)
        ends = np.asarray(ends)
        extra = {"ae": ae, "lat": lat, "ref": ref_clouds, "ref_raw": ref_raw,
                 "ref_meshes": ref_meshes, "ends": ends, "seed": seed}  # fmt: skip
        return Trial(edm, lat["u"], ends[0::2], ends[1::2], k_noise, extra)

    def decode(trial: Trial, u):
        lat, seed = trial.extra["lat"], trial.extra["seed"]
        z = u * lat["std"][None] + lat["mean"][None]
        meshes = decode_meshes(trial.extra["ae"], z, cfg.decode_res)
        return surface_clouds(meshes, cfg.n_surface, seed=seed)

    def score_latents(trial: Trial, u) -> dict[str, float]:
        clouds, ok = decode(trial, u)
        seed = trial.extra["seed"]
        return _score_shapes(clouds, ok, trial.extra["ref"], cfg, seed)

    def score(trial: Trial, paths) -> dict[str, float]:
        return score_latents(trial, paths[:, list(cfg.eval_steps)].reshape(-1, cfg.latent_dim))

    def floors(trial: Trial) -> dict[str, dict[str, float]]:
        # the autoencoder's reconstruction of training shapes (the data's own distance to the
        # family, through the decoder), the clean endpoints (the latent EDM's samples), and
        # the quality bar's numbers: held-out reconstruction error, samples / data
        ex = trial.extra
        rows = {"reconstruction": score_latents(trial, ex["lat"]["u"][: max(4, cfg.n_pairs)]),
                "endpoints": score_latents(trial, ex["ends"])}  # fmt: skip
        ratio = quality_ratio(rows["endpoints"]["family_dist"],
                              rows["reconstruction"]["family_dist"])  # fmt: skip
        held = _heldout_reconstruction(ex["ae"], ex["ref_meshes"], ex["ref_raw"], cfg, ex["seed"])
        rows["quality"] = {"sample_ratio": ratio, **held}
        return rows

    def keep(trial: Trial, paths: dict) -> None:
        # strips: every waypoint of pair 0, decoded, FPS-thinned for drawing
        strips = {}
        for m, res in paths.items():
            sc, sok = decode(trial, res["path"][0])
            strips[m] = np.where(sok[:, None, None], prepare_clouds(sc, 384, seed=0), np.nan)
        run.save_arrays("strips.npz", **strips)
        run.save_arrays("paths.npz", **{k: v["path"] for k, v in paths.items()})

    return Study(prepare, score, HEADLINE, floors, FLOOR_HEADLINE, keep)


HEADLINE = ("CD", "HD", "F@0.1", "COV", "family_dist")
"""Per-method headline metrics (each with ``/ci_lo`` and ``/ci_hi`` over seeds)."""
FLOOR_HEADLINE = ("family_dist", "sample_ratio", "ae_heldout_cd", "ae_heldout_floor",
                  "ae_heldout_failed")  # fmt: skip
"""Headline metrics of the floor rows, where a row has them: ``reconstruction/family_dist``,
``endpoints/family_dist``, and the quality bar's ``quality/sample_ratio`` (endpoints over
reconstruction, per seed), ``quality/ae_heldout_cd`` with its sampling floor
``quality/ae_heldout_floor``, ``quality/ae_heldout_failed``; with
``quality/factor`` and ``quality/ok`` (:func:`geomopt.latent._study.apply_quality_bar`)."""


def run(cfg: ShapesConfig, run: Run) -> dict[str, float]:
    from geomopt.latent._study import apply_quality_bar, run_study

    headline = run_study(_study(cfg, run), cfg, run)
    apply_quality_bar(headline, cfg.quality_factor, "latent EDM samples' family distance", run)
    return headline


_QUICK = ShapesConfig()

EXPERIMENT = Experiment(
    name="gfm/shapes",
    description="3-D shape interpolation in a learned latent: GFM vs baselines, official metrics "
    "and a ground-truth off-family distance",
    presets={
        "smoke": ShapesConfig(
            n_shapes=16,
            n_reference=8,
            mesh_res=24,
            n_cloud=64,
            n_query=256,
            latent_dim=8,
            # at width 32 (seed 0) the decoder starts below the clamp band (-0.1) of its loss,
            # which has no gradient there: it never learns and nothing decodes; at 20 steps
            # every method decoded the same blob (family distance 0.105 for all of them)
            ae_width=64,
            ae_steps=300,
            ae_batch=4,
            edm_width=32,
            edm_steps=200,
            n_pairs=2,
            adam_iters=10,
            rbf_iters=10,
            land_iters=10,
            rbf_centers=4,
            rbf_fit_iters=200,
            decode_res=16,
            n_surface=256,
            n_eval_points=64,
            methods=("gfm", "jacobian", "rbf", "linear"),
            ablations=("lam=0",),
            n_seeds=2,
            family_fit_max=6,  # of 8 scored shapes per method: exercises the subset
        ),
        "quick": _QUICK,
        # the quick models (cached), GFM with one setting changed at a time, on the same pairs
        "ablate": dataclasses.replace(
            _QUICK,
            methods=("gfm", "linear", "slerp"),
            ablations=("sigma=0.15", "sigma=0.6", "lam=0", "lam=3", "residual=euclidean"),
        ),
        "paper": ShapesConfig(
            n_shapes=4096,
            n_reference=512,
            mesh_res=64,
            n_cloud=1024,
            n_query=4096,
            latent_dim=64,
            ae_width=256,
            ae_steps=50_000,
            ae_batch=32,
            edm_width=512,
            edm_steps=50_000,
            n_pairs=200,
            rbf_centers=1000,
            decode_res=129,
            n_surface=16384,
            n_eval_points=4096,
        ),
    },
    notes={
        "smoke": "tiny models, 4 of the 8 methods (each method compiles its own solver)",
        "quick": "CPU: 256 shapes, 32-d latent, 64 pairs x 3 seeds (970 s, training included)",
        "ablate": "the quick models and pairs: GFM at sigma 0.15 / 0.6, lambda 0 / 3, the "
        "Euclidean residual, beside GFM, linear and SLERP",
        "paper": "the official evaluation sizes (200 pairs, 129^3 decode, 16,384 -> 4,096 points); "
        "larger models; for an accelerator",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/gfm/figures",
    key_numbers=(
        "gfm/family_dist",
        "linear/family_dist",
        "endpoints/family_dist",
        "gfm/CD",
        "gfm/COV",
        "quality/sample_ratio",
        "quality/ok",
    ),
    # smoke, quick: measured with training at load ~3; ablate: estimated from its per-seed
    # times alone (the whole run measured 1,536 s with another job beside it; README_latent.md)
    seconds={"smoke": 40.0, "quick": 970.0, "ablate": 960.0},
)
