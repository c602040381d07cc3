"""The direct adapter and the litellm adapter are indistinguishable to the agent loop.

Both are driven against the same real OpenAI-compatible upstream (the scripted model on
loopback): scripted streams, and recorded provider streams replayed byte for byte in odd-sized
writes. Each scenario asserts what the loop must see, and that both adapters see exactly that:
the same deltas in the same order, the same error (code, message, retryability, status), the
upstream connection closed at once when the consumer stops.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway.engine.deltas import (
    Finish,
    ModelError,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from gateway.engine.models.adapters import AdapterError, model_adapter
from gateway.engine.models.direct import DirectModel
from gateway.engine.models.litellm_model import LiteLLMModel, ModelRequest
from gateway.engine.models.native import NativeModel
from gateway.services import load_litellm
from tests.support.model_stream import outcome
from tests.support.scripted_model import ScriptedModel

# The adapters against the upstream: no gateway, no store.
pytestmark = pytest.mark.sqlite_only

KEY = "sk-test-secret-key-1234"
ADAPTERS = ("litellm", "direct")

load_litellm()


@pytest.fixture
async def made() -> AsyncIterator[Callable[..., DirectModel | NativeModel | LiteLLMModel]]:
    """`model_adapter`, its direct adapters closed after the test (as the server closes them)."""
    models: list[DirectModel | NativeModel | LiteLLMModel] = []

    def make(*args: Any) -> DirectModel | NativeModel | LiteLLMModel:
        models.append(model_adapter(*args))
        return models[-1]

    yield make
    for model in models:
        if isinstance(model, (DirectModel, NativeModel)):
            await model.aclose()


def _chunk(delta: str, finish: str = "null") -> str:
    return ('data: {"id":"chatcmpl-AbC","object":"chat.completion.chunk","created":1732000000,'
            '"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[{"index":0,'
            f'"delta":{delta},"logprobs":null,"finish_reason":{finish}}}],"usage":null}}\n\n')


# What an OpenAI chat-completions stream with two parallel tool calls looks like on the wire.
OPENAI_PARALLEL_TOOLS = (
    _chunk('{"role":"assistant","content":null,"refusal":null}')
    + _chunk('{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":'
             '{"name":"get_weather","arguments":""}}]}')
    + _chunk('{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\": \\"Par"}}]}')
    + _chunk('{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":'
             '{"name":"get_time","arguments":""}}]}')
    + _chunk('{"tool_calls":[{"index":0,"function":{"arguments":"is\\"}"}}]}')
    + _chunk('{"tool_calls":[{"index":1,"function":{"arguments":"{\\"tz\\": \\"CET\\"}"}}]}')
    + _chunk("{}", '"tool_calls"')
    + 'data: {"id":"chatcmpl-AbC","object":"chat.completion.chunk","created":1732000000,'
      '"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[],"usage":'
      '{"prompt_tokens":57,"completion_tokens":41,"total_tokens":98}}\n\n'
    + "data: [DONE]\n\n"
)

# A vLLM-style reasoning stream, with CRLF line endings and keep-alive comments.
VLLM_REASONING = (
    ": ping\r\n\r\n"
    + _chunk('{"role":"assistant","content":""}')
    + _chunk('{"reasoning_content":"The user greets. "}')
    + _chunk('{"reasoning_content":"Answer briefly."}')
    + ": ping\r\n\r\n"
    + _chunk('{"content":"Hello"}')
    + _chunk('{"content":" there, \\u00e9l\\u00e8ve \\ud83d\\udc4b"}')
    + _chunk("{}", '"stop"')
    + 'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
      '"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}\n\n'
    + "data: [DONE]\n\n"
).replace("\n", "\r\n").replace("\r\r\n", "\r\n")

SCENARIOS: dict[str, tuple[list[dict[str, Any]], list[Any]]] = {
    "text": (
        [{"content": "Hello "}, {"content": "world"}, {"usage": {"prompt_tokens": 7,
                                                                 "completion_tokens": 3}}],
        [TextDelta("Hello "), TextDelta("world"), Finish("stop"), Usage(7, 3)],
    ),
    "reasoning then text": (
        [{"reasoning": "Think "}, {"reasoning": "twice."}, {"content": "Done."}],
        # The scripted server does not break its usage down: the reasoning tokens are counted
        # from the streamed reasoning, by litellm and by the direct adapter alike.
        [ReasoningDelta("Think "), ReasoningDelta("twice."), TextDelta("Done."), Finish("stop"),
         Usage(1, 5, reasoning_tokens=3)],
    ),
    "usage broken down by the provider": (
        [{"reasoning": "Hm."}, {"content": "Hi"},
         {"usage": {"prompt_tokens": 120, "completion_tokens": 30,
                    "completion_tokens_details": {"reasoning_tokens": 10},
                    "prompt_tokens_details": {"cached_tokens": 100}}}],
        [ReasoningDelta("Hm."), TextDelta("Hi"), Finish("stop"),
         Usage(120, 30, reasoning_tokens=10, cached_input_tokens=100)],
    ),
    "parallel tool calls": (
        [{"content": "Checking."},
         {"tool_call": {"index": 0, "id": "call_1", "name": "a", "arguments": '{"x"'}},
         {"tool_call": {"index": 1, "id": "call_2", "name": "b", "arguments": ""}},
         {"tool_call": {"index": 0, "arguments": ": 1}"}},
         {"tool_call": {"index": 1, "arguments": "{}"}}],
        [TextDelta("Checking."), ToolCallDelta(0, "call_1", "a", '{"x"'),
         ToolCallDelta(1, "call_2", "b", ""), ToolCallDelta(0, None, None, ": 1}"),
         ToolCallDelta(1, None, None, "{}"), Finish("tool_calls"), Usage(1, 5)],
    ),
    "recorded OpenAI parallel tool calls, 7-byte writes": (
        [{"raw": {"body": OPENAI_PARALLEL_TOOLS, "piece": 7}}],
        [ToolCallDelta(0, "call_a", "get_weather", ""),
         ToolCallDelta(0, None, None, '{"city": "Par'),
         ToolCallDelta(1, "call_b", "get_time", ""), ToolCallDelta(0, None, None, 'is"}'),
         ToolCallDelta(1, None, None, '{"tz": "CET"}'), Finish("tool_calls"), Usage(57, 41)],
    ),
    "recorded vLLM reasoning, CRLF, 13-byte writes": (
        [{"raw": {"body": VLLM_REASONING, "piece": 13}}],
        [ReasoningDelta("The user greets. "), ReasoningDelta("Answer briefly."),
         TextDelta("Hello"), TextDelta(" there, élève 👋"), Finish("stop"), Usage(12, 9, reasoning_tokens=8)],
    ),
    "rate limited": (
        [{"error": 429, "message": f"Rate limit reached for key {KEY} and sk-otherkey9876"}],
        [("LLM_RATE_LIMITED", True, 429)],
    ),
    "context window": (
        [{"error": 400, "code": "context_length_exceeded",
          "message": "This model's maximum context length is 8192 tokens."}],
        [("LLM_CONTEXT_WINDOW_EXCEEDED", False, 400)],
    ),
    "bad request": ([{"error": 400, "message": "Invalid value for 'tool_choice'."}],
                    [("LLM_CLIENT_ERROR", False, 400)]),
    "bad key": ([{"error": 401, "message": f"Incorrect API key provided: {KEY}"}],
                [("LLM_AUTHENTICATION_ERROR", False, 401)]),
    "forbidden": ([{"error": 403, "message": "Project lacks access"}],
                  [("LLM_AUTHENTICATION_ERROR", False, 403)]),
    "unknown model": ([{"error": 404, "message": "The model `x` does not exist"}],
                      [("LLM_CLIENT_ERROR", False, 404)]),
    "server error": ([{"error": 500, "message": "boom"}], [("LLM_SERVER_ERROR", True, 500)]),
    "overloaded": ([{"error": 503, "message": "overloaded"}], [("LLM_SERVER_ERROR", True, 503)]),
    "connection cut mid-stream": (
        [{"content": "Partial "}, {"content": "answer"}, {"error": 500, "message": "cut"}],
        [TextDelta("Partial "), TextDelta("answer"), ("LLM_SERVER_ERROR", True, 500)],
    ),
}


def comparable(items: list[Any]) -> list[Any]:
    return [(i.code, i.message, i.category, i.retryable, i.status) if isinstance(i, ModelError)
            else i for i in items]


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_both_adapters_stream_the_same(scripted_model: ScriptedModel, scenario: str,
                                             made: Callable[..., Any]):
    turn, expected = SCENARIOS[scenario]
    results = {}
    for adapter in ADAPTERS:
        model = made("openai/scripted", scripted_model.base_url, KEY, adapter)
        assert isinstance(model, DirectModel if adapter == "direct" else LiteLLMModel)
        scripted_model.enqueue(turn)
        results[adapter] = await outcome(model)

    assert comparable(results["direct"]) == comparable(results["litellm"])
    seen = results["direct"]
    if isinstance(expected[-1], tuple):  # a failure: the deltas before it, then the error
        code, retryable, status = expected[-1]
        error = seen[-1]
        assert isinstance(error, ModelError), seen
        assert (error.code, error.retryable, error.status) == (code, retryable, status)
        assert KEY not in error.message and "sk-otherkey" not in error.message
        assert seen[:-1] == expected[:-1]
    else:
        assert seen == expected


@pytest.mark.parametrize(("wire", "adapter"), [
    ("openai", "litellm"), ("openai", "direct"), ("anthropic", "direct"), ("gemini", "direct")])
async def test_unreachable_upstream_is_its_own_retryable_error(wire: str, adapter: str,
                                                               made: Callable[..., Any]):
    from tests.support.gateway_server import free_port

    model = made(f"{wire}/scripted", f"http://127.0.0.1:{free_port()}/v1", KEY, adapter)
    [error] = await outcome(model)

    assert isinstance(error, ModelError)
    # Not a provider's 5xx: nothing answered, so the operator must look at the address.
    assert (error.code, error.retryable, error.status) == ("LLM_UNREACHABLE", True, 502)


async def _first_deltas(stream: AsyncIterator[Any], count: int) -> None:
    for _ in range(count):
        await anext(stream)


@pytest.mark.parametrize(("wire", "adapter"), [
    ("openai", "litellm"), ("openai", "direct"), ("anthropic", "direct"), ("gemini", "direct")])
@pytest.mark.parametrize("how", ["aclose", "cancel"])
async def test_stopping_the_stream_closes_the_upstream_at_once(
        scripted_model: ScriptedModel, wire: str, adapter: str, how: str,
        made: Callable[..., Any]):
    """On every format the gateway streams directly (Anthropic's and Gemini's through
    `NativeModel`), and through litellm."""
    model = made(f"{wire}/scripted", scripted_model.base_for(wire), KEY, adapter)
    scripted_model.enqueue([{"slow": {"count": 500, "interval": 0.02}}])
    stream = model.stream(ModelRequest(messages=[{"role": "user", "content": "hi"}]))
    before = len(scripted_model.disconnects)
    if how == "aclose":
        await _first_deltas(stream, 3)
        stopped = time.monotonic()
        await stream.aclose()
    else:
        streaming = asyncio.Event()

        async def consume() -> None:
            seen = 0
            async for _ in stream:
                seen += 1
                if seen == 3:  # the upstream is streaming (not a fixed wait: a busy machine)
                    streaming.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(streaming.wait(), 30)
        stopped = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    while len(scripted_model.disconnects) == before and time.monotonic() - stopped < 5:
        await asyncio.sleep(0.01)

    assert len(scripted_model.disconnects) == before + 1, "the upstream kept streaming"
    # Well before the 500 tokens (10 s) would have ended: the upstream was closed, not drained.
    assert scripted_model.disconnects[-1][0] - stopped < 5.0


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_run_may_name_another_model_of_the_same_upstream(
        scripted_model: ScriptedModel, adapter: str, made: Callable[..., Any]):
    model = made("openai/scripted", scripted_model.base_url, KEY, adapter)
    scripted_model.enqueue([{"content": "From the large one."}])
    request = ModelRequest(messages=[{"role": "user", "content": "hi"}],
                           model="openai/scripted-large")
    deltas = [delta async for delta in model.stream(request)]

    assert TextDelta("From the large one.") in deltas
    assert scripted_model.requests[-1]["model"] == "scripted-large"


def test_auto_picks_direct_only_for_openai_compatible_providers(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GROQ_API_KEY", "gsk-from-env")
    local = model_adapter("openai/llama3", "http://127.0.0.1:11434/v1", None)
    groq = model_adapter("groq/llama-3.1-8b-instant", None, None)
    assert isinstance(local, DirectModel) and isinstance(groq, DirectModel)
    assert (local.model, local.api_base, local.api_key) == ("llama3", "http://127.0.0.1:11434/v1",
                                                            None)
    assert (groq.model, groq.provider, groq.api_key) == ("llama-3.1-8b-instant", "groq",
                                                         "gsk-from-env")
    assert groq.api_base.startswith("https://api.groq.com/")

    assert isinstance(model_adapter("cohere/command-r", None, "k"), LiteLLMModel)
    assert isinstance(model_adapter("gateway/demo", None, None), LiteLLMModel)
    assert isinstance(model_adapter("openai/x", "http://h/v1", "k", "litellm"), LiteLLMModel)
    with pytest.raises(AdapterError, match="cohere"):
        model_adapter("cohere/command-r", None, "k", "direct")


async def test_direct_adapter_answers_non_streamed_calls_through_litellm(
        scripted_model: ScriptedModel, made: Callable[..., Any]):
    model = made("openai/scripted", scripted_model.base_url, KEY, "direct")
    scripted_model.enqueue({"steps": [{"content": "A short title"}], "stream": False})

    assert await model.complete([{"role": "user", "content": "name this"}]) == "A short title"
    assert not scripted_model.requests[-1].get("stream")
