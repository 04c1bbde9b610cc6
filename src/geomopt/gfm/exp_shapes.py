"""``gfm/shapes``: 3-D shape interpolation in a learned latent space, with ground truth.

A parametric family of solids (superquadrics, tori, capsules, rounded boxes;
:mod:`geomopt.shapes`) replaces ShapeNet (no download here). A point-cloud encoder / SDF decoder
is trained on family members, an unconditional EDM denoiser on their standardised latents, and
pairs of clean model samples are interpolated by every method with the official pipeline
(:mod:`geomopt.shapes._interp`: noise at sigma 0.3, solve, 5 Heun steps to 0.002, decode,
marching cubes). The inner waypoints (steps 3-6 of 10) are scored against reference family
shapes with the official set-level metrics (CD, HD, F-score, COV), and every decoded shape gets
a ground-truth off-family distance: the RMS SDF of the closest family member (fitted class,
parameters and translation) at its surface points, divided by the shape's radius (the
normalised frame of the metrics).

    uv run experiments/gfm/shapes.py [smoke|quick|paper] [--field value ...]
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Literal

from geomopt.checks import check_names, check_nonnegative, check_one_of
from geomopt.experiment import Experiment, Run, check_ints, check_positive, figure_path

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
    n_pairs: int = 8
    """Endpoint pairs (clean model samples; the paper: 200)."""
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
    """k-means centres of the RBF metric (official 2000 on ShapeNet latents)."""
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
    seed: int = 0
    """Seed of shapes, training, endpoint samples and noise."""


def validate(cfg: ShapesConfig) -> None:
    check_ints(cfg, "n_shapes", "n_reference", "n_cloud", "n_query", "ae_width", "ae_steps",
               "ae_batch", "edm_width", "edm_steps", "n_pairs", "denoise_steps", "n_eval_points",
               "rbf_centers", "adam_iters", "rbf_iters", "land_iters")  # fmt: skip
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
    check_positive(cfg, "sigma", "lr")
    check_nonnegative(cfg, "lam")
    check_one_of(cfg, "residual", ("hypersphere", "euclidean"))
    check_names(cfg, "methods", ALL_METHODS)
    if cfg.n_eval_points > cfg.n_surface:
        raise ValueError(
            f"n_eval_points={cfg.n_eval_points!r}: expected at most n_surface={cfg.n_surface} "
            "(they are chosen among those points)"
        )
    if cfg.rbf_centers > cfg.n_shapes:
        raise ValueError(
            f"rbf_centers={cfg.rbf_centers!r}: expected at most n_shapes={cfg.n_shapes} "
            "(k-means on the training latents)"
        )


def _model_key(cfg: ShapesConfig) -> dict:
    keys = ("n_shapes", "mesh_res", "n_cloud", "n_query", "latent_dim", "ae_width", "ae_steps",
            "ae_batch", "edm_width", "edm_steps", "seed")  # fmt: skip
    return {k: getattr(cfg, k) for k in keys}


def _models(cfg: ShapesConfig, run: Run):
    """Autoencoder, latent EDM and latent statistics: trained, or loaded from the cache."""
    import jax
    import numpy as np

    from geomopt.diffusion import DenoiserConfig, EDMDenoiser
    from geomopt.shapes import _family as fam
    from geomopt.shapes import _model as mdl

    ae_cfg = mdl.AEConfig(latent_dim=cfg.latent_dim, width=cfg.ae_width, steps=cfg.ae_steps,
                          batch_shapes=cfg.ae_batch, batch_queries=128,
                          log_every=max(1, min(250, cfg.ae_steps)))  # fmt: skip
    edm_cfg = mdl.EDMTrainConfig(width=cfg.edm_width, steps=cfg.edm_steps,
                                 log_every=max(1, min(500, cfg.edm_steps)))  # fmt: skip
    cache = run.cache_dir("shape_models", _model_key(cfg))
    k_ae, k_edm = jax.random.split(jax.random.key(cfg.seed))
    ae_skel = mdl.ShapeAutoencoder(ae_cfg, key=k_ae)
    edm_skel = EDMDenoiser(cfg.latent_dim, DenoiserConfig(cfg.edm_width, 4, 64), key=k_edm)
    stats_file = cache / "latents.npz"
    if (
        (cache / "ae" / "model.eqx").exists()
        and (cache / "edm" / "model.eqx").exists()
        and (stats_file.exists())
    ):
        run.print(f"models loaded from {cache}")
        with np.load(stats_file) as f:
            lat = dict(f)
        return mdl.load_model(cache / "ae", ae_skel), mdl.load_model(cache / "edm", edm_skel), lat
    shapes = fam.random_shapes(cfg.n_shapes, cfg.seed)
    data = mdl.shape_training_data(shapes, n_cloud=cfg.n_cloud, n_query=cfg.n_query,
                                   mesh_res=cfg.mesh_res, seed=cfg.seed)  # fmt: skip
    bar = run.progress(total=cfg.ae_steps, desc="autoencoder", unit="step")
    ae, ae_losses = mdl.train_autoencoder(
        data, ae_cfg, key=k_ae, on_chunk=lambda n, loss: bar.update(n, loss=loss)
    )
    bar.close()
    z = mdl.encode(ae, data["clouds"])
    mean, std = z.mean(0), z.std(0) + 1e-6
    u = (z - mean) / std
    bar = run.progress(total=cfg.edm_steps, desc="latent EDM", unit="step")
    edm, edm_losses = mdl.train_latent_edm(
        u, edm_cfg, key=k_edm, on_chunk=lambda n, loss: bar.update(n, loss=loss)
    )
    bar.close()
    lat = {"mean": mean, "std": std, "u": u, "clouds": data["clouds"],
           "ae_loss": ae_losses, "edm_loss": edm_losses}  # fmt: skip
    mdl.save_model(cache / "ae", ae, {"config": dataclasses.asdict(ae_cfg)})
    mdl.save_model(cache / "edm", edm, {"config": dataclasses.asdict(edm_cfg)})
    buf_path = stats_file.with_suffix(".tmp.npz")
    np.savez(buf_path, **lat)
    buf_path.replace(stats_file)
    return ae, edm, lat


def _nanmean(x) -> float:
    import numpy as np

    x = np.asarray(x, float)
    return float(np.mean(x[np.isfinite(x)])) if np.isfinite(x).any() else math.nan


def _score_shapes(clouds, ok, ref_clouds, cfg: ShapesConfig, seed: int):
    """Official set metrics of ``clouds`` against ``ref_clouds`` (both (B, n_surface, 3)),
    plus each shape's off-family distance (NaN for failed decodes)."""
    import numpy as np

    from geomopt.shapes import _family as fam
    from geomopt.shapes import _metrics as met

    gen = met.prepare_clouds(clouds, cfg.n_eval_points, seed=seed)
    cd = met.chamfer_matrix(gen, ref_clouds)
    m = met.set_metrics(cd)
    fam_d = np.full(len(clouds), np.nan)
    for i in np.flatnonzero(ok):
        _, _, rms = fam.fit_family(clouds[i])
        radius = np.linalg.norm(clouds[i] - clouds[i].mean(0), axis=1).max()
        fam_d[i] = rms / radius
    return m, fam_d, np.sqrt(cd.min(axis=1))


