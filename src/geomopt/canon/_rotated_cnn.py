"""The official rotated-MNIST models in ``flax.nnx`` (images ``(B, H, W, C)``), for the group
C4 of quarter turns:

- :class:`CNN` — six convolutions (3x3; every third a 5x5 of stride 2 and padding 1 that
  doubles the channels, followed by 2-D dropout 0.4), each with batch norm and ReLU, then a
  linear layer: the official ``CNN(out_channels=32, num_layers=6)``. Not invariant.
- :class:`AveragedCNN` — the CNN's logits averaged over the four quarter turns of the input
  (the official ``AverageCNN``): invariant to C4.
- :class:`CanonizedCNN` — a p4-equivariant canonizer in front of a CNN (the official
  ``CNp4CNN``): a lifting convolution (the 3x3 kernel at its four quarter turns) and two 1x1
  group convolutions (cyclic shifts along the group axis) with ReLU between, averaged over
  channels and space into four fibre activations; the image is turned back by the argmax's
  quarter turn and classified. Invariant to C4 (up to ties of the argmax). Officially the
  canonizer is frozen at its random initialisation (``freeze = True``, gradients never reach
  it, and the distance script builds it untrained); ``train_canonizer=True`` trains it
  through a straight-through softmax over the four turns.

Where the official code rotates kernels by 90 degrees with an interpolating rotation, quarter
turns of a square kernel are exact index permutations (``jnp.rot90``), so this is the same map.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

__all__ = ["AveragedCNN", "CNN", "CanonizedCNN", "P4Canonizer", "quarter_turns"]


def quarter_turns(x, k):
    """``x`` ``(..., H, W, C)`` turned counter-clockwise by ``k`` quarter turns (an int)."""
    return jnp.rot90(x, k, axes=(-3, -2))


class CNN(nnx.Module):
    """The official plain CNN (module doc) for ``(B, side, side, in_channels)`` images."""

    def __init__(self, *, side: int = 28, in_channels: int = 1, channels: int = 32,
                 n_layers: int = 6, n_classes: int = 10, dropout: float = 0.4,
                 rngs: nnx.Rngs):  # fmt: skip
        convs, norms, drops = [], [], []
        c_in, c, s = in_channels, channels, side
        for i in range(n_layers):
            if i % 3 == 2:
                convs.append(nnx.Conv(c, 2 * c, (5, 5), 2, padding=((1, 1), (1, 1)),
                                      rngs=rngs))  # fmt: skip
                c, s = 2 * c, (s + 2 - 5) // 2 + 1
                drops.append(nnx.Dropout(dropout, broadcast_dims=(1, 2), rngs=rngs))
            else:
                convs.append(nnx.Conv(c_in if i == 0 else c, c, (3, 3), padding="VALID",
                                      rngs=rngs))  # fmt: skip
                s -= 2
                drops.append(None)
            if s < 1:
                raise ValueError(f"side={side}: too small for {n_layers} layers")
            norms.append(nnx.BatchNorm(c, momentum=0.9, epsilon=1e-5, rngs=rngs))
        self.convs, self.norms, self.drops = nnx.List(convs), nnx.List(norms), nnx.List(drops)
        self.head = nnx.Linear(c * s * s, n_classes, rngs=rngs)

    def __call__(self, x):
        for conv, norm, drop in zip(self.convs, self.norms, self.drops, strict=True):
            x = jax.nn.relu(norm(conv(x)))
            if drop is not None:
                x = drop(x)
        return self.head(x.reshape(x.shape[0], -1))


class AveragedCNN(nnx.Module):
    """Mean of the CNN's logits over the four quarter turns (one pass on a 4x batch)."""

    def __init__(self, *, rngs: nnx.Rngs, **cnn):
        self.base = CNN(rngs=rngs, **cnn)

    def __call__(self, x):
        b = x.shape[0]
        turns = jnp.concatenate([quarter_turns(x, k) for k in range(4)])
        return self.base(turns).reshape(4, b, -1).mean(0)


class P4Canonizer(nnx.Module):
    """Four fibre activations ``(B, 4)`` that shift cyclically when the input turns: lifting
    convolution then ``n_layers - 1`` 1x1 group convolutions (module doc; official: 16
    channels, 3 layers, 3x3 kernel)."""

    def __init__(self, *, in_channels: int = 1, channels: int = 16, n_layers: int = 3,
                 kernel: int = 3, rngs: nnx.Rngs):  # fmt: skip
        init = nnx.initializers.lecun_normal()
        self.lift = nnx.Param(init(rngs.params(), (kernel, kernel, in_channels, channels)))
        self.lift_bias = nnx.Param(jnp.zeros(channels))
        self.group = nnx.List([nnx.Param(init(rngs.params(), (channels, channels, 4)))
                               for _ in range(n_layers - 1)])  # fmt: skip
        self.group_bias = nnx.List([nnx.Param(jnp.zeros(channels)) for _ in range(n_layers - 1)])

    def __call__(self, x):
        w = self.lift[...]
        kernels = jnp.concatenate([jnp.rot90(w, r, axes=(0, 1)) for r in range(4)], -1)
        f = jax.lax.conv_general_dilated(x, kernels, (1, 1), "VALID",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))  # fmt: skip
        c = w.shape[-1]
        f = f.reshape(f.shape[:3] + (4, c)) + self.lift_bias[...][None, None, None, None, :]
        # f: (B, H, W, rotation, C)
        for wg, bg in zip(self.group, self.group_bias, strict=True):
            f = jax.nn.relu(f)
            # output rotation r sees the input group axis shifted by r: W[o, i, (g - r) % 4]
            shifted = jnp.stack([jnp.roll(wg[...], r, axis=-1) for r in range(4)])  # (r,o,i,g)
            f = jnp.einsum("bhwgi,roig->bhwro", f, shifted) + bg[...][None, None, None, None, :]
        return f.mean(axis=(1, 2, 4))


class CanonizedCNN(nnx.Module):
    """A :class:`P4Canonizer` in front of a :class:`CNN` (module doc)."""

    def __init__(self, *, train_canonizer: bool = False, beta: float = 1.0,
                 canonizer: dict | None = None, rngs: nnx.Rngs, **cnn):  # fmt: skip
        self.canonizer = P4Canonizer(in_channels=cnn.get("in_channels", 1), rngs=rngs,
                                     **(canonizer or {}))  # fmt: skip
        self.base = CNN(rngs=rngs, **cnn)
        self.train_canonizer = train_canonizer
        self.beta = beta

    def canonize(self, x):
        """``(canonical images, k)``: each image turned back by its argmax quarter turn ``k``."""
        fib = self.canonizer(x)
        if not self.train_canonizer:
            fib = jax.lax.stop_gradient(fib)
        k = jnp.argmax(fib, -1)
        turns = jnp.stack([quarter_turns(x, -r) for r in range(4)], 1)  # (B, 4, H, W, C)
        hard = jax.nn.one_hot(k, 4, dtype=x.dtype)
        soft = jax.nn.softmax(self.beta * fib, -1)
        w = hard + soft - jax.lax.stop_gradient(soft)  # straight-through: forward is hard
        return jnp.einsum("br,brhwc->bhwc", w, turns), k

    def __call__(self, x):
        return self.base(self.canonize(x)[0])
