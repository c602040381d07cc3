"""`HttpAgent` from `@ag-ui/client` 1.0 (Node 20) against the AG-UI 1.0 endpoint, over loopback.

HttpAgent verifies every stream it reads (its own enforceEvents / verifyEvents pipeline), so a
run without `error` passed the client's verifier; each event is also validated here against the
Python `ag_ui` 1.0 models, which are stricter (they reject the `THINKING_*` events the Tambo
dialect needs).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from tests.conformance.conftest import wire_env
from tests.support.agents import ANSWER, DELEGATE, RESEARCH
from tests.support.gateway_server import GatewayServer
from tests.support.node import have_node, run_agui_agent
from tests.support.run_stream import gateway_ids
from tests.support.scripted_model import ScriptedModel

pytestmark = pytest.mark.skipif(not have_node(), reason="node and npm are needed")

EVENT = TypeAdapter(Event)
SERVER_TOOLS = Path(__file__).resolve().parents[1] / "support" / "server_tools.py"
WEATHER_TOOL = {"name": "get_weather", "description": "The weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
WEATHER_CARD = {"name": "WeatherCard", "description": "A card showing the weather",
                "propsSchema": {"type": "object", "properties": {
                    "city": {"type": "string"}, "tempC": {"type": "number"}}}}


@pytest.fixture(scope="module", params=["openai", "anthropic", "gemini"])
def tools_gateway(request: pytest.FixtureRequest, scripted_model: ScriptedModel,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    """A gateway with server tools, its model in each wire format it streams directly."""
    server = GatewayServer(tmp_path_factory.mktemp(f"agui-gateway-{request.param}"),
                           wire_env(scripted_model, request.param,
                                    GATEWAY_TOOLS=str(SERVER_TOOLS)))
    server.start()
    yield server
    server.stop()


def call(index: int, call_id: str, name: str, arguments: str) -> dict:
    return {"tool_call": {"index": index, "id": call_id, "name": name, "arguments": arguments}}


def run_plan(gateway: GatewayServer, *steps: dict, agent: str = "default",
             connect: bool = False) -> dict:
    result = run_agui_agent({"url": f"{gateway.url}/v1/agui/agents/{agent}/run",
                             "headers": {"x-api-key": "test-key"}, "connect": connect,
                             "threadId": f"agui-{uuid.uuid4()}", "steps": list(steps)})
    for run in result["runs"]:
        assert run["error"] is None, (run, result["_stderr"])
        for event in run["events"]:
            EVENT.validate_python(event)  # strict AG-UI 1.0
        assert "THINKING_" not in json.dumps(run["events"])
    assert result["warnings"] == [], result["warnings"]
    return result


def messages_of(result: dict, role: str) -> list[dict]:
    return [m for m in result["messages"] if m["role"] == role]


def test_text_and_reasoning(tools_gateway: GatewayServer, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"reasoning": "The user "}, {"reasoning": "greets me."},
                            {"content": "Hello "}, {"content": "there."}])
    result = run_plan(tools_gateway, {"user": "hi"})

    (run,) = result["runs"]
    types = [e["type"] for e in run["events"]]
    assert types[0] == "RUN_STARTED" and run["events"][0]["protocolVersion"] == "1.0"
    assert types[-1] == "RUN_FINISHED" and run["outcome"] == "success"
    assert run["runId"] == run["events"][0]["runId"]
    assert [m["content"] for m in messages_of(result, "reasoning")] == ["The user greets me."]
    assert [m["content"] for m in messages_of(result, "assistant")] == ["Hello there."]
    assert scripted_model.requests[0]["messages"][-1] == {"role": "user", "content": "hi"}


def test_a_cut_answer_and_an_estimated_usage_pass_the_verifier(
        tools_gateway: GatewayServer, scripted_model: ScriptedModel,
        request: pytest.FixtureRequest):
    """Issue 42: `RUN_FINISHED.metadata` (`truncated`, `usageEstimated`), through HttpAgent's
    verifier and the strict Python models. Each format's cap reached (`length`, Anthropic's
    `max_tokens`, Gemini's `MAX_TOKENS`) is a truncation; an OpenAI-compatible server may also
    report no usage (Anthropic's and Gemini's always do)."""
    openai = request.node.callspec.params["tools_gateway"] == "openai"
    scripted_model.behave(usage=not openai)
    scripted_model.enqueue([{"content": "Hello "}, {"content": "the"}, {"finish": "length"}])
    result = run_plan(tools_gateway, {"user": "hi"})

    (run,) = result["runs"]
    finished = run["events"][-1]
    assert finished["type"] == "RUN_FINISHED" and run["outcome"] == "success"
    assert finished["metadata"]["truncated"]["reason"] == "length"
    assert finished["metadata"].get("usageEstimated") is (True if openai else None)
    [usage] = finished["usage"]
    assert usage["outputTokens"] > 0


def test_server_tool_result_reaches_the_client(tools_gateway: GatewayServer,
                                               scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "Adding. "}, call(0, "call_add", "add", '{"a": 2, "b": 40}')],
                           [{"content": "It is 42."}])
    result = run_plan(tools_gateway, {"user": "2 + 40?"})

    (run,) = result["runs"]
    assert run["pendingToolCallIds"] == []
    (tool,) = messages_of(result, "tool")
    assert tool["toolCallId"] == "call_add" and json.loads(tool["content"]) == {"sum": 42}
    calls = [c for m in messages_of(result, "assistant") for c in m.get("toolCalls") or []]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [("call_add", "add")]
    assert messages_of(result, "assistant")[-1]["content"] == "It is 42."


def test_frontend_tool_pauses_and_continues(tools_gateway: GatewayServer,
                                            scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "Let me check."},
                            call(0, "call_w1", "get_weather", '{"city": "Paris"}')],
                           [{"content": "It is 21 °C in Paris."}])
    result = run_plan(tools_gateway, {"user": "weather in Paris?", "tools": [WEATHER_TOOL]},
                      {"answerPending": "21 °C, sunny", "tools": [WEATHER_TOOL]}, connect=True)

    first, second = result["runs"]
    finished = first["events"][-1]
    assert finished["type"] == "RUN_FINISHED"
    assert finished["outcome"] == {"type": "success", "pendingToolCallIds": ["call_w1"]}
    assert first["pendingToolCallIds"] == ["call_w1"]
    assert not any(e["type"] == "TOOL_CALL_RESULT" for e in first["events"])
    assert second["pendingToolCallIds"] == [] and second["outcome"] == "success"
    answered = [m for m in scripted_model.requests[1]["messages"] if m["role"] == "tool"]
    assert answered == [{"role": "tool", "tool_call_id": "call_w1", "content": "21 °C, sunny"}]
    assert messages_of(result, "assistant")[-1]["content"] == "It is 21 °C in Paris."
    with httpx.Client(base_url=tools_gateway.url, headers={"x-api-key": "k"}) as http:
        thread_id, run_id = gateway_ids(http, {"threadId": result["threadId"],
                                               "runId": second["runId"]})
        thread = http.get(f"/v1/threads/{thread_id}").json()
    assert thread["runStatus"] == "idle" and thread["lastCompletedRunId"] == run_id
    # A page that reloads loads the same conversation with connectAgent() (the client's own
    # message ids are its own: the gateway's stand in for them).
    connected = result["connected"]
    assert connected["error"] is None, connected
    for event in connected["events"]:
        EVENT.validate_python(event)
    assert [e["type"] for e in connected["events"]] == [
        "RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    def without_ids(messages: list[dict]) -> list[dict]:
        return [{k: v for k, v in m.items() if k != "id"} for m in messages]
    assert without_ids(connected["messages"]) == without_ids(result["messages"])


def test_component_is_a_tool_call_and_agent_state(tools_gateway: GatewayServer,
                                                  scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "Here it is."},
                            call(0, "call_c1", "show_component_WeatherCard", '{"city": "Pa'),
                            {"tool_call": {"index": 0, "arguments": 'ris", "tempC": 21}'}}])
    result = run_plan(tools_gateway, {"user": "show the card",
                                      "forwardedProps": {"components": [WEATHER_CARD]}})

    (run,) = result["runs"]
    assert run["pendingToolCallIds"] == []
    calls = [c for m in messages_of(result, "assistant") for c in m.get("toolCalls") or []]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [("call_c1", "WeatherCard")]
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris", "tempC": 21}
    (component,) = result["state"]["components"].values()
    assert component["name"] == "WeatherCard" and component["toolCallId"] == "call_c1"
    assert component["props"] == {"city": "Paris", "tempC": 21}
    assert [m["toolCallId"] for m in messages_of(result, "tool")] == ["call_c1"]
    with httpx.Client(base_url=tools_gateway.url) as http:
        thread_id, _ = gateway_ids(http, {"threadId": result["threadId"], "runId": run["runId"]})
        state = http.get(f"/v1/threads/{thread_id}/components/"
                         f"{component['componentId']}/state").json()
    assert state["state"] == component["state"]


def test_a_subagent_streams_between_its_events(agents_gateway: GatewayServer,
                                               scripted_model: ScriptedModel):
    """HttpAgent's verifier and the `ag_ui` models accept a run that delegates: the
    sub-agent's work, attributed to it, between SUBAGENT_STARTED and SUBAGENT_FINISHED."""
    scripted_model.enqueue(DELEGATE, RESEARCH, ANSWER)
    result = run_plan(agents_gateway, {"user": "mugs?"}, agent="shop")

    (run,) = result["runs"]
    types = [e["type"] for e in run["events"]]
    started, finished = types.index("SUBAGENT_STARTED"), types.index("SUBAGENT_FINISHED")
    invocation = run["events"][started]["subagentRunId"]
    assert run["events"][started]["name"] == "researcher"
    assert run["events"][finished]["result"] == "Blue and red mugs."
    inside = run["events"][started + 1:finished]
    assert inside and all(e.get("subagentRunId") == invocation for e in inside)
    researched = [m for m in messages_of(result, "assistant")
                  if m.get("subagentRunId") == invocation]
    assert [m["content"] for m in researched] == ["Blue and red mugs."]
    (tool,) = messages_of(result, "tool")
    assert tool["toolCallId"] == "call_r1" and tool["content"] == "Blue and red mugs."
    assert messages_of(result, "assistant")[-1]["content"] == "We have blue and red mugs."
