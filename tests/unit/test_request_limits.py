"""Request limits that need no server: JSON depth read from the raw bytes, and the run
request's message, tools and component schemas against the settings."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from gateway.api import json_body as request_limits
from gateway.api.json_body import (
    SCAN_OFF_LOOP_BYTES,
    SEARCH_WINDOW,
    check_json_body,
    checked_json_body,
    scan_json,
)
from gateway.config import Settings
from gateway.dialects.tambo.input import run_spec
from gateway.protocol.problems import ApiError, Problem
from gateway.protocol.run_spec import RunSpec
from gateway.protocol.tambo import RunRequest
from gateway.runs.admission.checks import check_limits as check_run_request


@pytest.mark.parametrize(("text", "depth"), [
    (b'{"a": 1}', 1),
    (b'[[[]], {"b": [{}]}]', 4),
    (b'{"s": "[[[[{{{{ \\" ]]"}', 1),  # brackets and an escaped quote inside a string
    (b'"just a string"', 0),
    (b"[" * 500 + b"]" * 500, 500),
])
def test_json_depth(text: bytes, depth: int) -> None:
    assert scan_json(text).depth == depth


@pytest.mark.parametrize(("text", "beyond"), [
    (b'{"a": 9223372036854775807, "b": -9223372036854775808}', False),  # the range's ends
    (b'{"a": 9223372036854775808}', True),
    (b'{"a": [1, -9223372036854775809]}', True),
    (b'{"a": 1e400, "b": 0.123456789012345678901234, "c": 1.5e-12345678901234567890}', False),
    (b'{"a": 123456789012345678901234.5}', False),  # a float, whatever its digits
    (b'{"s": "99999999999999999999999999", "t": "\\" 99999999999999999999999"}', False),
])
def test_integers_beyond_64_bits_are_found_outside_strings(text: bytes, beyond: bool) -> None:
    """Python reads any integer, but the model client cannot send one past 64 bits: such a
    body is refused before the run starts (the fuzzer found one failing a run)."""
    assert json.loads(text) is not None  # every case is valid JSON
    assert (scan_json(text).number_problem is Problem.INTEGER_OUT_OF_RANGE) is beyond


@pytest.mark.parametrize(("text", "found"), [
    (b'{"a": 1.5e308, "b": -2.2e-308, "c": 5e-324, "d": 1e-400, "e": 0.1}', None),
    (b'{"s": "NaN Infinity 1e400", "t": "\\" -Infinity"}', None),  # inside strings
    (b'{"a": [1, NaN]}', b"NaN"),
    (b'{"a": Infinity}', b"Infinity"),
    (b'{"a": -Infinity}', b"-Infinity"),
    (b'{"a": 1e400}', b"1e400"),
    (b'{"a": -12.5E+999}', b"-12.5E+999"),
    (b'{"a": ' + b"9" * 400 + b'.5}', b"9" * 400 + b".5"),
])
def test_numbers_no_double_holds_are_found_outside_strings(text: bytes,
                                                           found: bytes | None) -> None:
    """The parsers read `NaN`, `Infinity` and `1e400` (as infinity), but PostgreSQL refuses
    them in JSON and no JSON peer can be sent them: a thread's metadata holding one failed
    its run's start on PostgreSQL as if the database were down (503)."""
    scan = scan_json(text)
    assert scan.number == found
    assert (scan.number_problem in (Problem.INVALID_JSON, Problem.NUMBER_OUT_OF_RANGE)) is (
        found is not None)


@pytest.mark.parametrize(("text", "code"), [
    (b'{"metadata": {"x": NaN}}', "INVALID_JSON"),
    (b'{"metadata": {"x": 1e999}}', "NUMBER_OUT_OF_RANGE"),
])
def test_a_body_with_a_number_no_double_holds_is_refused(text: bytes, code: str) -> None:
    with pytest.raises(ApiError) as error:
        check_json_body(text, 32)
    assert (error.value.status, error.value.code) == (400, code)


