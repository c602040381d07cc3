"""The documents under `schemas/`: one JSON Schema per wire type, per union, plus an index.

Every file is self-contained (its definitions under `$defs`), so a consumer can validate a
payload with one file and no reference resolution across files.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import Event as AguiEvent

from . import events, frames_schema
from .jsonschema import canonical, standalone

INDEX = "index.json"


def _entries() -> list[tuple[str, str, Any, str]]:
    """(dialect/kind, wire name, type, file path) for every published type, in a stable order."""
    entries: list[tuple[str, str, Any, str]] = []
    for name, tp in events.EVENTS.items():
        entries.append(("tambo.events", name, tp, f"tambo/events/{name}.json"))
    for name, tp in events.CUSTOM_EVENTS.items():
        entries.append(("tambo.events", f"CUSTOM {name}", tp, f"tambo/events/CUSTOM.{name}.json"))
    for name, tp in frames_schema.FRAMES.items():
        entries.append(("timbal.frames", name, tp, f"timbal/frames/{name}.json"))
    for name, tp in frames_schema.CONTROL_FRAMES.items():
        entries.append(("timbal.frames", f"control {name}", tp,
                        f"timbal/frames/control.{name}.json"))
    for name, tp in frames_schema.VALUES.items():
        entries.append(("timbal.values", name, tp, f"timbal/values/{name}.json"))
    return entries


UNIONS: list[tuple[str, Any, str, str]] = [
    ("tambo.event", events.TamboEvent, "tambo/event.json",
     ("Any event of a Tambo-dialect run stream: the JSON in the `data:` line of one SSE message "
     "(POST /v1/threads/runs, POST /v1/threads/{threadId}/runs, GET .../runs/{runId}).")),
    ("agui.event", AguiEvent, "agui/event.json",
     ("Any event of an AG-UI 1.0 run stream (POST /v1/agui/agents/{agent}/run, GET "
      "/v1/agui/threads/{threadId}/runs/{runId}): ag-ui-protocol 1.0's `ag_ui.core.Event`.")),
    ("timbal.frame", frames_schema.Frame, "timbal/frame.json",
     "One line of a run's Timbal log (message frames and the gateway's control frames)."),
    ("timbal.value", frames_schema.MessageValue, "timbal/value.json",
     "One part of a stored message: the `v` of a set frame, or an input value stored as is."),
]


def schema_files() -> dict[str, str]:
    """Path under `schemas/` -> file text, for every generated file."""
    files: dict[str, str] = {}
    index: dict[str, Any] = {
        "$comment": "Generated from gateway/protocol/events.py and frames_schema.py by "
                    "`gateway openapi`; do not edit.",
        "unions": {},
        "types": {},
    }
    for key, tp, path, description in UNIONS:
        files[path] = canonical(standalone(tp, key, description))
        index["unions"][key] = {"path": path, "description": description}
    for group, name, tp, path in _entries():
        schema = standalone(tp, name)
        files[path] = canonical(schema)
        index["types"].setdefault(group, {})[name] = {
            "path": path, "description": schema.get("description", "")}
    files[INDEX] = canonical(index)
    return files
