"""The modules of ``geomopt.gfm`` import only modules below them: the import graph among them,
read with ``ast`` from every ``import`` / ``from ... import`` (module level and inside
functions: the package imports lazily), has no cycle."""

import ast
from pathlib import Path

import pytest

import geomopt.gfm

PACKAGE = "geomopt.gfm"
ROOT = Path(geomopt.gfm.__file__).parent


def _lazy_submodules(tree: ast.Module) -> set[str]:
    """The submodules ``__init__`` attaches with ``lazy_loader`` (``submod_attrs`` keys)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "submod_attrs":
            out |= {f"{PACKAGE}.{k}" for k in ast.literal_eval(node.value)}
    return out


def _module_names(root: Path, package: str) -> dict[str, Path]:
    """``dotted name -> file`` of every module under ``root``, subpackages included."""
    out = {}
    for p in root.rglob("*.py"):
        parts = [package, *p.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """``module -> modules of the package it imports`` for every ``*.py`` under ``root``."""
    modules = _module_names(root, package)
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges = _lazy_submodules(tree) if name == package else set()
        home = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative to the module's package
                    pkg = home
                    for _ in range(node.level - 1):
                        pkg = pkg.rsplit(".", 1)[0]
                    base = pkg + ("." + base if base else "")
                # `from pkg import sub` imports the submodule `pkg.sub` when there is one
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            edges |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


def test_import_graph_of_the_package_is_acyclic(find_cycle):
    graph = import_graph()
    assert len(graph) >= 20 and f"{PACKAGE}._gfm" in graph[f"{PACKAGE}._continuation"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_layers_point_down():
    graph = import_graph()
    lib = f"{PACKAGE}.solvers"
    methods = {f"{lib}.{m}" for m in ("_levenberg_marquardt", "_adam", "_action", "_gauss_newton",
                                      "_newton_krylov")}  # fmt: skip
    assert methods <= set(graph)
    assert not graph[f"{PACKAGE}._init"] & (methods | {f"{PACKAGE}._gfm"})
    for m in methods:  # the methods know nothing of each other, but the composite Action is LM's
        allowed = {f"{lib}._levenberg_marquardt"} if m.endswith("_action") else set()
        assert not graph[m] & methods - allowed, m
    below = {"_metrics", "_residuals", "_status", "solvers._banded", "solvers._krylov",
             "solvers._interface"}  # fmt: skip
    for m in below:
        assert not graph[f"{PACKAGE}.{m}"] & methods, m
    # the solver library is a layer: it imports nothing of gfm above the reports and checks
    for m in (x for x in graph if x.startswith(lib)):
        above = {e for e in graph[m] if not e.startswith(lib)} - {
            f"{PACKAGE}._status", f"{PACKAGE}._checks", PACKAGE}  # fmt: skip
        assert not above, f"{m} imports {sorted(above)}"


@pytest.mark.parametrize("where", ["module", "function"])
def test_a_circle_is_found(tmp_path, where, find_cycle):
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "_a.py").write_text("from ._b import x\n")
    body = "from ._a import y\n" if where == "module" else "def f():\n    from . import _a\n"
    (tmp_path / "_b.py").write_text(body)
    (tmp_path / "_c.py").write_text("from pkg._a import y\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg._c"] == {"pkg._a"}
    assert find_cycle(graph) in (["pkg._a", "pkg._b", "pkg._a"], ["pkg._b", "pkg._a", "pkg._b"])
