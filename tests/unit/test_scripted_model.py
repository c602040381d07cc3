"""The scripted upstream must look like a real OpenAI server *through litellm*,
because that is the path the gateway uses. These tests drive it with
``litellm.acompletion(model="openai/scripted", api_base=...)``."""

import asyncio
import os
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")

import httpx
import pytest

from tests.support.scripted_model import ScriptedModel

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def litellm():
    import litellm as _litellm  # ~5 s, once per module

    return _litellm


@pytest.fixture(scope="module")
def model():
    with ScriptedModel() as m:
        yield m


@pytest.fixture(autouse=True)
def _clean(model):
    model.reset()
    yield


def call(litellm, model, messages=None, **kwargs):
    return litellm.acompletion(
        model="openai/scripted",
        api_base=model.base_url,
        api_key="x",
        messages=messages or [{"role": "user", "content": "hi"}],
        max_retries=0,
        **kwargs,
    )


async def collect(stream):
    """Flatten litellm stream chunks into content, reasoning, tool calls and finish reason."""
    out = {"content": [], "reasoning": [], "tools": {}, "finish": None, "usage": None}
    async for chunk in stream:
        if getattr(chunk, "usage", None):
            out["usage"] = chunk.usage
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        if delta.content:
            out["content"].append(delta.content)
        if getattr(delta, "reasoning_content", None):
            out["reasoning"].append(delta.reasoning_content)
        for tc in delta.tool_calls or []:
            entry = out["tools"].setdefault(tc.index, {"id": None, "name": None, "args": []})
            entry["id"] = entry["id"] or tc.id
            entry["name"] = entry["name"] or tc.function.name
            if tc.function.arguments:
                entry["args"].append(tc.function.arguments)
        out["finish"] = choice.finish_reason or out["finish"]
    return out


async def test_litellm_stream_text_reasoning_and_tool_call_fragments(litellm, model):
    model.enqueue(
        [
            {"reasoning": "Need the weather."},
            {"content": "Let me "},
            {"content": "check."},
            {"tool_call": {"index": 0, "id": "call_1", "name": "get_weather", "arguments": '{"ci'}},
            {"tool_call": {"index": 0, "arguments": 'ty": "Paris"}'}},
        ]
    )
    out = await collect(await call(litellm, model, stream=True, tools=[WEATHER_TOOL]))
    assert out["reasoning"] == ["Need the weather."]
    assert out["content"] == ["Let me ", "check."]  # one step = one delta
    assert out["tools"] == {
        0: {"id": "call_1", "name": "get_weather", "args": ['{"ci', 'ty": "Paris"}']}
    }
    assert out["finish"] == "tool_calls"
    request = model.requests[0]
    assert request["stream"] is True
    assert request["tools"][0]["function"]["name"] == "get_weather"
    assert request["messages"] == [{"role": "user", "content": "hi"}]


async def test_two_parallel_tool_calls_and_explicit_finish(litellm, model):
    model.enqueue(
        [
            {
                "tool_call": {
                    "index": 0,
                    "id": "call_a",
                    "name": "get_weather",
                    "arguments": '{"city":"A"}',
                }
            },
            {
                "tool_call": {
                    "index": 1,
                    "id": "call_b",
                    "name": "get_weather",
                    "arguments": '{"city":"B"}',
                }
            },
            {"finish": "tool_calls"},
        ]
    )
    out = await collect(await call(litellm, model, stream=True, tools=[WEATHER_TOOL]))
    assert [(t["id"], "".join(t["args"])) for t in out["tools"].values()] == [
        ("call_a", '{"city":"A"}'),
        ("call_b", '{"city":"B"}'),
    ]


async def test_default_turn_echoes_last_user_message(litellm, model):
    messages = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "what is the weather today"}]},
    ]
    out = await collect(await call(litellm, model, messages, stream=True))
    assert "".join(out["content"]) == "You said: what is the weather today"
    assert len(out["content"]) > 1
    assert out["finish"] == "stop"


