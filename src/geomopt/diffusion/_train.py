"""Training the EDM denoiser on manifold samples, and trained denoisers cached per manifold.

``train_denoiser`` runs one jitted Adam step, ``lax.scan``-ned over chunks of ``log_every``
steps (one host round trip per chunk); batches are drawn uniformly with replacement from the
training set each step (the official code shuffles epochs; in expectation the same).
``train_for_manifold`` draws the training set from :mod:`geomopt.manifolds`, trains, samples
the PF-ODE to measure what the model learned (the samples' mean distance to the manifold) and
saves everything in a folder the caller chooses (experiments pass
``run.cache_dir("denoiser", key)``): ``model.eqx`` + ``model.json`` (:func:`save_denoiser`),
``samples.npy`` (the PF-ODE samples) and ``train_summary.json`` (config, chunk losses, summary).
A later call with the same settings loads the saved model instead of retraining.
"""

from __future__ import annotations

import dataclasses
import io
import json
import time
from collections.abc import Callable
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, PRNGKeyArray

from geomopt.diffusion._edm import DenoiserConfig, EDMDenoiser, edm_loss
from geomopt.diffusion._sample import sample_pf_ode
from geomopt.experiment import atomic_write_bytes, atomic_write_json, to_jsonable
from geomopt.manifolds import MANIFOLDS, get_manifold

__all__ = [
    "TrainConfig",
    "ScoreConfig",
    "learning_rates",
    "SCORE_PRESETS",
    "train_denoiser",
    "save_denoiser",
    "load_denoiser",
    "train_for_manifold",
]

MODEL_FILE = "model.eqx"
MODEL_META = "model.json"
SAMPLES_FILE = "samples.npy"
TRAIN_SUMMARY = "train_summary.json"


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The EDM training recipe (defaults: the official synthetic-experiment settings)."""

    steps: int = 10_000
    """Adam steps (official: 1000 epochs of 20,000 points in batches of 2048, ~10,000 steps)."""
    batch_size: int = 2048
    """Examples per step."""
    lr: float = 1e-3
    """Adam learning rate (the peak rate under a schedule)."""
    schedule: str = "constant"
    """Learning-rate schedule: "constant" (official) or "cosine" (``lr`` decayed to 0 over
    ``steps`` by a half cosine)."""
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
        "CPU, ~35 s per manifold: the official net, 10,000 steps of batch 1024, cosine rate 2e-3",
        ScoreConfig(
            n_data=20_000,
            train=TrainConfig(batch_size=1024, lr=2e-3, schedule="cosine", log_every=500),
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
    if cfg.schedule not in SCHEDULES:
        raise ValueError(f"TrainConfig.schedule {cfg.schedule!r}: expected one of {SCHEDULES}")


SCHEDULES = ("constant", "cosine")


def learning_rates(cfg: TrainConfig) -> np.ndarray:
    """The learning rate of every step of ``cfg`` (``(steps,)``)."""
    t = np.arange(cfg.steps, dtype=np.float64)
    if cfg.schedule == "cosine":
        return cfg.lr * 0.5 * (1.0 + np.cos(np.pi * t / cfg.steps))
    return np.full(cfg.steps, cfg.lr)


# One optimizer object for every call: the learning rate lives in its state (inject_hyperparams),
# so a new rate does not recompile the jitted chunk.
_ADAM = optax.inject_hyperparams(optax.adam)(learning_rate=1e-3)


@eqx.filter_jit
def _train_chunk(static, params, opt_state, data, key, hyper, lrs, *, optimizer, n_steps, batch):
    """``n_steps`` Adam steps under one ``lax.scan`` at the rates ``lrs`` (one per step, traced:
    a schedule does not recompile); returns the new state and their losses."""

    def loss_fn(p, x0, k):
        return edm_loss(eqx.combine(p, static), x0, k, hyper["p_mean"], hyper["p_std"])

    def step(carry, xs):
        p, s = carry
        k, lr = xs
        s.hyperparams["learning_rate"] = lr
        k_batch, k_loss = jax.random.split(k)
        idx = jax.random.randint(k_batch, (batch,), 0, data.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(p, data[idx], k_loss)
        updates, s = optimizer.update(grads, s, p)
        return (optax.apply_updates(p, updates), s), loss

    (params, opt_state), losses = jax.lax.scan(
        step, (params, opt_state), (jax.random.split(key, n_steps), lrs)
    )
    return params, opt_state, losses


def train_denoiser(
    data: Float[Array, "n d"],
    *,
    key: PRNGKeyArray,
    model_config: DenoiserConfig | None = None,
    train_config: TrainConfig | None = None,
    model: EDMDenoiser | None = None,
    progress=None,
    log: Callable[[int, float], None] | None = None,
) -> tuple[EDMDenoiser, np.ndarray]:
    """Train an :class:`EDMDenoiser` on ``data`` (rows are examples) with EDM's loss and Adam.

    ``model_config`` / ``train_config`` default to the official settings.
    Returns ``(model, losses)`` with the loss of every step. ``model`` continues training an
    existing denoiser; ``progress`` (an object with ``update(n, **postfix)``, e.g. a
    :class:`geomopt.experiment.Progress`) and ``log(step, loss)`` get one call per chunk (mean
    loss of the chunk).
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
    rates = jnp.asarray(learning_rates(train_config), data.dtype)
    losses, done = [], 0
    for i, size in enumerate(sizes):
        params, opt_state, chunk_losses = _train_chunk(
            static,
            params,
            opt_state,
            data,
            jax.random.fold_in(k_train, i),
            hyper,
            rates[done : done + size],
            optimizer=optimizer,
            n_steps=size,
            batch=train_config.batch_size,
        )
        losses.append(chunk_losses)
        done += size
        if progress or log is not None:
            chunk_loss = float(jnp.mean(chunk_losses))
            if progress:
                progress.update(size, loss=chunk_loss)
            if log is not None:
                log(done, chunk_loss)
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


