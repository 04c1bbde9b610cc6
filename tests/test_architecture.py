"""The shape of the house, read with ``ast`` from every ``import`` / ``from ... import`` under
``src/geomopt`` (module level and inside functions: the packages import lazily):

- no import cycle among the modules of the whole package;
- the packages form layers: the runner (``geomopt.experiment``) and the top-level modules (run
  files, checks, stats, plotting, fetch, ...) import no family package, and the family
  packages import each other without a cycle (data packages below the methods, the experiments
  that combine them above both);
- module and function sizes: the modules over ~500 lines and functions over ~80 lines are
  listed here by name, to be split; a new one fails the test, and so does a listed one that
  no longer needs its place (remove it from the list);
- private names: the files outside a package that import its private modules or names are
  listed likewise (the list may only shrink).
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "geomopt"

MODULE_LINES, FUNCTION_LINES = 500, 80

BIG_MODULES: set[str] = set()
"""Modules over MODULE_LINES lines, to be split by responsibility."""

LONG_FUNCTIONS: set[str] = set()
"""Functions over FUNCTION_LINES lines, to be split."""

PRIVATE_IMPORTERS: set[str] = set()
"""Files outside a package that import its private modules or names."""


def modules(src: Path = SRC) -> dict[str, Path]:
    out = {}
    for p in src.rglob("*.py"):
        parts = list(p.relative_to(src.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _targets(node, name: str, is_package: bool, mods) -> list[str]:
    """What an import statement imports: ``from pkg import sub`` imports the submodule (and
    only that, when every name is one), ``from pkg import name`` the package."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        pkg = name if is_package else name.rsplit(".", 1)[0]
        for _ in range(node.level - 1):
            pkg = pkg.rsplit(".", 1)[0]
        base = pkg + ("." + base if base else "")
    subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
    return subs if len(subs) == len(node.names) else [base, *subs]


def _runtime_nodes(tree: ast.Module):
    """Every node of ``tree`` except those under ``if TYPE_CHECKING:`` (imports for type
    annotations only, which never run)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            test = child.test if isinstance(child, ast.If) else None
            if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
                stack.extend(child.orelse)
                continue
            stack.append(child)


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """``module -> modules of the package it imports`` (a package's ``__init__`` also imports
    the submodules it attaches lazily; edges between a package and its own submodules are left
    out: every submodule runs its package's ``__init__`` first, which is not a circle)."""
    mods = modules(src)
    graph = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        edges = set()
        for node in _runtime_nodes(tree):
            if is_package and isinstance(node, ast.keyword) and node.arg == "submod_attrs":
                edges |= {f"{name}.{k}" for k in ast.literal_eval(node.value)}
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for t in _targets(node, name, is_package, mods):
                while t and t not in mods:
                    t = t.rsplit(".", 1)[0] if "." in t else ""
                if t and t != name:
                    edges.add(t)
        own = {e for e in edges if e.startswith(name + ".") or name.startswith(e + ".")}
        graph[name] = edges - own
    return graph


def package_of(module: str, src: Path = SRC) -> str:
    """The subpackage a module belongs to (``gfm``, ``experiment``, ...), or ``.name`` for a
    top-level module (``geomopt.plotting`` -> ``.plotting``)."""
    parts = module.split(".")
    if len(parts) > 1 and (src / parts[1]).is_dir():
        return parts[1]
    return "." + (parts[1] if len(parts) > 1 else "")


def test_no_import_cycle_among_the_modules(find_cycle):
    graph = import_graph()
    assert len(graph) > 100
    assert "geomopt.canon._layers" in graph["geomopt.canon._models"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_packages_form_layers(find_cycle):
    graph = import_graph()
    packages: dict[str, set[str]] = {}
    for m, edges in graph.items():
        a = package_of(m)
        packages.setdefault(a, set()).update(b for b in map(package_of, edges) if b != a)
    infra = {p for p in packages if p.startswith(".")} | {"experiment"}
    for p in infra:  # the runner, run files, checks, stats, plotting, fetch, ...
        assert packages[p] <= infra, f"{p} imports a family package: {packages[p] - infra}"
    cycle = find_cycle(packages)
    assert cycle is None, "packages import each other in a circle: " + " -> ".join(cycle)
    # data below the methods, the experiments that combine them above both
    assert "gfm" not in packages["shapes"] and "shapes" not in packages["gfm"]
    assert {"gfm", "shapes"} <= packages["latent"]


def _sizes():
    big, long = set(), set()
    for name, path in modules().items():
        text = path.read_text()
        if text.count("\n") > MODULE_LINES:
            big.add(name)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.end_lineno - node.lineno + 1 > FUNCTION_LINES:
                    long.add(f"{name}.{node.name}")
    return big, long


def test_module_and_function_sizes_only_shrink():
    big, long = _sizes()
    assert not big - BIG_MODULES, (
        f"new modules over {MODULE_LINES} lines: {sorted(big - BIG_MODULES)}"
    )
    assert not long - LONG_FUNCTIONS, (
        f"new functions over {FUNCTION_LINES} lines: {sorted(long - LONG_FUNCTIONS)}"
    )
    assert not BIG_MODULES - big, f"no longer over the limit, drop: {sorted(BIG_MODULES - big)}"
    assert not LONG_FUNCTIONS - long, f"no longer too long, drop: {sorted(LONG_FUNCTIONS - long)}"


def private_importers(root: Path = ROOT) -> set[str]:
    """Files that import a private module or name of a ``geomopt`` package they are not in."""
    out = set()
    for base in ("src", "benchmarks", "experiments"):
        for p in (root / base).rglob("*.py"):
            rel = p.relative_to(root).as_posix()
            parts = p.relative_to(root / "src").with_suffix("").parts if base == "src" else ()
            home = ".".join(parts[:2]) if len(parts) > 2 else None
            for node in ast.walk(ast.parse(p.read_text())):
                if not (isinstance(node, ast.ImportFrom) and not node.level and node.module):
                    continue
                mod = node.module.split(".")
                if mod[0] != "geomopt":
                    continue
                private = any(x.startswith("_") for x in mod[1:]) or any(
                    a.name.startswith("_") for a in node.names
                )
                inside = home is not None and node.module.startswith(home)
                if private and not inside:
                    out.add(rel)
    return out


def test_private_imports_across_packages_only_shrink():
    found = private_importers()
    new = found - PRIVATE_IMPORTERS
    assert not new, f"new private imports in {sorted(new)}"
    assert not PRIVATE_IMPORTERS - found, f"clean now, drop: {sorted(PRIVATE_IMPORTERS - found)}"


@pytest.mark.parametrize("where", ["module", "function"])
def test_a_circle_across_packages_is_found(tmp_path, where, find_cycle):
    src = tmp_path / "geomopt"
    for pkg in ("a", "b"):
        (src / pkg).mkdir(parents=True)
        (src / pkg / "__init__.py").write_text("")
    (src / "__init__.py").write_text("")
    (src / "a" / "_x.py").write_text("from geomopt.b._y import f\n")
    body = (
        "from geomopt.a import _x\n" if where == "module" else "def g():\n    from ..a import _x\n"
    )
    (src / "b" / "_y.py").write_text(body)
    graph = import_graph(src)
    assert graph["geomopt.a._x"] == {"geomopt.b._y"} and graph["geomopt.b._y"] == {"geomopt.a._x"}
    assert find_cycle(graph) is not None