NO_SURFACE = "no decoded shape has a surface (no zero crossing in any decoded SDF grid)"


def run(cfg: ShapesConfig, run: Run) -> dict[str, float]:
    import jax
    import numpy as np

    from geomopt.diffusion import sample_pf_ode
    from geomopt.shapes import _family as fam
    from geomopt.shapes import _interp as itp
    from geomopt.shapes import _metrics as met
    from geomopt.shapes import _model as mdl

    ae, edm, lat = _models(cfg, run)
    mean, std = lat["mean"], lat["std"]

    def decode_clouds(u, seed):
        meshes = mdl.decode_meshes(ae, u * std[None] + mean[None], cfg.decode_res)
        return mdl.surface_clouds(meshes, cfg.n_surface, seed=seed)

    # reference set: fresh family members, exact meshes
    refs = fam.random_shapes(cfg.n_reference, cfg.seed + 1)
    ref_raw = np.stack([fam.sample_surface(fam.shape_mesh(s, cfg.mesh_res), cfg.n_surface, seed=i)
                        for i, s in enumerate(refs)])  # fmt: skip
    ref_clouds = met.prepare_clouds(ref_raw, cfg.n_eval_points, seed=cfg.seed + 1)

    k_end, k_noise = jax.random.split(jax.random.key(cfg.seed + 7))
    ends, _ = sample_pf_ode(edm, k_end, 2 * cfg.n_pairs, cfg.latent_dim)
    ends = np.asarray(ends)
    x0, x1 = ends[0::2], ends[1::2]

    bar = run.progress(total=len(cfg.methods), desc="interpolate", unit="method")
    paths = itp.interpolate_all(
        x0, x1, denoiser=edm, data=lat["u"], methods=cfg.methods, key=k_noise,
        n_points=cfg.n_points, sigma=cfg.sigma, lam=cfg.lam, residual=cfg.residual, lr=cfg.lr,
        adam_iters=cfg.adam_iters, rbf_iters=cfg.rbf_iters, land_iters=cfg.land_iters,
        rbf_centers=cfg.rbf_centers, denoise_steps=cfg.denoise_steps,
        on_method=lambda m: (bar.set_description(f"interpolate (done: {m})"), bar.update(1)),
    )  # fmt: skip
    bar.close()

    headline: dict[str, float] = {}
    table: dict[str, dict] = {}
    strips: dict[str, np.ndarray] = {}
    steps = list(cfg.eval_steps)
    # floors: the autoencoder's reconstruction of training shapes, and the clean endpoints
    floors = {
        "reconstruction": lat["u"][: max(4, cfg.n_pairs)],
        "endpoints": ends,
    }
    bar = run.progress(total=len(cfg.methods) + len(floors), desc="decode + score", unit="set")
    for name, u in floors.items():
        clouds, ok = decode_clouds(u, cfg.seed)
        m, fam_d, _ = _score_shapes(clouds, ok, ref_clouds, cfg, cfg.seed)
        table[name] = {**m, "family_dist": _nanmean(fam_d), "failed": float((~ok).mean())}
        headline[f"{name}/family_dist"] = table[name]["family_dist"]
        if not ok.any():
            run.explain_nan(f"{name}/family_dist", NO_SURFACE)
        bar.update(1)
    for meth in cfg.methods:
        bar.set_description(f"decode + score: {meth}")
        p = paths[meth]["path"]
        inner = p[:, steps].reshape(-1, cfg.latent_dim)
        clouds, ok = decode_clouds(inner, cfg.seed)
        m, fam_d, nearest = _score_shapes(clouds, ok, ref_clouds, cfg, cfg.seed)
        row = {**m, "family_dist": _nanmean(fam_d), "failed": float((~ok).mean()),
               "seconds": paths[meth]["seconds"]}  # fmt: skip
        if paths[meth]["converged"] is not None:
            row["converged"] = float(np.mean(paths[meth]["converged"]))
            row["iterations"] = float(np.mean(paths[meth]["iterations"]))
        table[meth] = row
        for k in ("CD", "HD", "F@0.1", "COV", "family_dist"):
            headline[f"{meth}/{k}"] = row[k]
        if not ok.any():
            run.explain_nan(f"{meth}/family_dist", NO_SURFACE)
        run.log(method=meth, **row)
        # strip: every waypoint of pair 0, decoded, FPS-thinned for drawing
        sc, sok = decode_clouds(p[0], cfg.seed)
        strips[meth] = np.where(sok[:, None, None], met.prepare_clouds(sc, 384, seed=0), np.nan)
        run.save_arrays("paths.npz", **{k: v["path"] for k, v in paths.items()})
        bar.update(1)
    bar.close()
    run.save_arrays("strips.npz", **strips)
    run.details["table"] = table
    run.details["methods"] = list(cfg.methods)
    return headline


