"""Every event of real runs, and every frame and stored value they leave, matches `schemas/`.

A real gateway (scripted model behind litellm, a server tool module) runs the conformance shapes:
text, reasoning, a client tool round trip, a component whose state changes mid-run, a server
tool, an approved server tool, a provider error, a cancellation, and a replay. Each SSE event is checked with `jsonschema`
against the published union (`schemas/tambo/event.json`) and its own file (from
`schemas/index.json`); the run log (`run_frames`) and the stored messages are read from the
gateway's SQLite file and checked against `schemas/timbal/`. The runs must exercise every type
the gateway emits, so the check cannot pass vacuously.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from gateway.store.repository import Store
from tests.conftest import scripted_env
from tests.support.gateway_server import USER, read_store
from tests.support.inprocess_app import InProcessGateway
from tests.support.run_stream import open_stream, read_until, texts
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import SseEvent, iter_events, run_events

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
INDEX = json.loads((SCHEMAS / "index.json").read_text())
SERVER_TOOLS = Path(__file__).resolve().parents[1] / "support" / "server_tools.py"

WEATHER = {"name": "get_weather", "description": "Get weather",
           "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}
CARD = {"name": "Card", "description": "A card",
        "propsSchema": {"type": "object", "properties": {"title": {"type": "string"}}}}
# A sub-agent's end and a tool's status: in the run's log, never stored with the thread.
LOG_ONLY = {"agent_complete", "error", "status"}
# Reserved by the dialect, never emitted by the gateway yet.
NOT_EMITTED = {"CUSTOM tambo.message.parent"}


def validator(path: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads((SCHEMAS / path).read_text()))


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def call(call_id: str | None, name: str | None, arguments: str, index: int = 0) -> dict:
    fragment: dict[str, Any] = {"index": index, "arguments": arguments}
    if call_id:
        fragment.update(id=call_id, name=name)
    return {"tool_call": fragment}

@dataclass
class Captured:
    events: list[SseEvent] = field(default_factory=list)
    run_ids: set[str] = field(default_factory=set)
    thread_ids: set[str] = field(default_factory=set)

    def add(self, events: list[SseEvent]) -> list[SseEvent]:
        self.events += events
        started = next(e for e in events if e.type == "RUN_STARTED")
        self.run_ids.add(started.data["runId"])
        self.thread_ids.add(started.data["threadId"])
        return events


def event_name(event: dict[str, Any]) -> str:
    return f"CUSTOM {event['name']}" if event["type"] == "CUSTOM" else event["type"]


@pytest.fixture(scope="module")
def schema_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[InProcessGateway]:
    workdir = tmp_path_factory.mktemp("schema-gateway")
    # An agent that takes a client's system prompt, so a thread can store one (`x-system`),
    # and delegates to a sub-agent (its frames and values).
    (workdir / "agents.toml").write_text(
        "[agents.default]\nallow_client_system_prompt = true\nsubagents = [\"helper\"]\n"
        "[agents.helper]\ndescription = \"Helps\"\n")
    server = InProcessGateway(workdir, scripted_env(
        scripted_model, GATEWAY_TOOLS=str(SERVER_TOOLS),
        GATEWAY_AGENTS_FILE=str(workdir / "agents.toml")))
    server.start()
    yield server
    server.stop()


def component_run_with_state(http: httpx.Client, captured: Captured) -> None:
    """A component whose state is set while the run is still streaming (state_delta live)."""
    body = {"message": user("show a card"), "availableComponents": [CARD]}
    with http.stream("POST", "/v1/threads/runs", json=body,
                     headers={"accept": "text/event-stream"}) as response:
        events = []
        for event in iter_events(response):
            events.append(event)
            if event.type == "CUSTOM" and event.data["name"] == "tambo.component.start":
                url = (f"/v1/threads/{events[0].data['threadId']}/components/"
                       f"{event.data['value']['componentId']}/state")
                assert http.post(url, json={"state": {"open": True}}).status_code == 200
    captured.add(events)


def cancelled_run(http: httpx.Client, captured: Captured) -> None:
    with http.stream("POST", "/v1/threads/runs", json={"message": user("go on")},
                     headers={"accept": "text/event-stream"}) as response:
        events = []
        for event in iter_events(response):
            events.append(event)
            if event.type == "TEXT_MESSAGE_CONTENT" and len(events) == 3:
                started = events[0].data
                threading.Thread(target=http.delete, args=(
                    f"/v1/threads/{started['threadId']}/runs/{started['runId']}",)).start()
    captured.add(events)


def queued_run(http: httpx.Client, captured: Captured) -> None:
    """A message enqueued behind a streaming run (its stream opens with the queued notice),
    which starts once that run is cancelled."""
    with open_stream(http, "POST", "/v1/threads/runs", json={"message": user("first")}) as (
            _, events):
        first = read_until(events, lambda seen: texts(seen) >= 2)
        ids = first[0].data["threadId"], first[0].data["runId"]
        with open_stream(http, "POST", f"/v1/threads/{ids[0]}/runs", json={
                "message": user("second"), "multitaskStrategy": "enqueue"}) as (_, queued):
            http.delete(f"/v1/threads/{ids[0]}/runs/{ids[1]}")
            captured.add(list(queued))
        captured.add(first + list(events))


@pytest.fixture(scope="module")
def captured(schema_gateway: InProcessGateway, scripted_model: ScriptedModel) -> Captured:
    scripted_model.reset()
    got = Captured()
    with schema_gateway.client(event_hooks=USER, timeout=60,
                               headers={"x-api-key": "test-key"}) as http:
        # Text, in a thread seeded with a system prompt and an assistant greeting.
        scripted_model.enqueue([{"content": "Hello "}, {"content": "there."}])
        got.add(run_events(http, "POST", "/v1/threads/runs", json={
            "message": user("hi"), "thread": {"initialMessages": [
                {"role": "system", "content": "Be brief."},
                {"role": "assistant", "content": [{"type": "text", "text": "Hi!"}]}]}}))
        # Reasoning, then text.
        scripted_model.enqueue([{"reasoning": "Think "}, {"reasoning": "twice."},
                                {"content": "Done thinking."}])
        got.add(run_events(http, "POST", "/v1/threads/runs", json={"message": user("think")}))
        # A client tool round trip: the run pauses, the continuation carries the result.
        scripted_model.enqueue(
            [{"content": "Checking."}, call("call_w", "get_weather", '{"city":'),
             call(None, None, '"Oslo"}')],
            [{"content": "Sunny in Oslo."}])
        paused = got.add(run_events(http, "POST", "/v1/threads/runs", json={
            "message": user("weather?"), "tools": [WEATHER]}))
        started = paused[0].data
        got.add(run_events(http, "POST", f"/v1/threads/{started['threadId']}/runs", json={
            "previousRunId": started["runId"], "tools": [WEATHER], "message": {
                "role": "user", "content": [{"type": "tool_result", "toolUseId": "call_w",
                                             "content": [{"type": "text", "text": "21C"}]}]}}))
        # A component streamed in fragments, its state changed while the run is live.
        scripted_model.enqueue([{"content": "Here."},
                                call("call_c", "show_component_Card", '{"title": "Ca'),
                                call(None, None, 'rd"}'), {"delay": 1}])
        component_run_with_state(http, got)
        # A server tool (a result event), and one that fails.
        scripted_model.enqueue([call("call_a", "add", '{"a": 1, "b": 2}'),
                                call("call_x", "explode", "{}", index=1)],
                               [{"content": "Three."}])
        got.add(run_events(http, "POST", "/v1/threads/runs", json={"message": user("add")}))
        # A server tool that reports its progress (status messages, deleted at its end).
        scripted_model.enqueue([call("call_s", "survey", '{"sources": 2}')],
                               [{"content": "Searched."}])
        surveyed = got.add(run_events(http, "POST", "/v1/threads/runs",
                                      json={"message": user("survey")}))[0].data
        check_statuses_on_the_timbal_view(http, surveyed)
        # A server tool that changes the thread's shared state (a `thread.state` frame).
        scripted_model.enqueue([call("call_l", "set_language", '{"language": "nb"}')],
                               [{"content": "Byttet."}])
        got.add(run_events(http, "POST", "/v1/threads/runs", json={"message": user("norsk")}))
        # A server tool that asks first: the run pauses, the continuation approves it.
        scripted_model.enqueue([call("call_o", "place_order", '{"item": "tea"}')],
                               [{"content": "Ordered."}])
        asking = got.add(run_events(http, "POST", "/v1/threads/runs",
                                    json={"message": user("order tea")}))[0].data
        got.add(run_events(http, "POST", f"/v1/threads/{asking['threadId']}/runs", json={
            "previousRunId": asking["runId"], "message": {"role": "user", "content": [
                {"type": "tool_result", "toolUseId": "call_o",
                 "content": [{"type": "text", "text": '{"approved": true}'}]}]}}))
        # A provider error, and a cancellation mid-stream.
        scripted_model.enqueue([{"error": 503, "message": "overloaded"}])
        got.add(run_events(http, "POST", "/v1/threads/runs", json={"message": user("fail")}))
        scripted_model.enqueue([{"slow": {"count": 200, "interval": 0.05}}])
        cancelled_run(http, got)
        # A message enqueued behind a streaming run, which is cancelled.
        scripted_model.enqueue([{"content": "First "}, {"slow": {"count": 200, "interval": 0.05}}],
                               [{"content": "Queued answer."}])
        queued_run(http, got)
        # A sub-agent that answers, then one that fails.
        scripted_model.enqueue([call("call_d", "helper", '{"task": "look"}')],
                               [{"content": "Looked."}], [{"content": "Done."}],
                               [call("call_e", "helper", '{"task": "fail"}')],
                               [{"error": 400, "message": "bad"}], [{"content": "Sorry."}])
        got.add(run_events(http, "POST", "/v1/threads/runs", json={"message": user("ask")}))
        got.add(run_events(http, "POST", "/v1/threads/runs", json={"message": user("ask")}))
        # A reconnect replays a finished run from its stored log.
        replay = run_events(http, "GET", f"/v1/threads/{started['threadId']}/runs/"
                                         f"{started['runId']}")
        assert [e.data for e in replay] == [e.data for e in paused]
        got.events += replay
    return got


def check_statuses_on_the_timbal_view(http: httpx.Client, run: dict[str, Any]) -> None:
    """The Timbal run view shows the tool's statuses: one `status` message, set once per
    status and deleted before the tool's result; the Tambo stream shows none of it."""
    response = http.get(f"/v1/timbal/threads/{run['threadId']}/runs/{run['runId']}")
    frames = [json.loads(line) for line in response.text.splitlines()]
    statuses = [f for f in frames if (f.get("v") or {}).get("type") == "status"]
    assert [f["v"]["detail"] for f in statuses] == ["Searching source 1 of 2",
                                                     "Searching source 2 of 2"]
    assert {(f["i"], f["v"]["state"], f["v"]["toolCallId"], f["v"]["sender"])
            for f in statuses} == {(statuses[0]["i"], "searching", "call_s", "default")}
    deleted = frames.index({"i": statuses[0]["i"], "v": None})
    result = next(k for k, f in enumerate(frames)
                  if (f.get("v") or {}).get("type") == "tool_result")
    assert frames.index(statuses[-1]) < deleted < result


