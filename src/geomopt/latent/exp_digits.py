"""``gfm/digits``: interpolation between real images (scikit-learn's 8x8 digits) of different
classes, with an EDM denoiser in pixel space (64-d) and every method.

The pipeline is the latent one (:mod:`geomopt.latent._interp`) with the official image
settings where they apply (sigma 0.5, lambda 1, Adam lr 0.01 / 800 iterations for the Adam
solvers, 18 Heun denoising steps); the metrics are the official image metrics with substitutes
computed by a small classifier trained here (:mod:`geomopt.shapes._digits`): PPL, PDV, a
no-reference quality score and FID of the inner frames against the data, all in its feature
space. Every method's frames start and end at the same two real digits. This file only
declares the comparison (:func:`_study`); :mod:`geomopt.latent._study` runs it over
``n_seeds`` seeds (split, models, pairs and noise each) and reports means with 95 % intervals
over seeds.

    uv run experiments/gfm/digits.py [smoke|quick|paper] [--field value ...]
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from geomopt.checks import check_ints, check_names, check_nonnegative, check_one_of, check_positive
from geomopt.experiment import Experiment, Run, figure_path

ALL_METHODS = ("gfm", "gfm_adam", "jacobian", "stein", "rbf", "land", "linear", "slerp")


@dataclasses.dataclass(frozen=True)
class DigitsConfig:
    """Digit interpolation: a pixel-space EDM, every method, image metrics in feature space."""

    edm_width: int = 256
    """Hidden width of the EDM denoiser (residual MLP, 4 blocks)."""
    edm_steps: int = 12_000
    """Adam steps of the denoiser (batch 256, lr 1e-3 with cosine decay). 12,000 meets the
    quality bar on every quick seed (sample FID ratio 1.70 / 1.28 / 1.40); 4,000 did not
    (2.45 / 1.46 / 2.09, mean 2.00 against the factor 2)."""
    classifier_steps: int = 1500
    """Adam steps of the feature classifier (batch 128, lr 3e-3)."""
    n_pairs: int = 64
    """Endpoint pairs per seed: held-out images with different labels."""
    n_points: int = 10
    """Frames including the endpoints."""
    sigma: float = 0.5
    """Noise level of endpoints, score and denoising start (official images: 0.5)."""
    lam: float = 1.0
    """Potential weight lambda of GFM."""
    residual: Literal["hypersphere", "euclidean"] = "euclidean"
    """GFM residual; pixel space is not a Gaussian latent, so the Euclidean one by default."""
    lr: float = 0.01
    """Adam learning rate of the Adam-based methods."""
    adam_iters: int = 800
    """Adam iterations of gfm_adam / jacobian / stein (official EDM2 images: 800)."""
    rbf_iters: int = 2000
    """Adam iterations of rbf."""
    land_iters: int = 400
    """Adam iterations of land."""
    rbf_centers: int = 64
    """k-means centres of the RBF metric."""
    rbf_kappa: float = 2.0
    """RBF bandwidth factor kappa (official training script: 2)."""
    rbf_fit_iters: int = 30_000
    """Adam iterations of the RBF weights (official 30,000, batch 128, lr 1e-3)."""
    denoise_steps: int = 18
    """EDM Heun levels from sigma to 0.002 (official images: 18)."""
    n_test: int = 297
    """Images held out from denoiser / classifier training; endpoints are drawn from them."""
    methods: tuple[str, ...] = ALL_METHODS
    """Interpolation methods."""
    ablations: tuple[str, ...] = ()
    """GFM again with one setting changed, on the same models, pairs and noise draw, as rows
    ``gfm@<spec>`` with paired differences to ``gfm`` (``field=value``, field one of sigma,
    lam, residual; :mod:`geomopt.latent._study`). The ``ablate`` preset runs a set of them."""
    seed: int = 0
    """First seed of the split, training, pairs and noise."""
    n_seeds: int = 3
    """Seeds ``seed, seed + 1, ...``, each with its own split, models, pairs and noise; every
    headline number is their mean with a 95 % t-interval (``/ci_lo``, ``/ci_hi``)."""
    quality_factor: float = 2.0
    """Quality bar: the denoiser's own samples (``n_test`` of them, PF-ODE) must have an FID
    (feature-space substitute) within this factor of the held-out real digits' (``n_test``
    images: the same sample size, so the same small-sample bias):
    ``quality/sample_ratio <= quality_factor``, reported as ``quality/ok`` (the run is not
    refused when the bar is missed)."""


N_IMAGES = 1797
"""Images in scikit-learn's digits."""


