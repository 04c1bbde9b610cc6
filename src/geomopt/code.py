"""Which source files an experiment's numbers come from, and whether they changed since a run.

:func:`code_fingerprint` follows the ``geomopt`` imports of an experiment's ``run``, ``plot``
and ``validate`` functions statically (every ``import`` statement in the module, function-local
ones included, recursively), so it needs no JAX and sees the imports a run makes lazily. A
package imported as a whole (``from geomopt import gfm``) brings every module its
``lazy_loader.attach`` names; ``from geomopt.gfm import solve`` only the one that defines
``solve``. The runner's own modules (:data:`RUNNER_MODULES`: run folders, progress, reports)
are left out: they decide where numbers are written, not what they are.

The result maps module names to SHA-256 digests of their files' bytes; the runner records it in
``config.json`` and ``reproduce.py`` reruns a finished run whose files changed
(:func:`changed_modules`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["RUNNER_MODULES", "code_fingerprint", "changed_modules", "module_file"]

RUNNER_MODULES = frozenset(
    {
        "geomopt",
        "geomopt.experiment",
        "geomopt.report",
        "geomopt.reproduce",
        "geomopt.registry",
        "geomopt.interrupts",
        "geomopt.code",
    }
)
_ROOT = Path(__file__).resolve().parent


def module_file(name: str) -> Path | None:
    """The source file of module ``name`` (``None`` if there is none); ``geomopt`` modules are
    found on disk without importing them."""
    if _ours(name):
        base = _ROOT.joinpath(*name.split(".")[1:])
        for f in (base / "__init__.py", base.with_suffix(".py")):
            if f.is_file():
                return f
        return None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None)
    return Path(origin) if origin and origin.endswith(".py") else None


def _ours(name: str) -> bool:
    return name == "geomopt" or name.startswith("geomopt.")


def _digest(path: Path | None) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path is not None else None
    except OSError:
        return None


@functools.lru_cache(maxsize=512)
def _parse(path: Path, mtime_ns: int) -> ast.Module:
    return ast.parse(path.read_bytes(), filename=str(path))


def _tree(path: Path) -> ast.Module:
    return _parse(path, path.stat().st_mtime_ns)


def _lazy_attrs(init: Path) -> dict[str, str]:
    """``attribute -> submodule`` of a package's ``lazy_loader.attach(submod_attrs=...)``."""
    out: dict[str, str] = {}
    for node in ast.walk(_tree(init)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "attach"):
            continue
        for kw in node.keywords:
            if kw.arg == "submod_attrs" and isinstance(kw.value, ast.Dict):
                for key, names in zip(kw.value.keys, kw.value.values, strict=True):
                    if isinstance(key, ast.Constant) and isinstance(names, (ast.List, ast.Tuple)):
                        for n in names.elts:
                            if isinstance(n, ast.Constant):
                                out[n.value] = key.value
            elif kw.arg == "submodules" and isinstance(kw.value, (ast.List, ast.Tuple, ast.Set)):
                for n in kw.value.elts:
                    if isinstance(n, ast.Constant):
                        out[n.value] = n.value
    return out


def _is_package(name: str) -> bool:
    f = module_file(name)
    return f is not None and f.name == "__init__.py"


def _imports(name: str) -> set[tuple[str, bool]]:
    """``(module, whole)`` pairs imported by module ``name``; ``whole``: the module object
    itself is bound (so every lazily attached submodule of a package may be used)."""
    path = module_file(name)
    if path is None:
        return set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[tuple[str, bool]] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            for alias in (a for a in node.names if _ours(a.name)):
                parts = alias.name.split(".")
                for i in range(1, len(parts)):  # parent packages run their __init__ only
                    found.add((".".join(parts[:i]), False))
                found.add((alias.name, True))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if not _ours(base):
                continue
            parts = base.split(".")
            for i in range(1, len(parts)):
                found.add((".".join(parts[:i]), False))
            found.add((base, False))
            lazy = _lazy_attrs(module_file(base)) if _is_package(base) else {}
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if module_file(sub) is not None:
                    found.add((sub, True))
                elif alias.name in lazy:
                    found.add((f"{base}.{lazy[alias.name]}", False))
    return found


def _closure(roots: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    todo = [(r, True) for r in roots]
    whole_done: set[str] = set()
    while todo:
        name, whole = todo.pop()
        if name not in seen:
            seen.add(name)
            if name not in RUNNER_MODULES:
                todo.extend(_imports(name))
        if whole and name not in whole_done and _is_package(name):
            whole_done.add(name)
            for sub in set(_lazy_attrs(module_file(name)).values()):
                todo.append((f"{name}.{sub}", False))
    return seen


def _roots(exp) -> list[str]:
    roots = []
    for fn in (exp.run, exp.plot, exp.validate):
        while isinstance(fn, functools.partial):
            fn = fn.func
        mod = getattr(fn, "__module__", None)
        if mod:
            roots.append(mod)
    return roots


def code_fingerprint(exp) -> dict[str, str]:
    """``module -> sha256`` of every source file the experiment ``exp`` can run (module doc)."""
    names = sorted(m for m in _closure(_roots(exp)) if m not in RUNNER_MODULES)
    out = {}
    for m in names:
        digest = _digest(module_file(m))
        if digest is not None:
            out[m] = digest
    return out


def changed_modules(recorded: Mapping[str, str], exp) -> list[str]:
    """Modules whose source differs from ``recorded`` (a :func:`code_fingerprint` of an earlier
    run of ``exp``): changed or removed files, and modules the experiment uses now but did not
    then."""
    now = code_fingerprint(exp)
    changed = [m for m, h in recorded.items() if now.get(m, _digest(module_file(m))) != h]
    return sorted(set(changed) | (set(now) - set(recorded)))
