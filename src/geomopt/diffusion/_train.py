"""Training the EDM denoiser on manifold samples, checkpoints, and cached per-manifold models.

``train_denoiser`` runs one jitted Adam step, ``lax.scan``-ned over chunks of ``log_every``
steps (one host round trip per chunk); batches are drawn uniformly with replacement from the
training set each step (the official code shuffles epochs; in expectation the same).
``train_for_manifold`` draws the training set from :mod:`geomopt.manifolds`, trains, samples
the PF-ODE to measure what the model learned (the samples' mean distance to the manifold) and
saves everything in a run folder ``<root>/gfm/scores/<manifold>/``:

- ``config.json``, ``metrics.jsonl`` (loss per chunk), ``summary.json`` (see :mod:`geomopt.runs`),
- ``model.eqx`` (``eqx.tree_serialise_leaves``) and ``model.json`` (what rebuilds the model),
  both written atomically; ``samples.npy``, the PF-ODE samples.

A later call with the same settings loads the saved model instead of retraining.
"""

from __future__ import annotations

import dataclasses
import io
import json
import time
from pathlib import Path
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, PRNGKeyArray

from geomopt.diffusion._edm import DenoiserConfig, EDMDenoiser, edm_loss
from geomopt.diffusion._sample import sample_pf_ode
from geomopt.manifolds import MANIFOLDS, get_manifold
from geomopt.runs import (
    Progress,
    Run,
    RunExistsError,
    atomic_write_bytes,
    atomic_write_json,
    load_run,
    to_jsonable,
)

__all__ = [
    "TrainConfig",
    "ScoreConfig",
    "SCORE_PRESETS",
    "train_denoiser",
    "save_denoiser",
    "load_denoiser",
    "train_for_manifold",
    "score_dir",
    "train_scores",
]