def validate(cfg: DigitsConfig) -> None:
    check_ints(cfg, "edm_width", "edm_steps", "classifier_steps", "n_pairs", "adam_iters",
               "rbf_iters", "land_iters", "rbf_centers", "denoise_steps", "n_test",
               "rbf_fit_iters", "n_seeds")  # fmt: skip
    check_positive(cfg, "quality_factor")
    check_ints(cfg, "seed", minimum=0)
    check_ints(cfg, "n_points", minimum=3)
    if not 2 * cfg.n_pairs <= cfg.n_test <= 1000:
        raise ValueError(
            f"n_test={cfg.n_test!r}: expected 2 * n_pairs = {2 * cfg.n_pairs} <= n_test <= 1000"
        )
    if cfg.rbf_centers > N_IMAGES - cfg.n_test:
        raise ValueError(
            f"rbf_centers={cfg.rbf_centers!r}: expected at most the {N_IMAGES - cfg.n_test} "
            "training images (k-means on them)"
        )
    check_positive(cfg, "sigma", "lr", "rbf_kappa")
    check_nonnegative(cfg, "lam")
    check_one_of(cfg, "residual", ("hypersphere", "euclidean"))
    check_names(cfg, "methods", ALL_METHODS)
    from geomopt.latent._study import check_ablations  # NumPy only

    check_ablations(cfg)


def _pairs(labels, n_pairs: int, seed: int):
    """``n_pairs`` index pairs into ``labels`` with different labels, no index used twice."""
    import numpy as np

    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    a, b, used = [], [], set()
    for i in order:
        if len(a) == n_pairs:
            break
        if i in used:
            continue
        for j in order:
            if j not in used and j != i and labels[j] != labels[i]:
                a.append(i), b.append(j)
                used.update((i, j))
                break
    if len(a) < n_pairs:
        raise ValueError(f"only {len(a)} pairs of different labels among {len(labels)} images")
    return np.array(a), np.array(b)


def _models(cfg: DigitsConfig, run: Run, x_train, y_train, seed: int):
    import jax

    from geomopt.diffusion import DenoiserConfig, EDMDenoiser
    from geomopt.shapes import (
        Classifier,
        EDMTrainConfig,
        load_model,
        save_model,
        train_classifier,
        train_latent_edm,
    )

    key = {"edm_width": cfg.edm_width, "edm_steps": cfg.edm_steps, "n_test": cfg.n_test,
           "classifier_steps": cfg.classifier_steps, "seed": seed}  # fmt: skip
    cache = run.cache_dir("digit_models", key)
    k_edm, k_cls = jax.random.split(jax.random.key(seed))
    edm_skel = EDMDenoiser(64, DenoiserConfig(cfg.edm_width, 4, 64), key=k_edm)
    cls_skel = Classifier(key=k_cls)
    if (cache / "edm" / "model.eqx").exists() and (cache / "classifier" / "model.eqx").exists():
        run.print(f"models loaded from {cache}")
        return load_model(cache / "edm", edm_skel), load_model(cache / "classifier", cls_skel)
    edm_cfg = EDMTrainConfig(width=cfg.edm_width, steps=cfg.edm_steps,
                             log_every=max(1, min(500, cfg.edm_steps)))  # fmt: skip
    bar = run.progress(total=cfg.edm_steps, desc=f"seed {seed}: pixel EDM", unit="step")
    edm, _ = train_latent_edm(
        x_train, edm_cfg, key=k_edm, on_chunk=lambda n, loss: bar.update(n, loss=loss)
    )
    bar.close()
    cls = train_classifier(x_train, y_train, key=k_cls, steps=cfg.classifier_steps)
    save_model(cache / "edm", edm, {"config": dataclasses.asdict(edm_cfg)})
    save_model(cache / "classifier", cls, {"steps": cfg.classifier_steps})
    return edm, cls


