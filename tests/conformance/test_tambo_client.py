"""The real `@tambo-ai/client` 1.1.3 (Node 20) against a real gateway over loopback HTTP.

Each test scripts the model, runs a scenario of `run_scenario.mjs`, and asserts what a front-end
developer would check: no `streaming.error`, the thread idle, the answer rendered, tools run once.
Every stream is also fed through `@ag-ui/client` 1.0's verifier.
"""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import update

from gateway.store.repository import Store
from gateway.store.tables import RunFrameRow
from tests.conformance.conftest import AGENT_INSTRUCTIONS, AGENT_MAX_INPUT_TOKENS
from tests.integration.test_agui import agui_input
from tests.support.agents import ANSWER, DELEGATE, RESEARCH
from tests.support.gateway_server import GatewayServer, read_store
from tests.support.node import capture_and_verify, have_node, run_scenario
from tests.support.run_stream import message, open_stream, read_until
from tests.support.scripted_model import ScriptedModel

pytestmark = pytest.mark.skipif(not have_node(), reason="node and npm are needed")

WEATHER_CALL = [
    {"content": "Let me check."},
    {"tool_call": {"index": 0, "id": "call_w1", "name": "get_weather", "arguments": '{"ci'}},
    {"tool_call": {"index": 0, "arguments": 'ty": "Par'}},
    {"tool_call": {"index": 0, "arguments": 'is"}'}},
]
CARD_CALL = [
    {"content": "Here it is."},
    {"tool_call": {"index": 0, "id": "call_c1", "name": "show_component_WeatherCard",
                   "arguments": '{"city": "Pa'}},
    {"tool_call": {"index": 0, "arguments": 'ris", "tem'}},
    {"tool_call": {"index": 0, "arguments": 'pC": 21}'}},
]


def texts(message: dict) -> str:
    return "".join(b.get("text", "") for b in message["content"] if b["type"] == "text")


def assert_clean(run: dict) -> None:
    assert run["rejected"] is None, run
    assert run["error"] is None, run
    assert run["status"] == "idle"


def test_basic_run_and_follow_up(gateway: GatewayServer, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "Hello "}, {"content": "from the model."}],
                           [{"content": "Still here."}])
    result = run_scenario("basic", gateway.url)

    assert "crash" not in result, result
    first, second = result["firstRun"], result["secondRun"]
    assert_clean(first)
    assert_clean(second)
    assert texts(first["messages"][-1]) == "Hello from the model."
    assert texts(second["messages"][-1]) == "Still here."
    assert second["lastCompletedRunId"] == result["runIds"][-1]
    history = scripted_model.requests[-1]["messages"]
    if history[0]["role"] == "system":  # the operator's instructions (the agents file's)
        assert history.pop(0)["content"] == AGENT_INSTRUCTIONS
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    assert history[1]["content"] == "Hello from the model."


def test_a_cut_answer_and_an_estimated_usage_are_read_by_the_client(
        gateway: GatewayServer, scripted_model: ScriptedModel):
    """Issue 42: an answer the provider cut (`RUN_FINISHED.metadata.truncated`) and usage the
    server did not report (`metadata.usageEstimated`) are fields the real client accepts."""
    scripted_model.behave(usage=False)
    scripted_model.enqueue([{"content": "Hello "}, {"content": "from the mo"},
                            {"finish": "length"}], [{"content": "Still here."}])
    result = run_scenario("basic", gateway.url)

    assert "crash" not in result, result
    assert_clean(result["firstRun"])
    assert_clean(result["secondRun"])
    assert texts(result["firstRun"]["messages"][-1]) == "Hello from the mo"


