"""Component state over raw HTTP against the gateway app: full replacement and JSON Patch,
revisions and If-Match, the stateSchema, live `tambo.component.state_delta` events during a run,
no lost update under concurrency across two apps sharing the database (each with its own
engine and run manager, as two processes have), and the state reaching the model on the next
run; the real Tambo client against a gateway process. Racing writers in one process, and racing updates reaching
a live run in order, are proven in-process (tests/inprocess/runs/test_component_state.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest

from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import DEFAULT_USER, USER, GatewayServer
from tests.support.inprocess_app import InProcess, InProcessGateway
from tests.support.node import capture_and_verify, have_node, run_scenario
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import SseEvent, iter_events, run_events

TABLE = {"name": "Table", "description": "A data table",
         "propsSchema": {"type": "object", "properties": {"title": {"type": "string"}}}}
COUNTER_SCHEMA = {"type": "object", "properties": {"count": {"type": "integer", "minimum": 0}},
                  "required": ["count"]}


def table_call(name: str = "Table", arguments: str = '{"title": "Users"}'
               ) -> list[dict[str, Any]]:
    """The model's turn: some text, then the component tool call in two fragments."""
    middle = len(arguments) // 2
    return [
        {"content": "Here is the table."},
        {"tool_call": {"index": 0, "id": "call_t", "name": f"show_component_{name}",
                       "arguments": arguments[:middle]}},
        {"tool_call": {"index": 0, "arguments": arguments[middle:]}},
    ]


def custom(events: list[SseEvent], name: str) -> list[dict[str, Any]]:
    return [e.data["value"] for e in events if e.type == "CUSTOM" and e.data["name"] == name]


def render_table(client: httpx.Client, model: ScriptedModel, component: dict | None = None,
                 user_key: str = DEFAULT_USER) -> tuple[str, str, str]:
    """Run a new thread whose model renders one component; (threadId, componentId, runId)."""
    model.enqueue(table_call())
    events = run_events(client, "POST", "/v1/threads/runs", json={
        "message": {"role": "user", "content": [{"type": "text", "text": "show users"}]},
        "thread": {"userKey": user_key}, "availableComponents": [component or TABLE]})
    assert events[-1].type == "RUN_FINISHED", events[-1]
    (start,) = custom(events, "tambo.component.start")
    return events[0].data["threadId"], start["componentId"], events[0].data["runId"]


def state_url(thread_id: str, component_id: str) -> str:
    return f"/v1/threads/{thread_id}/components/{component_id}/state"


def stored(client: httpx.Client, thread_id: str, component_id: str,
           user_key: str = DEFAULT_USER) -> tuple[dict, int]:
    response = client.get(state_url(thread_id, component_id), params={"userKey": user_key})
    assert response.status_code == 200, response.text
    body = response.json()
    assert response.headers["etag"] == f'"{body["revision"]}"'
    return body["state"], body["revision"]