HEADLINE = ("PPL", "PDV", "FID", "quality")
"""Per-method headline metrics (each with ``/ci_lo`` and ``/ci_hi`` over seeds)."""


def _study(cfg: DigitsConfig, run: Run):
    """The comparison of :mod:`geomopt.latent._study`, declared for digits."""
    import jax
    import numpy as np

    from geomopt.diffusion import sample_pf_ode
    from geomopt.latent._study import Study, Trial, quality_ratio
    from geomopt.shapes import features, frechet_distance, load_digits, path_scores

    x, y = load_digits()
    inner = list(range(1, cfg.n_points - 1))

    def prepare(seed: int) -> Trial:
        perm = np.random.default_rng(seed).permutation(len(x))
        test, train = perm[: cfg.n_test], perm[cfg.n_test :]
        edm, cls = _models(cfg, run, x[train], y[train], seed)
        ia, ib = _pairs(y[test], cfg.n_pairs, seed)
        data_feat, _ = features(cls, x)
        extra = {"cls": cls, "test": test, "data_feat": data_feat,
                 "k_samples": jax.random.key(seed + 11)}  # fmt: skip
        return Trial(edm, x[train], x[test][ia], x[test][ib], jax.random.key(seed + 7), extra)

    def score(trial: Trial, paths) -> dict[str, float]:
        cls = trial.extra["cls"]
        row = path_scores(cls, paths, inner)
        f_inner, _ = features(cls, paths[:, inner].reshape(-1, 64))
        row["FID"] = frechet_distance(f_inner, trial.extra["data_feat"])
        return row

    def floors(trial: Trial) -> dict[str, dict[str, float]]:
        # the data's own FID floor (held-out images against all images), the denoiser's own
        # samples (as many, PF-ODE, 18 Heun steps), their ratio (the quality bar), and the
        # classifier
        test, cls = trial.extra["test"], trial.extra["cls"]
        f_test, probs = features(cls, x[test])
        accuracy = float((probs.argmax(1) == y[test]).mean())
        run.print(f"feature classifier: held-out accuracy {accuracy:.3f}")
        heldout = frechet_distance(f_test, trial.extra["data_feat"])
        gen, _ = sample_pf_ode(trial.denoiser, trial.extra["k_samples"], len(test), 64)
        f_gen, _ = features(cls, np.asarray(gen))
        samples = frechet_distance(f_gen, trial.extra["data_feat"])
        return {"heldout": {"FID": heldout}, "samples": {"FID": samples},
                "quality": {"sample_ratio": quality_ratio(samples, heldout)},
                "classifier": {"accuracy": accuracy}}  # fmt: skip

    def keep(trial: Trial, paths: dict) -> None:
        run.save_arrays("paths.npz", **{m: v["path"] for m, v in paths.items()})

    return Study(prepare, score, HEADLINE, floors, ("FID", "sample_ratio", "accuracy"), keep)


def run(cfg: DigitsConfig, run: Run) -> dict[str, float]:
    from geomopt.latent._study import apply_quality_bar, run_study

    headline = run_study(_study(cfg, run), cfg, run)
    apply_quality_bar(headline, cfg.quality_factor, "denoiser samples' FID", run)
    return headline