def test_a_delegating_agent_reads_as_a_server_tool(agents_gateway: GatewayServer,
                                                  scripted_model: ScriptedModel):
    """The shop agent hands a task to its sub-agent: the Tambo client sees the call and its
    result, as for any server tool, and none of the sub-agent's own messages."""
    scripted_model.enqueue(DELEGATE, RESEARCH, ANSWER, [{"content": "Still here."}])
    result = run_scenario("basic", agents_gateway.url)

    assert "crash" not in result, result
    first = result["firstRun"]
    assert_clean(first)
    assert_clean(result["secondRun"])
    assert "TOOL_CALL_RESULT" in first["eventTypes"]
    assert "THINKING_TEXT_MESSAGE_START" not in first["eventTypes"]  # the researcher's
    assert texts(first["messages"][-1]) == "We have blue and red mugs."
    shown = json.dumps(first["messages"])
    assert "Checking." not in shown


def test_suggestions_come_back_as_arrays(gateway: GatewayServer, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "Hello."}], {"stream": False, "steps": [{"content": json.dumps(
        [{"title": "Go on", "detailedSuggestion": "Tell me more"},
         {"title": "Stop", "detailedSuggestion": "That is enough"}])}]})
    result = run_scenario("suggestions", gateway.url)

    assert "crash" not in result, result
    assert_clean(result["run"])
    assert result["before"] == {"isArray": True, "titles": []}
    assert result["generated"] == {"isArray": True, "titles": ["Go on", "Stop"]}
    assert result["after"] == {"isArray": True, "titles": ["Go on", "Stop"]}


def test_demo_model_answers_with_no_key(demo_gateway: GatewayServer):
    result = run_scenario("basic", demo_gateway.url)

    assert "crash" not in result, result
    assert_clean(result["firstRun"])
    answer = texts(result["firstRun"]["messages"][-1])
    assert "built-in demo model" in answer and "GATEWAY_MODEL" in answer
    assert "hello" in answer
    assert result["firstRun"]["messages"][-1]["reasoning"]
    assert_clean(result["secondRun"])
    assert "(2 earlier messages)" in texts(result["secondRun"]["messages"][-1])


def test_client_tool_round_trip(gateway: GatewayServer, scripted_model: ScriptedModel):
    scripted_model.enqueue(WEATHER_CALL, [{"content": "It is 21 °C in Paris."}],
                           [{"content": "You're welcome."}])
    result = run_scenario("client_tool", gateway.url)

    assert "crash" not in result, result
    run = result["firstRun"]
    assert_clean(run)
    assert result["calls"] == [{"city": "Paris"}]
    assert "tambo.run.awaiting_input" in run["customNames"]
    assert len(run["runIds"]) == 2
    assert texts(run["messages"][-1]) == "It is 21 °C in Paris."
    continuation = scripted_model.requests[1]["messages"]
    tool_message = next(m for m in continuation if m["role"] == "tool")
    assert tool_message["tool_call_id"] == "call_w1"
    assert json.loads(tool_message["content"]) == {"city": "Paris", "tempC": 21}
    assert_clean(result["followUp"])
    assert texts(result["followUp"]["messages"][-1]) == "You're welcome."


def test_component_renders_with_complete_props(gateway: GatewayServer,
                                               scripted_model: ScriptedModel):
    scripted_model.enqueue(CARD_CALL, [{"content": "Anything else?"}])
    result = run_scenario("component", gateway.url)

    assert "crash" not in result, result
    run = result["firstRun"]
    assert_clean(run)
    assert run["customNames"][0] == "tambo.component.start"
    assert run["customNames"][-1] == "tambo.component.end"
    blocks = [b for m in run["messages"] for b in m["content"] if b["type"] == "component"]
    assert len(blocks) == 1
    assert blocks[0]["name"] == "WeatherCard"
    assert blocks[0]["props"] == {"city": "Paris", "tempC": 21}
    assert texts(run["messages"][-1]) == "Here it is."
    offered = {t["function"]["name"] for t in scripted_model.requests[0]["tools"]}
    # The components the client registered, besides the agent's own sub-agents (the agents
    # gateway's shop agent delegates to `researcher`).
    assert offered - {"researcher"} == {"show_component_WeatherCard"}
    assert_clean(result["followUp"])

    listed = json.loads(json.dumps(result["followUp"]["messages"]))
    assert any(b["type"] == "component" for m in listed for b in m["content"])


