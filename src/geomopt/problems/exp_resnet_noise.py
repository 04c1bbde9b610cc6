"""``signsgd/resnet_noise``: how sparse is the mini-batch gradient noise of a ResNet-20 while it
trains? The official ``resnet_expt`` (ResNet-20 on CIFAR-10 with SGD and with Adam, the noise
density phi measured every epoch, 3 repeats).

    uv run experiments/signsgd/resnet_noise.py [smoke|quick|paper] [--field value ...]

Every epoch, before training on it (as the official), ``noise_batches`` mini-batch gradients of
``batch_size`` images are drawn at the current weights with the network in inference mode (the
official samples in ``model.eval()``), their per-coordinate variance ``sigma^2`` accumulated with
:func:`geomopt.lm._noise.welford_variance`, and
``phi = ||sigma||_1^2 / (d ||sigma||_2^2)`` (:func:`geomopt.lm._noise.noise_density`, the
estimator of the GPT-2 runs; in [1/d, 1]: 1/d is one noisy coordinate, a vector of equal
standard deviations gives 1, the absolute values of one isotropic Gaussian draw 2/pi). The
official draws every batch of the epoch (391 on CIFAR-10); here ``noise_batches`` batches drawn
at random (with the offline data an epoch has only 11).

Data: ``digits`` (offline: scikit-learn's 1,797 8 x 8 grey digits, 1,437 train / 360 test, no
augmentation: a real-image stand-in, not CIFAR-10) or ``cifar10`` (:func:`geomopt.vision.
fetch_cifar10`, normalised by the official channel means / deviations, random crop with
4-pixel padding and horizontal flips as the official).

Optimisers at the official settings: SGD (lr 0.1, momentum 0.9, weight decay 1e-4 coupled) and
Adam (lr 1e-3, betas 0.9 / 0.999, eps 1e-8, weight decay 1e-4 coupled, as ``torch.optim.Adam``),
the learning rate divided by 10 at 50 % and 75 % of the epochs (official: 80 and 120 of 160),
batch 128.

The control: the estimator's own bias. At the last epoch the measured ``sigma`` is used to draw
``noise_batches`` isotropic-Gaussian gradient samples of exactly that per-coordinate deviation,
and phi is estimated from them the same way: its departure from ``phi(sigma)``
(``<opt>/estimator_bias``) is what the finite number of batches alone does to phi.

Headline: ``<opt>/phi/first`` (before training), ``/last`` (the mean of the last 10 % of the
measurements, at least the one after the last epoch: the official "convergence limit"),
``/min``, ``/max`` (95 % interval over repeats: ``/lo``, ``/hi``), ``<opt>/test_acc``,
``<opt>/estimator_bias``, ``gaussian_reference`` (2/pi).
Module-level imports are light.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from geomopt.checks import check_ints, check_names, check_one_of
from geomopt.experiment import Experiment, Run, figure_path

OPTIMIZERS = ("sgd", "adam")
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)
OFFICIAL_CONVERGED_PHI = 0.700
"""Read off the official figure ``noise_sparstiy_resnet.pdf`` (its "Convergence Limit" line,
the mean of the last 16 of 160 epochs): phi starts at 0.11 (epoch 0), 0.54 at epoch 5, 0.68 at
epoch 20, and ends at 0.70, above the Gaussian reference 0.637."""


@dataclasses.dataclass(frozen=True)
class ResNetNoiseConfig:
    """ResNet-20 with SGD and Adam, phi of the mini-batch gradient noise every epoch.

    Paper command: ``uv run experiments/signsgd/resnet_noise.py paper`` (CIFAR-10, a GPU)."""

    data: Literal["digits", "cifar10"] = "digits"
    """Images: "digits" (scikit-learn, offline) or "cifar10" (fetched)."""
    optimizers: tuple[str, ...] = OPTIMIZERS
    """Optimisers at the official settings: sgd, adam."""
    epochs: int = 40
    """Epochs (official: 160); the rate drops by 10x at 50 % and 75 %."""
    repeats: int = 3
    """Repeats (seeds of initialisation, batch order and noise batches; official: 3)."""
    batch_size: int = 128
    """Mini-batch (official: 128)."""
    noise_batches: int = 64
    """Mini-batch gradients per phi estimate."""
    noise_every: int = 1
    """phi is measured before epoch 0 and every this many epochs, and after the last (official:
    every epoch)."""
    n_train: int = 1437
    """Training images (digits: of 1,797; CIFAR-10: of 50,000)."""
    n_test: int = 360
    """Test images."""


def validate(cfg: ResNetNoiseConfig) -> None:
    check_one_of(cfg, "data", ("digits", "cifar10"))
    check_names(cfg, "optimizers", OPTIMIZERS)
    check_ints(cfg, "epochs", "repeats", "batch_size", "n_train", "n_test", "noise_every")
    check_ints(cfg, "noise_batches", minimum=2)
    if cfg.batch_size > cfg.n_train:
        raise ValueError(f"batch_size={cfg.batch_size}: expected <= n_train={cfg.n_train}")
    if cfg.data == "digits" and cfg.n_train + cfg.n_test > 1797:
        raise ValueError(f"n_train + n_test = {cfg.n_train + cfg.n_test}: scikit-learn's digits "
                         "has 1797 images")  # fmt: skip


def optimizer(name: str, epochs: int, steps_per_epoch: int):
    """The official optimiser with its step schedule (lr / 10 at 50 % and 75 % of the epochs)."""
    import optax

    lr = {"sgd": 0.1, "adam": 1e-3}[name]
    sched = optax.piecewise_constant_schedule(lr, {int(epochs * f) * steps_per_epoch: 0.1
                                                   for f in (0.5, 0.75)})  # fmt: skip
    core = (optax.sgd(sched, momentum=0.9) if name == "sgd"
            else optax.adam(sched, b1=0.9, b2=0.999, eps=1e-8))  # fmt: skip
    return optax.chain(optax.add_decayed_weights(1e-4), core)  # coupled, as torch


def load_data(cfg: ResNetNoiseConfig):
    """``(train, test)`` :class:`geomopt.vision.ImageSet` (digits: split by a fixed seed)."""
    import numpy as np

    from geomopt import vision

    if cfg.data == "cifar10":
        d = vision.fetch_cifar10()
        norm = [vision.ImageSet((s.x - np.array(CIFAR_MEAN, np.float32)) /
                                np.array(CIFAR_STD, np.float32), s.y, s.name)
                for s in (d["train"], d["test"])]  # fmt: skip
        return norm[0].take(slice(0, cfg.n_train)), norm[1].take(slice(0, cfg.n_test))
    full = vision.sklearn_digits(canvas=8, box=8)
    idx = np.random.default_rng(0).permutation(len(full))
    return full.take(idx[: cfg.n_train]), full.take(idx[cfg.n_train : cfg.n_train + cfg.n_test])


def augment(x, rng):
    """The official CIFAR-10 augmentation: random 32 x 32 crop of the 4-pixel zero-padded image,
    and a horizontal flip with probability 1/2."""
    import numpy as np

    n, h, w, _ = x.shape
    pad = np.pad(x, ((0, 0), (4, 4), (4, 4), (0, 0)))
    dy, dx = rng.integers(0, 9, n), rng.integers(0, 9, n)
    out = np.stack([pad[i, dy[i] : dy[i] + h, dx[i] : dx[i] + w] for i in range(n)])
    flip = rng.random(n) < 0.5
    out[flip] = out[flip, :, ::-1]
    return out


def _noise_fn(clf):
    """``(mean, var)`` of the mini-batch gradients over a stack of batches ``(K, B, ...)``, the
    network in inference mode, through the GPT-2 runs' Welford estimator."""
    import jax
    from flax import nnx

    from geomopt.lm import welford_variance
    from geomopt.vision import cross_entropy

    model = clf.model
    model.eval()
    graph, params, rest = nnx.split(model, nnx.Param, ...)

    def grad(batch, params, rest):
        x, y = batch
        return jax.grad(lambda p: cross_entropy(nnx.merge(graph, p, rest)(x), y))(params)

    return jax.jit(lambda xs, ys, params, rest: welford_variance(grad, (xs, ys), params, rest))


