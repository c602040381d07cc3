"""The demo model's offline tool picking: words that name a tool pick it, arguments fit the
tool's schema."""

from __future__ import annotations

import jsonschema

from gateway.engine.tools.demo import example_value, name_words, pick_tool


def tool(name: str, parameters: dict | None = None) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": parameters or {}}}


def test_name_words():
    assert name_words("get_local_time") == {"local", "time"}
    assert name_words("show_component_StockTable") == {"stock", "table"}


def test_pick_tool_by_the_users_words():
    tools = [tool("get_local_time"), tool("show_component_StockTable")]
    assert pick_tool("What time is it?", tools)["name"] == "get_local_time"
    assert pick_tool("show me stock prices", tools)["name"] == "show_component_StockTable"
    assert pick_tool("show me the tables", tools)["name"] == "show_component_StockTable"
    assert pick_tool("hello there", tools) is None
    assert pick_tool("what time is it", []) is None


def test_example_values_fit_their_schemas():
    schemas = [
        {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"},
                                          "tags": {"type": "array", "items": {"type": "string"}},
                                          "unit": {"enum": ["C", "F"]}},
         "required": ["city"]},
        {"type": "object", "properties": {"rows": {"type": "array", "items": {
            "type": "object", "properties": {"symbol": {"type": "string"},
                                             "price": {"type": "number"},
                                             "up": {"type": "boolean"}}}}}},
        {"type": "object", "properties": {"when": {"anyOf": [{"type": "string"},
                                                             {"type": "null"}]}}},
    ]
    for schema in schemas:
        jsonschema.validate(example_value(schema), schema)
