"""Image data and small image classifiers shared by the vision experiments (rotated digits for
canonization, ResNet-20 noise density for SignSGD).

- data (:mod:`geomopt.vision._data`): :func:`sklearn_digits` (offline), :func:`fetch_mnist` /
  :func:`read_idx`, :func:`fetch_mnist_rot` / :func:`read_amat` (the official rotated MNIST),
  :func:`fetch_cifar10` / :func:`read_cifar10`, :func:`rotate`, :class:`ImageSet`,
  :class:`DataError`;
- training (:mod:`geomopt.vision._train`): :class:`Classifier` (one flax.nnx train loop),
  :func:`cross_entropy`, :func:`accuracy`.
"""

import lazy_loader as _lazy

__getattr__, __dir__, __all__ = _lazy.attach(
    __name__,
    submod_attrs={
        "_data": [
            "CIFAR10_URLS",
            "DataError",
            "ImageSet",
            "MNIST_FILES",
            "MNIST_MIRRORS",
            "MNIST_ROT_URLS",
            "fetch_cifar10",
            "fetch_mnist",
            "fetch_mnist_rot",
            "read_amat",
            "read_cifar10",
            "read_idx",
            "rotate",
            "sklearn_digits",
        ],
        "_train": [
            "Classifier",
            "accuracy",
            "cross_entropy",
        ],
    },
)
