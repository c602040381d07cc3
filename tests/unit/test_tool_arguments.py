"""A tool call's arguments are run only as the model wrote them: complete JSON, an object,
valid against the tool's schema; anything else is an error, never a repaired call
(`gateway/engine/tool_arguments.py`)."""

from __future__ import annotations

import pytest

from gateway.engine.tool_arguments import arguments_error, parsed_arguments

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.mark.parametrize("text, error", [
    ('{"city": "Paris"}', None),
    ('{"city": "Par', "not complete JSON"),
    ('{"ci', "not complete JSON"),
    ("{}", "'city' is a required property"),
    ('{"city": 3}', "3 is not of type 'string'"),
    ('["Paris"]', "a JSON object is needed"),
    ("", "'city' is a required property"),
])
def test_arguments_are_checked_against_the_schema(text: str, error: str | None) -> None:
    found = arguments_error(text, SCHEMA)
    if error is None:
        assert found is None
    else:
        assert found is not None and error in found


def test_a_cut_call_says_it_was_cut() -> None:
    found = arguments_error('{"city": "Par', SCHEMA, "length")
    assert found is not None and "cut off" in found


def test_a_schema_the_bounded_validator_cannot_run_leaves_only_the_json_checked() -> None:
    backtracking = {"type": "object", "properties": {"a": {"type": "string",
                                                           "pattern": "^(a)\\1$"}}}
    assert arguments_error('{"a": "b"}', backtracking) is None
    assert arguments_error('{"a": ', backtracking) is not None


def test_no_call_is_repaired_into_another() -> None:
    assert parsed_arguments('{"city": "Par') == {}
    assert parsed_arguments('{"city": "Paris"}') == {"city": "Paris"}
    assert parsed_arguments("") == {}
