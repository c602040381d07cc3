"""Double texting over HTTP: a message sent while a run streams, with `multitaskStrategy`
(Tambo body field, AG-UI `forwardedProps`). On PostgreSQL + Redis the two requests go to two
apps, so the cancel crosses processes. (The logic and its races: tests/inprocess/runs/
test_multitask.py.)"""

from __future__ import annotations

import json

import httpx
import pytest

from tests.integration.test_agui import RUN, agui_input
from tests.support.gateway_server import DEFAULT_USER
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