def test_updates_errors_and_revisions(client: httpx.Client, scripted_model: ScriptedModel):
    thread_id, component_id, _ = render_table(client, scripted_model)
    url = state_url(thread_id, component_id)
    assert stored(client, thread_id, component_id) == ({}, 0)

    replaced = client.post(url, json={"state": {"rows": [], "loading": True}, "userKey": DEFAULT_USER})
    assert replaced.status_code == 200, replaced.text
    assert replaced.json() == {"componentId": component_id,
                               "state": {"rows": [], "loading": True}, "revision": 1}
    assert replaced.headers["etag"] == '"1"'

    patched = client.post(url, json={"patch": [
        {"op": "test", "path": "/loading", "value": True},
        {"op": "add", "path": "/rows/-", "value": {"name": "Ada"}},
        {"op": "copy", "from": "/rows/0", "path": "/first"},
        {"op": "move", "from": "/first", "path": "/pinned"},
        {"op": "replace", "path": "/loading", "value": False},
        {"op": "remove", "path": "/pinned"},
    ]})
    assert patched.status_code == 200, patched.text
    expected = {"rows": [{"name": "Ada"}], "loading": False}
    assert patched.json() == {"componentId": component_id, "state": expected, "revision": 2}

    failing = [{"op": "replace", "path": "/loading", "value": True},
               {"op": "test", "path": "/rows/0/name", "value": "Grace"}]
    conflict = client.post(url, json={"patch": failing})
    assert conflict.status_code == 409
    body = conflict.json()
    assert body["code"] == "JSON_PATCH_TEST_FAILED"
    assert body["index"] == 1 and body["operation"] == failing[1]
    assert conflict.headers["content-type"].startswith("application/problem+json")

    stale = client.post(url, json={"state": {"rows": []}}, headers={"If-Match": '"1"'})
    assert stale.status_code == 412
    assert stale.json()["code"] == "REVISION_MISMATCH" and stale.json()["revision"] == 2

    for bad in ([{"op": "remove", "path": "/missing"}],
                [{"op": "replace", "path": "/rows/5", "value": 1}],
                [{"op": "frobnicate", "path": "/rows"}],
                [{"op": "add", "path": "rows", "value": 1}],
                [{"op": "move", "path": "/x"}],
                [{"op": "replace", "path": "", "value": [1, 2]}],
                ["add /x"]):
        invalid = client.post(url, json={"patch": bad})
        assert invalid.status_code == 400, (bad, invalid.text)
        assert invalid.json()["code"] == "INVALID_JSON_PATCH", bad

    for bad_body in ({}, {"state": {"a": 1}, "patch": [{"op": "remove", "path": "/rows"}]},
                     {"state": [1, 2]}, {"state": "x"}, {"patch": []}, {"patch": {"op": "add"}}):
        invalid = client.post(url, json=bad_body)
        assert invalid.status_code == 400, (bad_body, invalid.text)
        assert invalid.json()["code"] == "VALIDATION_ERROR", bad_body

    unknown = client.post(state_url(thread_id, "comp_nope"), json={"state": {}})
    assert unknown.status_code == 404 and unknown.json()["code"] == "COMPONENT_NOT_FOUND"
    assert client.get(state_url(thread_id, "comp_nope")).status_code == 404
    assert client.post(state_url("thr_nope", component_id),
                       json={"state": {}}).json()["code"] == "THREAD_NOT_FOUND"

    assert stored(client, thread_id, component_id) == (expected, 2)

    # The ETag round trip: a writer that read revision 2 may write; then it is stale itself.
    etag = client.get(url).headers["etag"]
    fresh = client.post(url, json={"patch": [{"op": "add", "path": "/page", "value": 2}]},
                        headers={"If-Match": etag})
    assert fresh.status_code == 200 and fresh.json()["revision"] == 3
    again = client.post(url, json={"state": {}}, headers={"If-Match": etag})
    assert again.status_code == 412 and again.json()["revision"] == 3
    assert client.get(url, headers={"If-None-Match": '"3"'}).status_code == 304
    assert stored(client, thread_id, component_id) == ({**expected, "page": 2}, 3)


def test_listings_show_current_state(client: httpx.Client, scripted_model: ScriptedModel):
    thread_id, component_id, _ = render_table(client, scripted_model)
    client.post(state_url(thread_id, component_id), json={"state": {"selected": 3}})

    def component_block(messages: list[dict]) -> dict:
        return next(b for m in messages for b in m["content"] if b["type"] == "component")

    listed = client.get(f"/v1/threads/{thread_id}/messages").json()["messages"]
    block = component_block(listed)
    assert block == {"type": "component", "id": component_id, "name": "Table",
                     "props": {"title": "Users"}, "state": {"selected": 3}}
    thread = client.get(f"/v1/threads/{thread_id}").json()
    assert component_block(thread["messages"]) == block
    message = client.get(f"/v1/threads/{thread_id}/messages/{listed[-1]['id']}").json()
    assert component_block([message]) == block


