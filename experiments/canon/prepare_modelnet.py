"""Download, check and unpack the 2048-point ModelNet40 HDF5 archive (about 435 MB), and derive
ModelNet10 from it as the official code does. A tool, not an experiment:

    uv run experiments/canon/prepare_modelnet.py [--dataset modelnet40|modelnet10]
        [--cache-dir DIR] [--url URL]

The data goes to DIR/modelnet40_ply_hdf5_2048/ (and DIR/modelnet10_ply_hdf5_2048/); DIR defaults
to $XDG_CACHE_HOME/geomopt/modelnet (~/.cache/geomopt/modelnet). A broken download resumes
where it stopped when the same command is run again; a verified folder is reused. At the end it
prints the commands that read the data. The work happens in geomopt.canon.prepare_modelnet.
Errors are one line; --debug (or GEOMOPT_DEBUG=1) prints the traceback.
"""

import dataclasses
import sys
from typing import Literal

import tyro

from geomopt.canon import MODELNET40_URL
from geomopt.experiment import tool_main


@dataclasses.dataclass(frozen=True)
class Config:
    dataset: Literal["modelnet40", "modelnet10"] = "modelnet40"
    """modelnet40: the archive itself; modelnet10: also the ten ModelNet10 classes taken out
    of it and relabelled 0..9 (the official ModelNet10 HDF5 is built from ModelNet40 meshes)."""
    cache_dir: str = ""
    """Folder for the data; empty: $XDG_CACHE_HOME/geomopt/modelnet (~/.cache/geomopt/modelnet)."""
    url: str = MODELNET40_URL
    """Where modelnet40_ply_hdf5_2048.zip comes from (default: the Hugging Face mirror; the
    original, often unreachable: https://shapenet.cs.stanford.edu/media/modelnet40_ply_hdf5_2048.zip)."""
    retries: int = 5
    """Retries after a dropped connection within one run (each resumes where it stopped)."""


def main(cfg: Config) -> int:
    from geomopt.canon import next_commands, prepare_modelnet

    if cfg.retries < 0:
        raise ValueError(f"retries={cfg.retries}: expected an integer >= 0")
    root = prepare_modelnet(cfg.dataset, cfg.cache_dir or None, cfg.url, retries=cfg.retries)
    print(f"{cfg.dataset} is ready under {root}. Next:")
    for command in next_commands(cfg.dataset, root):
        print(f"  {command}")
    return 0


if __name__ == "__main__":
    sys.exit(tool_main("prepare_modelnet.py", main, lambda argv: tyro.cli(
        Config, args=argv, description=__doc__)))  # fmt: skip
