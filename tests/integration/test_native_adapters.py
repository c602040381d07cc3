"""Anthropic and Gemini streamed directly (`NativeModel`) are indistinguishable from litellm's
path to the agent loop.

Both adapters are driven against the same real upstream on loopback (the scripted model, in
Anthropic's Messages format and in Gemini's): scripted streams, and streams recorded in each
provider's format replayed byte for byte in odd-sized writes. Each scenario asserts what the
loop must see, and that both adapters see exactly that (the same deltas in the same order, the
same error: code, message, retryability). Then what only the direct path does (an answer cut
before the provider's end is an error). What each sends is in
tests/inprocess/engine/test_native_requests.py; that a stopped stream closes its upstream at
once, for every format, in tests/integration/test_model_adapters.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway.engine.deltas import (
    Finish,
    ModelError,
    ReasoningDelta,
    ReasoningSignature,
    RedactedReasoning,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from gateway.engine.models.adapters import model_adapter
from gateway.engine.models.litellm_model import LiteLLMModel, ModelRequest
from gateway.engine.models.native import NativeModel
from gateway.services import load_litellm
from tests.support.model_stream import HI, outcome
from tests.support.scripted_model import ScriptedModel

pytestmark = pytest.mark.sqlite_only  # the adapters against the upstream: no gateway, no store

KEY = "sk-test-secret-key-1234"
WIRES = ("anthropic", "gemini")
TOOLS = [{"type": "function", "function": {"name": name, "description": f"the {name} tool",
                                           "parameters": {"type": "object", "properties": {
                                               "x": {"type": "integer"}}}}}
         for name in ("a", "b")]

load_litellm()


@pytest.fixture
async def made() -> AsyncIterator[Callable[..., NativeModel | LiteLLMModel]]:
    """`model_adapter` for a wire's scripted upstream, direct adapters closed after the test."""
    models: list[Any] = []

    def make(scripted: ScriptedModel, wire: str, adapter: str = "direct",
             name: str = "scripted") -> NativeModel | LiteLLMModel:
        model = model_adapter(f"{wire}/{name}", scripted.base_for(wire), KEY, adapter)
        assert isinstance(model, NativeModel if adapter == "direct" else LiteLLMModel)
        models.append(model)
        return model

    yield make
    for model in models:
        if isinstance(model, NativeModel):
            await model.aclose()


def _anthropic(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


# A Claude answer with extended thinking and a tool call, as Anthropic streams it (pings and
# all; the signature shortened).
ANTHROPIC_RECORDED = "".join([
    _anthropic("message_start", {"message": {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": 472, "cache_creation_input_tokens": 0,
                                         "cache_read_input_tokens": 128, "output_tokens": 2}}}),
    _anthropic("content_block_start", {"index": 0, "content_block": {
        "type": "thinking", "thinking": "", "signature": ""}}),
    _anthropic("ping", {}),
    _anthropic("content_block_delta", {"index": 0, "delta": {
        "type": "thinking_delta", "thinking": "The user wants the weather. "}}),
    _anthropic("content_block_delta", {"index": 0, "delta": {
        "type": "thinking_delta", "thinking": "I'll call the tool."}}),
    _anthropic("content_block_delta", {"index": 0, "delta": {
        "type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl"}}),
    _anthropic("content_block_stop", {"index": 0}),
    _anthropic("content_block_start", {"index": 1, "content_block": {"type": "text",
                                                                     "text": ""}}),
    _anthropic("content_block_delta", {"index": 1, "delta": {
        "type": "text_delta", "text": "Let me check — un instant. 🌦"}}),
    _anthropic("content_block_stop", {"index": 1}),
    _anthropic("content_block_start", {"index": 2, "content_block": {
        "type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather",
        "input": {}}}),
    _anthropic("content_block_delta", {"index": 2, "delta": {
        "type": "input_json_delta", "partial_json": ""}}),
    _anthropic("content_block_delta", {"index": 2, "delta": {
        "type": "input_json_delta", "partial_json": "{\"city\": \"Par"}}),
    _anthropic("content_block_delta", {"index": 2, "delta": {
        "type": "input_json_delta", "partial_json": "is\"}"}}),
    _anthropic("content_block_stop", {"index": 2}),
    _anthropic("message_delta", {"delta": {"stop_reason": "tool_use", "stop_sequence": None},
                                 "usage": {"output_tokens": 89}}),
    _anthropic("message_stop", {}),
])