def test_user_key_in_query_or_body(client: httpx.Client, scripted_model: ScriptedModel):
    thread_id, component_id, _ = render_table(client, scripted_model, user_key="owner")
    url = state_url(thread_id, component_id)
    for kwargs in ({"params": {"userKey": "intruder"}, "json": {"state": {"x": 1}}},
                   {"json": {"state": {"x": 1}, "userKey": "intruder"}}):
        refused = client.post(url, **kwargs)
        assert refused.status_code == 404 and refused.json()["code"] == "THREAD_NOT_FOUND"
    assert client.get(url, params={"userKey": "intruder"}).status_code == 404
    ok = client.post(url, params={"userKey": "owner"}, json={"state": {"x": 1}, "userKey": "owner"})
    assert ok.status_code == 200
    assert stored(client, thread_id, component_id, "owner") == ({"x": 1}, 1)


def test_state_schema_is_enforced(client: httpx.Client, scripted_model: ScriptedModel):
    thread_id, component_id, _ = render_table(
        client, scripted_model, {**TABLE, "name": "Table", "stateSchema": COUNTER_SCHEMA})
    url = state_url(thread_id, component_id)
    assert client.post(url, json={"state": {"count": 1}}).status_code == 200

    wrong_type = client.post(url, json={"patch": [{"op": "replace", "path": "/count",
                                                   "value": "two"}]})
    assert wrong_type.status_code == 422
    assert wrong_type.json()["code"] == "STATE_SCHEMA_VIOLATION"
    assert wrong_type.json()["path"] == "/count"
    missing = client.post(url, json={"state": {}})
    assert missing.status_code == 422 and "count" in missing.json()["detail"]
    assert stored(client, thread_id, component_id) == ({"count": 1}, 1)


@pytest.fixture(scope="module")
def second_gateway(gateway: InProcess, scripted_model: ScriptedModel
                   ) -> Iterator[InProcessGateway]:
    """Another gateway app on the first one's database."""
    server = InProcessGateway(gateway.workdir, scripted_env(scripted_model))
    server.start()
    yield server
    server.stop()


def test_concurrent_patches_across_processes(client: httpx.Client, scripted_model: ScriptedModel,
                                             gateway: InProcess,
                                             second_gateway: InProcessGateway):
    thread_id, component_id, _ = render_table(client, scripted_model)
    statuses = asyncio.run(concurrent_patches([gateway, second_gateway], thread_id,
                                              component_id, 50))

    assert statuses == [200] * 50
    state, revision = stored(client, thread_id, component_id)
    assert state == {f"k{i}": i for i in range(50)}
    assert revision == 50


async def concurrent_patches(gateways: list[InProcess], thread_id: str, component_id: str,
                             count: int) -> list[int]:
    """`count` patches at once, each adding its own key, spread over the given gateways."""
    clients = [gateway.async_client(timeout=60, headers={"x-api-key": "test-key"})
               for gateway in gateways]

    async def one(i: int) -> int:
        http = clients[i % len(clients)]
        response = await http.post(state_url(thread_id, component_id),
                                   params={"userKey": DEFAULT_USER}, json={"patch": [
                                       {"op": "add", "path": f"/k{i}", "value": i}]})
        return response.status_code

    try:
        return list(await asyncio.gather(*(one(i) for i in range(count))))
    finally:
        for http in clients:
            await http.aclose()


