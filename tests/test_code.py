"""geomopt.code: the source files an experiment's numbers come from (followed statically,
function-local and lazily attached imports included) and the modules changed since a run."""

import subprocess
import sys

from geomopt.code import RUNNER_MODULES, changed_modules, code_fingerprint, module_file
from geomopt.registry import load


def test_fingerprint_follows_local_and_lazy_imports():
    toy = code_fingerprint(load("geomopt.problems.exp_toy"))
    # exp_toy imports its numerics inside run(); _run imports the optimisers through the
    # lazily attached geomopt.optim
    assert {"geomopt.problems.exp_toy", "geomopt.problems._run", "geomopt.problems._separable",
            "geomopt.optim._sign"} <= set(toy)  # fmt: skip
    assert not set(toy) & RUNNER_MODULES
    assert not any(m.startswith(("geomopt.gfm", "geomopt.canon")) for m in toy)
    paths = code_fingerprint(load("geomopt.gfm.exp_paths"))
    lm = "geomopt.gfm.solvers._levenberg_marquardt"
    assert {"geomopt.gfm._residuals", lm, "geomopt.manifolds"} <= set(paths)
    assert all(len(h) == 64 for h in paths.values())


def test_changed_modules_names_what_changed():
    exp = load("geomopt.problems.exp_toy")
    recorded = code_fingerprint(exp)
    assert changed_modules(recorded, exp) == []
    edited = {**recorded, "geomopt.problems._run": "0" * 64}
    assert changed_modules(edited, exp) == ["geomopt.problems._run"]
    fewer = {k: v for k, v in recorded.items() if k != "geomopt.optim._sign"}
    assert changed_modules(fewer, exp) == ["geomopt.optim._sign"]  # used now, not then
    gone = {**recorded, "geomopt.no_such_module": "0" * 64}
    assert changed_modules(gone, exp) == ["geomopt.no_such_module"]
    assert module_file("geomopt.gfm").name == "__init__.py"


def test_fingerprint_does_not_import_jax():
    code = (
        "import sys\n"
        "from geomopt.registry import load_all\n"
        "from geomopt.code import code_fingerprint\n"
        "for e in load_all():\n"
        "    assert code_fingerprint(e), e.name\n"
        "print('jax' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