def test_every_event_matches_the_union_and_its_own_schema(captured: Captured) -> None:
    seen = check_all([e.data for e in captured.events], "tambo.event", "tambo.events",
                     event_name)
    # The runs exercised every event type the gateway emits, both kinds of RUN_ERROR included.
    assert seen == set(INDEX["types"]["tambo.events"]) - NOT_EMITTED
    codes = {e.data["code"] for e in captured.events if e.type == "RUN_ERROR"}
    assert codes == {"LLM_SERVER_ERROR", "CANCELLED"}


def stored_frames(server: InProcessGateway, run_ids: set[str]) -> list[dict[str, Any]]:
    """Every frame of the runs, once each run's log is complete on disk (it is written in
    batches, the last one just after the terminal event)."""
    async def frames_of(store: Store) -> list[tuple[str, dict[str, Any]]]:
        return [(run_id, row.frame) for run_id in sorted(run_ids)
                for row in await store.read_frames(run_id)]

    deadline = time.monotonic() + 10
    while True:
        frames = read_store(server, frames_of)
        ended = {run_id for run_id, frame in frames
                 if frame.get("c") in ("run.finished", "run.cancelled", "error")}
        if ended == run_ids or time.monotonic() > deadline:
            assert ended == run_ids, f"runs without a terminal frame: {run_ids - ended}"
            return [frame for _, frame in frames]
        time.sleep(0.1)