MODEL_FILE = "model.eqx"
MODEL_META = "model.json"
SAMPLES_FILE = "samples.npy"


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The EDM training recipe (defaults: the official synthetic-experiment settings)."""

    steps: int = 10_000
    """Adam steps (official: 1000 epochs of 20,000 points in batches of 2048, ~10,000 steps)."""
    batch_size: int = 2048
    """Examples per step."""
    lr: float = 1e-3
    """Adam learning rate."""
    p_mean: float = -1.2
    """Mean of ln(sigma) for the training noise levels."""
    p_std: float = 1.2
    """Standard deviation of ln(sigma)."""
    log_every: int = 500
    """Steps per jitted chunk; the loss is logged once per chunk."""


@dataclasses.dataclass(frozen=True)
class ScoreConfig:
    """Everything ``train_for_manifold`` needs: data, model, training, sampling check."""

    manifold: str = "torus"
    """Manifold to learn (see geomopt.manifolds.MANIFOLDS)."""
    n_data: int = 20_000
    """Training points drawn from the manifold with its default noise."""
    model: DenoiserConfig = DenoiserConfig()
    """Network architecture."""
    train: TrainConfig = TrainConfig()
    """Training recipe."""
    n_samples: int = 2000
    """PF-ODE samples drawn to measure the sample quality."""
    sample_steps: int = 18
    """EDM Heun steps of the PF-ODE sampler."""
    seed: int = 0
    """Seed of data, initialisation, training noise and sampling."""


SCORE_PRESETS: dict[str, tuple[str, ScoreConfig]] = {
    "smoke": (
        "seconds: a tiny net, 400 steps at lr 3e-3",
        ScoreConfig(
            n_data=1000,
            model=DenoiserConfig(width=32, n_blocks=2, embed_dim=16),
            train=TrainConfig(steps=400, batch_size=256, lr=3e-3, log_every=200),
            n_samples=256,
        ),
    ),
    "quick": (
        "CPU, seconds per manifold: a 64-wide 3-block net, 1500 steps of batch 512 at lr 3e-3",
        ScoreConfig(
            n_data=20_000,
            model=DenoiserConfig(width=64, n_blocks=3, embed_dim=32),
            train=TrainConfig(steps=1500, batch_size=512, lr=3e-3, log_every=500),
            n_samples=1000,
        ),
    ),
    "paper": (
        "official: 128-wide 4-block net, 10,000 Adam steps of batch 2048 on 20,000 points",
        ScoreConfig(),
    ),
}


def _check_train_config(cfg: TrainConfig) -> None:
    for name in ("steps", "batch_size", "log_every"):
        v = getattr(cfg, name)
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"TrainConfig.{name} {v!r}: expected a positive integer")
    if not cfg.lr > 0 or not cfg.p_std > 0:
        raise ValueError(f"TrainConfig lr {cfg.lr!r} and p_std {cfg.p_std!r}: expected > 0")


# One optimizer object for every call: the learning rate lives in its state (inject_hyperparams),
# so a new rate does not recompile the jitted chunk.
_ADAM = optax.inject_hyperparams(optax.adam)(learning_rate=1e-3)


@eqx.filter_jit
def _train_chunk(static, params, opt_state, data, key, hyper, *, optimizer, n_steps, batch):
    """``n_steps`` Adam steps under one ``lax.scan``; returns the new state and their losses."""

    def loss_fn(p, x0, k):
        return edm_loss(eqx.combine(p, static), x0, k, hyper["p_mean"], hyper["p_std"])

    def step(carry, k):
        p, s = carry
        k_batch, k_loss = jax.random.split(k)
        idx = jax.random.randint(k_batch, (batch,), 0, data.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(p, data[idx], k_loss)
        updates, s = optimizer.update(grads, s, p)
        return (optax.apply_updates(p, updates), s), loss

    (params, opt_state), losses = jax.lax.scan(
        step, (params, opt_state), jax.random.split(key, n_steps)
    )
    return params, opt_state, losses


def train_denoiser(
    data: Float[Array, "n d"],
    *,
    key: PRNGKeyArray,
    model_config: DenoiserConfig | None = None,
    train_config: TrainConfig | None = None,
    model: EDMDenoiser | None = None,
    run: Run | None = None,
    progress: bool = True,
) -> tuple[EDMDenoiser, np.ndarray]:
    """Train an :class:`EDMDenoiser` on ``data`` (rows are examples) with EDM's loss and Adam.

    ``model_config`` / ``train_config`` default to the official settings.
    Returns ``(model, losses)`` with the loss of every step. ``model`` continues training an
    existing denoiser; ``run`` receives one metrics row per chunk (mean loss of the chunk).
    The learning rate and the ``P_mean``/``P_std`` are traced arrays, so changing them reuses
    the compiled step.
    """
    data = jnp.asarray(data)
    if data.ndim != 2 or data.shape[0] < 1:
        raise ValueError(f"data of shape {data.shape}: expected (n_examples, dim)")
    if not bool(jnp.all(jnp.isfinite(data))):
        raise ValueError("data holds non-finite values")
    model_config = DenoiserConfig() if model_config is None else model_config
    train_config = TrainConfig() if train_config is None else train_config
    _check_train_config(train_config)
    k_init, k_train = jax.random.split(key)
    if model is None:
        model = EDMDenoiser(data.shape[1], model_config, key=k_init)
    elif model.data_dim != data.shape[1]:
        raise ValueError(f"model dim {model.data_dim} != data dim {data.shape[1]}")
    params, static = eqx.partition(model, eqx.is_inexact_array)
    optimizer = _ADAM
    opt_state = optimizer.init(params)
    opt_state.hyperparams["learning_rate"] = jnp.asarray(train_config.lr, data.dtype)
    hyper = {
        "p_mean": jnp.asarray(train_config.p_mean, data.dtype),
        "p_std": jnp.asarray(train_config.p_std, data.dtype),
    }
    chunk = min(train_config.log_every, train_config.steps)
    n_chunks, rest = divmod(train_config.steps, chunk)
    sizes = [chunk] * n_chunks + ([rest] if rest else [])
    bar = Progress(train_config.steps, "train denoiser", enabled=progress)
    losses, done = [], 0
    for i, size in enumerate(sizes):
        params, opt_state, chunk_losses = _train_chunk(
            static,
            params,
            opt_state,
            data,
            jax.random.fold_in(k_train, i),
            hyper,
            optimizer=optimizer,
            n_steps=size,
            batch=train_config.batch_size,
        )
        losses.append(chunk_losses)
        done += size
        chunk_loss = jnp.mean(chunk_losses)
        bar.update(done, {"loss": chunk_loss})
        if run is not None:
            run.log(done, loss=chunk_loss)
    bar.close({"loss": chunk_loss})
    losses = np.asarray(jnp.concatenate(losses))
    if not np.all(np.isfinite(losses)):
        raise FloatingPointError(
            f"denoiser training diverged: first non-finite loss at step "
            f"{int(np.argmin(np.isfinite(losses)))}; lower the learning rate"
        )
    return eqx.combine(params, static), losses


def save_denoiser(path: str | Path, model: EDMDenoiser, config: DenoiserConfig) -> None:
    """Write ``model.eqx`` and ``model.json`` (data_dim + architecture) into folder ``path``."""
    path = Path(path)
    buf = io.BytesIO()
    eqx.tree_serialise_leaves(buf, model)
    atomic_write_bytes(path / MODEL_FILE, buf.getvalue())
    meta = {"data_dim": model.data_dim, "model": dataclasses.asdict(config), "format": 1}
    atomic_write_json(path / MODEL_META, meta)


def _load_leaf_as(f, like):
    """Read one saved leaf and cast it to the dtype of ``like`` (the skeleton's leaf), so a
    denoiser saved in float32 loads with x64 enabled (as float64, exactly) and one saved in
    float64 loads without it (rounded to float32)."""
    if eqx.is_array(like):
        return jnp.asarray(np.load(f).astype(like.dtype))
    return eqx.default_deserialise_filter_spec(f, like)


def load_denoiser(path: str | Path) -> EDMDenoiser:
    """Rebuild the denoiser saved by :func:`save_denoiser` in folder ``path`` (no retraining).

    The weights take JAX's default float dtype of the loading process (float64 under
    ``jax_enable_x64``, float32 otherwise), whatever dtype they were saved in."""
    path = Path(path)
    if not (path / MODEL_FILE).exists() or not (path / MODEL_META).exists():
        raise FileNotFoundError(f"{path}: no {MODEL_FILE} / {MODEL_META}; not a saved denoiser")
    meta = json.loads((path / MODEL_META).read_text())
    config = DenoiserConfig(**meta["model"])
    skeleton = EDMDenoiser(int(meta["data_dim"]), config, key=jax.random.key(0))
    with open(path / MODEL_FILE, "rb") as f:
        return eqx.tree_deserialise_leaves(f, skeleton, filter_spec=_load_leaf_as)


def score_dir(manifold: str, root: str | Path = "results") -> Path:
    """The folder ``<root>/gfm/scores/<manifold>`` where a manifold's denoiser is kept."""
    return Path(root) / "gfm" / "scores" / manifold