def _gemini(parts: list[dict[str, Any]], finish: str | None = None,
            usage: dict[str, int] | None = None) -> str:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return "data: " + json.dumps({
        "candidates": [candidate], "usageMetadata": usage or {"promptTokenCount": 61,
                                                              "totalTokenCount": 61},
        "modelVersion": "gemini-2.5-flash", "responseId": "mBbCaO3gD4ajxN8P0_LmsQc"}) + "\r\n\r\n"


# A Gemini 2.5 answer with thoughts and two function calls, as Google streams it (CRLF).
GEMINI_RECORDED = "".join([
    _gemini([{"text": "**Planning the lookups**\n\nI need both cities.", "thought": True}]),
    _gemini([{"text": "Checking both cities"}]),
    _gemini([{"text": " now."}]),
    _gemini([{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
              "thoughtSignature": "CiQB0e2Kb7Qz"},
             {"functionCall": {"name": "get_weather", "args": {"city": "Zürich"}}}]),
    _gemini([{"text": ""}], "STOP", {"promptTokenCount": 61, "candidatesTokenCount": 24,
                                     "totalTokenCount": 140, "thoughtsTokenCount": 55,
                                     "cachedContentTokenCount": 32}),
])

SCENARIOS: dict[str, tuple[list[dict[str, Any]], dict[str, list[Any]]]] = {
    "text": (
        [{"content": "Hello "}, {"content": "world"}, {"usage": {"prompt_tokens": 7,
                                                                 "completion_tokens": 3}}],
        {w: [TextDelta("Hello "), TextDelta("world"), Finish("stop"), Usage(7, 3)]
         for w in WIRES},
    ),
    "reasoning, signed, then text": (
        [{"reasoning": "Think "}, {"reasoning": "twice."}, {"signature": "sig-abc"},
         {"content": "Done."}, {"usage": {"prompt_tokens": 9, "completion_tokens": 6}}],
        # Anthropic signs its thinking block; Gemini signs the part after (here, the last).
        {"anthropic": [ReasoningDelta("Think "), ReasoningDelta("twice."),
                       ReasoningSignature("sig-abc"), TextDelta("Done."), Finish("stop"),
                       Usage(9, 6, reasoning_tokens=3)],
         "gemini": [ReasoningDelta("Think "), ReasoningDelta("twice."), TextDelta("Done."),
                    Finish("stop"), Usage(9, 6, reasoning_tokens=4)]},
    ),
    "redacted thinking": (
        [{"redacted": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"}, {"content": "Hi."}],
        {"anthropic": [RedactedReasoning("EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"),
                       TextDelta("Hi."), Finish("stop"), Usage(1, 1)],
         "gemini": [TextDelta("Hi."), Finish("stop"), Usage(1, 1)]},
    ),
    "tool calls": (
        [{"content": "Checking."},
         {"tool_call": {"index": 0, "id": "call_1", "name": "a", "arguments": '{"x"'}},
         {"tool_call": {"index": 0, "arguments": ": 1}"}},
         {"tool_call": {"index": 1, "id": "call_2", "name": "b"}}],
        # Anthropic streams the arguments (an empty call's are `{}`); Gemini sends each call
        # whole, with the id Gemini 3 sends.
        {"anthropic": [TextDelta("Checking."), ToolCallDelta(0, "call_1", "a", ""),
                       ToolCallDelta(0, None, None, '{"x"'), ToolCallDelta(0, None, None, ": 1}"),
                       ToolCallDelta(1, "call_2", "b", ""), ToolCallDelta(1, None, None, "{}"),
                       Finish("tool_calls"), Usage(1, 5)],
         "gemini": [TextDelta("Checking."), ToolCallDelta(0, "call_1", "a", '{"x": 1}'),
                    ToolCallDelta(1, "call_2", "b", "{}"), Finish("tool_calls"), Usage(1, 5)]},
    ),
    "usage with cached input": (
        [{"content": "Hi"}, {"usage": {"prompt_tokens": 120, "completion_tokens": 30,
                                       "prompt_tokens_details": {"cached_tokens": 100}}}],
        {w: [TextDelta("Hi"), Finish("stop"), Usage(120, 30, cached_input_tokens=100)]
         for w in WIRES},
    ),
    "stopped at max tokens": (
        [{"content": "Once upon"}, {"finish": "length"}],
        {w: [TextDelta("Once upon"), Finish("length"), Usage(1, 3)] for w in WIRES},
    ),
    "recorded provider stream, 7-byte writes": (
        [{"raw": {"body": "", "piece": 7}}],  # the wire's own recording (`_recorded`)
        {"anthropic": [ReasoningDelta("The user wants the weather. "),
                       ReasoningDelta("I'll call the tool."),
                       ReasoningSignature("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl"),
                       TextDelta("Let me check — un instant. 🌦"),
                       ToolCallDelta(0, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", ""),
                       ToolCallDelta(0, None, None, '{"city": "Par'),
                       ToolCallDelta(0, None, None, 'is"}'), Finish("tool_calls"),
                       Usage(600, 89, reasoning_tokens=12, cached_input_tokens=128)],
         "gemini": [ReasoningDelta("**Planning the lookups**\n\nI need both cities."),
                    TextDelta("Checking both cities"), TextDelta(" now."),
                    ToolCallDelta(0, "<generated>__thought__CiQB0e2Kb7Qz", "get_weather",
                                  '{"city": "Paris"}'),
                    ToolCallDelta(1, "<generated>", "get_weather", '{"city": "Zürich"}'),
                    Finish("tool_calls"),
                    Usage(61, 79, reasoning_tokens=55, cached_input_tokens=32)]},
    ),
    "rate limited": (
        [{"error": 429, "message": f"Rate limit reached for key {KEY} and sk-otherkey9876"}],
        {w: [("LLM_RATE_LIMITED", True, 429)] for w in WIRES},
    ),
    "prompt too long": (
        [{"error": 400, "message": "prompt is too long: 208310 tokens > 200000 maximum"
                                   " / The input token count (208310) exceeds the maximum "
                                   "number of tokens allowed (1048576)."}],
        {w: [("LLM_CONTEXT_WINDOW_EXCEEDED", False, 400)] for w in WIRES},
    ),
    "bad request": ([{"error": 400, "message": "tools.0.name: String should match pattern"}],
                    {w: [("LLM_CLIENT_ERROR", False, 400)] for w in WIRES}),
    "bad key": ([{"error": 401, "message": "invalid x-api-key"}],
                {w: [("LLM_AUTHENTICATION_ERROR", False, 401)] for w in WIRES}),
    "forbidden": ([{"error": 403, "message": "Your API key does not have permission"}],
                  {w: [("LLM_AUTHENTICATION_ERROR", False, 403)] for w in WIRES}),
    "server error": ([{"error": 500, "message": "Internal server error"}],
                     {w: [("LLM_SERVER_ERROR", True, 500)] for w in WIRES}),
    "connection cut mid-stream": (
        [{"content": "Partial "}, {"content": "answer"}, {"error": 500, "message": "cut"}],
        {w: [TextDelta("Partial "), TextDelta("answer"), ("LLM_SERVER_ERROR", True, None)]
         for w in WIRES},
    ),
    "the provider's error inside the stream": (
        [{"content": "Partial "}, {"stream_error": {"message": "Internal error"}}],
        {w: [TextDelta("Partial "), ("LLM_SERVER_ERROR", True, None)] for w in WIRES},
    ),
}


def _recorded(wire: str, turn: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if turn and "raw" in turn[0]:
        body = ANTHROPIC_RECORDED if wire == "anthropic" else GEMINI_RECORDED
        return [{"raw": {**turn[0]["raw"], "body": body}}]
    return turn


def comparable(items: list[Any]) -> list[Any]:
    """Errors as their fields; Gemini's generated tool call ids as `<generated>`."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, ModelError):
            item = (item.code, item.message, item.category, item.retryable)
        elif isinstance(item, ToolCallDelta) and item.id and item.id.startswith("call_") \
                and len(item.id.split("__")[0]) == 33:
            _, _, signature = item.id.partition("__thought__")
            generated = "<generated>" + (f"__thought__{signature}" if signature else "")
            item = ToolCallDelta(item.index, generated, item.name, item.arguments)
        out.append(item)
    return out


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_both_adapters_stream_the_same(scripted_model: ScriptedModel, wire: str,
                                             scenario: str, made: Callable[..., Any]):
    turn, expected_by_wire = SCENARIOS[scenario]
    expected = expected_by_wire[wire]
    results = {}
    for adapter in ("litellm", "direct"):
        model = made(scripted_model, wire, adapter)
        scripted_model.enqueue(_recorded(wire, turn))
        results[adapter] = await outcome(model, ModelRequest(messages=HI, tools=TOOLS))

    seen = comparable(results["direct"])
    if isinstance(expected[-1], tuple):  # a failure: the deltas before it, then the error
        # The direct path also meters what the call consumed before it failed (litellm's
        # wrapper drops it): the provider's count so far, once the stream had started.
        metered = [d for d in seen if isinstance(d, Usage)]
        seen = [d for d in seen if not isinstance(d, Usage)]
        assert len(metered) == (1 if len(expected) > 1 else 0), results["direct"]
        assert seen == comparable(results["litellm"])
        code, retryable, status = expected[-1]
        error = results["direct"][-1]
        assert isinstance(error, ModelError), seen
        assert (error.code, error.retryable) == (code, retryable)
        assert status is None or error.status == status
        assert KEY not in error.message and "sk-otherkey" not in error.message
        assert seen[:-1] == expected[:-1]
    else:
        assert seen == comparable(results["litellm"])
        assert seen == expected


@pytest.mark.parametrize("wire", WIRES)
async def test_a_providers_error_reaches_the_client_in_its_own_words(
        scripted_model: ScriptedModel, wire: str, made: Callable[..., Any]):
    """Not the body as a Python bytes literal (`b'{"type":"error",...}'`): the sentence in it,
    on both paths."""
    text = "Number of request tokens has exceeded your per-minute rate limit"
    for adapter in ("litellm", "direct"):
        scripted_model.enqueue([{"error": 429, "message": text}])
        [error] = await outcome(made(scripted_model, wire, adapter))
        assert isinstance(error, ModelError)
        assert (error.code, error.message) == ("LLM_RATE_LIMITED", text)


@pytest.mark.parametrize("wire", WIRES)
async def test_an_answer_cut_before_the_providers_end_is_an_error_after_what_streamed(
        scripted_model: ScriptedModel, wire: str, made: Callable[..., Any]):
    """The body ended cleanly without `message_stop` (or any `finishReason`): a proxy or a
    provider that stopped. litellm's path ends such an answer as if complete."""
    scripted_model.enqueue([{"content": "The first half"}, {"cut": True}])
    seen = await outcome(made(scripted_model, wire))
    assert seen[0] == TextDelta("The first half")
    assert isinstance(seen[-2], Usage) and seen[-2].input_tokens > 0  # metered all the same
    assert isinstance(seen[-1], ModelError) and seen[-1].code == "LLM_STREAM_INCOMPLETE"
    assert seen[-1].retryable and not any(isinstance(d, Finish) for d in seen)


@pytest.mark.parametrize("wire", WIRES)
async def test_runs_one_after_another_reuse_one_connection(
        scripted_model: ScriptedModel, wire: str, made: Callable[..., Any]):
    scripted_model.enqueue([{"content": "one"}], [{"content": "two"}], [{"content": "three"}])
    model = made(scripted_model, wire)
    texts = [await outcome(model) for _ in range(3)]
    assert [seen[0] for seen in texts] == [TextDelta("one"), TextDelta("two"), TextDelta("three")]
    ports = scripted_model.peers
    assert len(ports) == 3 and len(set(ports)) == 1


@pytest.mark.parametrize("wire", WIRES)
async def test_non_streamed_calls_go_through_litellm(
        scripted_model: ScriptedModel, wire: str, made: Callable[..., Any]):
    model = made(scripted_model, wire)
    scripted_model.enqueue({"steps": [{"content": "A short title"}], "stream": False})
    assert await model.complete([{"role": "user", "content": "name this"}]) == "A short title"
    assert not scripted_model.requests[-1].get("stream")
