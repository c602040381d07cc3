"""No module of `gateway/runs` imports another that imports it back, even for type checking only.

Imports are read from the source (every `import`/`from` statement, including those under
`if TYPE_CHECKING:`), so a cycle hidden from the interpreter is still found.
"""

from __future__ import annotations

import ast
from pathlib import Path

RUNS = Path(__file__).resolve().parents[2] / "gateway" / "runs"


def runs_imports(path: Path) -> set[str]:
    """The modules of gateway.runs that `path` imports, by module name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1:  # from .x import y / from . import x
                if module:
                    found.add(module.split(".")[0])
                else:
                    found.update(alias.name for alias in node.names)
            elif module.startswith("gateway.runs."):
                found.add(module.split(".")[2])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("gateway.runs."):
                    found.add(alias.name.split(".")[2])
    return found


def test_no_module_of_runs_is_in_an_import_cycle():
    graph = {p.stem: runs_imports(p) for p in RUNS.glob("*.py")}
    assert len(graph) > 5, "gateway/runs was not found"

    def reaches(start: str, target: str) -> bool:
        seen, stack = set(), [start]
        while stack:
            for nxt in graph.get(stack.pop(), ()):
                if nxt == target:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return False

    cycles = sorted(name for name in graph if reaches(name, name))
    assert cycles == [], f"modules of gateway/runs in an import cycle: {cycles}"


def test_the_checker_sees_a_type_checking_import(tmp_path: Path):
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from .manager import RunManager\n")
    assert runs_imports(module) == {"manager"}


# -- the import direction: runs/ and engine/ see no dialect, protocol/ nothing of ours ------------

GATEWAY = RUNS.parent
# A dialect's types: its request models, its events, its translation.
DIALECT_MODULES = ("gateway.dialects", "gateway.protocol.tambo", "gateway.api")


def imported_modules(path: Path) -> set[str]:
    """Every gateway module `path` imports, by absolute name (relative imports resolved)."""
    package = ".".join(path.relative_to(GATEWAY.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("gateway")}


def offending(package: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    found = {}
    for path in sorted((GATEWAY / package).rglob("*.py")):
        bad = sorted(m for m in imported_modules(path)
                     if any(m == f or m.startswith(f + ".") for f in forbidden))
        if bad:
            found[path.relative_to(GATEWAY).as_posix()] = bad
    return found


def test_runs_and_engine_import_no_dialect() -> None:
    for package in ("runs", "engine"):
        assert offending(package, DIALECT_MODULES) == {}, (
            f"gateway/{package} must read the neutral RunSpec, not a dialect's types")


def test_protocol_imports_nothing_of_ours_outside_it() -> None:
    others = tuple(f"gateway.{p.name}" for p in GATEWAY.iterdir()
                   if p.name not in ("protocol", "__pycache__", "__init__.py"))
    assert offending("protocol", others) == {}


def test_the_import_checker_resolves_relative_imports(tmp_path: Path) -> None:
    module = GATEWAY / "runs" / "manager.py"
    assert "gateway.protocol.run_spec.RunSpec" in imported_modules(module)
    assert "gateway.store.repository" in imported_modules(module)


def test_a_dialects_parsing_translation_and_events_are_pure() -> None:
    """Only `routes.py` (`routes_*.py`) and `dialect.py` of a dialect touch HTTP and the run manager: its
    request parsing, translation and event types import nothing of ours but `protocol/`."""
    above = ("gateway.api", "gateway.runs", "gateway.engine", "gateway.store", "gateway.app",
             "gateway.config", "gateway.observability")
    dialects = [p for p in (GATEWAY / "dialects").iterdir() if (p / "dialect.py").exists()]
    assert {p.name for p in dialects} >= {"tambo", "agui", "timbal"}
    for folder in dialects:
        for path in folder.glob("*.py"):
            if path.name in ("routes.py", "dialect.py", "__init__.py") or (
                    path.name.startswith("routes_")):  # a dialect's routes in several modules
                continue
            bad = [m for m in imported_modules(path) if m.startswith(above)]
            assert bad == [], f"{path.relative_to(GATEWAY)} imports {bad}"


# -- the house: no two packages import each other; small rooms; a short top level -----------------

def _package_of(module: str, packages: list[str]) -> str | None:
    """The deepest package of ours that holds `module` (a top-level module is its own)."""
    found = None
    for package in packages:
        if module == package or module.startswith(package + "."):
            if found is None or len(package) > len(found):
                found = package
    return found


def package_imports() -> set[tuple[str, str]]:
    """(importer, imported) for every two packages (or top-level modules) of ours, neither
    inside the other, where a module of the first imports the second."""
    packages = sorted(".".join(p.parent.relative_to(GATEWAY.parent).parts)
                      for p in GATEWAY.rglob("__init__.py") if "migrations" not in p.parts)
    tops = [f"gateway.{p.stem}" for p in GATEWAY.glob("*.py") if p.stem != "__init__"]
    units = [*packages, *tops]
    edges = set()
    for path in GATEWAY.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        name = ".".join(path.relative_to(GATEWAY.parent).with_suffix("").parts)
        importer = _package_of(name.removesuffix(".__init__"), units)
        for module in imported_modules(path):
            imported = _package_of(module, units)
            if None in (importer, imported) or "gateway" in (importer, imported):
                continue
            if not (imported.startswith(importer + ".") or importer.startswith(imported + ".")
                    or imported == importer):
                edges.add((importer, imported))
    return edges


def test_no_two_packages_import_each_other() -> None:
    edges = package_imports()
    assert len(edges) > 20, "the package graph was not found"
    both_ways = sorted(f"{a} <-> {b}" for a, b in edges if (b, a) in edges and a < b)
    assert both_ways == [], f"packages that import each other: {both_ways}"


def test_the_pair_checker_sees_a_two_way_import() -> None:
    edges = package_imports()
    assert ("gateway.api", "gateway.runs") in edges
    assert ("gateway.runs", "gateway.api") not in edges


# A room holds about 15 modules at most (its `__init__.py` not counted); a folder that grows past
# it is split by what its modules do (as `engine/models/`, `runs/admission/`).
MAX_MODULES = 16
# Rooms still being emptied this round (none left).
SPLITTING: set[str] = set()


def test_no_folder_is_too_large() -> None:
    large = {}
    for folder in [GATEWAY, *GATEWAY.rglob("*/")]:
        if "__pycache__" in folder.parts or "migrations" in folder.parts:
            continue
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        if len(modules) > MAX_MODULES and folder.relative_to(GATEWAY.parent).as_posix() \
                not in SPLITTING:
            large[folder.relative_to(GATEWAY.parent).as_posix()] = len(modules)
    assert large == {}, f"folders over {MAX_MODULES} modules: {large}"


def test_the_top_level_holds_at_most_six_modules() -> None:
    modules = sorted(p.name for p in GATEWAY.glob("*.py"))
    assert len(modules) <= 6, f"gateway/ holds {modules}: give each a room"