def test_live_subscriber_receives_state_deltas(client: httpx.Client,
                                               scripted_model: ScriptedModel):
    # The model renders the table, then keeps its stream open: the run is live while we update.
    scripted_model.enqueue(table_call() + [{"delay": 3}])
    events: list[SseEvent] = []
    posted: list[httpx.Response] = []
    body = {"message": {"role": "user", "content": [{"type": "text", "text": "show users"}]},
            "availableComponents": [TABLE]}
    headers = {"accept": "text/event-stream", "x-api-key": "test-key"}
    with client.stream("POST", "/v1/threads/runs", json=body, headers=headers) as response:
        assert response.status_code == 200
        for event in iter_events(response):
            events.append(event)
            if event.type == "CUSTOM" and event.data["name"] == "tambo.component.start":
                thread_id = events[0].data["threadId"]
                url = state_url(thread_id, event.data["value"]["componentId"])
                posted.append(client.post(url, json={"state": {"rows": [], "loading": True}}))
                posted.append(client.post(url, json={"patch": [
                    {"op": "test", "path": "/loading", "value": True},
                    {"op": "add", "path": "/rows/-", "value": {"id": 1}},
                    {"op": "replace", "path": "/loading", "value": False}]}))

    assert [p.status_code for p in posted] == [200, 200], [p.text for p in posted]
    assert events[-1].type == "RUN_FINISHED"
    (start,) = custom(events, "tambo.component.start")
    deltas = custom(events, "tambo.component.state_delta")
    assert [d["revision"] for d in deltas] == [1, 2]
    assert all(d["componentId"] == start["componentId"] for d in deltas)
    assert deltas[1]["operations"] == [{"op": "add", "path": "/rows/-", "value": {"id": 1}},
                                       {"op": "replace", "path": "/loading", "value": False}]
    copy: dict[str, Any] = {}  # what a client holds for a component it saw start
    for delta in deltas:
        assert delta["delta"] == delta["operations"]
        copy = jsonpatch.apply_patch(copy, delta["operations"])
    state, revision = stored(client, thread_id, start["componentId"])
    assert copy == state == {"rows": [{"id": 1}], "loading": False}
    assert revision == 2
    names = [e.data["name"] for e in events if e.type == "CUSTOM"]
    assert names.index("tambo.component.state_delta") < names.index("tambo.component.end")

    # A reader that comes later replays the same deltas from the stored log.
    replay = run_events(client, "GET", f"/v1/threads/{thread_id}/runs/{events[0].data['runId']}")
    assert custom(replay, "tambo.component.state_delta") == deltas


def test_model_sees_current_state_on_next_run(client: httpx.Client,
                                              scripted_model: ScriptedModel):
    thread_id, component_id, run_id = render_table(client, scripted_model)
    client.post(state_url(thread_id, component_id), json={"state": {"sort": "name"}})
    client.post(state_url(thread_id, component_id),
                json={"patch": [{"op": "add", "path": "/page", "value": 4}]})

    scripted_model.enqueue([{"content": "Sorted by name, page 4."}])
    run_events(client, "POST", f"/v1/threads/{thread_id}/runs", json={
        "message": {"role": "user", "content": [{"type": "text", "text": "where am I?"}]},
        "previousRunId": run_id, "availableComponents": [TABLE]})

    sent = scripted_model.requests[-1]["messages"]
    call = next(m for m in sent if m["role"] == "assistant" and m.get("tool_calls"))
    assert call["tool_calls"][0]["function"]["name"] == "show_component_Table"
    result = next(m for m in sent if m.get("tool_call_id") == call["tool_calls"][0]["id"])
    assert json.dumps({"sort": "name", "page": 4}) in result["content"]


@pytest.mark.skipif(not have_node(), reason="node and npm are needed")
def test_tambo_client_applies_state_deltas(gateway_process: GatewayServer,
                                           scripted_model: ScriptedModel):
    """The real `@tambo-ai/client` follows a run whose component state is updated mid-stream
    (through its own SDK's `updateState`), and its copy ends equal to the stored state."""
    scripted_model.enqueue(table_call("DataTable") + [{"delay": 3}])
    gateway = gateway_process  # Node's client needs a port
    result = run_scenario("state_delta", gateway.url)

    assert "crash" not in result, result
    run = result["run"]
    assert run["rejected"] is None and run["error"] is None, result
    assert run["status"] == "idle"
    assert run["customNames"].count("tambo.component.state_delta") == 2, run["customNames"]
    expected = {"rows": [{"id": 1, "name": "Ada"}], "loading": False}
    assert [u["revision"] for u in result["updates"]] == [1, 2]
    assert result["updates"][-1]["state"] == expected
    (block,) = [b for m in run["messages"] for b in m["content"] if b["type"] == "component"]
    assert block["id"] == result["componentId"]
    assert block["state"] == expected
    assert block["streamingState"] == "done"
    with httpx.Client(base_url=gateway.url, event_hooks=USER, headers={"x-api-key": "test-key"}) as http:
        assert stored(http, result["threadId"], result["componentId"], "user-1") == (expected, 2)

    # The same stream, replayed from the log, through @ag-ui/client's verifier.
    verified = capture_and_verify(
        f"{gateway.url}/v1/threads/{result['threadId']}/runs/{run['runIds'][0]}", None,
        {"x-api-key": "test-key", "accept": "text/event-stream"}, method="GET")
    assert verified["errors"] == [], verified["errors"]
    names = [e.get("name") for e in verified["events"] if e["type"] == "CUSTOM"]
    assert names.count("tambo.component.state_delta") == 2


