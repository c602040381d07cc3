"""How the built-in demo model shows off tools and components, offline.

No language model runs here, so the demo picks a tool the way a person skimming the request
would: when the user's words name an offered tool or component (`get_local_time` is picked by
"what time is it?", `show_component_StockTable` by "show me the stock table"), it calls it with
example arguments made from the tool's JSON Schema. That is enough to see a client tool's round
trip and a component's streamed props in a real front end before configuring a real model.
"""

from __future__ import annotations

import re
from typing import Any

from ..model_view import COMPONENT_TOOL_PREFIX

GENERIC_WORDS = {"get", "set", "show", "component", "the", "tool", "with", "from", "list",
                 "fetch", "make", "create", "update", "info", "data"}


def name_words(name: str) -> set[str]:
    """`get_local_time` -> {local, time}; `StockTable` -> {stock, table}."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name.removeprefix(COMPONENT_TOOL_PREFIX))
    words = {w.lower() for w in re.split(r"[\s_\-.]+", spaced) if w}
    return {w for w in words if len(w) >= 4 and w not in GENERIC_WORDS}


def pick_tool(user_text: str, tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first offered tool whose name the user's words mention, if any."""
    said = set(re.findall(r"[a-z0-9]+", user_text.lower()))
    said |= {w[:-1] for w in said if w.endswith("s")}  # "prices" names "price"
    for tool in tools:
        function = tool.get("function") or {}
        if name_words(function.get("name", "")) & said:
            return function
    return None


def example_value(schema: Any, depth: int = 0) -> Any:
    """A small value that fits the schema: its example, default or first enum if it has one."""
    if not isinstance(schema, dict) or depth > 6:
        return "example"
    for key in ("examples", "default", "enum"):
        if schema.get(key):
            value = schema[key]
            return value[0] if key in ("examples", "enum") and isinstance(value, list) else value
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return example_value(schema[key][0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        return {name: example_value(sub, depth + 1) for name, sub in properties.items()}
    if kind == "array":
        return [example_value(schema.get("items"), depth + 1)]
    if kind in ("number", "integer"):
        return 42
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "example"
