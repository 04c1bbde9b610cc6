"""The experiment type :class:`Experiment`: a name, frozen-dataclass presets, run and plot."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from geomopt.experiment._run import Run



C = TypeVar("C")

RESERVED_FIELDS = frozenset({"out", "name", "overwrite", "plot", "debug"})
"""Command-line options of the runner; a config may not have fields with these names."""

DEFAULT_OUT = Path("results")
REQUIRED_PRESETS = ("smoke", "quick")
PACKAGES = ("jax", "jaxlib", "optax", "flax", "equinox", "diffrax", "optimistix", "numpy", "tyro")


@dataclasses.dataclass(frozen=True)
class Experiment(Generic[C]):
    """One reproducible experiment.

    Attributes:
        name: ``"<family>/<name>"``, e.g. ``"gfm/paths"``; runs go to ``<out>/<name>/<run>``.
        description: one line saying what it shows.
        presets: frozen dataclass configs by preset name; ``smoke`` (seconds on a CPU) and
            ``quick`` (the CPU default) are required, ``paper`` holds the paper's settings.
        run: ``run(cfg, run) -> headline``; logs through ``run`` and returns the flat mapping
            of the numbers the READMEs quote (name -> number).
        plot: ``plot(run_dir, out) -> figures``; reads only the run folder, writes figures into
            ``out`` and returns their paths. ``None`` for experiments without figures.
        notes: a one-line description per preset for ``--help``.
        validate: optional ``validate(cfg)`` raising ``ValueError`` naming a bad field; called
            before the run folder is created.
        resumable: ``run`` continues an unfinished run (``run.resumed`` tells it so).
        figures_dir: repository folder of the committed figures (``experiments/<family>/
            figures``), written by ``plot`` only with ``--update-committed``.
        key_numbers: the few headline keys the final table shows (all headline keys stay in
            ``summary.json``); empty: the first four.
        paper: headline key -> the paper's (or its theory's) value, shown beside ours in the
            final table; ``paper_source`` says where it comes from (figure, table, theorem).
        seconds: preset -> measured runtime in seconds on a quiet 2-core CPU;
            ``reproduce.py`` uses it for its overall ETA.
    """

    name: str
    description: str
    presets: Mapping[str, C]
    run: Callable[[C, Run], Mapping[str, float]]
    plot: Callable[[Path, Path], Sequence[Path]] | None = None
    notes: Mapping[str, str] = dataclasses.field(default_factory=dict)
    validate: Callable[[C], None] | None = None
    resumable: bool = False
    figures_dir: str | None = None
    key_numbers: tuple[str, ...] = ()
    paper: Mapping[str, float] = dataclasses.field(default_factory=dict)
    paper_source: str = ""
    seconds: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        parts = self.name.split("/")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"experiment name {self.name!r}: expected '<family>/<name>'")
        missing = [p for p in REQUIRED_PRESETS if p not in self.presets]
        if missing:
            raise ValueError(f"experiment {self.name}: presets {missing} missing")
        types = {type(c) for c in self.presets.values()}
        if len(types) != 1:
            raise TypeError(f"experiment {self.name}: presets of several types {types}")
        (cls,) = types
        if not (dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen):
            raise TypeError(f"experiment {self.name}: presets must be frozen dataclasses")
        clash = RESERVED_FIELDS & {f.name for f in dataclasses.fields(cls)}
        if clash:
            raise TypeError(
                f"experiment {self.name}: config fields {sorted(clash)} clash with runner options"
            )

    @property
    def family(self) -> str:
        return self.name.split("/")[0]

    @property
    def config_type(self) -> type:
        return type(self.presets["quick"])

    def preset(self, name: str) -> C:
        if name not in self.presets:
            raise ValueError(
                f"{self.name}: unknown preset {name!r}; expected one of {sorted(self.presets)}"
            )
        return self.presets[name]
