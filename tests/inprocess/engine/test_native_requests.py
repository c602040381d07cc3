"""What each adapter sends: Anthropic's and Gemini's requests as litellm builds them (the key in
the provider's header, the messages and tools translated, the thinking asked for), reasoning on
request for every provider, and thinking blocks given back where the provider takes them.

Against the scripted model on loopback, which records each request in the OpenAI shape with the
body as sent under `native`, and each request's headers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway.engine.deltas import ModelError
from gateway.engine.loop import RunInput, ServerToolSpec, run_agent
from gateway.engine.models.adapters import model_adapter
from gateway.engine.models.litellm_model import ModelRequest
from gateway.engine.models.reasoning import Reasoning
from gateway.services import load_litellm
from tests.inprocess.engine.test_loop import ListSink
from tests.support.model_stream import outcome
from tests.support.scripted_model import ScriptedModel

load_litellm()
KEY = "sk-test-secret-key-1234"
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "The weather",
                                         "parameters": {"type": "object", "properties": {
                                             "city": {"type": "string"}}}}}
SYSTEM_AND_USER = [{"role": "system", "content": "Be brief."},
                   {"role": "user", "content": "Weather in Paris?"}]
# A turn that thought (signed), called a tool and got its result: what the next call replays.
AFTER_A_TOOL = [*SYSTEM_AND_USER,
                {"role": "assistant", "content": None,
                 "tool_calls": [{"id": "toolu_1", "type": "function", "function": {
                     "name": "get_weather", "arguments": '{"city": "Paris"}'}}],
                 "thinking_blocks": [{"type": "thinking", "thinking": "Look it up.",
                                      "signature": "sig-1"}]},
                {"role": "tool", "tool_call_id": "toolu_1", "content": "21 °C"}]


@pytest.fixture
async def made() -> AsyncIterator[Callable[..., Any]]:
    models: list[Any] = []

    def make(scripted: ScriptedModel, model: str, adapter: str = "auto") -> Any:
        wire = model.split("/")[0] if model.split("/")[0] in ("anthropic", "gemini") else "openai"
        models.append(model_adapter(model, scripted.base_for(wire), KEY, adapter))
        return models[-1]

    yield make
    for model in models:
        if hasattr(model, "aclose"):
            await model.aclose()


async def sent(scripted: ScriptedModel, model: Any, request: ModelRequest) -> dict[str, Any]:
    scripted.enqueue([{"content": "ok"}])
    seen = await outcome(model, request)
    assert not any(isinstance(s, Exception) for s in seen), seen
    return scripted.requests[-1]


async def test_anthropic_gets_litellms_request_with_the_key_in_its_header(
        scripted_model: ScriptedModel, made: Callable[..., Any]) -> None:
    model = made(scripted_model, "anthropic/claude-sonnet-4-5")
    body = await sent(scripted_model, model, ModelRequest(
        messages=SYSTEM_AND_USER, tools=[TOOL], tool_choice="auto", max_tokens=300,
        temperature=0.2))
    native, headers = body["native"], scripted_model.headers[-1]

    assert headers["x-api-key"] == KEY and "authorization" not in headers
    assert headers["anthropic-version"]
    assert native["model"] == "claude-sonnet-4-5" and native["stream"] is True
    assert native["system"] == [{"type": "text", "text": "Be brief."}]
    assert native["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Weather in Paris?"}]}]
    assert native["tools"][0]["name"] == "get_weather"
    assert native["tools"][0]["input_schema"]["properties"] == {"city": {"type": "string"}}
    assert (native["tool_choice"], native["max_tokens"], native["temperature"]) == (
        {"type": "auto"}, 300, 0.2)


@pytest.mark.parametrize("name", ["claude-sonnet-4-5", "scripted"])
@pytest.mark.parametrize(("reasoning", "budget"), [(Reasoning(budget=3000), 3000),
                                                   (Reasoning(effort="low"), 1024),
                                                   (Reasoning("high", 2500), 2500)])
async def test_anthropic_thinks_when_asked_also_on_a_model_litellm_does_not_list(
        scripted_model: ScriptedModel, made: Callable[..., Any], name: str,
        reasoning: Reasoning, budget: int) -> None:
    """A budget is Anthropic's own; an effort is litellm's mapping of it (its budgets)."""
    native = (await sent(scripted_model, made(scripted_model, f"anthropic/{name}"),
                         ModelRequest(messages=SYSTEM_AND_USER, reasoning=reasoning)))["native"]
    assert native["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert native["max_tokens"] > budget  # the answer gets room besides the thinking
    assert "reasoning_effort" not in native


async def test_anthropic_gets_the_signed_thinking_back_before_the_tool_call(
        scripted_model: ScriptedModel, made: Callable[..., Any]) -> None:
    native = (await sent(scripted_model, made(scripted_model, "anthropic/claude-sonnet-4-5"),
                         ModelRequest(messages=AFTER_A_TOOL,
                                      reasoning=Reasoning(budget=2000))))["native"]
    assistant = native["messages"][1]
    assert assistant["role"] == "assistant"
    assert [block["type"] for block in assistant["content"]] == ["thinking", "tool_use"]
    assert assistant["content"][0]["signature"] == "sig-1"
    assert native["messages"][2]["content"][0]["type"] == "tool_result"


async def test_gemini_gets_litellms_request_with_the_key_in_its_header(
        scripted_model: ScriptedModel, made: Callable[..., Any]) -> None:
    model = made(scripted_model, "gemini/gemini-2.5-flash")
    body = await sent(scripted_model, model, ModelRequest(
        messages=SYSTEM_AND_USER, tools=[TOOL], max_tokens=300,
        reasoning=Reasoning(budget=2048)))
    native, headers = body["native"], scripted_model.headers[-1]

    assert headers["x-goog-api-key"] == KEY and "authorization" not in headers
    assert body["model"] == "gemini-2.5-flash" and body["stream"] is True
    assert native["system_instruction"] == {"parts": [{"text": "Be brief."}]}
    assert native["contents"] == [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}]
    assert native["tools"][0]["function_declarations"][0]["name"] == "get_weather"
    config = native["generationConfig"]
    assert config["max_output_tokens"] == 300
    assert config["thinkingConfig"] == {"thinkingBudget": 2048, "includeThoughts": True}


async def test_gemini_gets_its_signed_call_back_with_its_id(
        scripted_model: ScriptedModel, made: Callable[..., Any]) -> None:
    """Gemini 3 needs a call's thought signature back on that call: litellm carries it in the
    call's id, which the gateway keeps as the call's id."""
    history = json.loads(json.dumps(AFTER_A_TOOL).replace(
        '"toolu_1"', '"call_1__thought__c2lnLTE="'))
    native = (await sent(scripted_model, made(scripted_model, "gemini/gemini-3-pro-preview"),
                         ModelRequest(messages=history)))["native"]
    [call] = [p for c in native["contents"] for p in c["parts"] if "function_call" in p]
    assert call["thoughtSignature"] == "c2lnLTE="
    assert call["function_call"]["id"] == "call_1"
    [answer] = [p for c in native["contents"] for p in c["parts"] if "function_response" in p]
    assert answer["function_response"]["id"] == "call_1"


@pytest.mark.parametrize("adapter", ["direct", "litellm"])
async def test_an_openai_compatible_server_gets_the_effort_and_no_thinking_blocks(
        scripted_model: ScriptedModel, made: Callable[..., Any], adapter: str) -> None:
    """It has no budget (an agent's budget alone sends nothing) and may refuse a field it does
    not know."""
    model = made(scripted_model, "openai/scripted", adapter)
    body = await sent(scripted_model, model, ModelRequest(
        messages=AFTER_A_TOOL, reasoning=Reasoning("medium", 4000)))
    assert body["reasoning_effort"] == "medium" and "thinking" not in body
    assert not any("thinking_blocks" in m for m in body["messages"])
    body = await sent(scripted_model, model, ModelRequest(
        messages=SYSTEM_AND_USER, reasoning=Reasoning(budget=4000)))
    assert "reasoning_effort" not in body and "thinking" not in body


async def lookup(arguments: dict[str, Any]) -> str:
    return "21 °C"


async def test_a_thinking_turn_with_a_tool_gives_its_signature_back_on_the_next_call(
        scripted_model: ScriptedModel, made: Callable[..., Any]) -> None:
    """The whole loop on Anthropic's format: the signature streamed with the thinking is
    written on the thinking message and sent back with the tool call."""
    scripted_model.enqueue(
        [{"reasoning": "The user wants weather. "}, {"signature": "sig-live"},
         {"tool_call": {"index": 0, "id": "toolu_9", "name": "get_weather",
                        "arguments": '{"city": "Paris"}'}}],
        [{"content": "21 °C in Paris."}])
    model = made(scripted_model, "anthropic/claude-sonnet-4-5")
    tools = {"get_weather": ServerToolSpec("get_weather", "The weather",
                                           TOOL["function"]["parameters"], lookup)}
    sink = ListSink()
    outcome_ = await run_agent(model, RunInput(history=SYSTEM_AND_USER, server_tools=tools,
                                               reasoning=Reasoning(budget=2000)), sink)

    assert outcome_.text == "21 °C in Paris."
    thinking = [v for v in sink.values() if v["type"] == "thinking"]
    assert [(v["content"], v.get("signature")) for v in thinking] == [
        ("The user wants weather. ", "sig-live")]
    replayed = scripted_model.requests[-1]["native"]["messages"][1]["content"]
    assert replayed[0] == {"type": "thinking", "thinking": "The user wants weather. ",
                           "signature": "sig-live"}
    assert replayed[1]["type"] == "tool_use" and replayed[1]["id"] == "toolu_9"


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash"])
async def test_without_a_key_the_call_fails_as_the_operators_to_fix_and_nothing_is_sent(
        scripted_model: ScriptedModel, monkeypatch: pytest.MonkeyPatch, model: str) -> None:
    for name in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "PALM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    wire = model.split("/")[0]
    adapter = model_adapter(model, scripted_model.base_for(wire), None)
    adapter.open()  # the pool is made without a key (start-up does not fail)
    try:
        [error] = await outcome(adapter)
    finally:
        await adapter.aclose()
    assert isinstance(error, ModelError) and error.code == "LLM_AUTHENTICATION_ERROR"
    assert scripted_model.requests == []


@pytest.mark.parametrize("adapter", ["direct", "litellm"])
async def test_a_tool_call_turn_without_text_goes_to_anthropic_without_a_made_up_text(
        scripted_model: ScriptedModel, made: Callable[..., Any], adapter: str) -> None:
    """`content: ""` beside tool calls (what OpenAI-compatible servers want) would make
    litellm put a placeholder sentence of its own in the assistant's mouth."""
    history = json.loads(json.dumps(AFTER_A_TOOL))
    history[2]["content"] = ""
    native = (await sent(scripted_model, made(scripted_model, "anthropic/claude-sonnet-4-5",
                                              adapter), ModelRequest(messages=history)))["native"]
    assert [b["type"] for b in native["messages"][1]["content"]] == ["thinking", "tool_use"]
