"""`gateway openapi`: regenerate `openapi/openapi.json`, `schemas/`, `docs/settings.md`,
`docs/errors.md` and `deploy/gateway.env`.

Both are checked in so front-end teams can generate clients and validate payloads without
running the server; CI regenerates them in memory and fails when the checked-in copies differ.
Generation also refuses to run while a route of the app has no entry in `openapi/spec.py` (or an
entry has no route), so the document covers exactly the routes that exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from starlette.routing import BaseRoute, Route

from ..dialects import registry
from ..protocol.schema_files import schema_files
from .document import openapi_text
from .problems_report import PROBLEMS_PATH, problems_markdown
from .settings_report import ENV_FILE_PATH, REFERENCE_PATH, env_file_text, reference_markdown
from .spec import all_operations, operation_keys

COMMAND = "gateway openapi"
GENERATED_DIRS = ("openapi", "schemas")


def generated_files() -> dict[str, str]:
    """Path relative to the repository root -> text, for every generated file."""
    files = {"openapi/openapi.json": openapi_text()}
    files.update({f"schemas/{path}": text
                  for path, text in schema_files(d.schemas for d in registry.DIALECTS).items()})
    files[REFERENCE_PATH] = reference_markdown()
    files[PROBLEMS_PATH] = problems_markdown()
    files[ENV_FILE_PATH] = env_file_text()
    return files


def route_mismatches(routes: Sequence[BaseRoute]) -> list[str]:
    """Routes without an operation in `openapi/spec.py`, and operations without a route."""
    served = {(method, route.path) for route in routes if isinstance(route, Route)
              for method in (route.methods or ()) if method != "HEAD"}
    documented = operation_keys(all_operations())
    problems = [f"route {m} {p} has no Operation in gateway/openapi/spec.py (or its dialect's "
                f"dialect.py)" for m, p in sorted(served - documented)]
    problems += [f"Operation {m} {p} (gateway/openapi/spec.py or a dialect's) has no route"
                 for m, p in sorted(documented - served)]
    return problems


def stale_files(root: Path) -> list[str]:
    """Generated files that are missing, different, or no longer generated, under `root`."""
    expected = generated_files()
    stale = [path for path, text in sorted(expected.items())
             if not (root / path).is_file() or (root / path).read_text("utf-8") != text]
    for directory in GENERATED_DIRS:
        for file in sorted((root / directory).rglob("*.json")):
            relative = file.relative_to(root).as_posix()
            if relative not in expected:
                stale.append(relative)
    return stale


def write(root: Path) -> list[str]:
    """Bring the generated files under `root` up to date; returns what changed."""
    changed = stale_files(root)
    expected = generated_files()
    for path in changed:
        target = root / path
        if path in expected:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(expected[path], "utf-8", newline="\n")
        else:
            target.unlink()
    return changed


def main(root: Path, check: bool, routes: Sequence[BaseRoute]) -> int:
    """`gateway openapi`: the app's `routes` checked against the operations, then the files
    checked (`check`) or written."""
    problems = route_mismatches(routes)
    if problems:
        print("\n".join(problems))
        return 1
    if check:
        stale = stale_files(root)
        for path in stale:
            print(f"stale: {path}")
        if stale:
            print(f"run `{COMMAND}` to regenerate")
        return 1 if stale else 0
    changed = write(root)
    print("\n".join(f"wrote {path}" for path in changed) or "up to date")
    return 0