def strings(value: object) -> list[str]:
    """Every string of a parsed JSON value, its object keys included."""
    if isinstance(value, dict):
        return [*value, *(s for v in value.values() for s in strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


@pytest.mark.parametrize(("text", "nul"), [
    (b'{"a": "x\\u0000y"}', True),
    (b'{"a\\u0000": 1}', True),  # in a key too
    (b'{"a": "\\\\\\u0000"}', True),  # an escaped backslash, then the escape
    (b'{"a": "\\\\u0000"}', False),  # a backslash, then the text "u0000"
    (b'{"a": "\\u0001 u0000"}', False),
])
def test_a_nul_character_is_found_in_strings(text: bytes, nul: bool) -> None:
    """PostgreSQL stores no NUL character in text or JSON (it answered 400 there while SQLite
    kept it): a body holding one is refused alike on every database."""
    assert any("\x00" in s for s in strings(json.loads(text))) is nul  # as the parser reads it
    assert scan_json(text).nul is nul
    if nul:
        with pytest.raises(ApiError) as error:
            check_json_body(text, 32)
        assert (error.value.status, error.value.code) == (400, "NUL_CHARACTER")
        assert "NUL" in error.value.detail


def request(**body: object) -> RunSpec:
    return run_spec(RunRequest.model_validate({"message": {"role": "user", "content": "hi"},
                                               **body}))


def refusal(settings: Settings, body: RunSpec) -> tuple[int, str]:
    with pytest.raises(ApiError) as error:
        check_run_request(settings, body)
    return error.value.status, error.value.code


@pytest.mark.parametrize("offset", [-10, -2, 0])
def test_a_big_bodys_number_is_found_across_search_windows(offset: int) -> None:
    """A body is searched for long numbers a window at a time: a number across a window's edge
    (here starting `offset` bytes from it, in the second window or across into it) is found
    all the same."""
    def starting_at(at: int, number: bytes) -> bytes:
        opening, closing = b'{"pad": "', b'", "n": '
        return opening + b"x" * (at - len(opening) - len(closing)) + closing + number + b"}"

    for number, problem in ((b"9" * 25, Problem.INTEGER_OUT_OF_RANGE),
                            (b"1e400", Problem.NUMBER_OUT_OF_RANGE)):
        body = starting_at(SEARCH_WINDOW + offset, number)
        assert body.index(number) == SEARCH_WINDOW + offset
        assert scan_json(body).number_problem is problem


def test_a_big_body_is_scanned_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A body of `SCAN_OFF_LOOP_BYTES` or more is checked on a worker thread (a 10 MB body's
    scan takes most of a second: on the loop, every stream would wait for it), a small one
    on the loop; the refusal is the same either way."""
    scanned_on: list[int] = []
    check = request_limits.check_json_body

    def recorded(raw: bytes, depth_limit: int) -> None:
        scanned_on.append(threading.get_ident())
        check(raw, depth_limit)

    monkeypatch.setattr(request_limits, "check_json_body", recorded)
    big = b'{"a": [' + b"[" * 70 + b"]" * 70 + b',"' + b"x" * SCAN_OFF_LOOP_BYTES + b'"]}'

    async def check_both() -> None:
        await checked_json_body(b'{"a": 1}', 64)
        with pytest.raises(ApiError) as deep:
            await checked_json_body(big, 64)
        assert deep.value.problem is Problem.JSON_TOO_DEEP

    asyncio.run(check_both())
    loop_thread = threading.get_ident()
    assert scanned_on[0] == loop_thread and scanned_on[1] != loop_thread


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


def test_nan_inside_strings_costs_no_token_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """A body whose `NaN`/`Infinity`/long digits are all inside strings is scanned like one
    without them: the number-by-number pass (a Python loop over every token, about a second
    per MB of small tokens) runs only for one outside a string, which it refuses."""
    json_body = request_limits
    passes: list[bytes] = []

    class Spy:
        def finditer(self, raw: bytes) -> Any:
            passes.append(raw)
            return json_body_tokens.finditer(raw)

    json_body_tokens = json_body._TOKENS
    monkeypatch.setattr(json_body, "_TOKENS", Spy())
    body = b'{"a":[' + b"0," * 1000 + b'"NaN","-Infinity","12345678901234567890","1e999"]}'
    assert json_body.scan_json(body) == json_body.JsonScan(2)
    assert passes == []
    refused = json_body.scan_json(b'{"a":"NaN","b":NaN}')
    assert refused.number == b"NaN" and passes


@pytest.mark.parametrize("padding", [0, 1, 7, 65_530, 65_536, 70_000])
def test_strings_across_the_scans_windows_are_still_strings(padding: int) -> None:
    """The strings are taken out a window at a time: a string cut by a window's end, one
    longer than a window, escaped quotes and backslashes are read as the parser reads them."""
    text = "p" * padding + '\\" NaN \\\\'
    inside = json.dumps({"a": text, "b": ["x" * 70_000 + "Infinity", "1e999"]}).encode()
    assert scan_json(inside).number is None
    outside = inside[:-1] + b', "c": -Infinity}'
    assert scan_json(outside).number == b"-Infinity"