LABELS = {"gfm": "GFM (LM)", "gfm_adam": "GFM (Adam)", "jacobian": "Jacobian", "stein": "Stein",
          "rbf": "RBF", "land": "LAND", "linear": "linear", "slerp": "SLERP"}  # fmt: skip


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``digits_strips.png`` (the frames of two pairs per method, first seed) and
    ``digits_metrics.png`` (per method and ablation (hatched): means over seeds with their
    95 % intervals)."""
    import numpy as np

    from geomopt import plotting
    from geomopt.experiment import read_run
    from geomopt.latent._study import error_bars

    rec = read_run(run_dir)
    methods = rec.details["methods"]
    table = rec.details["table"]
    with np.load(Path(run_dir) / "paths.npz") as f:
        paths = {m: f[m] for m in methods}
    n_show = min(2, next(iter(paths.values())).shape[0])
    k = next(iter(paths.values())).shape[1]
    rows = len(methods) * n_show
    fig, axes = plotting.figure(k, rows, width=0.55, height=0.55)
    for r in range(rows):
        m, pair = methods[r // n_show], r % n_show
        for c in range(k):
            ax = axes[r, c]
            ax.imshow(paths[m][pair, c].reshape(8, 8), cmap="gray_r", vmin=-1, vmax=1)
            ax.set_xticks([]), ax.set_yticks([])
            ax.grid(False)
            if c == 0:
                ax.set_ylabel(f"{LABELS.get(m, m)}" if pair == 0 else "", fontsize=5)
    figures = [plotting.save(fig, figure_path(run_dir, out, "digits_strips"))]

    keys = ("PPL", "PDV", "FID", "quality")
    rows = methods + rec.details.get("ablations", [])  # bars: methods, then ablations
    fig, axes = plotting.figure(len(keys), 1, width=2.3 + 0.15 * max(0, len(rows) - 8),
                                height=2.8)  # fmt: skip
    x = np.arange(len(rows))
    for ax, key in zip(np.asarray(axes).flat, keys, strict=True):
        ax.bar(x, [table[m][key] for m in rows], yerr=error_bars(rec.headline, rows, key),
               capsize=2, color=[plotting.color(m.split("@")[0]) for m in rows],
               hatch=["//" if "@" in m else "" for m in rows])  # fmt: skip
        if key == "FID":
            ax.axhline(table["heldout"]["FID"], color="k", ls="--", lw=0.8, label="held-out")
            ax.legend(loc="best", fontsize=6)
        ax.set_xticks(x, [LABELS.get(m, m) for m in rows], rotation=60, fontsize=7)
        ax.set_title(key + (" (higher better)" if key == "quality" else " (lower better)"),
                     fontsize=8)  # fmt: skip
    figures.append(plotting.save(fig, figure_path(run_dir, out, "digits_metrics")))
    return figures


_QUICK = DigitsConfig()

EXPERIMENT = Experiment(
    name="gfm/digits",
    description="interpolation between real 8x8 digits of different classes with a pixel-space "
    "EDM: GFM vs baselines, PPL / PDV / FID / quality in a trained classifier's feature space",
    presets={
        "smoke": DigitsConfig(
            edm_width=32,
            edm_steps=200,
            classifier_steps=100,
            n_pairs=2,
            n_points=5,
            adam_iters=5,
            rbf_iters=5,
            land_iters=5,
            rbf_centers=8,
            rbf_fit_iters=200,
            denoise_steps=3,
            n_test=40,
            methods=("gfm", "stein", "land", "slerp"),
            ablations=("residual=hypersphere",),
            n_seeds=2,
        ),
        "quick": _QUICK,
        # the quick models (cached), GFM with one setting changed at a time, on the same pairs
        "ablate": dataclasses.replace(
            _QUICK,
            methods=("gfm", "linear", "slerp"),
            ablations=("sigma=0.25", "sigma=1", "lam=0", "lam=3", "residual=hypersphere"),
        ),
        "paper": DigitsConfig(
            edm_width=512,
            edm_steps=50_000,
            classifier_steps=5000,
            n_pairs=100,
            n_test=400,
            rbf_centers=256,
        ),
    },
    notes={
        "smoke": "tiny models, 4 of the 8 methods (each method compiles its own solver)",
        "quick": "CPU: 12,000 EDM steps, 64 pairs x 3 seeds (232 s with the denoisers cached; "
        "training adds ~1.5 min per seed)",
        "ablate": "the quick models and pairs: GFM at sigma 0.25 / 1, lambda 0 / 3, the "
        "hypersphere residual, beside GFM, linear and SLERP",
        "paper": "larger denoiser, 100 pairs; for an accelerator (ran once at reduced scale: "
        "--edm_steps 12000 --n_seeds 1, 396 s)",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/gfm/figures",
    key_numbers=(
        "gfm/FID",
        "slerp/FID",
        "heldout/FID",
        "samples/FID",
        "quality/ok",
        "gfm/PPL",
        "gfm/quality",
    ),
    # measured cold (denoisers trained in the run) on the 2-core machine (README_latent.md)
    seconds={"smoke": 39.0, "quick": 453.0},
)