def _same_config(saved: dict, cfg: ScoreConfig) -> bool:
    if isinstance(saved, dict) and isinstance(saved.get("train"), dict):
        # folders written before the schedule existed were trained at a constant rate
        saved = {**saved, "train": {"schedule": "constant", **saved["train"]}}
    return saved == json.loads(json.dumps(to_jsonable(cfg)))


def _score_config(manifold: str, config: ScoreConfig | str) -> ScoreConfig:
    """``config`` (or the preset it names) for ``manifold``, both checked."""
    if manifold not in MANIFOLDS:
        raise ValueError(f"unknown manifold {manifold!r}; expected one of {sorted(MANIFOLDS)}")
    if isinstance(config, str):
        if config not in SCORE_PRESETS:
            raise ValueError(f"unknown preset {config!r}; expected one of {sorted(SCORE_PRESETS)}")
        config = SCORE_PRESETS[config][1]
    return dataclasses.replace(config, manifold=manifold)


def _load_trained(folder: Path, cfg: ScoreConfig) -> tuple[EDMDenoiser, dict]:
    """The denoiser saved in ``folder`` and its summary, if it was trained with ``cfg``."""
    record = folder / TRAIN_SUMMARY
    try:
        saved = json.loads(record.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{record}: corrupt JSON ({e}); delete the folder to retrain") from e
    if not _same_config(saved.get("config"), cfg):
        raise ValueError(
            f"{folder} holds a denoiser trained with other settings; use another folder "
            "or retrain=True"
        )
    return load_denoiser(folder), {**saved["summary"], "loaded": True}


def _train_and_sample(cfg: ScoreConfig, progress, log) -> tuple[EDMDenoiser, list, Array, dict]:
    """Train on ``cfg``'s data and sample the PF-ODE: the model, the chunk losses, the samples
    and the summary (see :func:`train_for_manifold`)."""
    m = get_manifold(cfg.manifold)
    key = jax.random.key(cfg.seed)
    k_data, k_train, k_sample = jax.random.split(key, 3)
    data = m.sample(k_data, cfg.n_data)
    chunks: list[tuple[int, float]] = []

    def _log(step, loss):
        chunks.append((step, loss))
        if log is not None:
            log(step, loss)

    t0 = time.perf_counter()
    model, losses = train_denoiser(
        data,
        key=k_train,
        model_config=cfg.model,
        train_config=cfg.train,
        progress=progress,
        log=_log,
    )
    train_seconds = time.perf_counter() - t0
    samples, info = sample_pf_ode(
        model, k_sample, cfg.n_samples, m.ambient_dim, num_steps=cfg.sample_steps
    )
    distance = jax.jit(jax.vmap(m.distance))
    dists = np.asarray(distance(samples))
    n_ref = min(cfg.n_samples, cfg.n_data)
    summary = {
        "manifold": cfg.manifold,
        "final_loss": float(np.mean(losses[-min(100, len(losses)) :])),
        "initial_loss": float(np.mean(losses[: min(100, len(losses))])),
        "sample_mean_distance": float(np.mean(dists)),
        "sample_median_distance": float(np.median(dists)),
        "data_mean_distance": float(np.mean(np.asarray(distance(data[:n_ref])))),
        "sampler_steps": info["num_steps"],
        "train_seconds": train_seconds,
    }
    return model, chunks, samples, summary


def train_for_manifold(
    manifold: str,
    config: ScoreConfig | str,
    folder: str | Path,
    *,
    retrain: bool = False,
    progress=None,
    log: Callable[[int, float], None] | None = None,
) -> tuple[EDMDenoiser, dict]:
    """A trained denoiser for ``manifold``, kept in ``folder`` (e.g. an experiment's
    ``run.cache_dir("denoiser", key)``, keyed by the manifold and the training config).

    ``config`` is a :class:`ScoreConfig` or the name of one of :data:`SCORE_PRESETS`. If
    ``folder`` holds a model trained with the same config (``train_summary.json``), it is
    loaded (training is deterministic given the config and its seed, so this is the model a
    retrain would give on the same backend); ``retrain=True`` trains anyway. A saved model with
    a DIFFERENT config is never loaded: :class:`ValueError` names the folder.

    Trains on ``config.n_data`` points drawn from the manifold with its default noise, then
    samples the PF-ODE (EDM Heun, ``config.sample_steps`` steps) to measure what was learned.
    Writes ``model.eqx`` / ``model.json`` (:func:`save_denoiser`), ``samples.npy`` and
    ``train_summary.json`` (config, losses per chunk, summary). ``progress`` (an object with
    ``update(n, **postfix)``, e.g. ``run.progress(total=steps)``) and ``log(step, loss)`` see
    the training chunks.

    Returns ``(model, summary)``; the summary holds ``final_loss`` / ``initial_loss`` (mean of
    the last / first 100 steps), the PF-ODE samples' ``sample_mean_distance`` /
    ``sample_median_distance`` to the manifold, the same for the training data
    (``data_mean_distance``, the floor set by the data noise), ``train_seconds`` and ``loaded``
    (True when nothing was trained).
    """
    cfg = _score_config(manifold, config)
    folder = Path(folder)
    if (folder / TRAIN_SUMMARY).exists() and (folder / MODEL_FILE).exists() and not retrain:
        return _load_trained(folder, cfg)
    folder.mkdir(parents=True, exist_ok=True)
    model, chunks, samples, summary = _train_and_sample(cfg, progress, log)
    save_denoiser(folder, model, cfg.model)
    buf = io.BytesIO()
    np.save(buf, np.asarray(samples))
    atomic_write_bytes(folder / SAMPLES_FILE, buf.getvalue())
    atomic_write_json(folder / TRAIN_SUMMARY, {"config": cfg, "losses": chunks, "summary": summary})
    return model, {**summary, "loaded": False}
