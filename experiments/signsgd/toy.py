"""The paper's two toy experiments with their exact settings.

``uv run experiments/signsgd/toy.py [smoke|quick|paper]``.

Intentionally short: the work happens in :func:`geomopt.problems.experiments.run_toy`.
"""

from geomopt.cli import preset_cli
from geomopt.problems.experiments import TOY_PRESETS, run_toy

if __name__ == "__main__":
    path = run_toy(preset_cli(TOY_PRESETS, default="quick", description=__doc__))
    print(f"run folder: {path}  (figures: uv run experiments/signsgd/plot.py)")
