"""The built-in demo model, through litellm's real streaming path (`gateway/demo`): reasoning
then an honest answer, a call to the tool the user's words name, an offline title."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.engine.deltas import Delta, Finish, ReasoningDelta, TextDelta, ToolCallDelta
from gateway.engine.models import demo as demo_model
from gateway.engine.models.litellm_model import LiteLLMModel, ModelRequest
from gateway.services import load_litellm

load_litellm()
DEMO = LiteLLMModel("gateway/demo")
TIME_TOOL = {"type": "function", "function": {
    "name": "get_local_time", "description": "The time in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


@pytest.fixture(autouse=True)
def _no_token_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_model, "TOKEN_DELAY_SECONDS", 0)


async def stream(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
                 ) -> list[Delta]:
    return [d async for d in DEMO.stream(ModelRequest(messages=messages, tools=tools or []))]


def joined(deltas: list[Delta], kind: type[TextDelta] | type[ReasoningDelta]) -> str:
    return "".join(d.text for d in deltas if isinstance(d, kind))


async def test_it_streams_reasoning_then_an_answer_that_says_what_it_is() -> None:
    messages = [{"role": "user", "content": "Hello, who are you?"}]
    deltas = await stream(messages)

    reasoning, answer = demo_model.reply_for(messages)
    assert joined(deltas, ReasoningDelta) == reasoning
    assert joined(deltas, TextDelta) == answer
    assert "\u201cHello, who are you?\u201d" in answer and "GATEWAY_MODEL" in answer
    kinds = [type(d) for d in deltas if isinstance(d, (ReasoningDelta, TextDelta))]
    assert kinds.index(TextDelta) > 0 and ReasoningDelta not in kinds[kinds.index(TextDelta):]
    assert len([d for d in deltas if isinstance(d, TextDelta)]) > 10  # token by token
    assert [d for d in deltas if isinstance(d, Finish)] == [Finish("stop")]


async def test_it_calls_the_tool_the_users_words_name_with_fitting_arguments() -> None:
    deltas = await stream([{"role": "user", "content": "What time is it in Paris?"}],
                          [TIME_TOOL])

    calls = [d for d in deltas if isinstance(d, ToolCallDelta)]
    assert calls[0].name == "get_local_time" and (calls[0].id or "").startswith("call_demo_")
    assert all(c.id is None and c.name is None for c in calls[1:])
    assert isinstance(json.loads("".join(c.arguments for c in calls))["city"], str)
    assert [d for d in deltas if isinstance(d, Finish)] == [Finish("tool_calls")]


async def test_no_tool_is_called_when_the_words_name_none() -> None:
    deltas = await stream([{"role": "user", "content": "Tell me a joke"}], [TIME_TOOL])
    assert not any(isinstance(d, ToolCallDelta) for d in deltas)


async def test_after_a_tool_result_it_repeats_what_the_tool_returned() -> None:
    deltas = await stream([
        {"role": "user", "content": "What time is it?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_local_time", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "14:05 in Paris"},
    ], [TIME_TOOL])
    assert "The tool returned: 14:05 in Paris." in joined(deltas, TextDelta)
    assert not any(isinstance(d, ToolCallDelta) for d in deltas)


def test_the_reply_mentions_attachments_and_counts_earlier_messages() -> None:
    png = "data:image/png;base64,AAAA"
    _, answer = demo_model.reply_for([
        {"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "and this?"},
                                     {"type": "image_url", "image_url": {"url": png}}]}])
    assert answer.startswith("I received an image (image/png) with your message")
    assert "(2 earlier messages)" in answer and "\u201cand this?\u201d" in answer


async def test_its_one_shot_tasks_answer_offline() -> None:
    conversation = [{"role": "user", "content": "user: Plan a trip to Lisbon in May please\n"
                                                "assistant: Sure."}]
    assert await DEMO.complete(conversation, task="title") == "Plan a trip to Lisbon in"
    suggestions = json.loads(await DEMO.complete(conversation, task="suggestions"))
    assert all({"title", "detailedSuggestion"} <= set(s) for s in suggestions)
