"""benchmarks/device_check.py cannot rot: its dry run (the device run's code paths at tiny
sizes, on the CPU) writes every section of the report, in a Python where the packages the
device image lacks (tyro, trimesh, ott-jax, tensorboardX, matplotlib) cannot be imported; a
failing section is reported and does not lose the others; a run that imported one of those
packages fails; the MD/JSON report exists after every section. (The whole dry run, every
section, runs in CI: `.ci/run`.)"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "benchmarks" / "device_check.py"
ABSENT_ON_DEVICE = ("tyro", "trimesh", "ott", "tensorboardX", "matplotlib")


def run_dry(out: Path, *extra: str, block=ABSENT_ON_DEVICE) -> tuple[int, dict, str]:
    """Run the dry run in a fresh Python (no conftest flags) with ``block`` unimportable."""
    code = (
        "import runpy, sys\n"
        f"for m in {tuple(block)!r}: sys.modules[m] = None\n"
        f"sys.argv = ['device_check.py', '--dry-run', '--out', {str(out)!r}, *{list(extra)!r}]\n"
        f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600
    )
    report = json.loads((out / "device_report.json").read_text())
    return proc.returncode, report, proc.stdout + proc.stderr


def test_core_sections_without_the_packages_the_device_lacks(tmp_path):
    code, report, log = run_dry(tmp_path, "--only", "environment", "rates", "hilbert", "muon")
    assert code == 0, log
    sections = report["sections"]
    for name in ("environment", "rates", "hilbert", "muon"):
        assert sections[name]["status"] == "ok", sections[name]
    assert "gpt2" not in sections
    assert sections["rates"]["results"]["matmul_bf16_tflops"] > 0
    goals = {g["goal"]: g for g in report["goals"]}
    assert len(goals) == 2 and all("dry run" in g["note"] for g in goals.values())
    md = (tmp_path / "device_report.md").read_text()
    assert "DRY RUN" in md and "## hilbert: ok" in md and "dry run on the CPU" in md


def test_a_failing_section_is_reported_and_the_others_still_run(tmp_path):
    # without optax the muon section fails; the sections after it must still run
    code, report, log = run_dry(
        tmp_path, "--only", "environment", "muon", "hilbert", block=(*ABSENT_ON_DEVICE, "optax")
    )
    assert code == 1, log
    assert report["sections"]["muon"]["status"] == "error"
    assert "optax" in report["sections"]["muon"]["error"]
    assert report["sections"]["hilbert"]["status"] == "ok"
    assert "## muon: error" in (tmp_path / "device_report.md").read_text()


def test_a_run_that_imports_a_package_the_device_lacks_fails(tmp_path):
    # tyro importable (not blocked) and imported by a section: the dry run must say so and fail
    code = (
        "import runpy, sys, types\n"
        f"sys.argv = ['device_check.py', '--dry-run', '--out', {str(tmp_path)!r}, '--only',"
        " 'environment']\n"
        "sys.modules['tyro'] = types.ModuleType('tyro')\n"
        f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    done = json.loads((tmp_path / "device_report.json").read_text())["sections"]["done"]
    assert done["status"] == "error" and done["results"]["imported_absent_on_device"] == ["tyro"]