@pytest.fixture(scope="module")
def tools_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[InProcessGateway]:
    """A gateway whose server tools include `load_users` (tests/support/component_tools.py)."""
    tools = Path(__file__).resolve().parents[1] / "support" / "component_tools.py"
    server = InProcessGateway(tmp_path_factory.mktemp("tools-gateway"),
                           scripted_env(scripted_model, GATEWAY_TOOLS=str(tools)))
    server.start()
    yield server
    server.stop()


def test_server_tool_streams_rows_into_a_component(tools_gateway: InProcessGateway,
                                                   scripted_model: ScriptedModel):
    """Example 5.6 of the proposal: the model renders a table and calls a server tool that
    fills it row by row; each row reaches the stream as a state delta."""
    scripted_model.enqueue(
        table_call() + [{"tool_call": {"index": 1, "id": "call_load", "name": "load_users",
                                       "arguments": '{"count": 3}'}}],
        [{"content": "Three users loaded."}])
    with tools_gateway.client(event_hooks=USER, timeout=30,
                              headers={"x-api-key": "test-key"}) as http:
        events = run_events(http, "POST", "/v1/threads/runs", json={
            "message": {"role": "user", "content": [{"type": "text", "text": "users"}]},
            "availableComponents": [TABLE]})
        assert events[-1].type == "RUN_FINISHED"
        (start,) = custom(events, "tambo.component.start")
        deltas = custom(events, "tambo.component.state_delta")
        assert [d["revision"] for d in deltas] == [1, 2, 3, 4, 5]
        copy: dict[str, Any] = {}
        for delta in deltas:
            copy = jsonpatch.apply_patch(copy, delta["operations"])
        rows = [{"id": n, "name": f"user {n}"} for n in (1, 2, 3)]
        expected = {"loading": False, "rows": rows, "totalCount": 3}
        assert copy == expected
        assert stored(http, events[0].data["threadId"], start["componentId"]) == (expected, 5)
        result = next(e for e in events if e.type == "TOOL_CALL_RESULT")
        assert result.data["content"] == "Loaded 3 users (revision 5)."


def test_component_from_an_earlier_run_is_resent_whole(client: httpx.Client,
                                                        scripted_model: ScriptedModel):
    """A run's subscribers may hold any revision of a component rendered before the run (they
    loaded it over REST, maybe long ago), so its first delta in the run is a root `replace` of
    the whole state, which applies to any copy; later ones in the same run are the plain ops."""
    thread_id, component_id, run_id = render_table(client, scripted_model)
    url = state_url(thread_id, component_id)
    client.post(url, json={"state": {"rows": [1]}})

    scripted_model.enqueue([{"content": "Working"}, {"delay": 3}, {"content": " done."}])
    body = {"message": {"role": "user", "content": [{"type": "text", "text": "more"}]},
            "previousRunId": run_id, "availableComponents": [TABLE]}
    headers = {"accept": "text/event-stream", "x-api-key": "test-key"}
    events: list[SseEvent] = []
    with client.stream("POST", f"/v1/threads/{thread_id}/runs", json=body,
                       headers=headers) as response:
        for event in iter_events(response):
            events.append(event)
            if event.type == "TEXT_MESSAGE_CONTENT" and len(events) < 5:
                for row in (2, 3):
                    assert client.post(url, json={"patch": [
                        {"op": "add", "path": "/rows/-", "value": row}]}).status_code == 200

    deltas = custom(events, "tambo.component.state_delta")
    assert [d["operations"] for d in deltas] == [
        [{"op": "replace", "path": "", "value": {"rows": [1, 2]}}],
        [{"op": "add", "path": "/rows/-", "value": 3}]]
    assert [d["revision"] for d in deltas] == [2, 3]
    stale_copy: dict[str, Any] = {"rows": []}  # whatever the client had
    for delta in deltas:
        stale_copy = jsonpatch.apply_patch(stale_copy, delta["operations"])
    assert stale_copy == stored(client, thread_id, component_id)[0] == {"rows": [1, 2, 3]}


