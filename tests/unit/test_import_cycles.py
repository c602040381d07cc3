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
