import textwrap

import pytest

from geomopt.cli import preset_cli, resolve_preset
from geomopt.reproduce import Experiment, discover, run_all


def _write_registry(folder, body):
    folder.mkdir(parents=True)
    (folder / "registry.py").write_text(textwrap.dedent(body))


def test_discover_and_run_all(tmp_path):
    _write_registry(
        tmp_path / "exps" / "fam",
        """
        from pathlib import Path
        from geomopt.reproduce import Experiment

        def run(preset, root, overwrite):
            (root / "fam").mkdir(parents=True, exist_ok=True)
            (root / "fam" / "out.txt").write_text(preset)

        def plot(root, figures):
            figures.mkdir(parents=True, exist_ok=True)
            p = figures / "fam.txt"
            p.write_text((root / "fam" / "out.txt").read_text())
            return [p]

        def broken(preset, root, overwrite):
            raise RuntimeError("kaputt")

        EXPERIMENTS = [
            Experiment("fam/ok", "works", run, plot),
            Experiment("fam/broken", "fails", broken, plot),
        ]
        """,
    )
    exps = discover(tmp_path / "exps")
    assert [e.name for e in exps] == ["fam/ok", "fam/broken"]
    logs = []
    outcomes = run_all(exps, preset="quick", root=tmp_path / "res", log=logs.append)
    assert [o.status for o in outcomes] == ["ok", "FAILED"]
    assert "kaputt" in outcomes[1].error
    assert (tmp_path / "res" / "figures" / "fam.txt").read_text() == "quick"
    table = (tmp_path / "res" / "summary.md").read_text()
    assert "| fam/ok | ok |" in table and "| fam/broken | FAILED |" in table
    with pytest.raises(ValueError, match="matches no experiment"):
        run_all(exps, preset="quick", root=tmp_path / "res", only=("nope",))
    with pytest.raises(ValueError, match="preset 'fast'"):
        run_all(exps, preset="fast", root=tmp_path / "res")


def test_duplicate_names_rejected(tmp_path):
    body = """
        from geomopt.reproduce import Experiment
        EXPERIMENTS = [Experiment("x/y", "", lambda *a: None, lambda *a: [])]
        """
    _write_registry(tmp_path / "a", body)
    _write_registry(tmp_path / "b", body)
    with pytest.raises(ValueError, match="x/y"):
        discover(tmp_path)


def test_real_registries_import():
    from pathlib import Path

    exps = discover(Path(__file__).parents[1] / "experiments")
    assert all(isinstance(e, Experiment) for e in exps)


def test_preset_cli_defaults_and_overrides():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class C:
        lr: float = 1.0
        """Step size."""
        steps: int = 10
        """Steps."""

    presets = {"quick": ("q", C()), "paper": ("p", C(lr=0.5, steps=1000))}
    assert preset_cli(presets, default="quick", args=[]) == C()
    assert preset_cli(presets, default="quick", args=["--lr", "2"]) == C(lr=2.0)
    assert preset_cli(presets, default="quick", args=["paper", "--steps", "3"]) == C(0.5, 3)
    with pytest.raises(SystemExit, match="unknown preset 'fast'"):
        preset_cli(presets, default="quick", args=["fast"])
    with pytest.raises(ValueError, match="unknown preset 'x'"):
        resolve_preset(presets, "x")