@pytest.fixture(scope="module")
def postgres_without_redis(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                           ) -> Iterator[list[InProcessGateway]]:
    """Two gateway apps on one PostgreSQL database and no Redis: signals go through
    PostgreSQL's LISTEN/NOTIFY."""
    if engines.backend() != "postgres":
        pytest.skip("needs the PostgreSQL configuration")
    workdir = tmp_path_factory.mktemp("postgres-without-redis")
    servers = [InProcessGateway(workdir, scripted_env(scripted_model, GATEWAY_REDIS_URL=""))
               for _ in range(2)]
    for server in servers:
        server.start()
    yield servers
    for server in servers:
        server.stop()


def test_updates_and_cancel_on_another_process_without_redis(
        postgres_without_redis: list[InProcessGateway], scripted_model: ScriptedModel):
    """The run streams from its process; state updates and the cancel are sent to the other
    one, which reaches it through the database's notifications. The second update is larger
    than a notification may be, so it travels as a reference and is read back."""
    owner, other = postgres_without_redis
    scripted_model.enqueue(table_call() + [{"delay": 20}])
    big = "x" * 10000
    body = {"message": {"role": "user", "content": [{"type": "text", "text": "show users"}]},
            "thread": {"userKey": DEFAULT_USER}, "availableComponents": [TABLE]}
    headers = {"accept": "text/event-stream", "x-api-key": "test-key"}
    events: list[SseEvent] = []
    posted: list[httpx.Response] = []
    cancelled: httpx.Response | None = None
    scope = {"userKey": DEFAULT_USER}
    with owner.client(timeout=30, headers={"x-api-key": "test-key"}) as mine, \
            other.client(timeout=30, params=scope, headers={"x-api-key": "test-key"}) as theirs:
        with mine.stream("POST", "/v1/threads/runs", json=body, headers=headers) as response:
            for event in iter_events(response):
                events.append(event)
                if event.type == "CUSTOM" and event.data["name"] == "tambo.component.start":
                    component_id = event.data["value"]["componentId"]
                    url = state_url(events[0].data["threadId"], component_id)
                    posted.append(theirs.post(url, json={"state": {"rows": [], "note": ""}}))
                    posted.append(theirs.post(url, json={"patch": [
                        {"op": "add", "path": "/rows/-", "value": {"id": 1}},
                        {"op": "replace", "path": "/note", "value": big}]}))
                deltas = custom(events, "tambo.component.state_delta")
                if len(deltas) == 2 and cancelled is None:
                    cancelled = theirs.delete(f"/v1/threads/{events[0].data['threadId']}"
                                              f"/runs/{events[0].data['runId']}")
        thread_id = events[0].data["threadId"]
        state, revision = stored(theirs, thread_id, component_id)

    assert [p.status_code for p in posted] == [200, 200], [p.text for p in posted]
    assert [d["revision"] for d in deltas] == [1, 2]
    copy: dict[str, Any] = {}
    for delta in deltas:
        copy = jsonpatch.apply_patch(copy, delta["operations"])
    assert copy == state == {"rows": [{"id": 1}], "note": big} and revision == 2
    assert cancelled is not None and cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert [e.data["code"] for e in events if e.type == "RUN_ERROR"] == ["CANCELLED"]
    assert events[-1].type == "RUN_ERROR"
    assert scripted_model.disconnects, "the model's stream was never closed"