def frame_name(frame: dict[str, Any]) -> str:
    if "c" in frame:
        return f"control {frame['c']}"
    if "v" in frame:
        return "set" if frame["v"] is not None else "delete"
    return "append" if "a" in frame else "start"


def value_name(value: dict[str, Any]) -> str:
    if value["type"] == "tool_result":
        return "tool_result.client" if value.get("origin") == "client" else "tool_result.server"
    return value["type"]


def check_all(items: list[dict[str, Any]], union: str, group: str, name_of: Any) -> set[str]:
    """Validate each item against the union and its own file; returns the names seen."""
    whole = validator(INDEX["unions"][union]["path"])
    own = {name: validator(entry["path"]) for name, entry in INDEX["types"][group].items()}
    problems = []
    for item in items:
        name = name_of(item)
        for check in (whole, own.get(name)):
            errors = list(check.iter_errors(item)) if check else ["no schema for it"]
            problems += [f"{name}: {e} in {item}" for e in errors]
    assert not problems, "\n".join(str(p)[:500] for p in problems)
    return {name_of(item) for item in items}


def test_run_logs_match_the_timbal_frame_schemas(schema_gateway: InProcessGateway,
                                                  captured: Captured) -> None:
    frames = stored_frames(schema_gateway, captured.run_ids)
    seen = check_all(frames, "timbal.frame", "timbal.frames", frame_name)
    assert seen == set(INDEX["types"]["timbal.frames"])
    # The values only a run's log holds (a sub-agent's end): their set frames passed above,
    # and each matches its own file.
    values = [f["v"] for f in frames if f.get("v") and f["v"]["type"] in LOG_ONLY]
    assert {value_name(v) for v in values} == LOG_ONLY
    for value in values:
        entry = INDEX["types"]["timbal.values"][value_name(value)]
        assert not list(validator(entry["path"]).iter_errors(value)), value


def test_stored_messages_match_the_timbal_value_schemas(schema_gateway: InProcessGateway,
                                                         captured: Captured) -> None:
    async def messages(store: Store) -> list[Any]:
        return [row for thread_id in sorted(captured.thread_ids)
                for row in await store.history(thread_id)]

    parts = [part for row in read_store(schema_gateway, messages) for part in row.parts]
    seen = check_all(parts, "timbal.value", "timbal.values", value_name)
    # A summary of older turns is a value of its run's log only, never a part of a message.
    assert seen == set(INDEX["types"]["timbal.values"]) - LOG_ONLY - {"x-summary"}
