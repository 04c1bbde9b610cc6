"""ResNet-20 for CIFAR (He et al. 2016, the official ``resnet_expt/resnet.py``) in ``flax.nnx``:
a 3x3 convolution to 16 channels, three stages of three basic blocks (16, 32, 64 channels;
the first block of stages 2 and 3 strides by 2 with a 1x1 convolution + batch norm shortcut),
global average pooling and a linear layer. Convolutions have no bias; every one is followed by
batch norm (momentum 0.1 in torch's convention, epsilon 1e-5). 0.27 M parameters for 3 input
channels and 10 classes. Images ``(B, H, W, C)``; any side works (the pooling is global).
"""

from __future__ import annotations

import jax
from flax import nnx

__all__ = ["BasicBlock", "ResNet20"]


def _bn(c, rngs):
    return nnx.BatchNorm(c, momentum=0.9, epsilon=1e-5, rngs=rngs)


class BasicBlock(nnx.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, *, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(c_in, c_out, (3, 3), stride, padding=1, use_bias=False, rngs=rngs)
        self.bn1 = _bn(c_out, rngs)
        self.conv2 = nnx.Conv(c_out, c_out, (3, 3), 1, padding=1, use_bias=False, rngs=rngs)
        self.bn2 = _bn(c_out, rngs)
        if stride != 1 or c_in != c_out:
            self.short = nnx.Conv(c_in, c_out, (1, 1), stride, padding=0, use_bias=False,
                                  rngs=rngs)  # fmt: skip
            self.short_bn = _bn(c_out, rngs)
        else:
            self.short, self.short_bn = None, None

    def __call__(self, x):
        out = jax.nn.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        skip = x if self.short is None else self.short_bn(self.short(x))
        return jax.nn.relu(out + skip)


class ResNet20(nnx.Module):
    """ResNet-20 (module doc)."""

    def __init__(self, *, in_channels: int = 3, n_classes: int = 10, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(in_channels, 16, (3, 3), 1, padding=1, use_bias=False, rngs=rngs)
        self.bn1 = _bn(16, rngs)
        blocks, c = [], 16
        for width, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                blocks.append(BasicBlock(c, width, stride if i == 0 else 1, rngs=rngs))
                c = width
        self.blocks = nnx.List(blocks)
        self.linear = nnx.Linear(64, n_classes, rngs=rngs)

    def __call__(self, x):
        out = jax.nn.relu(self.bn1(self.conv1(x)))
        for block in self.blocks:
            out = block(out)
        return self.linear(out.mean(axis=(1, 2)))