def _resolve(config: ScoreConfig | str, manifold: str) -> ScoreConfig:
    if isinstance(config, str):
        if config not in SCORE_PRESETS:
            raise ValueError(f"unknown preset {config!r}; expected one of {sorted(SCORE_PRESETS)}")
        config = SCORE_PRESETS[config][1]
    return dataclasses.replace(config, manifold=manifold)


def train_for_manifold(
    manifold: str,
    config: ScoreConfig | Literal["smoke", "quick", "paper"] = "quick",
    *,
    root: str | Path = "results",
    overwrite: bool = False,
    retrain: bool = False,
    progress: bool = True,
) -> tuple[EDMDenoiser, dict]:
    """A trained denoiser for ``manifold``, kept in ``score_dir(manifold, root)``.

    If that folder holds a finished run with the same config, the saved model is loaded
    (training is deterministic given the config and its seed, so this is the model a retrain
    would give on the same backend); ``retrain=True`` trains anyway. A finished run with a
    DIFFERENT config is replaced only with ``overwrite=True`` (otherwise
    :class:`geomopt.runs.RunExistsError`).

    Returns ``(model, summary)``; the summary holds ``final_loss`` / ``initial_loss`` (mean of
    the last / first 100 steps), the PF-ODE samples' ``sample_mean_distance`` /
    ``sample_median_distance`` to the manifold, the same for the training data
    (``data_mean_distance``, the floor set by the data noise), ``train_seconds`` and ``loaded``
    (True when nothing was trained).
    """
    if manifold not in MANIFOLDS:
        raise ValueError(f"unknown manifold {manifold!r}; expected one of {sorted(MANIFOLDS)}")
    cfg = _resolve(config, manifold)
    folder = score_dir(manifold, root)
    if (folder / "summary.json").exists() and (folder / MODEL_FILE).exists():
        saved_cfg, _, summary = load_run(folder)
        same = saved_cfg == json.loads(json.dumps(to_jsonable(cfg)))
        if same and not retrain:
            return load_denoiser(folder), {**summary, "loaded": True}
        if not same and not overwrite:
            raise RunExistsError(
                f"{folder} holds a denoiser trained with other settings; pass overwrite=True "
                "to retrain it"
            )
    run = Run.create("scores", manifold, cfg, root=Path(root) / "gfm", overwrite=True)
    m = get_manifold(manifold)
    key = jax.random.key(cfg.seed)
    k_data, k_train, k_sample = jax.random.split(key, 3)
    data = m.sample(k_data, cfg.n_data)
    t0 = time.perf_counter()
    model, losses = train_denoiser(
        data,
        key=k_train,
        model_config=cfg.model,
        train_config=cfg.train,
        run=run,
        progress=progress,
    )
    train_seconds = time.perf_counter() - t0
    save_denoiser(run.path, model, cfg.model)
    samples, info = sample_pf_ode(
        model, k_sample, cfg.n_samples, m.ambient_dim, num_steps=cfg.sample_steps
    )
    buf = io.BytesIO()
    np.save(buf, np.asarray(samples))
    atomic_write_bytes(run.path / SAMPLES_FILE, buf.getvalue())
    distance = jax.jit(jax.vmap(m.distance))
    dists = np.asarray(distance(samples))
    n_ref = min(cfg.n_samples, cfg.n_data)
    summary = {
        "manifold": manifold,
        "final_loss": float(np.mean(losses[-min(100, len(losses)) :])),
        "initial_loss": float(np.mean(losses[: min(100, len(losses))])),
        "sample_mean_distance": float(np.mean(dists)),
        "sample_median_distance": float(np.median(dists)),
        "data_mean_distance": float(np.mean(np.asarray(distance(data[:n_ref])))),
        "sampler_steps": info["num_steps"],
        "train_seconds": train_seconds,
    }
    run.finish(summary)
    return model, {**summary, "loaded": False}


def train_scores(
    manifolds: tuple[str, ...] | list[str],
    config: ScoreConfig | Literal["smoke", "quick", "paper"] = "quick",
    *,
    root: str | Path = "results",
    overwrite: bool = False,
    retrain: bool = False,
    progress: bool = True,
) -> list[dict]:
    """:func:`train_for_manifold` for each manifold; writes the summaries, one row per manifold,
    to ``<root>/gfm/scores/summary.json`` and returns them."""
    unknown = [m for m in manifolds if m not in MANIFOLDS]
    if unknown:
        raise ValueError(f"unknown manifolds {unknown}; expected names from {sorted(MANIFOLDS)}")
    rows = []
    for name in manifolds:
        _, summary = train_for_manifold(
            name, config, root=root, overwrite=overwrite, retrain=retrain, progress=progress
        )
        rows.append({"manifold": name, **summary})
    atomic_write_json(Path(root) / "gfm" / "scores" / "summary.json", rows)
    return rows
