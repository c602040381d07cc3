"""The registry: the dialects this gateway speaks, one line each.

`create_app` mounts their routes, the OpenAPI builder documents their operations and event
unions, and `gateway openapi` publishes their schemas, all in this order (which is the order of
the generated documents). Adding a dialect is its folder (`gateway/dialects/<name>/`, see
`docs/architecture.md`) and its name here.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..protocol.operations import Operation
from .base import EventSchema, WireDialect

NAMES = (
    "tambo",
    "agui",
    "timbal",
    "chorus",
)


def _load(name: str) -> WireDialect:
    dialect = importlib.import_module(f"{__package__}.{name}.dialect").DIALECT
    if not isinstance(dialect, WireDialect) or dialect.name != name:
        raise TypeError(f"gateway/dialects/{name}/dialect.py must define DIALECT, a "
                        f"WireDialect named {name!r}")
    return dialect


# Readers look it up when they use it (`registry.DIALECTS`), never copy it at import, so a test
# may add a dialect.
DIALECTS: tuple[WireDialect, ...] = tuple(_load(name) for name in NAMES)


def operations() -> tuple[Operation, ...]:
    """The dialects' documented operations, in the registry's order."""
    return tuple(op for d in DIALECTS for op in d.operations)


def all_examples() -> dict[str, dict[str, Any]]:
    """The dialects' operation examples, by operationId."""
    return {key: value for d in DIALECTS for key, value in d.examples.items()}


def event_schemas() -> list[EventSchema]:
    """The dialects' SSE event unions, in the registry's order."""
    return [d.events for d in DIALECTS if d.events is not None]
