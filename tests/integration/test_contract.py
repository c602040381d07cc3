"""The rest of the Tambo run contract over raw HTTP: tool-result validation, server tools,
parallel calls, tool choice and call limits, components with text, names and suggestions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import scripted_env
from tests.support.gateway_server import DEFAULT_USER, USER, GatewayServer
from tests.support.inprocess_app import InProcessGateway
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of

WEATHER_TOOL = {"name": "get_weather", "description": "Get weather",
                "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}
TIME_TOOL = {"name": "get_time", "description": "Get the time",
             "inputSchema": {"type": "object", "properties": {}}}


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def tool_results(*ids: str) -> dict:
    return {"role": "user", "content": [
        {"type": "tool_result", "toolUseId": i, "content": [{"type": "text", "text": "ok"}]}
        for i in ids]}


def call(index: int, call_id: str | None, name: str | None, arguments: str) -> dict:
    fragment = {"index": index, "arguments": arguments}
    if call_id:
        fragment.update(id=call_id, name=name)
    return {"tool_call": fragment}


def paused_run(client: httpx.Client, model: ScriptedModel) -> tuple[str, str, list]:
    """A run that stops for two client tool calls streamed interleaved by index."""
    model.enqueue([
        call(0, "call_a", "get_weather", '{"city":'),
        call(1, "call_b", "get_time", "{"),
        call(0, None, None, '"Oslo"}'),
        call(1, None, None, "}"),
    ])
    events = run_events(client, "POST", "/v1/threads/runs", json={
        "message": user("weather and time?"), "tools": [WEATHER_TOOL, TIME_TOOL]})
    return events[0].data["threadId"], events[0].data["runId"], events


def test_parallel_client_calls_pause_the_run(client: httpx.Client, scripted_model: ScriptedModel):
    thread_id, run_id, events = paused_run(client, scripted_model)

    types = [e.type for e in events]
    assert types[-2:] == ["CUSTOM", "RUN_FINISHED"]
    awaiting = events[-2].data
    assert awaiting["name"] == "tambo.run.awaiting_input"
    pending = awaiting["value"]["pendingToolCalls"]
    assert [(p["toolCallId"], p["toolName"], json.loads(p["arguments"])) for p in pending] == [
        ("call_a", "get_weather", {"city": "Oslo"}), ("call_b", "get_time", {})]
    args = {}
    for event in events:
        if event.type == "TOOL_CALL_ARGS":
            args[event.data["toolCallId"]] = args.get(event.data["toolCallId"], "") + event.data["delta"]
    assert json.loads(args["call_a"]) == {"city": "Oslo"} and json.loads(args["call_b"]) == {}
    thread = client.get(f"/v1/threads/{thread_id}").json()
    assert thread["runStatus"] == "idle"
    assert thread["lastCompletedRunId"] == run_id
    assert thread["pendingToolCallIds"] == ["call_a", "call_b"]


@pytest.mark.parametrize("message, reason", [
    (tool_results("call_a"), "MISSING_RESULTS"),
    (tool_results("call_a", "call_b", "call_zzz"), "EXTRA_RESULTS"),
    (tool_results("call_a", "call_a", "call_b"), "DUPLICATE_RESULTS"),
    (user("never mind"), "MISSING_RESULTS"),
])
def test_bad_continuations_are_refused(client: httpx.Client, scripted_model: ScriptedModel,
                                       message: dict, reason: str):
    thread_id, run_id, _ = paused_run(client, scripted_model)
    refused = client.post(f"/v1/threads/{thread_id}/runs",
                          json={"message": message, "previousRunId": run_id})
    assert refused.status_code == 400
    assert refused.json()["code"] == "INVALID_TOOL_RESULT"
    assert refused.json()["reason"] == reason

    scripted_model.enqueue([{"content": "Oslo is sunny at noon."}])
    done = run_events(client, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": tool_results("call_a", "call_b"), "previousRunId": run_id,
        "tools": [WEATHER_TOOL, TIME_TOOL]})
    assert text_of(done) == "Oslo is sunny at noon."
    assert not any(e.type in ("TOOL_CALL_RESULT", "TEXT_MESSAGE_START") and
                   e.data.get("role") == "user" for e in done)


def test_proposal_shaped_tool_result_is_accepted(client: httpx.Client,
                                                 scripted_model: ScriptedModel):
    scripted_model.enqueue([call(0, "call_p", "get_weather", '{"city":"Rome"}')],
                           [{"content": "Sunny in Rome."}])
    first = run_events(client, "POST", "/v1/threads/runs",
                       json={"message": user("Rome?"), "tools": [WEATHER_TOOL]})
    thread_id, run_id = first[0].data["threadId"], first[0].data["runId"]
    second = run_events(client, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": {"role": "tool", "toolCallId": "call_p", "content": '{"temp": 30}'},
        "previousRunId": run_id, "tools": [WEATHER_TOOL]})
    assert text_of(second) == "Sunny in Rome."
    tool_message = [m for m in scripted_model.requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_message == [{"role": "tool", "tool_call_id": "call_p", "content": '{"temp": 30}'}]


def test_tool_choice_and_max_calls_reach_the_model(client: httpx.Client,
                                                   scripted_model: ScriptedModel):
    limited = {**WEATHER_TOOL, "maxCalls": 1}
    scripted_model.enqueue([call(0, "call_m", "get_weather", '{"city":"Lima"}')],
                           [{"content": "Done."}])
    first = run_events(client, "POST", "/v1/threads/runs", json={
        "message": user("Lima?"), "tools": [limited, TIME_TOOL],
        "toolChoice": {"name": "get_weather"}})
    sent = scripted_model.requests[0]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    thread_id, run_id = first[0].data["threadId"], first[0].data["runId"]

    run_events(client, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": tool_results("call_m"), "previousRunId": run_id,
        "tools": [limited, TIME_TOOL], "toolChoice": "auto"})
    offered = [t["function"]["name"] for t in scripted_model.requests[1]["tools"]]
    assert offered == ["get_time"]  # get_weather used its one call on this thread
    assert scripted_model.requests[1]["tool_choice"] == "auto"


def test_force_component_and_text_order(client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([
        {"content": "Before the card. "},
        call(0, "call_k", "show_component_Card", '{"title": "Hi", "rows": [1, 2]}'),
    ])
    events = run_events(client, "POST", "/v1/threads/runs", json={
        "message": user("card please"), "forceComponent": "Card",
        "availableComponents": [{"name": "Card", "description": "A card",
                                 "propsSchema": {"type": "object"}}]})
    assert scripted_model.requests[0]["tool_choice"] == {
        "type": "function", "function": {"name": "show_component_Card"}}
    types = [e.type if e.type != "CUSTOM" else e.data["name"] for e in events]
    assert types.index("TEXT_MESSAGE_END") < types.index("tambo.component.start")
    assert "TOOL_CALL_START" not in types
    start = next(e for e in events if e.type == "CUSTOM" and e.data["name"] == "tambo.component.start")
    text_start = next(e for e in events if e.type == "TEXT_MESSAGE_START")
    assert start.data["value"]["messageId"] == text_start.data["messageId"]
    props = {}
    for event in events:
        if event.type == "CUSTOM" and event.data["name"] == "tambo.component.props_delta":
            import jsonpatch
            props = jsonpatch.apply_patch(props, event.data["value"]["operations"])
    assert props == {"title": "Hi", "rows": [1, 2]}

    thread_id = events[0].data["threadId"]
    assistant = client.get(f"/v1/threads/{thread_id}/messages").json()["messages"][-1]
    assert [b["type"] for b in assistant["content"]] == ["text", "component"]
    component = assistant["content"][1]
    assert component["id"] == start.data["value"]["componentId"]
    assert component["props"] == {"title": "Hi", "rows": [1, 2]}


def test_thread_name_and_suggestions(client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "Paris is lovely."}])
    events = run_events(client, "POST", "/v1/threads/runs",
                        json={"message": user("Tell me about Paris"),
                              "thread": {"userKey": DEFAULT_USER}})
    thread_id = events[0].data["threadId"]
    scripted_model.enqueue({"steps": [{"content": '"Trip to Paris"'}], "stream": False})
    named = client.post(f"/threads/{thread_id}/generate-name", params={"contextKey": DEFAULT_USER})
    assert named.status_code == 200 and named.json()["name"] == "Trip to Paris"
    assert client.get(f"/v1/threads/{thread_id}").json()["name"] == "Trip to Paris"
    client.patch(f"/v1/threads/{thread_id}", json={"name": "My own name"})
    again = client.post(f"/threads/{thread_id}/generate-name")
    assert again.json()["name"] == "My own name"  # an existing name is never replaced

    message_id = client.get(f"/v1/threads/{thread_id}/messages").json()["messages"][-1]["id"]
    path = f"/v1/threads/{thread_id}/messages/{message_id}/suggestions"
    assert client.get(path).json() == {"suggestions": [], "hasMore": False}
    scripted_model.enqueue({"steps": [{"content": json.dumps([
        {"title": "Museums", "detailedSuggestion": "Which museums should I see?"},
        {"title": "Food", "detailedSuggestion": "Where should I eat?"}])}], "stream": False})
    created = client.post(path, json={"maxSuggestions": 2, "availableComponents": []})
    assert created.status_code == 201
    titles = [s["title"] for s in created.json()["suggestions"]]
    assert titles == ["Museums", "Food"]
    assert [s["title"] for s in client.get(path).json()["suggestions"]] == titles
    assert client.get(f"/v1/threads/{thread_id}/messages/nope/suggestions").status_code == 404

    # A real model is asked in plain words: the demo model's task names never reach a prompt.
    one_shot = [r for r in scripted_model.requests if not r.get("stream")]
    assert len(one_shot) == 2
    sent = json.dumps([r["messages"] for r in one_shot])
    assert "short title" in sent and "follow-up messages" in sent
    assert "[gateway:" not in sent and "gateway_task" not in json.dumps(one_shot)


def tools_env(model: ScriptedModel) -> dict[str, str]:
    tools = Path(__file__).resolve().parents[1] / "support" / "server_tools.py"
    return scripted_env(model, GATEWAY_TOOLS=str(tools), GATEWAY_TOOL_TIMEOUT_SECONDS="1")


@pytest.fixture(scope="module")
def tools_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[InProcessGateway]:
    server = InProcessGateway(tmp_path_factory.mktemp("tools-gateway"), tools_env(scripted_model))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tools_gateway_process(scripted_model: ScriptedModel,
                          tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    """The same as a process, for Node's verifier (it needs a port)."""
    server = GatewayServer(tmp_path_factory.mktemp("tools-process"), tools_env(scripted_model))
    server.start()
    yield server
    server.stop()


