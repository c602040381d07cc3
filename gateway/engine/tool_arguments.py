"""A tool call's arguments, checked before the tool runs or a client is asked to run it.

A model's arguments are JSON text, streamed. A call is run only as the model wrote it: complete
JSON, an object, valid against the tool's schema (a component's props schema, a sub-agent's
`task`). Anything else, most often arguments cut off by the call's `max_tokens`, is never
repaired into a call the model did not make (a best-effort parse of `{"city": "Par` is
`{"city": "Par"}`, of `{"ci` is `{}`: a required field silently gone). Instead the loop answers
the call with an error result (the model sees it, and may call again; the client sees it as the
call's result) and, if the model does it again in the same run, ends the run with
`TOOL_ARGUMENTS_INVALID` (`engine/loop.py`).

Schemas from clients run on the bounded validator (`tools/client_schema.py`): RE2 patterns, no
remote `$ref`, a step budget. A schema it cannot run is not held against the model: only the
JSON itself is checked then.
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

from jsonschema import SchemaError

from .tools import client_schema

log = logging.getLogger(__name__)

# How much of a validation error the model and the client are told.
ERROR_CHARS = 300


def parsed_arguments(text: str) -> dict[str, Any]:
    """Arguments already checked (`arguments_error` is None) as the object they are; `{}` for
    a call without any. Anything else (only a call that failed the check) is `{}`: it never
    runs."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def arguments_error(text: str, schema: Any, truncated: str | None = None) -> str | None:
    """Why a call's arguments cannot be run (None: they can). `truncated`: the call's finish
    reason when the provider cut it (`length`), which the error names."""
    cut = " (the answer was cut off by its token limit)" if truncated == "length" else ""
    if not text.strip():
        value: Any = {}
    else:
        try:
            value = json.loads(text)
        except ValueError as error:
            return f"Invalid arguments: not complete JSON{cut}: {error}"[:ERROR_CHARS]
    if not isinstance(value, dict):
        return f"Invalid arguments: a JSON object is needed, not {type(value).__name__}"
    if not isinstance(schema, dict) or not schema:
        return None
    problem = _schema_error(json.dumps(schema, sort_keys=True), value)
    return None if problem is None else f"Invalid arguments: they do not match the tool's schema{cut}: " \
                                        f"{problem}"[:ERROR_CHARS]


def _schema_error(schema_text: str, value: dict[str, Any]) -> str | None:
    checker = _checker(schema_text)
    if checker is None:
        return None
    try:
        found = client_schema.errors(checker, value)
    except (client_schema.SchemaTooCostly, SchemaError):
        return None
    if not found:
        return None
    error = found[0]
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where + ': ' if where else ''}{error.message}"


@functools.lru_cache(maxsize=512)
def _checker(schema_text: str) -> Any:
    """A validator per distinct schema (a run's tools are the same on every call); None for a
    schema the bounded validator cannot run."""
    try:
        return client_schema.validator(json.loads(schema_text))
    except (client_schema.SchemaRefused, SchemaError) as error:
        log.info("a tool schema cannot be checked (%s): only its JSON is", error)
        return None