def test_a_catastrophic_pattern_neither_freezes_nor_slows_the_gateway(
        client: httpx.Client, gateway: InProcess, scripted_model: ScriptedModel):
    """`^(a+)+$` against 40 characters takes Python's `re` hours, holding the event loop; the
    state schema's patterns run on a linear-time engine, so the update is answered and the
    gateway keeps serving meanwhile."""
    schema = {"type": "object", "properties": {"name": {"type": "string",
                                                        "pattern": "^(a+)+$"}}}
    thread_id, component_id, _ = render_table(
        client, scripted_model, {**TABLE, "stateSchema": schema})

    async def update_while_probing() -> tuple[httpx.Response, list[int]]:
        async with gateway.async_client(headers=client.headers, timeout=10) as http:
            update = asyncio.create_task(http.post(
                state_url(thread_id, component_id), params={"userKey": DEFAULT_USER},
                json={"state": {"name": "a" * 40 + "!"}}))
            probes = [(await http.get("/health")).status_code for _ in range(5)]
            return await update, probes

    answered, probes = asyncio.run(update_while_probing())
    assert answered.status_code == 422, answered.text
    assert answered.json()["code"] == "STATE_SCHEMA_VIOLATION"
    assert probes == [200] * 5


def test_state_schemas_the_gateway_cannot_bound_are_refused_before_the_run(
        client: httpx.Client):
    for schema, code in (({"type": "string", "pattern": "^(?!admin)"}, "UNSUPPORTED_SCHEMA_PATTERN"),
                         ({"$ref": "http://127.0.0.1:9/schema.json"}, "UNSUPPORTED_SCHEMA_REF")):
        response = client.post("/v1/threads/runs", json={
            "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            "thread": {"userKey": DEFAULT_USER},
            "availableComponents": [{**TABLE, "stateSchema": {
                "type": "object", "properties": {"name": schema}}}]})
        assert response.status_code == 400, response.text
        assert response.json()["code"] == code
        assert "Table" in response.json()["detail"]


def test_a_doubling_patch_is_refused_before_the_memory_is_spent(
        client: httpx.Client, gateway: InProcess, scripted_model: ScriptedModel):
    """22 `copy` ops from `/a` into `/a/kN` double the state each time (4 MiB of seed becomes
    terabytes): refused before work, and a Fibonacci chain of copies that never copies a
    value into itself is stopped at the op that passes the size cap, while `/health` answers.
    Too many ops are refused as such."""
    thread_id, component_id, _ = render_table(client, scripted_model)
    url, user = state_url(thread_id, component_id), {"userKey": DEFAULT_USER}
    assert client.post(url, params=user, json={"state": {"a": {"x": "y" * 1000}}}
                       ).status_code == 200
    doubling = [{"op": "copy", "from": "/a", "path": f"/a/k{n}"} for n in range(22)]
    # Each copy below goes elsewhere, yet the state grows as the Fibonacci numbers.
    chain = [{"op": "add", "path": "/p", "value": {"a": "y" * 1000}},
             {"op": "add", "path": "/q", "value": {}}]
    for n in range(40):
        source, target = ("/p", "/q") if n % 2 == 0 else ("/q", "/p")
        chain.append({"op": "copy", "from": source, "path": f"{target}/c{n}"})

    async def patch_while_probing(patch: list[dict[str, Any]]
                                  ) -> tuple[httpx.Response, list[int]]:
        async with gateway.async_client(headers=client.headers, timeout=30) as http:
            update = asyncio.create_task(http.post(url, params=user, json={"patch": patch}))
            probes = [(await http.get("/health")).status_code for _ in range(5)]
            return await update, probes

    for patch, status, code in ((doubling, 400, "INVALID_JSON_PATCH"),
                                (chain, 413, "STATE_TOO_LARGE")):
        answered, probes = asyncio.run(patch_while_probing(patch))
        assert answered.status_code == status, answered.text
        assert answered.json()["code"] == code
        assert probes == [200] * 5
    long = client.post(url, params=user, json={"patch": [
        {"op": "test", "path": "/a", "value": {"x": "y" * 1000}}] * 1000})
    assert long.status_code == 413 and long.json()["code"] == "JSON_PATCH_TOO_LONG"
    assert stored(client, thread_id, component_id) == ({"a": {"x": "y" * 1000}}, 1)
