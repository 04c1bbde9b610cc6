"""The three recipes of the README's "Extending geomopt", each run as written there: a new
optimiser, your own score in GFM, a new experiment. If one fails, fix the code or the README."""

import dataclasses
import json
from pathlib import Path

import numpy as np

from geomopt.experiment import read_run


def test_recipe_a_new_optimiser(tmp_path, fresh_registry):
    # --- recipe (README, "A new optimiser") ---
    from geomopt import optim
    from geomopt.experiment import execute
    from geomopt.problems import exp_toy

    def signum_wd(learning_rate, momentum=0.9, weight_decay=1e-2):
        """Signum with decoupled weight decay."""
        return optim.signum(learning_rate, momentum=momentum, weight_decay=weight_decay)

    optim.register_optimizer("signum_wd", signum_wd)
    cfg = dataclasses.replace(
        exp_toy.EXPERIMENT.presets["smoke"],
        methods=("sgd", "signsgd", "signum_wd"),
        noisy_lrs=(1e-3, 1e-2, 1e-2),
    )
    outcome = execute(exp_toy.EXPERIMENT, cfg, preset="smoke", out=tmp_path, name="signum_wd")
    print(outcome.headline["noisy/signum_wd/final_mean_loss"])
    # --- end of recipe ---
    head = outcome.headline
    for m in cfg.methods:
        assert np.isfinite(head[f"noisy/{m}/final_mean_loss"]), m
    assert head["noisy/signum_wd/final_mean_loss"] != head["noisy/signsgd/final_mean_loss"]
    # the figures label a method without a legend name by its name (no KeyError)
    figures = exp_toy.EXPERIMENT.plot(outcome.path, tmp_path / "figures")
    assert len(figures) == 2 and all(f.exists() for f in figures)
    rows = read_run(outcome.path).metrics
    assert {r["opt"] for r in rows} == set(cfg.methods)


def test_recipe_your_own_score_in_gfm():
    # --- recipe (README, "Your own score in GFM") ---
    import jax.numpy as jnp

    from geomopt import gfm

    def score(x):
        """grad log p of one point, (d,) -> (d,): a Gaussian well at (0.5, 1) of width 0.5."""
        return -(x - jnp.array([0.5, 1.0])) / 0.25

    x0, x1 = jnp.array([0.0, 0.0]), jnp.array([1.0, 0.0])
    path, report = gfm.solve(x0, x1, score=score, lam=1.0, n_points=16)
    print(report.status, report.residual, report.tol)
    metrics = gfm.path_metrics(path, score=score, lam=report.lam)
    # --- end of recipe ---
    assert report.converged and report.residual <= report.tol
    assert (report.lam, report.n_points) == (1.0, 16)
    assert float(metrics["el_residual"]) <= 2 * report.tol
    mid = np.asarray(path)[8]
    assert 0.2 < mid[1] < 1.0  # the well pulls the path up from the chord y = 0


RECIPE_EXPERIMENT = '''
import dataclasses
from pathlib import Path

from geomopt.experiment import Experiment, Run, figure_path


@dataclasses.dataclass(frozen=True)
class MeanConfig:
    """The mean of n standard normal samples."""

    n: int = 1000
    """Number of samples."""
    seed: int = 0
    """Random seed."""


def run(cfg: MeanConfig, run: Run) -> dict[str, float]:
    import numpy as np

    x = np.random.default_rng(cfg.seed).normal(size=cfg.n)
    for i in run.progress(range(0, cfg.n, 100), desc="chunks"):
        run.log(i, running_mean=float(x[: i + 100].mean()))
    return {"mean": float(x.mean())}


def plot(run_dir: Path, out: Path) -> list[Path]:
    from geomopt import plotting
    from geomopt.experiment import read_run

    rows = read_run(run_dir).metrics
    fig, ax = plotting.figure()
    ax.plot([r["step"] for r in rows], [r["running_mean"] for r in rows])
    return [plotting.save(fig, figure_path(run_dir, out, "running_mean"))]


EXPERIMENT = Experiment(
    name="demo/mean",
    description="the running mean of normal samples",
    presets={"smoke": MeanConfig(n=200), "quick": MeanConfig()},
    run=run,
    plot=plot,
)
'''

RECIPE_ENTRY_POINT = """
import sys

from geomopt.experiment import main
from exp_mean import EXPERIMENT

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
"""


def test_recipe_a_new_experiment(tmp_path, monkeypatch):
    """The module of the recipe, and its entry point run as ``python mean.py smoke``."""
    import importlib
    import subprocess
    import sys

    src = tmp_path / "src"
    src.mkdir()
    (src / "exp_mean.py").write_text(RECIPE_EXPERIMENT)
    (src / "mean.py").write_text(RECIPE_ENTRY_POINT)
    monkeypatch.syspath_prepend(str(src))
    exp = importlib.import_module("exp_mean").EXPERIMENT
    out = tmp_path / "results"
    cmd = [sys.executable, str(src / "mean.py"), "smoke", "--out", str(out)]
    subprocess.run(cmd, check=True, cwd=tmp_path, capture_output=True, text=True)
    run_dir = out / "demo" / "mean" / "smoke"
    summary = json.loads((run_dir / "summary.json").read_text())
    samples = np.random.default_rng(0).normal(size=200)
    assert summary["headline"] == {"mean": float(samples.mean())}
    assert Path(out / "figures" / "demo" / "running_mean_smoke.png").exists()
    config = json.loads((run_dir / "config.json").read_text())
    assert "exp_mean" in config["code"]  # its source is fingerprinted for reproduce.py
    assert exp.name == "demo/mean"


def _readme_recipes() -> list[str]:
    """The python blocks of the README's "Extending geomopt" section, in order."""
    import re

    text = (Path(__file__).parents[1] / "README.md").read_text()
    section = text.split("\n## Extending geomopt\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_readme_shows_the_recipes_these_tests_run():
    """Every line of the README's recipes is a line the tests above run (up to indentation and
    the output folder, which is a temporary one here): edit both together."""
    blocks = _readme_recipes()
    assert len(blocks) == 4, f"expected 4 python blocks in 'Extending geomopt', got {len(blocks)}"
    optimiser, score, experiment, entry = blocks
    here = {line.strip() for line in Path(__file__).read_text().splitlines()}
    for block in (optimiser, score):
        for line in block.replace('out="results"', "out=tmp_path").splitlines():
            assert not line.strip() or line.strip() in here, f"README line not tested: {line!r}"
    assert experiment.strip() == RECIPE_EXPERIMENT.strip()
    entry = entry.replace("# experiments/demo/mean.py\n", "").replace(
        "geomopt.demo.exp_mean", "exp_mean"
    )
    assert entry.strip() == RECIPE_ENTRY_POINT.strip()