LABELS = {"gfm": "GFM (LM)", "gfm_adam": "GFM (Adam)", "jacobian": "Jacobian", "stein": "Stein",
          "rbf": "RBF", "land": "LAND", "linear": "linear", "slerp": "SLERP"}  # fmt: skip


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``shapes_metrics.png`` (CD, HD, F@0.1, COV, family distance per method) and
    ``shapes_strips.png`` (decoded waypoints of pair 0 per method)."""
    import numpy as np

    from geomopt import plotting
    from geomopt.runs import read_run

    rec = read_run(run_dir)
    table = rec.details["table"]
    methods = rec.details["methods"]
    keys = ("CD", "HD", "F@0.1", "COV", "family_dist")
    fig, axes = plotting.figure(len(keys), 1, width=2.3, height=2.8)
    x = np.arange(len(methods))
    for ax, k in zip(np.asarray(axes).flat, keys, strict=True):
        vals = [table[m][k] for m in methods]
        ax.bar(x, vals, color=[plotting.color(m) for m in methods])
        if k == "family_dist":
            for ref, ls in (("reconstruction", "--"), ("endpoints", ":")):
                ax.axhline(table[ref][k], color="k", ls=ls, lw=0.8, label=ref)
            top = np.array(vals + [table["reconstruction"][k], table["endpoints"][k]], float)
            if np.isfinite(top).any():  # room for the legend above the bars
                ax.set_ylim(0, 1.4 * np.nanmax(top))
            ax.legend(loc="upper left", fontsize=6, ncols=2)
        ax.set_xticks(x, [LABELS.get(m, m) for m in methods], rotation=60, fontsize=7)
        ax.set_title(k + (" (lower better)" if k in ("CD", "HD", "family_dist") else ""),
                     fontsize=8)  # fmt: skip
    figures = [plotting.save(fig, figure_path(run_dir, out, "shapes_metrics"))]

    with np.load(Path(run_dir) / "strips.npz") as f:
        strips = {m: f[m] for m in methods if m in f}
    k = next(iter(strips.values())).shape[0]
    fig, ax0 = plotting.figure(1, 1, width=1.1 * k, height=1.1 * len(strips))
    ax0.remove()
    for r, (m, clouds) in enumerate(strips.items()):
        for c in range(k):
            ax = fig.add_subplot(len(strips), k, r * k + c + 1, projection="3d")
            pts = clouds[c]
            if np.isfinite(pts).all():
                ax.scatter(pts[:, 0], pts[:, 1], pts[:, 2], s=0.5, c=pts[:, 2], cmap="viridis")
            ax.set_xlim(-1, 1), ax.set_ylim(-1, 1), ax.set_zlim(-1, 1)
            ax.set_xlabel("x", fontsize=4, labelpad=-14)
            ax.set_ylabel("y", fontsize=4, labelpad=-14)
            ax.set_zlabel("z", fontsize=4, labelpad=-14)
            ax.set_xticks([]), ax.set_yticks([]), ax.set_zticks([])
            if r == 0:
                ax.set_title(f"step {c}", fontsize=6)
            if c == 0:
                ax.text2D(-0.3, 0.5, LABELS.get(m, m), transform=ax.transAxes, fontsize=6,
                          rotation=90, va="center")  # fmt: skip
    figures.append(plotting.save(fig, figure_path(run_dir, out, "shapes_strips")))
    return figures


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
            # which has no gradient there: it never learns and nothing decodes
            ae_width=64,
            ae_steps=20,
            ae_batch=4,
            edm_width=32,
            edm_steps=20,
            n_pairs=2,
            adam_iters=10,
            rbf_iters=10,
            land_iters=10,
            rbf_centers=4,
            decode_res=16,
            n_surface=256,
            n_eval_points=64,
            methods=("gfm", "jacobian", "rbf", "linear"),
        ),
        "quick": ShapesConfig(),
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
        "quick": "CPU: 256 shapes, 32-d latent, 8 pairs (runtime in README_latent.md)",
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
    ),
    # quick: README_latent.md (3336 s at load 12-28)
    seconds={"smoke": 18.7, "quick": 3336.0},
)