def test_server_tools_run_inline(tools_gateway: InProcessGateway, scripted_model: ScriptedModel):
    scripted_model.enqueue(
        [call(0, "call_s1", "add", '{"a": 2, "b": 40}'),
         call(1, "call_s2", "explode", "{}"),
         call(2, "call_s3", "sleepy", "{}")],
        [{"content": "The sum is 42."}],
    )
    with tools_gateway.client(event_hooks=USER, timeout=30) as http:
        events = run_events(http, "POST", "/v1/threads/runs", json={"message": user("add")})
        results = {e.data["toolCallId"]: e.data for e in events if e.type == "TOOL_CALL_RESULT"}
        starts = {e.data["toolCallId"]: e.data for e in events if e.type == "TOOL_CALL_START"}
        assert json.loads(results["call_s1"]["content"]) == {"sum": 42}
        # The exception's text stays in the server's log (it may hold secrets): the model and the
        # client see which tool failed and an error id to find that line.
        assert results["call_s2"]["content"].startswith("Tool explode failed (error ")
        assert "because" not in results["call_s2"]["content"]
        # The proposal's error flag on a failed tool's result, absent on a success.
        assert results["call_s2"]["isError"] is True and "isError" not in results["call_s1"]
        assert "timed out" in results["call_s3"]["content"]
        for call_id, result in results.items():
            assert result["messageId"] == starts[call_id]["parentMessageId"]
        assert events[-1].type == "RUN_FINISHED"
        assert text_of(events) == "The sum is 42."

        offered = {t["function"]["name"] for t in scripted_model.requests[0]["tools"]}
        assert {"add", "population", "explode", "sleepy"} <= offered
        second = scripted_model.requests[1]["messages"]
        tool_messages = {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"}
        assert json.loads(tool_messages["call_s1"]) == {"sum": 42}

        thread_id = events[0].data["threadId"]
        messages = http.get(f"/v1/threads/{thread_id}/messages").json()["messages"]
        blocks = [b["type"] for b in messages[1]["content"]]
        assert blocks == ["tool_use", "tool_use", "tool_use",
                          "tool_result", "tool_result", "tool_result"]
        assert messages[1]["content"][4]["isError"] is True
        assert messages[2]["content"] == [{"type": "text", "text": "The sum is 42."}]


@pytest.mark.sqlite_only  # the stream's shape; the Node clients check it on both (conformance)
def test_server_tool_stream_passes_the_ag_ui_verifier(tools_gateway_process: GatewayServer,
                                                      scripted_model: ScriptedModel):
    from tests.support.node import capture_and_verify, have_node

    if not have_node():
        pytest.skip("node and npm are needed")
    scripted_model.enqueue([{"content": "Adding. "}, call(0, "call_v1", "add", '{"a": 1, "b": 2}'),
                            call(1, "call_v2", "explode", "{}")],
                           [{"content": "It is 3."}])
    result = capture_and_verify(f"{tools_gateway_process.url}/v1/threads/runs",
                                {"message": user("1+2?"), "thread": {"userKey": "u"}},
                                    {"accept": "text/event-stream"})
    assert result["errors"] == [], result
    types = [e["type"] for e in result["events"]]
    assert "TOOL_CALL_RESULT" in types and types[-1] == "RUN_FINISHED"
