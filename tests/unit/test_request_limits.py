"""Request limits that need no server: JSON depth read from the raw bytes, and the run
request's message, tools and component schemas against the settings."""

from __future__ import annotations

import json

import pytest

from gateway.api.request_limits import check_run_request, json_depth
from gateway.config import Settings
from gateway.dialects.tambo.input import run_spec
from gateway.protocol.problems import ApiError
from gateway.protocol.run_spec import RunSpec
from gateway.protocol.tambo import RunRequest


@pytest.mark.parametrize(("text", "depth"), [
    (b'{"a": 1}', 1),
    (b'[[[]], {"b": [{}]}]', 4),
    (b'{"s": "[[[[{{{{ \\" ]]"}', 1),  # brackets and an escaped quote inside a string
    (b'"just a string"', 0),
    (b"[" * 500 + b"]" * 500, 500),
])
def test_json_depth(text: bytes, depth: int) -> None:
    assert json_depth(text) == depth


def request(**body: object) -> RunSpec:
    return run_spec(RunRequest.model_validate({"message": {"role": "user", "content": "hi"},
                                               **body}))


def refusal(settings: Settings, body: RunSpec) -> tuple[int, str]:
    with pytest.raises(ApiError) as error:
        check_run_request(settings, body)
    return error.value.status, error.value.code


def test_message_text_tools_components_and_schemas_are_bounded() -> None:
    settings = Settings(max_message_chars=10, max_tools=1, max_components=1,
                        max_schema_bytes=100)
    check_run_request(settings, request())
    assert refusal(settings, request(message={"role": "user", "content": "x" * 11})) == (
        413, "MESSAGE_TOO_LARGE")
    tool = {"name": "t", "inputSchema": {"type": "object"}}
    assert refusal(settings, request(tools=[tool, {**tool, "name": "u"}])) == (
        400, "TOO_MANY_TOOLS")
    component = {"name": "C", "propsSchema": {"type": "object"}}
    assert refusal(settings, request(availableComponents=[component, component])) == (
        400, "TOO_MANY_COMPONENTS")
    big = {"type": "object", "description": "d" * 100}
    assert len(json.dumps(big)) > 100
    assert refusal(settings, request(tools=[{"name": "t", "inputSchema": big}])) == (
        413, "SCHEMA_TOO_LARGE")
    tool_result = {"role": "user", "content": [{"type": "tool_result", "toolUseId": "c1",
                                                "content": "y" * 11}]}
    assert refusal(settings, request(message=tool_result)) == (413, "MESSAGE_TOO_LARGE")
