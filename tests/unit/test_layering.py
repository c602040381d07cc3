"""Observability is a leaf: `gateway/observability` imports nothing of the gateway but itself.

The agent loop and the store call it through their hooks, and the HTTP endpoints that expose
it (`/metrics`, `/ready`, `/health`) live in `gateway/api`; an import from `api` (or from any
layer that calls it) would point the dependency the wrong way. Imports are read from the source,
those under `if TYPE_CHECKING:` included.
"""

from __future__ import annotations

import ast
from pathlib import Path

GATEWAY = Path(__file__).resolve().parents[2] / "gateway"


def gateway_imports(path: Path, package: str) -> set[str]:
    """The gateway modules `path` (a module of `gateway.<package>`) imports, as dotted names."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0:
                if module.startswith("gateway"):
                    found.add(module)
                continue
            base = ["gateway", package][: 3 - node.level] if node.level <= 2 else []
            names = [".".join([*base, module])] if module else [
                ".".join([*base, alias.name]) for alias in node.names]
            found.update(names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("gateway"))
    return found


def test_observability_imports_nothing_of_the_gateway_but_itself() -> None:
    modules = sorted((GATEWAY / "observability").glob("*.py"))
    assert len(modules) > 2, "gateway/observability was not found"
    outside = {f"{path.name}: {name}" for path in modules
               for name in gateway_imports(path, "observability")
               if not name.startswith("gateway.observability")}
    assert not outside, f"gateway/observability imports from above it: {sorted(outside)}"


def test_the_checker_sees_an_import_of_api(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from ..api.context import services\nfrom . import tracing\n")
    assert gateway_imports(module, "observability") == {"gateway.api.context",
                                                        "gateway.observability.tracing"}