def estimator_bias(sigma_leaves, k: int, rng) -> float:
    """phi of ``k`` isotropic-Gaussian samples of per-coordinate deviation ``sigma``, estimated
    as the experiment does, minus ``phi(sigma)``: the estimator's finite-sample bias."""
    import numpy as np

    from geomopt.lm import noise_density

    sig = np.concatenate([np.ravel(s) for s in sigma_leaves]).astype(np.float64)
    draws = rng.standard_normal((k, sig.size)) * sig
    var = draws.var(axis=0)
    return noise_density([var])["phi"] - noise_density([sig**2])["phi"]


def run(cfg: ResNetNoiseConfig, run: Run) -> dict[str, float]:
    import jax
    import numpy as np
    from flax import nnx

    from geomopt.lm import noise_density
    from geomopt.problems._resnet import ResNet20
    from geomopt.stats import put_mean_ci
    from geomopt.vision import Classifier

    train, test = load_data(cfg)
    steps = len(train) // cfg.batch_size
    headline: dict[str, float] = {"gaussian_reference": float(2 / np.pi)}
    bar = run.progress(total=len(cfg.optimizers) * cfg.repeats * cfg.epochs, desc="train")
    curves: dict[str, list] = {}
    for opt in cfg.optimizers:
        tx = optimizer(opt, cfg.epochs, steps)  # one object: compiled once for every repeat
        per_rep, accs, biases = [], [], []
        for rep in range(cfg.repeats):
            rng = np.random.default_rng(1000 * rep + 7)
            clf = Classifier(ResNet20(in_channels=train.x.shape[-1],
                                      rngs=nnx.Rngs(params=rep)), tx)  # fmt: skip
            noise = _noise_fn(clf)
            phis, ep_at = [], []

            def measure(rng=rng, clf=clf, noise=noise):
                idx = rng.integers(0, len(train), (cfg.noise_batches, cfg.batch_size))
                xs = train.x[idx]
                if cfg.data == "cifar10":
                    xs = augment(xs.reshape((-1,) + train.x.shape[1:]), rng).reshape(xs.shape)
                _, params, rest = nnx.split(clf.model, nnx.Param, ...)
                return noise(xs, train.y[idx], params, rest)[1]

            for epoch in range(cfg.epochs + 1):
                bar.set_description(f"{opt}, repeat {rep}, epoch {epoch}")
                row = dict(optimizer=opt, repeat=rep, epoch=epoch)
                if epoch % cfg.noise_every == 0 or epoch == cfg.epochs:
                    var = measure()
                    row["phi"] = noise_density(var)["phi"]
                    phis.append(row["phi"])
                    ep_at.append(epoch)
                if epoch == cfg.epochs:  # phi after the last epoch; nothing left to train
                    run.log(**row)
                    break
                x_ep = augment(train.x, rng) if cfg.data == "cifar10" else train.x
                tr = clf.fit_epoch(x_ep, train.y, batch_size=cfg.batch_size, rng=rng)
                te = clf.evaluate(test.x, test.y)
                run.log(**row, train_loss=tr["loss"], train_acc=tr["acc"], test_acc=te["acc"])
                bar.update(1)
            sig = [np.sqrt(np.maximum(np.asarray(v), 0)) for v in jax.tree.leaves(var)]
            biases.append(estimator_bias(sig, cfg.noise_batches, rng))
            per_rep.append(phis)
            accs.append(te["acc"])
        curves[opt] = per_rep
        arr = np.asarray(per_rep)
        tail = max(1, int(round(0.1 * arr.shape[1])))  # the last 10 % of the measurements
        for name, vals in (("first", arr[:, 0]), ("last", arr[:, -tail:].mean(1)),
                           ("min", arr.min(1)), ("max", arr.max(1))):  # fmt: skip
            put_mean_ci(headline, f"{opt}/phi/{name}", vals)
        put_mean_ci(headline, f"{opt}/test_acc", accs)
        put_mean_ci(headline, f"{opt}/estimator_bias", biases)
    bar.close()
    run.save_arrays("phi.npz", epochs=np.asarray(ep_at),
                    **{opt: np.asarray(c) for opt, c in curves.items()})  # fmt: skip
    run.print(_markdown(cfg, headline))
    return headline


