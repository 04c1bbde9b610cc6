"""geomopt: JAX reference implementations of three 2026 papers.

Subpackages: :mod:`geomopt.optim` (SignSGD, Signum, Muon), :mod:`geomopt.problems`
(synthetic sparse/dense-noise problems), plus shared primitives :mod:`geomopt.plotting` and
:mod:`geomopt.nn`; every experiment is a :class:`geomopt.experiment.Experiment` listed in
:mod:`geomopt.registry`, and :mod:`geomopt.experiment` also reads and writes run folders.
"""

__version__ = "0.1.0"
