"""The experiment layer: one type, one runner, its folder rules, CLI, plotting and reproduction.

A tiny pure-Python experiment stands in for the real ones (their smoke presets are tested in each
family's ``test_exp_*.py``), so these tests check the runner's rules, not any science.
"""

import dataclasses
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from geomopt import experiment as ex
from geomopt.experiment import (
    Experiment,
    Run,
    RunBusyError,
    RunError,
    RunExistsError,
    _execute,  # noqa: F401  (ex._execute)
    execute,
    load_metrics,
    main,
    parse,
    plot_run,
    read_run,
)


@dataclasses.dataclass(frozen=True)
class Cfg:
    n: int = 3
    """Number of steps."""
    scale: float = 1.0
    """A factor."""
    interrupt_at: int = -1
    """Raise KeyboardInterrupt at this step (tests only)."""


def _validate(cfg: Cfg) -> None:
    if cfg.n < 1:
        raise ValueError(f"n={cfg.n}: expected >= 1")


def _run(cfg: Cfg, run: Run) -> dict[str, float]:
    done = len(run.metrics())
    for i in run.progress(range(done, cfg.n), desc="steps"):
        if i == cfg.interrupt_at:
            raise KeyboardInterrupt
        run.log(i, value=i * cfg.scale)
    run.details["resumed"] = run.resumed
    return {"total": sum(r["value"] for r in run.metrics()), "steps": len(run.metrics())}


def _plot(run_dir: Path, out: Path) -> list[Path]:
    record = read_run(run_dir)
    if not record.metrics:
        return []
    path = ex.figure_path(run_dir, out, "values")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([r["value"] for r in record.metrics]))
    return [path]


def make(resumable=False) -> Experiment:
    return Experiment(
        name="test/toy",
        description="a pure-Python test experiment",
        presets={"smoke": Cfg(n=2), "quick": Cfg(), "paper": Cfg(n=10)},
        run=_run,
        plot=_plot,
        validate=_validate,
        resumable=resumable,
    )


def test_folder_layout_provenance_headline_and_modes(tmp_path):
    old = os.umask(0o022)
    try:
        outcome = execute(make(), Cfg(), preset="quick", out=tmp_path, argv=["x.py", "quick"])
    finally:
        os.umask(old)
    path = tmp_path / "test" / "toy" / "quick"
    assert outcome.path == path and outcome.status == "ran"
    assert sorted(p.name for p in path.iterdir()) == [
        "config.json",
        "metrics.jsonl",
        "summary.json",
    ]
    for p in path.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
    config = json.loads((path / "config.json").read_text())
    assert config["config"] == {"n": 3, "scale": 1.0, "interrupt_at": -1}
    prov = config["provenance"]
    assert prov["command"] == "x.py quick"
    assert {"git_commit", "git_dirty", "versions", "devices", "started"} <= set(prov)
    assert {"python", "jax", "jaxlib", "optax", "flax", "equinox"} <= set(prov["versions"])
    summary = json.loads((path / "summary.json").read_text())
    assert summary["headline"] == {"total": 3.0, "steps": 3}
    assert outcome.headline == summary["headline"]


def test_invalid_config_creates_no_folder(tmp_path):
    with pytest.raises(ValueError, match="n=0"):
        execute(make(), Cfg(n=0), preset="quick", out=tmp_path)
    assert not (tmp_path / "test").exists()


def test_wrong_config_type_is_refused(tmp_path):
    with pytest.raises(TypeError, match="expected Cfg"):
        execute(make(), {"n": 3}, preset="quick", out=tmp_path)


def test_finished_run_is_never_replaced_without_overwrite(tmp_path):
    exp = make()
    execute(exp, Cfg(), preset="quick", out=tmp_path)
    with pytest.raises(RunExistsError, match="--overwrite"):
        execute(exp, Cfg(scale=2.0), preset="quick", out=tmp_path)
    reused = execute(exp, Cfg(), preset="quick", out=tmp_path, reuse=True)
    assert reused.status == "existing" and reused.headline["total"] == 3.0
    again = execute(exp, Cfg(scale=2.0), preset="quick", out=tmp_path, overwrite=True)
    assert again.status == "ran" and again.headline["total"] == 6.0
    beside = execute(exp, Cfg(), preset="quick", out=tmp_path, name="other")
    assert beside.path.name == "other"


