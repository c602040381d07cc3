"""Client state schemas run in bounded time: patterns on RE2, no remote `$ref`, a linear
`uniqueItems` and a step budget (gateway/engine/tools/client_schema.py)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.engine.tools import client_schema as state_schema
from gateway.runs.components.state import ComponentStateError, check_state

CATASTROPHIC = {"type": "object", "properties": {"name": {"type": "string",
                                                          "pattern": "^(a+)+$"}}}


def codes(schema: dict[str, Any], state: dict[str, Any]) -> str | None:
    try:
        check_state(schema, state)
    except ComponentStateError as exc:
        return exc.code
    return None


def test_a_backtracking_pattern_is_answered_by_the_linear_engine() -> None:
    # Python's re takes hours on this; RE2 answers at once.
    assert codes(CATASTROPHIC, {"name": "a" * 64 + "!"}) == "STATE_SCHEMA_VIOLATION"
    assert codes(CATASTROPHIC, {"name": "a" * 64}) is None


def test_pattern_properties_and_additional_properties_use_the_linear_engine() -> None:
    schema = {"type": "object", "patternProperties": {"^(a+)+$": {"type": "integer"}},
              "additionalProperties": False}
    assert codes(schema, {"a" * 40: 1}) is None
    assert codes(schema, {"a" * 40: "x"}) == "STATE_SCHEMA_VIOLATION"
    assert codes(schema, {"a" * 40 + "!": 1}) == "STATE_SCHEMA_VIOLATION"


@pytest.mark.parametrize(("schema", "code"), [
    ({"type": "string", "pattern": "(a)\\1"}, "UNSUPPORTED_SCHEMA_PATTERN"),
    ({"patternProperties": {"^(?=x)": {}}}, "UNSUPPORTED_SCHEMA_PATTERN"),
    ({"$ref": "http://169.254.169.254/latest/meta-data"}, "UNSUPPORTED_SCHEMA_REF"),
    ({"patternProperties": {"a": {}}, "unevaluatedProperties": False},
     "UNSUPPORTED_SCHEMA_KEYWORD"),
])
def test_what_cannot_run_bounded_is_refused(schema: dict[str, Any], code: str) -> None:
    with pytest.raises(state_schema.SchemaRefused) as refused:
        state_schema.check_client_schema({"type": "object", "properties": {"x": schema}})
    assert refused.value.code == code


def test_data_that_looks_like_a_keyword_is_not_one() -> None:
    state_schema.check_client_schema({"const": {"pattern": "(a)\\1"},
                                      "properties": {"pattern": {"type": "string"}}})


def test_unique_items_is_linear_and_keeps_json_equality() -> None:
    schema = {"type": "object", "properties": {"rows": {"type": "array", "uniqueItems": True}}}
    rows = [{"id": n} for n in range(20_000)]
    assert codes(schema, {"rows": rows}) is None
    assert codes(schema, {"rows": [*rows, {"id": 7}]}) == "STATE_SCHEMA_VIOLATION"
    assert codes(schema, {"rows": [1, 1.0]}) == "STATE_SCHEMA_VIOLATION"
    assert codes(schema, {"rows": [1, True, "1", None, 0, False]}) is None


def test_an_exponential_schema_spends_its_budget_and_is_refused() -> None:
    # Each level tries both branches, and both descend: 2^depth keyword evaluations.
    schema = {"$defs": {"n": {"anyOf": [
        {"properties": {"c": {"$ref": "#/$defs/n"}}, "required": ["missing"]},
        {"properties": {"c": {"$ref": "#/$defs/n"}}}]}},
        "$ref": "#/$defs/n"}
    state: dict[str, Any] = {}
    for _ in range(40):
        state = {"c": state}
    assert codes(schema, state) == "STATE_SCHEMA_TOO_COMPLEX"