def test_reasoning_streams_without_client_error(gateway: GatewayServer,
                                                scripted_model: ScriptedModel):
    scripted_model.enqueue([{"reasoning": "Thinking "}, {"reasoning": "hard."},
                            {"content": "Answer."}], [{"content": "ok"}])
    result = run_scenario("basic", gateway.url)

    assert "crash" not in result, result
    run = result["firstRun"]
    assert_clean(run)
    assert "THINKING_TEXT_MESSAGE_CONTENT" in run["eventTypes"]
    assistant = run["messages"][-1]
    assert texts(assistant) == "Answer."
    assert "".join(assistant["reasoning"]) == "Thinking hard."


def test_reload_restores_history_and_continues(gateway: GatewayServer,
                                               scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "Remembered."}], [{"content": "Continued."}])
    first = run_scenario("basic", gateway.url)
    thread_id = first["threadId"]
    scripted_model.enqueue([{"content": "After the reload."}])
    result = run_scenario("reload", gateway.url, THREAD_ID=thread_id)

    assert "crash" not in result, result
    loaded = [texts(m) for m in result["loaded"]["messages"] if m["role"] == "assistant"]
    assert loaded == ["Remembered.", "Continued."]
    assert_clean(result["followUp"])
    assert texts(result["followUp"]["messages"][-1]) == "After the reload."