def test_unfinished_run_is_removed_or_resumed(tmp_path):
    """An interrupted run leaves nothing in the run folder; a resumable one keeps its staging
    folder, which the same settings resume and other settings are refused for."""
    with pytest.raises(KeyboardInterrupt):
        execute(make(), Cfg(n=5, interrupt_at=3), preset="quick", out=tmp_path)
    path = tmp_path / "test" / "toy" / "quick"
    stage = ex.staging_folder(path)
    assert not path.exists() and not stage.exists()
    again = execute(make(), Cfg(n=5), preset="quick", out=tmp_path)  # nothing to refuse
    assert again.status == "ran" and again.headline["steps"] == 5
    with pytest.raises(KeyboardInterrupt):
        execute(make(resumable=True), Cfg(n=5, interrupt_at=3), preset="r", out=tmp_path)
    path, stage = (
        tmp_path / "test" / "toy" / "r",
        ex.staging_folder(tmp_path / "test" / "toy" / "r"),
    )
    assert not path.exists() and len(load_metrics(stage)) == 3
    with pytest.raises(RunExistsError, match="interrupt_at differ.*--overwrite to discard"):
        execute(make(resumable=True), Cfg(n=5), preset="r", out=tmp_path)
    # the same settings resume: the three logged rows are kept and two more are added
    with open(stage / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "val')  # a line cut short by the interruption
    cfg = Cfg(n=5, interrupt_at=3)
    # interrupt_at=3 is past: the run continues from step 3 only because rows 0..2 exist
    exp = dataclasses.replace(
        make(resumable=True), run=lambda c, r: _run(dataclasses.replace(c, interrupt_at=-1), r)
    )
    outcome = execute(exp, cfg, preset="r", out=tmp_path)
    assert outcome.status == "resumed" and outcome.path == path and not stage.exists()
    assert [r["step"] for r in load_metrics(path)] == [0, 1, 2, 3, 4]
    assert read_run(path).details["resumed"] is True


def test_unfinished_run_of_an_older_version_is_refused_resumed_or_rerun(tmp_path):
    """A run folder without summary.json (left by an older geomopt) is resumed in place when the
    experiment can, refused naming --overwrite otherwise, and rerun by reproduce (reuse)."""
    path = tmp_path / "test" / "toy" / "quick"
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"experiment": "test/toy", "config": {
        "n": 3, "scale": 1.0, "interrupt_at": -1}}))  # fmt: skip
    (path / "metrics.jsonl").write_text('{"step": 0, "value": 0.0}\n')
    with pytest.raises(RunExistsError, match="cannot resume; pass --overwrite"):
        execute(make(), Cfg(), preset="quick", out=tmp_path)
    with pytest.raises(RunExistsError, match="scale differ"):
        execute(make(), Cfg(scale=2.0), preset="quick", out=tmp_path)
    assert execute(make(), Cfg(), preset="quick", out=tmp_path, reuse=True).status == "ran"
    assert len(load_metrics(path)) == 3
    (path / "summary.json").unlink()
    resumed = execute(make(resumable=True), Cfg(), preset="quick", out=tmp_path)
    assert resumed.status == "resumed" and len(load_metrics(path)) == 3