def _markdown(cfg, h) -> str:
    lines = ["| optimiser | phi first epoch | phi last 10 % | phi min | estimator bias | test acc "
             "|",
             "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for o in cfg.optimizers:
        lines.append(f"| {o} | {h[f'{o}/phi/first']:.3f} | {h[f'{o}/phi/last']:.3f} | "
                     f"{h[f'{o}/phi/min']:.3f} | {h[f'{o}/estimator_bias']:+.4f} | "
                     f"{h[f'{o}/test_acc']:.3f} |")  # fmt: skip
    lines.append(f"| official figure (CIFAR-10, 160 epochs) | 0.11 | {OFFICIAL_CONVERGED_PHI} | "
                 "| | |")  # fmt: skip
    return "\n".join(lines)


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``resnet_noise.png``: phi per epoch per optimiser (mean over repeats and its range), the
    Gaussian reference 2/pi and the official run's converged value."""
    import numpy as np

    from geomopt import plotting

    arr = np.load(Path(run_dir) / "phi.npz")
    fig, ax = plotting.figure(1, 1, width=4.2, height=3.0)
    ax = np.asarray(ax).ravel()[0]
    ep = arr["epochs"]
    for i, opt in enumerate(f for f in arr.files if f != "epochs"):
        c = arr[opt]
        ax.plot(ep, c.mean(0), color=f"C{i}", label=f"ResNet-20, {opt}")
        ax.fill_between(ep, c.min(0), c.max(0), color=f"C{i}", alpha=0.2)
    ax.axhline(2 / np.pi, color="gray", ls="--", label="Gaussian 2/pi")
    ax.axhline(OFFICIAL_CONVERGED_PHI, color="C3", ls=":", label="official, converged (CIFAR-10)")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("epoch")
    ax.set_ylabel("noise density phi(sigma)")
    ax.legend(fontsize=7)
    return [plotting.save(fig, figure_path(run_dir, out, "resnet_noise"))]


EXPERIMENT = Experiment(
    name="signsgd/resnet_noise",
    description="ResNet-20 with SGD and Adam: the noise density phi of its mini-batch gradients "
    "every epoch (the official resnet_expt), with the estimator's finite-sample control",
    presets={
        "smoke": ResNetNoiseConfig(epochs=2, repeats=2, batch_size=64, noise_batches=4,
                                   n_train=256, n_test=64),  # fmt: skip
        "quick": ResNetNoiseConfig(epochs=30, noise_every=3),
        "paper": ResNetNoiseConfig(data="cifar10", epochs=160, noise_batches=391,
                                   n_train=50_000, n_test=10_000),  # fmt: skip
    },
    notes={
        "smoke": "256 digits, 2 epochs, 2 repeats, 4 noise batches (seconds)",
        "quick": "scikit-learn digits (8 x 8), 30 epochs, 3 repeats, phi from 64 batches every "
        "3 epochs",
        "paper": "CIFAR-10 (fetched), 160 epochs, 3 repeats, 391 noise batches (an epoch's)",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/signsgd/figures",
    key_numbers=("sgd/phi/last", "adam/phi/last", "sgd/phi/first", "sgd/estimator_bias"),
    paper={"sgd/phi/last": OFFICIAL_CONVERGED_PHI, "sgd/phi/first": 0.11},
    paper_source="official resnet_expt/noise_sparstiy_resnet.pdf (one run on CIFAR-10, read off "
    "the figure)",
    # smoke and quick measured (quick: 1444 s); paper an estimate
    seconds={"smoke": 40.0, "quick": 1444.0, "paper": 36000.0},
)