async def test_non_streaming_reply_is_built_from_the_same_turn(litellm, model):
    model.enqueue(
        [
            {"content": "Paris "},
            {"content": "weather"},
            {
                "tool_call": {
                    "index": 0,
                    "id": "call_1",
                    "name": "get_weather",
                    "arguments": '{"city":',
                }
            },
            {"tool_call": {"index": 0, "arguments": '"Paris"}'}},
        ]
    )
    response = await call(litellm, model, tools=[WEATHER_TOOL])
    message = response.choices[0].message
    assert message.content == "Paris weather"
    assert message.tool_calls[0].id == "call_1"
    assert message.tool_calls[0].function.arguments == '{"city":"Paris"}'
    assert response.choices[0].finish_reason == "tool_calls"
    assert response.usage.total_tokens > 0


async def test_stream_flag_on_a_turn_keeps_it_for_streaming_requests(litellm, model):
    model.enqueue({"steps": [{"content": "for the agent loop"}], "stream": True})
    side = await call(litellm, model, [{"role": "user", "content": "name this thread"}])
    assert side.choices[0].message.content == "You said: name this thread"
    out = await collect(await call(litellm, model, stream=True))
    assert out["content"] == ["for the agent loop"]


async def test_include_usage_adds_a_usage_chunk(litellm, model):
    model.enqueue([{"content": "hi"}, {"usage": {"prompt_tokens": 11, "completion_tokens": 3}}])
    out = await collect(
        await call(litellm, model, stream=True, stream_options={"include_usage": True})
    )
    assert model.requests[0]["stream_options"] == {"include_usage": True}
    assert (out["usage"].prompt_tokens, out["usage"].completion_tokens) == (11, 3)


async def test_http_error_as_first_step(litellm, model):
    model.enqueue([{"error": 503, "message": "overloaded"}])
    with pytest.raises(litellm.ServiceUnavailableError) as info:
        await collect(await call(litellm, model, stream=True))
    assert getattr(info.value, "status_code", None) == 503
    assert "overloaded" in str(info.value)
    assert len(model.requests) == 1  # max_retries=0: no hidden retry consumed a turn


async def test_error_mid_stream_drops_the_connection(litellm, model):
    model.enqueue([{"content": "partial"}, {"error": 500}])
    seen = []
    # litellm reports the truncated body as MidStreamFallbackError, a ServiceUnavailableError.
    with pytest.raises(litellm.ServiceUnavailableError):
        async for chunk in await call(litellm, model, stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                seen.append(chunk.choices[0].delta.content)
    assert seen == ["partial"]
    assert model.disconnects == []  # the server aborted; the client did not leave


async def test_slow_numbered_tokens_pass_litellm_repeat_check(litellm, model):
    model.enqueue([{"slow": {"count": 150, "interval": 0}}])
    out = await collect(await call(litellm, model, stream=True))
    assert len(out["content"]) == 150
    assert out["content"][:2] == ["t1 ", "t2 "]


async def test_closing_the_stream_is_recorded_as_a_disconnect(litellm, model):
    model.enqueue([{"slow": {"count": 200, "interval": 0.05}}])
    stream = await call(litellm, model, stream=True)
    n = 0
    try:
        async for _ in stream:
            n += 1
            if n == 3:
                break
    finally:
        closed_at = time.monotonic()
        await stream.aclose()
    for _ in range(100):
        if model.disconnects:
            break
        await asyncio.sleep(0.01)
    assert len(model.disconnects) == 1
    at, index = model.disconnects[0]
    assert index == 0
    assert at - closed_at < 1.0


async def test_http_controls_for_other_processes(model):
    root = model.base_url.removesuffix("/v1")
    async with httpx.AsyncClient(base_url=root) as client:
        assert (
            await client.post("/_script", json={"turns": [[{"content": "remote"}]]})
        ).json() == {"pending": 1}
        assert (await client.post("/_script", json={"turns": [[{"bogus": 1}]]})).status_code == 400
        body = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": "x"}]}
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            text = "".join([part async for part in response.aiter_text()])
        assert '"content": "remote"' in text and text.endswith("data: [DONE]\n\n")
        assert (await client.get("/_requests")).json() == [body]
        assert (await client.get("/_disconnects")).json() == []
        await client.post("/_reset")
        assert (await client.get("/_requests")).json() == []
    assert model.requests == []
