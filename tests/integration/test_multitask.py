"""Double texting over HTTP: a message sent while a run streams, with `multitaskStrategy`
(Tambo body field, AG-UI `forwardedProps`). On PostgreSQL + Redis the two requests go to two
apps, so the cancel crosses processes. (The logic and its races: tests/inprocess/runs/
test_multitask.py.)"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from gateway.observability import logs
from tests.integration.test_agui import RUN, agui_input
from tests.support.gateway_server import DEFAULT_USER, USER
from tests.support.inprocess_app import InProcess, processes
from tests.support.run_stream import message, open_stream, read_until, run_status, texts
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events

SLOW = {"slow": {"count": 400, "interval": 0.05}}


@pytest.mark.parametrize("strategy", ["reject", "interrupt", "rollback"])
def test_a_message_sent_while_a_run_streams(client: httpx.Client,
                                            scripted_model: ScriptedModel, strategy: str):
    scripted_model.enqueue([{"content": "partial "}, SLOW], [{"content": "Second answer."}])
    with open_stream(client, "POST", "/v1/threads/runs", json={
            "message": message("first"), "thread": {"userKey": DEFAULT_USER}}) as (_, events):
        first = read_until(events, lambda seen: texts(seen) >= 2)
        thread_id, run_id = first[0].data["threadId"], first[0].data["runId"]

        body = {"message": message("second"), "multitaskStrategy": strategy}
        if strategy == "reject":
            busy = client.post(f"/v1/threads/{thread_id}/runs", json=body)
            assert (busy.status_code, busy.json()["code"]) == (409, "CONCURRENT_RUN")
            assert client.delete(f"/v1/threads/{thread_id}/runs/{run_id}").status_code in (
                200, 202)
            return
        second = run_events(client, "POST", f"/v1/threads/{thread_id}/runs", json=body)
        rest = list(events)

    assert rest[-1].type == "RUN_ERROR" and rest[-1].data["code"] == "CANCELLED"
    assert second[-1].type == "RUN_FINISHED"
    assert run_status(client, thread_id, run_id)["status"] == "cancelled"
    sent = json.dumps(scripted_model.requests[-1]["messages"])
    assert ("partial " in sent) is (strategy == "interrupt")
    thread = client.get(f"/v1/threads/{thread_id}").json()
    cut = [m for m in thread["messages"] if m.get("runId") == run_id and m["role"] == "assistant"]
    assert cut[0]["isCancelled"] is True
    assert (cut[0].get("metadata") or {}).get("rolledBack", False) is (strategy == "rollback")


def test_agui_interrupts_through_forwarded_props(client: httpx.Client,
                                                 scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "partial "}, SLOW], [{"content": "Second answer."}])
    first = agui_input(text="first")
    with open_stream(client, "POST", RUN, json=first) as (started, events):
        ids = started.headers["x-thread-id"], started.headers["x-run-id"]  # the gateway's
        read_until(events, lambda seen: texts(seen) >= 2)
        second = agui_input(first["threadId"], text="second",
                            forwardedProps={"multitaskStrategy": "interrupt"})
        answer = run_events(client, "POST", RUN, json=second)
        rest = list(events)
    assert rest[-1].type == "RUN_FINISHED" and rest[-1].data["outcome"] == {"type": "cancelled"}
    assert answer[-1].data["outcome"] == {"type": "success"}
    assert run_status(client, *ids)["status"] == "cancelled"


def test_an_enqueued_message_streams_once_the_thread_is_free(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "First "}, SLOW], [{"content": "Queued answer."}])
    with open_stream(client, "POST", "/v1/threads/runs", json={
            "message": message("first"), "thread": {"userKey": DEFAULT_USER}}) as (_, events):
        first = read_until(events, lambda seen: texts(seen) >= 2)
        thread_id, run_id = first[0].data["threadId"], first[0].data["runId"]
        with open_stream(client, "POST", f"/v1/threads/{thread_id}/runs", json={
                "message": message("second"), "multitaskStrategy": "enqueue"}) as (
                queued, queued_events):
            assert queued.headers["x-run-queued"] == "true"
            queued_id = queued.headers["x-run-id"]
            assert run_status(client, thread_id, queued_id)["status"] == "queued"
            # The run in the way ends (here cancelled): the queued one starts.
            assert client.delete(f"/v1/threads/{thread_id}/runs/{run_id}").status_code in (
                200, 202)
            later = list(queued_events)
        rest = list(events)

    assert rest[-1].type == "RUN_ERROR" and rest[-1].data["code"] == "CANCELLED"
    # The stream says at once that the run is queued: its start, then the notice (neither has
    # a position: a reconnect replays from the run's own first event); then the run's events
    # from its second position on (its first, RUN_STARTED, was sent early).
    prelude, later = later[:2], later[2:]
    assert [(e.type, e.id) for e in prelude] == [("RUN_STARTED", None), ("CUSTOM", None)]
    assert prelude[0].data["runId"] == queued_id
    assert (prelude[1].data["name"], prelude[1].data["value"]) == (
        "tambo.run.queued", {"threadId": thread_id, "runId": queued_id})
    assert [e.id for e in later] == list(range(2, len(later) + 2))
    assert "RUN_STARTED" not in [e.type for e in later] and later[-1].type == "RUN_FINISHED"
    done = run_status(client, thread_id, queued_id)
    assert (done["status"], done["previousRunId"]) == ("completed", run_id)
    assert "Queued answer." in json.dumps([e.data for e in later])
    thread = client.get(f"/v1/threads/{thread_id}").json()
    assert thread["lastCompletedRunId"] == queued_id


def test_agui_an_enqueued_run_says_it_is_queued(client: httpx.Client,
                                                scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "First "}, SLOW], [{"content": "Queued answer."}])
    first = agui_input(text="first")
    with open_stream(client, "POST", RUN, json=first) as (started, events):
        ids = started.headers["x-thread-id"], started.headers["x-run-id"]
        read_until(events, lambda seen: texts(seen) >= 2)
        second = agui_input(first["threadId"], text="second",
                            forwardedProps={"multitaskStrategy": "enqueue"})
        with open_stream(client, "POST", RUN, json=second) as (queued, queued_events):
            assert queued.headers["x-run-queued"] == "true"
            opening = read_until(queued_events, lambda seen: len(seen) >= 2)
            assert client.delete(f"/v1/threads/{ids[0]}/runs/{ids[1]}").status_code in (
                200, 202)
            later = opening + list(queued_events)
        list(events)

    assert [e.type for e in later[:2]] == ["RUN_STARTED", "CUSTOM"]
    assert (later[0].data["threadId"], later[0].data["runId"]) == (
        first["threadId"], second["runId"])  # the client's ids, as in every event
    assert (later[1].data["name"], later[1].data["value"]) == (
        "gateway.run.queued", {"threadId": first["threadId"], "runId": second["runId"]})
    assert [e.type for e in later].count("RUN_STARTED") == 1
    assert later[-1].data["outcome"] == {"type": "success"}
    assert "Queued answer." in json.dumps([e.data for e in later])


@pytest.mark.parametrize("strategy", ["interrupt", "enqueue"])
def test_racing_requests_never_run_two_at_once(gateway: InProcess, client: httpx.Client,
                                               scripted_model: ScriptedModel, strategy: str):
    """Three messages sent at once while a run streams (on PostgreSQL + Redis, to two apps):
    each is refused, or runs, one run at a time; every stream ends, the thread ends idle."""
    racing = 3
    slow = {"slow": {"count": 20, "interval": 0.05}}
    scripted_model.enqueue([{"content": "First "}, SLOW],
                           *[[{"content": "late "}, slow] for _ in range(racing)])

    def send(n: int) -> tuple[int, list]:
        with gateway.client(event_hooks=USER, timeout=60,
                            headers={"x-api-key": "test-key"}) as http, open_stream(
                http, "POST", f"/v1/threads/{thread_id}/runs",
                json={"message": message(f"racing {n}"), "previousRunId": run_id,
                      "multitaskStrategy": strategy}) as (response, events):
            return response.status_code, list(events)

    with open_stream(client, "POST", "/v1/threads/runs", json={
            "message": message("first"), "thread": {"userKey": DEFAULT_USER}}) as (_, events):
        first = read_until(events, lambda seen: texts(seen) >= 2)
        thread_id, run_id = first[0].data["threadId"], first[0].data["runId"]
        with ThreadPoolExecutor(racing) as pool:
            futures = [pool.submit(send, n) for n in range(racing)]
            if strategy == "enqueue":  # the queue moves once the run in its way ends
                assert client.delete(f"/v1/threads/{thread_id}/runs/{run_id}").status_code in (
                    200, 202)
            outcomes = [f.result() for f in futures]
        list(events)

    for status, streamed in outcomes:
        assert status == 200, streamed
        assert streamed[-1].type in ("RUN_FINISHED", "RUN_ERROR"), streamed[-1]
        assert [e.type for e in streamed].count("RUN_STARTED") == 1
    runs = client.get(f"/v1/threads/{thread_id}/runs", params={"limit": 10}).json()["runs"]
    assert len(runs) == racing + 1
    ran = sorted((r for r in runs if r.get("startedAt")), key=lambda r: r["startedAt"])
    for before, after in zip(ran, ran[1:], strict=False):
        assert before["finishedAt"] <= after["startedAt"], (before, after)  # one at a time
    statuses = sorted(r["status"] for r in runs)
    assert run_status(client, thread_id, run_id)["status"] == "cancelled"
    if strategy == "interrupt":  # each interrupts the one running when it arrives (if any)
        assert set(statuses) == {"cancelled", "completed"}
        assert ran[-1]["status"] == "completed"  # the newest message is answered
    else:  # the first was cancelled; the queued ones all ran, in turn
        assert statuses == ["cancelled"] + ["completed"] * racing
    assert client.get(f"/v1/threads/{thread_id}").json()["runStatus"] == "idle"


@contextlib.contextmanager
def cancelled_while_reading(gateway: InProcess, request_id: str, run_id: str,
                            when: str) -> Iterator[None]:
    """Another request's interrupt: it cancels `run_id` just `before` (or `after`) the request
    `request_id` reads its thread, on whichever app serves that request."""
    apps = processes(gateway)
    stores = [app.app.state.services.store for app in apps]

    def hooked(services: Any) -> Callable[..., Awaitable[Any]]:
        read = services.store.get_thread

        async def get_thread(*args: Any) -> Any:
            if logs.request_id.get() != request_id:
                return await read(*args)
            del services.store.get_thread  # once
            thread = await read(*args) if when == "after" else None
            assert (await services.runs.cancel(run_id)).status == "cancelled"
            return thread or await read(*args)
        return get_thread

    for app, store in zip(apps, stores, strict=True):
        store.get_thread = hooked(app.app.state.services)
    try:
        yield
    finally:
        for store in stores:
            store.__dict__.pop("get_thread", None)


@pytest.mark.parametrize("when", ["before", "after"])
def test_an_interrupt_whose_run_in_the_way_ended_after_it_arrived(
        gateway: InProcess, client: httpx.Client, scripted_model: ScriptedModel, when: str):
    """Two tabs interrupt one run: the other tab's cancel (on PostgreSQL + Redis maybe through
    the other app) ends the run after this request arrived, just before its API reads the
    thread (it finds it idle) or just after (it found it busy). Its client could not know that
    end: it starts after that run, not 400 INVALID_PREVIOUS_RUN."""
    scripted_model.enqueue([{"content": "partial "}, SLOW], [{"content": "Second answer."}])
    with open_stream(client, "POST", "/v1/threads/runs", json={
            "message": message("first"), "thread": {"userKey": DEFAULT_USER}}) as (_, events):
        first = read_until(events, lambda seen: texts(seen) >= 2)
        thread_id, run_id = first[0].data["threadId"], first[0].data["runId"]
        rid = f"second-tab-{when}"
        with cancelled_while_reading(gateway, rid, run_id, when):
            # As a Tambo tab sends it while the run streams: no previousRunId (the run is the
            # thread's first).
            answer = run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
                                headers={"x-request-id": rid}, json={
                                    "message": message("second"),
                                    "multitaskStrategy": "interrupt"})
        assert list(events)[-1].data["code"] == "CANCELLED"

    assert answer[-1].type == "RUN_FINISHED"
    assert "Second answer." in json.dumps([e.data for e in answer])
    second = answer[0].data["runId"]
    assert run_status(client, thread_id, second)["previousRunId"] == run_id
    assert client.get(f"/v1/threads/{thread_id}").json()["lastCompletedRunId"] == second
