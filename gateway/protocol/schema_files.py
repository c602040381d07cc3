"""The documents under `schemas/`: one JSON Schema per wire type, per union, plus an index.

Every file is self-contained (its definitions under `$defs`), so a consumer can validate a
payload with one file and no reference resolution across files. What is published comes from
each dialect's `Schemas` (`gateway/dialects/<name>/dialect.py`), in the registry's order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .jsonschema import canonical, standalone

INDEX = "index.json"


@dataclass(frozen=True)
class Union:
    """A union published as one file: `key` in the index, its type, its path, what it is."""

    key: str
    type: Any
    path: str
    description: str


@dataclass(frozen=True)
class Type:
    """One wire type published as its own file, listed in the index under `group`."""

    group: str
    name: str
    type: Any
    path: str


@dataclass(frozen=True)
class Schemas:
    """What one dialect publishes under `schemas/`."""

    unions: tuple[Union, ...] = ()
    types: tuple[Type, ...] = ()


def schema_files(published: Iterable[Schemas]) -> dict[str, str]:
    """Path under `schemas/` -> file text, for every generated file."""
    sets = list(published)
    files: dict[str, str] = {}
    index: dict[str, Any] = {
        "$comment": "Generated from the event types of each dialect (gateway/dialects/) and "
                    "gateway/protocol/frames_schema.py by `gateway openapi`; do not edit.",
        "unions": {},
        "types": {},
    }
    for union in (u for s in sets for u in s.unions):
        files[union.path] = canonical(standalone(union.type, union.key, union.description))
        index["unions"][union.key] = {"path": union.path, "description": union.description}
    for entry in (t for s in sets for t in s.types):
        schema = standalone(entry.type, entry.name)
        files[entry.path] = canonical(schema)
        index["types"].setdefault(entry.group, {})[entry.name] = {
            "path": entry.path, "description": schema.get("description", "")}
    files[INDEX] = canonical(index)
    return files