def test_interrupted_or_failed_overwrite_keeps_the_finished_run(tmp_path):
    exp = make()
    execute(exp, Cfg(), preset="quick", out=tmp_path)
    path = tmp_path / "test" / "toy" / "quick"
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    with pytest.raises(KeyboardInterrupt):
        execute(exp, Cfg(n=5, interrupt_at=2), preset="quick", out=tmp_path, overwrite=True)
    boom = dataclasses.replace(exp, run=lambda c, r: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        execute(boom, Cfg(), preset="quick", out=tmp_path, overwrite=True)
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before
    assert sorted(p.name for p in path.parent.iterdir()) == [".quick.lock", "quick"]
    again = execute(exp, Cfg(scale=2.0), preset="quick", out=tmp_path, overwrite=True)
    assert again.headline["total"] == 6.0 and read_run(path).headline["total"] == 6.0


def test_a_second_process_writing_the_same_run_is_refused(tmp_path):
    seen = {}

    def run(cfg, run):
        with pytest.raises(RunBusyError, match="another process .*pid") as err:
            execute(make(), Cfg(), preset="quick", out=tmp_path, overwrite=True)
        seen["error"] = str(err.value)
        return {"x": 1.0}

    execute(dataclasses.replace(make(), run=run), Cfg(), preset="quick", out=tmp_path)
    assert "--name NAME" in seen["error"]
    assert execute(make(), Cfg(), preset="quick", out=tmp_path, overwrite=True).status == "ran"


def test_an_interrupted_final_rename_is_completed(tmp_path):
    """A finished run still in its staging folder (the rename was cut short) is moved in."""
    exp = make()
    done = execute(exp, Cfg(scale=2.0), preset="quick", out=tmp_path)
    stage = ex.staging_folder(done.path)
    os.replace(done.path, stage)
    again = execute(exp, Cfg(scale=2.0), preset="quick", out=tmp_path, reuse=True)
    assert again.status == "existing" and again.headline["total"] == 6.0 and not stage.exists()


def test_out_must_be_a_writable_folder(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for bad, why in ((afile, "is a file"), (afile / "sub", "cannot create"),
                     (Path("/proc/geomopt-test"), "cannot")):  # fmt: skip
        assert main(make(), ["smoke", "--out", str(bad)]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--out {bad}" in err[0] and why in err[0], err
    from geomopt import reproduce

    assert reproduce.main(["smoke", "--only", "signsgd/toy", "--out", str(afile)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a file" in err[0], err


def test_errors_are_one_line_and_tracebacks_need_debug(tmp_path, capsys):
    boom = dataclasses.replace(make(), run=lambda c, r: {}["missing"])
    assert main(boom, ["smoke", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["test/toy: error: KeyError: 'missing' (run with --debug for the traceback)"]
    assert main(boom, ["smoke", "--out", str(tmp_path), "--debug"]) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err
    main(make(), ["smoke", "--out", str(tmp_path)])
    capsys.readouterr()
    assert main(make(), ["smoke", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "finished run; pass --overwrite" in err[0]


def test_truncated_or_corrupt_files_are_named(tmp_path):
    execute(make(), Cfg(), preset="quick", out=tmp_path)
    path = tmp_path / "test" / "toy" / "quick"
    with open(path / "metrics.jsonl", "a") as f:
        f.write('{"step": 9, "va')
    with pytest.raises(RunError, match=r"metrics.jsonl: line 4 is truncated"):
        read_run(path)
    (path / "metrics.jsonl").write_text('{"a": 1}\nnot json\n{"a": 2}\n')
    with pytest.raises(RunError, match="line 2 is not valid JSON"):
        load_metrics(path)
    (path / "config.json").write_text("{broken")
    with pytest.raises(RunError, match=r"config.json: corrupt JSON"):
        read_run(path)


def test_plot_run_errors_name_the_folder_and_a_command_that_works(tmp_path):
    exp = make()
    with pytest.raises(RunError, match="no such run folder"):
        plot_run(exp, tmp_path / "missing", tmp_path / "fig")
    path = tmp_path / "test" / "toy" / "quick"  # an unfinished run left by an older version
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({
        "experiment": "test/toy", "preset": "quick", "config": dataclasses.asdict(Cfg()),
        "provenance": {"argv": ["experiments/test/toy.py", "--out", str(tmp_path)]}}))  # fmt: skip
    with pytest.raises(RunError, match="unfinished run") as err:
        plot_run(exp, path, tmp_path / "fig")
    cmd = str(err.value).split("run it again with: ")[1].split()
    assert cmd[:3] == ["uv", "run", "experiments/test/toy.py"] and cmd.count("--overwrite") == 1
    assert main(exp, cmd[3:]) == 0  # the advised command works
    assert [f.name for f in plot_run(exp, path, tmp_path / "fig")] == ["values.png"]


def test_run_files_are_checked_for_content(tmp_path):
    """An empty summary, a config lacking a field, no metrics rows: named, never drawn/reused."""
    exp = make()
    path = execute(exp, Cfg(), preset="quick", out=tmp_path).path
    summary = (path / "summary.json").read_text()
    (path / "summary.json").write_text("{}")
    with pytest.raises(RunError, match=r"summary.json: no headline numbers"):
        plot_run(exp, path, tmp_path / "fig")
    with pytest.raises(RunExistsError, match="no headline numbers; pass --overwrite"):
        execute(exp, Cfg(), preset="quick", out=tmp_path)
    assert execute(exp, Cfg(), preset="quick", out=tmp_path, reuse=True).status == "ran"
    config = json.loads((path / "config.json").read_text())
    del config["config"]["scale"]
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(RunError, match=r"config.json: config lacks scale"):
        plot_run(exp, path, tmp_path / "fig")
    execute(exp, Cfg(), preset="quick", out=tmp_path, overwrite=True)
    (path / "metrics.jsonl").write_text("")
    with pytest.raises(RunError, match="metrics.jsonl: no rows"):
        plot_run(exp, path, tmp_path / "fig")
    assert summary


def test_parse_presets_positional_optional_and_fields_overridable():
    exp = make()
    preset, cfg, opts = parse(exp, [])
    assert preset == "quick" and cfg == Cfg() and opts.out == Path("results")
    preset, cfg, opts = parse(exp, ["paper", "--scale", "2.5", "--out", "/tmp/o", "--overwrite"])
    assert preset == "paper" and cfg == Cfg(n=10, scale=2.5)
    assert opts.out == Path("/tmp/o") and opts.overwrite and opts.name is None
    with pytest.raises(SystemExit, match="unknown preset 'nope'"):
        parse(exp, ["nope"])


def test_main_prints_headline_and_figures(tmp_path, capsys):
    assert main(make(), ["smoke", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "test/toy" in out and "total" in out and "values_smoke.png" in out
    assert main(make(), ["smoke", "--out", str(tmp_path)]) == 1
    assert "--overwrite" in capsys.readouterr().err


def test_main_ctrl_c_prints_one_line_whose_command_continues(tmp_path, capsys):
    argv = ["--interrupt-at", "1", "--out", str(tmp_path)]
    code = main(make(resumable=True), argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 130 and "Traceback" not in "\n".join(err)
    assert (
        err[-1].startswith("interrupted: the unfinished run is kept in")
        and "resume with: uv run" in err[-1]
    )
    main(make(), ["smoke", "--out", str(tmp_path)])
    capsys.readouterr()
    code = main(make(), ["smoke", *argv, "--overwrite"])
    last = capsys.readouterr().err.splitlines()[-1]
    assert code == 130 and last.count("--overwrite") == 1, last
    assert "the finished run there is unchanged" in last


def test_experiment_declaration_is_checked():
    with pytest.raises(ValueError, match="<family>/<name>"):
        dataclasses.replace(make(), name="toy")
    with pytest.raises(ValueError, match="smoke"):
        dataclasses.replace(make(), presets={"quick": Cfg()})

    @dataclasses.dataclass(frozen=True)
    class Clash:
        out: int = 1

    with pytest.raises(TypeError, match="clash"):
        dataclasses.replace(make(), presets={"smoke": Clash(), "quick": Clash()})

    @dataclasses.dataclass
    class Mutable:
        n: int = 1

    with pytest.raises(TypeError, match="frozen"):
        dataclasses.replace(make(), presets={"smoke": Mutable(), "quick": Mutable()})


def test_headline_must_be_flat_numbers(tmp_path):
    bad = dataclasses.replace(make(), run=lambda c, r: {"a": {"nested": 1}})
    with pytest.raises(TypeError, match=r"headline\['a'\]"):
        execute(bad, Cfg(), preset="quick", out=tmp_path)


def test_progress_rate_excludes_the_compiling_update():
    bar = ex.Progress(total=5, desc="d=64, seed 3/16", warmup=1, enabled=True)
    assert "compiling" in bar.bar.desc
    bar.update(1)
    assert bar.bar.initial == 1 and bar.bar.desc.startswith("d=64, seed 3/16")
    bar.update(2, loss=0.5)
    assert bar.bar.n == 3 and bar.bar.format_dict["initial"] == 1
    bar.close()


def test_progress_eta_never_includes_compilation():
    """A first step of 27 s (compiling) then 1 s per step: the rate shown is 1 step/s from the
    first line on, and the ETA of the remaining steps counts 1 s each."""
    clock = {"t": 1000.0}
    bar = ex.Progress(total=10, desc="fit", warmup=1, enabled=True)
    tq = bar.bar
    tq._time = lambda: clock["t"]
    tq.start_t = tq.last_print_t = clock["t"]
    tq.mininterval, tq.miniters = 0, 1
    lines = []
    real_refresh = tq.refresh
    tq.refresh = lambda *a, **k: (lines.append(str(tq)), real_refresh(*a, **k))[1]
    clock["t"] += 27.3
    bar.update(1)
    assert "27" not in lines[-1], lines[-1]  # no rate or ETA from the compiling step
    for _ in range(4):
        clock["t"] += 1.0
        bar.update(1)
    d = tq.format_dict
    rate = d["rate"] if d["rate"] else (d["n"] - d["initial"]) / d["elapsed"]
    assert rate == pytest.approx(1.0, rel=0.01)
    assert "00:05" in lines[-1] and "27" not in lines[-1], lines[-1]  # 5 steps left
    bar.close()


def test_quiet_progress_draws_nothing(capsys):
    bar = ex.Progress(total=3, desc="x", enabled=False)
    bar.update(1)
    bar.update(2, loss=1.0)
    assert bar.bar.n == 0  # a disabled tqdm bar keeps no count
    bar.close()
    assert capsys.readouterr().err == ""


def test_cache_dir_is_keyed_by_content(tmp_path):
    run = Run(
        tmp_path, experiment=make(), config=Cfg(), preset="quick", out=tmp_path, resumed=False
    )
    a = run.cache_dir("model", {"steps": 10, "width": 32})
    b = run.cache_dir("model", {"width": 32, "steps": 10})
    c = run.cache_dir("model", {"steps": 11, "width": 32})
    assert a == b != c and json.loads((a / "key.json").read_text())["steps"] == 10


def test_registered_experiments_load_and_parse_without_jax():
    """Every entry point's --help path (import + parse) must not import JAX (it takes seconds)."""
    code = (
        "import sys\n"
        "from geomopt.registry import load_all\n"
        "from geomopt.experiment import parse\n"
        "exps = load_all()\n"
        "for e in exps:\n"
        "    for p in e.presets:\n"
        "        parse(e, [p])\n"
        "bad = [m for m in ('jax', 'jaxlib', 'flax', 'equinox', 'optax') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "print(len(exps))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) >= 1


def test_plot_main_names_missing_runs_and_exits_nonzero(tmp_path, capsys):
    exp = make()
    assert ex.plot_main([exp], ["test/toy", "--out", str(tmp_path)]) == 1
    assert "no such run folder" in capsys.readouterr().err
    assert ex.plot_main([exp], ["nope/x", "--out", str(tmp_path)]) == 2
    execute(exp, Cfg(), preset="quick", out=tmp_path)
    assert ex.plot_main([exp], ["test/toy", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "figures" / "test" / "values.png").exists()


def test_reproduce_runs_reuses_and_reports_failures(tmp_path, capsys):
    from geomopt import reproduce

    good = make()
    bad = dataclasses.replace(
        make(), name="test/broken", run=lambda c, r: (_ for _ in ()).throw(RuntimeError("boom"))
    )
    results = reproduce.reproduce([good, bad], preset="smoke", out=tmp_path)
    assert [(r.name, r.status) for r in results] == [("test/toy", "ran"), ("test/broken", "FAILED")]
    assert results[1].error.startswith("RuntimeError: boom (traceback: ")
    assert "Traceback" not in capsys.readouterr().err  # saved to a file, not printed
    log = tmp_path / "errors" / "test_broken.txt"
    assert "Traceback (most recent call last)" in log.read_text()
    md = (tmp_path / "summary.md").read_text()
    seconds = json.loads((tmp_path / "test/toy/smoke/summary.json").read_text())["seconds"]
    assert f"| [test/toy](#testtoy) | ran | {seconds:.1f} s |" in md  # the run's own time
    assert "| `total` | 1 |" in md and "FAILED: RuntimeError: boom" in md
    assert "- commit: " in md and "- date: 20" in md and "CPUs" in md
    assert "[values_smoke.png](figures/test/values_smoke.png)" in md  # relative links
    assert "run folder: [test/toy/smoke](test/toy/smoke/)" in md
    again = reproduce.reproduce([good], preset="smoke", out=tmp_path)
    assert again[0].status == "existing" and again[0].outcome.headline["total"] == 1.0
    assert again[0].seconds == seconds
    assert json.loads((tmp_path / "summary.json").read_text())["results"][0]["status"] == "existing"
    with pytest.raises(ValueError, match=r"\['gfm'\] matches no experiment or family"):
        reproduce.select([good], ["gfm"])
    assert reproduce.select([good, bad], ["test/broken"]) == [bad]
    assert reproduce.select([good, bad], ["test"]) == [good, bad]  # a family


def test_reproduce_only_matches_names_and_families_exactly(capsys):
    from geomopt import reproduce

    toy, toy_big = make(), dataclasses.replace(make(), name="test/toy_big")
    other = dataclasses.replace(make(), name="other/toy")
    exps = [toy, toy_big, other]
    assert reproduce.select(exps, ["test/toy"]) == [toy]  # not test/toy_big
    assert reproduce.select(exps, ["test/toy_big", "other"]) == [toy_big, other]
    for prefix in ("test/to", "tes", "test/"):
        with pytest.raises(ValueError, match="matches no experiment or family"):
            reproduce.select(exps, [prefix])
    # --list lists what --only chose
    assert reproduce.main(["--list", "--only", "canon/stability", "signsgd"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert "canon/stability" in names and "signsgd/toy" in names
    assert all(n == "canon/stability" or n.startswith("signsgd/") for n in names), names
    assert reproduce.main(["--list", "--only", "canon/stab"]) == 2
    assert "matches no experiment" in capsys.readouterr().err


def test_reproduce_reruns_a_run_whose_config_differs(tmp_path, capsys):
    from geomopt import reproduce

    (first,) = reproduce.reproduce([make()], preset="smoke", out=tmp_path)
    assert first.status == "ran" and first.stale == ""
    changed = dataclasses.replace(make(), presets={**make().presets, "smoke": Cfg(n=4)})
    (r,) = reproduce.reproduce([changed], preset="smoke", out=tmp_path)
    assert r.status == "ran" and r.outcome.headline == {"total": 6.0, "steps": 4}
    assert r.stale == "its config differs from the requested one (n)"
    assert "test/toy: ran again: its config differs" in capsys.readouterr().err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["results"][0]["stale"] == r.stale
    (same,) = reproduce.reproduce([changed], preset="smoke", out=tmp_path)
    assert same.status == "existing" and same.stale == ""


EXP_MODULE = """
import dataclasses

from geomopt.experiment import Experiment


@dataclasses.dataclass(frozen=True)
class Cfg:
    n: int = 1


def run(cfg, run):
    run.log(0, value=1.0)
    return {"value": VALUE}


EXPERIMENT = Experiment("test/coded", "a test experiment in its own module",
                        presets={"smoke": Cfg(), "quick": Cfg()}, run=run)
"""


def test_reproduce_reruns_a_run_whose_code_changed(tmp_path, monkeypatch):
    """The issue's case: a code change to the experiment after its run (committed or not) is
    never reported with the old headline; the reason names the changed module."""
    import importlib

    from geomopt import reproduce

    src = tmp_path / "src"
    src.mkdir()
    monkeypatch.syspath_prepend(str(src))
    module = src / "geomopt_test_coded_exp.py"

    def load(value):
        module.write_text(EXP_MODULE.replace("VALUE", value))
        sys.modules.pop(module.stem, None)
        importlib.invalidate_caches()
        return importlib.import_module(module.stem).EXPERIMENT

    out = tmp_path / "out"
    exp = load("1.0")
    assert reproduce.reproduce([exp], preset="smoke", out=out)[0].status == "ran"
    assert reproduce.reproduce([exp], preset="smoke", out=out)[0].status == "existing"
    exp = load("2.0")  # the experiment's code changed: rerun, not the old headline
    (r,) = reproduce.reproduce([exp], preset="smoke", out=out)
    assert r.status == "ran" and r.outcome.headline == {"value": 2.0}
    assert r.stale == f"the experiment's code changed since it ran ({module.stem})"
    # a run recorded by an older geomopt (no fingerprint) is not trusted either
    config = out / "test" / "coded" / "smoke" / "config.json"
    record = json.loads(config.read_text())
    del record["code"]
    config.write_text(json.dumps(record))
    (r,) = reproduce.reproduce([exp], preset="smoke", out=out)
    assert r.status == "ran" and "records no code fingerprint" in r.stale


def test_reproduce_reruns_an_unfinished_run_that_cannot_resume(tmp_path):
    from geomopt import reproduce

    path = tmp_path / "test" / "toy" / "smoke"  # left unfinished by an older geomopt
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"experiment": "test/toy", "config": {}}))
    (path / "summary.json").write_text("{}")  # and a corrupt summary: rerun too
    (r,) = reproduce.reproduce([make()], preset="smoke", out=tmp_path)
    assert r.status == "ran" and r.outcome.headline == {"total": 1.0, "steps": 2}


def test_reproduce_overall_eta_from_measured_runtimes(monkeypatch):
    clock = {"t": 0.0}
    monkeypatch.setattr(time, "monotonic", lambda: clock["t"])
    bar = ex.OverallProgress([10.0, 20.0, None], desc="r", enabled=False)
    bar.start(0, "a")
    assert bar.eta() == 10 + 20 + bar.DEFAULT_ESTIMATE
    clock["t"] = 4.0
    assert bar.eta() == 6 + 20 + bar.DEFAULT_ESTIMATE
    clock["t"] = 20.0
    bar.finish(20.0, ran=True)  # this machine is twice slower than the estimates
    bar.start(1, "b")
    clock["t"] = 30.0
    assert bar.eta() == 2 * (20 - 5) + 2 * bar.DEFAULT_ESTIMATE
    bar.finish(0.0, ran=False)  # a reused run does not rescale
    assert bar.scale() == 2.0


def test_reproduce_cli_lists_without_running(capsys):
    from geomopt import reproduce

    assert reproduce.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "signsgd/toy" in out and "smoke" in out
    assert reproduce.main(["smoke", "--only", "no/such"]) == 2


def test_nested_config_fields_keep_their_prefix():
    @dataclasses.dataclass(frozen=True)
    class Inner:
        lr: float = 0.1
        """Step size."""

    @dataclasses.dataclass(frozen=True)
    class Outer:
        seeds: int = 2
        """Seeds."""
        optim: Inner = Inner()
        """Optimiser."""

    exp = dataclasses.replace(make(), presets={"smoke": Outer(), "quick": Outer()}, validate=None)
    _, cfg, _ = parse(exp, ["--seeds", "5", "--optim.lr", "0.3"])
    assert cfg == Outer(seeds=5, optim=Inner(lr=0.3))


def test_other_hosts_leave_the_run_folder_to_process_zero(tmp_path, monkeypatch):
    """In a multi-host run only process 0 creates, replaces and writes the folder."""
    execute(make(), Cfg(), preset="quick", out=tmp_path)
    path = tmp_path / "test" / "toy" / "quick"
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    monkeypatch.setattr(ex._execute, "_process_index", lambda: 1)
    outcome = execute(make(), Cfg(scale=3.0), preset="quick", out=tmp_path, overwrite=True)
    assert outcome.status == "ran"
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before
    other = execute(make(), Cfg(), preset="quick", out=tmp_path, name="fresh")
    assert other.status == "ran" and not other.path.exists()


def test_tools_report_errors_in_one_line(tmp_path, capsys):
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(
        "sample_tool", root / "experiments" / "signsgd" / "sample.py"
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    argv = ["--source", str(tmp_path / "none")]
    assert ex.tool_main("sample.py", tool.main, tool.parse, argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"sample.py: error: {tmp_path / 'none'}"), err
    assert ex.tool_main("sample.py", tool.main, tool.parse, [*argv, "--debug"]) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_committed_figures_go_to_the_repository_folders():
    """``plot.py --update-committed`` writes where the READMEs show the figures: every
    experiment's figures_dir is an existing folder at the top of the checkout."""
    from geomopt.experiment._cli import committed_figures_dir
    from geomopt.registry import load_all

    root = Path(__file__).resolve().parents[1]
    with_figures = [e for e in load_all() if e.figures_dir]
    assert with_figures
    for exp in with_figures:
        assert committed_figures_dir(exp) == root / exp.figures_dir
        assert committed_figures_dir(exp).is_dir(), exp.name
