"""One training loop for the vision experiments' ``flax.nnx`` classifiers (batch norm, dropout):
mini-batch steps of an optax optimiser on the cross-entropy, evaluation in inference mode
(running batch statistics, no dropout), and hooks for what an experiment measures per epoch.

Steps are ``nnx.jit`` functions of the model and an ``nnx.Optimizer`` (traced once per mode).
The last partial batch of an epoch is dropped (as fixed-shape steps need);
evaluation covers every example.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

__all__ = ["Classifier", "accuracy", "cross_entropy"]


def cross_entropy(logits, y):
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def accuracy(logits, y):
    return jnp.mean(jnp.argmax(logits, -1) == y)


def _loss(model, x, y):
    logits = model(x)
    return cross_entropy(logits, y), logits


# module-level, so every model of one architecture (seeds, repeats) shares the compiled code
@nnx.jit
def _step(model, optimizer, x, y):
    (loss, logits), g = nnx.value_and_grad(_loss, has_aux=True)(model, x, y)
    optimizer.update(model, g)
    return loss, accuracy(logits, y)


@nnx.jit
def _grad(model, x, y):
    return nnx.grad(lambda m: _loss(m, x, y)[0])(model)


@nnx.jit
def _logits(model, x):
    return model(x)


@dataclasses.dataclass
class Classifier:
    """A ``flax.nnx`` model under an optax optimiser: :meth:`fit_epoch`, :meth:`evaluate`,
    :meth:`logits`, and :meth:`loss_grad` (the gradient of one mini-batch at the current
    parameters, in training mode, without a step; for gradient-noise measurements).

    The step is compiled once per architecture and optimiser object: pass the same ``tx``
    object to every model of a sweep (a new ``optax.adamw(...)`` per seed re-traces)."""

    model: nnx.Module
    tx: optax.GradientTransformation

    def __post_init__(self):
        self.optimizer = nnx.Optimizer(self.model, self.tx, wrt=nnx.Param)
        self._step, self._grad, self._logits = _step, _grad, _logits

    def fit_epoch(self, x, y, *, batch_size: int, rng: np.random.Generator,
                  on_step: Callable[[], None] | None = None) -> dict[str, float]:  # fmt: skip
        """One pass over ``(x, y)`` in a random order: mean training loss and accuracy."""
        n = len(y) - len(y) % batch_size
        if n == 0:
            raise ValueError(f"batch_size={batch_size}: larger than the {len(y)} examples")
        order = rng.permutation(len(y))[:n].reshape(-1, batch_size)
        losses, accs = [], []
        self.model.train()
        for idx in order:
            loss, acc = self._step(self.model, self.optimizer, x[idx], y[idx])
            losses.append(loss)
            accs.append(acc)
            if on_step is not None:
                on_step()
        return {"loss": float(np.mean(losses)), "acc": float(np.mean(accs))}

    def logits(self, x, *, batch_size: int = 1024) -> np.ndarray:
        """Inference-mode logits of every example (in chunks)."""
        self.model.eval()
        return np.concatenate([np.asarray(self._logits(self.model, x[i : i + batch_size]))
                               for i in range(0, len(x), batch_size)])  # fmt: skip

    def evaluate(self, x, y, *, batch_size: int = 1024) -> dict[str, float]:
        lg = self.logits(x, batch_size=batch_size)
        return {"loss": float(cross_entropy(jnp.asarray(lg), jnp.asarray(y))),
                "acc": float(np.mean(lg.argmax(-1) == y))}  # fmt: skip

    def loss_grad(self, x, y):
        """The mini-batch gradient (an ``nnx.State`` of the parameters) at the current
        parameters, in training mode; the running batch statistics are left as they were."""
        self.model.train()
        stats = nnx.clone(nnx.state(self.model, nnx.BatchStat))
        g = self._grad(self.model, x, y)
        nnx.update(self.model, stats)
        return g
