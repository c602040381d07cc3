"""Tambo's tool status messages: what the React SDK shows while a tool works.

The real Tambo server adds two string parameters to every tool schema it gives the model
(`standardToolParameters`): `_tambo_statusMessage` ("Looking up the weather in Oslo") and
`_tambo_completionStatusMessage` ("Looked up the weather"). The model fills them in with the
other arguments, they stream to the client in `TOOL_CALL_ARGS`, and `@tambo-ai/react` shows
them as the call's label (without them it shows "Calling <tool>"). The gateway does the same for
a run of the Tambo endpoints (`RunInput.status_messages`), on client and server tools (not on
components, whose arguments are their props); a server tool receives its arguments without
them, so its own schema's parameters are all it ever sees.
"""

from __future__ import annotations

import copy
from typing import Any

STATUS = "_tambo_statusMessage"
COMPLETION = "_tambo_completionStatusMessage"
PROPERTIES: dict[str, dict[str, Any]] = {
    STATUS: {"type": "string", "description": "A short message shown to the user while the "
             "tool runs, in the present tense (e.g. 'Looking up the weather in Oslo')"},
    COMPLETION: {"type": "string", "description": "A short message shown to the user once "
                 "the tool is done, in the past tense (e.g. 'Looked up the weather in Oslo')"},
}


def with_status_messages(schema: Any, required: bool = True) -> dict[str, Any]:
    """`schema` (a tool's parameters; none: an empty object) with the two parameters added,
    as required ones, as the real server adds them to what the model gets (`required=False`:
    allowed, not required, for checking the model's arguments: a call without them still
    runs). A schema that is not a plain object schema is left as it is."""
    base: dict[str, Any] = schema if isinstance(schema, dict) and schema else {
        "type": "object", "properties": {}}
    properties = base.get("properties", {})
    if base.get("type", "object") != "object" or not isinstance(properties, dict):
        return base
    out = copy.copy(base)
    out["properties"] = {**properties, **PROPERTIES}
    if required:
        kept = [r for r in base.get("required", []) if r not in PROPERTIES]
        out["required"] = [*kept, STATUS, COMPLETION]
    return out


def without_status_messages(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments a tool receives: the model's, without the status messages."""
    if STATUS not in arguments and COMPLETION not in arguments:
        return arguments
    return {k: v for k, v in arguments.items() if k not in PROPERTIES}
