"""Fetch and verify an image data set of the vision experiments into the cache. A tool, not an
experiment:

    uv run experiments/prepare_images.py {cifar10|mnist|mnist_rot} [--folder DIR] [--url URL]

CIFAR-10 (the python batches, MD5-checked, for ``signsgd/resnet_noise paper``), MNIST (the four
IDX files, MD5-checked, for ``canon/rotated_digits --data mnist``) or the official rotated MNIST
(checked by its content, for ``canon/rotated_digits paper``). DIR defaults to
$XDG_CACHE_HOME/geomopt/<data set> (~/.cache/geomopt/<data set>), where the experiments look; a
verified file already there is not fetched again, and one placed there by hand is used once it
verifies. ``--url`` replaces the download address (a mirror; for MNIST a folder URL ending in
/). Errors are one line; --debug (or GEOMOPT_DEBUG=1) prints the traceback.
"""

import dataclasses
import sys
from typing import Literal

import tyro

from geomopt.experiment import tool_main

NEXT = {
    "cifar10": "uv run experiments/signsgd/resnet_noise.py paper",
    "mnist": "uv run experiments/canon/rotated_digits.py quick --data mnist --n-train 10000 "
    "--n-val 2000 --n-test 10000 --n-distance 2000",
    "mnist_rot": "uv run experiments/canon/rotated_digits.py paper",
}


@dataclasses.dataclass(frozen=True)
class Config:
    dataset: tyro.conf.Positional[Literal["cifar10", "mnist", "mnist_rot"]]
    """The data set."""
    folder: str = ""
    """Cache folder; empty: $XDG_CACHE_HOME/geomopt/<data set>."""
    url: str = ""
    """Download address instead of the default (a mirror)."""


def main(cfg: Config) -> int:
    from geomopt import vision

    folder = cfg.folder or None
    if cfg.dataset == "cifar10":
        data = vision.fetch_cifar10(folder, **({"urls": [cfg.url]} if cfg.url else {}))
    elif cfg.dataset == "mnist":
        data = vision.fetch_mnist(folder, **({"mirrors": [cfg.url]} if cfg.url else {}))
    else:
        data = vision.fetch_mnist_rot(folder, **({"urls": [cfg.url]} if cfg.url else {}))
    sizes = ", ".join(f"{k} {len(v)} images {tuple(v.x.shape[1:])}" for k, v in data.items())
    print(f"{cfg.dataset} is ready and verified: {sizes}. Next:\n  {NEXT[cfg.dataset]}")
    return 0


if __name__ == "__main__":
    sys.exit(tool_main("prepare_images.py", main, lambda argv: tyro.cli(
        Config, args=argv, description=__doc__)))  # fmt: skip