@pytest.mark.parametrize("turns", [
    [[{"reasoning": "hmm"}, {"content": "plain text"}]],
    [WEATHER_CALL],
    [CARD_CALL],
    [[{"content": "partial"}, {"error": 500}]],
    [[{"content": "cut sh"}, {"finish": "length"}]],  # RUN_FINISHED.metadata.truncated
    [[{"content": "partial"}, {"cut": True}]],  # LLM_STREAM_INCOMPLETE
    [WEATHER_CALL[:2] + [{"finish": "length"}]],  # arguments cut off: an error result
])
def test_streams_pass_the_ag_ui_verifier(gateway: GatewayServer, scripted_model: ScriptedModel,
                                         turns):
    scripted_model.enqueue(*turns)
    body = {
        "message": {"role": "user", "content": [{"type": "text", "text": "go"}]},
        "tools": [{"name": "get_weather", "description": "weather",
                   "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
        "availableComponents": [{"name": "WeatherCard", "description": "card",
                                 "propsSchema": {"type": "object"}}],
        "thread": {"userKey": "user-1"},
    }
    result = capture_and_verify(f"{gateway.url}/v1/threads/runs", body,
                                {"x-api-key": "test-key", "accept": "text/event-stream"})

    assert result["errors"] == [], result
    types = [e["type"] for e in result["events"]]
    assert types[0] == "RUN_STARTED"
    assert types[-1] in ("RUN_FINISHED", "RUN_ERROR")


def test_a_stream_that_fails_on_the_server_still_passes_the_verifier(
        gateway: GatewayServer, scripted_model: ScriptedModel):
    """A replay that breaks on a corrupted log row ends with the one RUN_ERROR the verifier
    requires, not a cut connection."""
    scripted_model.enqueue([{"content": "one "}, {"content": "two "}, {"content": "three"}])
    headers = {"x-api-key": "test-key", "accept": "text/event-stream"}
    first = capture_and_verify(f"{gateway.url}/v1/threads/runs", {
        "message": {"role": "user", "content": [{"type": "text", "text": "go"}]},
        "thread": {"userKey": "user-1"}}, headers)
    started = first["events"][0]
    thread_id, run_id = started["threadId"], started["runId"]

    async def corrupt_third_frame(store: Store) -> None:
        async with store.engine.begin() as connection:
            await connection.execute(update(RunFrameRow).where(
                RunFrameRow.run_id == run_id, RunFrameRow.seq == 3).values(frame=42))

    read_store(gateway, corrupt_third_frame)
    replay = capture_and_verify(f"{gateway.url}/v1/threads/{thread_id}/runs/{run_id}"
                                "?userKey=user-1", None, headers, method="GET")

    assert replay["errors"] == [], replay
    types = [e["type"] for e in replay["events"]]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_ERROR"
    assert types.count("RUN_ERROR") == 1
    assert replay["events"][-1]["code"] == "STREAM_FAILED"


def test_a_long_thread_keeps_answering_past_the_models_window(
        agents_gateway: GatewayServer, scripted_model: ScriptedModel):
    """Issue 25: 30 messages of ~2,000 characters on one thread, on a model whose window (6,000
    of its tokens) holds a few of them; the agent's `max_input_tokens` (3,000) makes the
    gateway leave older turns out. Every run finishes and answers the message just sent."""
    scripted_model.context_window = 6000
    try:
        result = run_scenario("long_thread", agents_gateway.url, timeout=120,
                              LONG_THREAD_MESSAGES="30")
        overflows = scripted_model.overflows
    finally:
        scripted_model.context_window, scripted_model.overflows = None, 0

    assert "crash" not in result, result
    runs = result["runs"]
    assert len(runs) == 30
    for run in runs:
        assert_clean(run)
        assert run["answered"], run
    assert overflows == 0
    with httpx.Client(base_url=agents_gateway.url, headers={"x-api-key": "test-key"}) as http:
        thread = http.get(f"/v1/threads/{result['threadId']}",
                          params={"userKey": "user-1"}).json()
    assert thread["historyTrimmed"] is True
    assert thread["contextTokens"] <= AGENT_MAX_INPUT_TOKENS


@pytest.mark.parametrize("gateway", ["direct"], indirect=True)  # about runs, not adapters
def test_a_reload_during_a_client_tool_leaves_a_thread_that_answers(
        gateway: GatewayServer, scripted_model: ScriptedModel):
    scripted_model.enqueue(WEATHER_CALL, [{"content": "Hello again."}])
    result = run_scenario("reload_during_tool", gateway.url)

    assert "crash" not in result, result
    assert result["call"] == {"city": "Paris"}
    assert result["deleted"] == {"runId": result["runId"], "status": "cancelled"}
    after = result["next"]
    assert_clean(after)
    assert texts(after["messages"][-1]) == "Hello again."
    model_saw = scripted_model.requests[-1]["messages"]
    tool_message = next(m for m in model_saw if m["role"] == "tool")
    assert (tool_message["tool_call_id"], tool_message["content"]) == (
        "call_w1", "cancelled by the user")
    assert model_saw[-1]["content"] == "Never mind, hello!"


@pytest.mark.parametrize("gateway", ["direct"], indirect=True)  # about runs, not adapters
@pytest.mark.parametrize("strategy", ["reject", "interrupt", "rollback", "enqueue"])
def test_a_message_sent_while_an_answer_streams(
        gateway: GatewayServer, scripted_model: ScriptedModel, strategy: str):
    cuts = strategy in ("interrupt", "rollback")
    count = 400 if cuts else 30  # reject, enqueue: the first answer runs to its end
    scripted_model.enqueue([{"content": "Once "}, {"slow": {"count": count, "interval": 0.05}}],
                           [{"content": "The end."}])
    result = run_scenario("double_text", gateway.url, STRATEGY=strategy)

    assert "crash" not in result, result
    first, second = result["first"], result["second"]
    if strategy == "reject":  # the app gets the 409 (CONCURRENT_RUN); the first answer goes on
        assert_clean(first)
        assert second["rejected"] is not None and second["runIds"] == []
        assert any(texts(m).endswith("t30 ") for m in first["messages"])
        return
    assert_clean(second)
    assert texts(second["messages"][-1]) == "The end."
    if cuts:
        assert first["eventTypes"][-1] == "RUN_ERROR" and first["lastRunCancelled"] is True
    else:
        assert_clean(first)
    assert second["threadId"] == first["threadId"]
    shown = [texts(m) for m in second["messages"]]
    assert shown[0] == "Tell me a long story" and shown[1].startswith("Once t1")
    if strategy == "enqueue":
        assert shown[1].endswith("t30 ")  # the whole first answer, then the queued exchange
        # The queued stream said so first; the client took it in its stride (one run).
        assert second["eventTypes"][:2] == ["RUN_STARTED", "CUSTOM"]
        assert second["customNames"][0] == "tambo.run.queued"
        assert len(second["runIds"]) == 1
    assert shown[2:] == ["Actually, a short one", "The end."]
    sent = scripted_model.requests[-1]["messages"]
    users = [m["content"] for m in sent if m["role"] == "user"]
    if strategy == "rollback":
        # The cut answer stays in the thread but the model no longer reads it: the two user
        # messages are sent as one, so the roles still alternate.
        assert users[-1] == "Tell me a long story\n\nActually, a short one"
    else:
        assert users[-2:] == ["Tell me a long story", "Actually, a short one"]
    assert ("Once t1" in json.dumps(sent)) is (strategy != "rollback")


@pytest.mark.parametrize("gateway", ["direct"], indirect=True)  # about runs, not adapters
@pytest.mark.parametrize("endpoint", ["tambo", "agui"])
def test_a_queued_runs_stream_passes_the_ag_ui_verifier(
        gateway: GatewayServer, scripted_model: ScriptedModel, endpoint: str):
    """Issue 25: an enqueued run's stream opens with RUN_STARTED and the queued notice, then
    the run's events once the run in its way ends: valid AG-UI on both endpoints."""
    scripted_model.enqueue([{"content": "First "}, {"slow": {"count": 400, "interval": 0.05}}],
                           [{"content": "Queued answer."}])
    headers = {"x-api-key": "test-key", "accept": "text/event-stream"}
    thread = f"agui-{uuid.uuid4()}"
    first_url, first_body = (
        ("/v1/threads/runs", {"message": message("first"), "thread": {"userKey": "user-1"}})
        if endpoint == "tambo" else ("/v1/agui/agents/default/run?userKey=user-1",
                                     agui_input(thread, text="first")))
    with httpx.Client(base_url=gateway.url, headers=headers, timeout=30) as http, \
            open_stream(http, "POST", first_url, json=first_body) as (started, events):
        read_until(events, lambda seen: len(seen) >= 2)
        thread_id, run_id = started.headers["x-thread-id"], started.headers["x-run-id"]
        if endpoint == "tambo":
            url = f"{gateway.url}/v1/threads/{thread_id}/runs"
            body = {"message": message("second"), "userKey": "user-1",
                    "multitaskStrategy": "enqueue"}
        else:
            url = f"{gateway.url}/v1/agui/agents/default/run?userKey=user-1"
            body = agui_input(thread, text="second",
                              forwardedProps={"multitaskStrategy": "enqueue"})
        with ThreadPoolExecutor(1) as pool:
            capture = pool.submit(capture_and_verify, url, body, headers)
            runs = f"/v1/threads/{thread_id}/runs"
            while not capture.done() and "queued" not in [
                    r["status"] for r in http.get(runs, params={"userKey": "user-1"}).json()[
                        "runs"]]:
                time.sleep(0.1)  # until the second request is queued
            assert http.delete(f"{runs}/{run_id}", params={"userKey": "user-1"}).status_code \
                in (200, 202)  # the run in its way ends: the queued one starts
            queued = capture.result()
        list(events)

    assert queued["errors"] == [], queued
    types = [e["type"] for e in queued["events"]]
    assert types[:2] == ["RUN_STARTED", "CUSTOM"] and types.count("RUN_STARTED") == 1
    assert queued["events"][1]["name"] == (
        "tambo.run.queued" if endpoint == "tambo" else "gateway.run.queued")
    assert types[-1] == "RUN_FINISHED"
    assert "Queued answer." in json.dumps(queued["events"])
