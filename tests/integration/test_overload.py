"""Admission control from outside: a process at `GATEWAY_MAX_ACTIVE_RUNS` refuses a new run on
every dialect's run endpoint at once with 503 `OVERLOADED` and `Retry-After`, says so on
`/ready` (a balancer stops sending it work) and counts the refusals in `/metrics`; the run it
carries goes on, and once it has ended new runs are admitted again. The refusal comes at the
door (`api/door.py`): before the caller is authenticated or the body read, so neither a bad key
nor a body that is not JSON changes it, and nothing but the run starts is refused. (The queue-wait limit,
`GATEWAY_MAX_START_WAIT_SECONDS`, is tested on the gate itself:
tests/inprocess/runs/test_start_gate.py.)"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import scripted_env
from tests.support.gateway_server import USER, GatewayServer
from tests.support.inprocess_app import InProcessGateway
from tests.support.run_stream import message, open_stream, read_until, slow_turn
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of


@pytest.fixture(scope="module")
def one_run(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[httpx.Client]:
    """A gateway process that carries one run at a time."""
    server = InProcessGateway(tmp_path_factory.mktemp("overload"),
                              scripted_env(scripted_model, GATEWAY_MAX_ACTIVE_RUNS="1")).start()
    with server.client(event_hooks=USER, timeout=30, headers={"x-api-key": "test-key"}) as http:
        yield http
    server.stop()


def agui_input(text: str) -> dict[str, Any]:
    return {"threadId": f"t-{uuid.uuid4()}", "runId": f"r-{uuid.uuid4()}",
            "messages": [{"id": f"m-{uuid.uuid4()}", "role": "user", "content": text}],
            "tools": [], "context": [], "state": {}, "forwardedProps": {}}


def starts(thread_id: str, previous_run_id: str, text: str) -> list[tuple[str, dict[str, Any]]]:
    """A new run on each run-start endpoint of every dialect."""
    return [("/v1/threads/runs", {"message": message(text)}),
            (f"/v1/threads/{thread_id}/runs",
             {"message": message(text), "previousRunId": previous_run_id}),
            ("/v1/agui/agents/default/run", agui_input(text))]


def refusals(http: httpx.Client) -> tuple[float, float]:
    """OVERLOADED refusals in `/metrics`: by code, and those of the cap on active runs."""
    text = http.get("/metrics").text

    def counter(sample: str) -> float:
        found = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.M)
        return float(found.group(1)) if found else 0.0

    return (counter('gateway_refusals_total{code="OVERLOADED"}'),
            counter('gateway_overloaded_refusals_total{reason="GATEWAY_MAX_ACTIVE_RUNS"}'))


def test_past_its_cap_a_process_refuses_new_runs_at_once_and_admits_them_again_after(
        one_run: httpx.Client, scripted_model: ScriptedModel) -> None:
    http = one_run
    scripted_model.enqueue_for("first", [{"content": "Done."}])
    first = run_events(http, "POST", "/v1/threads/runs", json={"message": message("first")})
    thread_id, first_run = first[0].data["threadId"], first[0].data["runId"]
    assert http.get("/ready").status_code == 200
    counted = refusals(http)

    scripted_model.enqueue_for("held", slow_turn(400, 0.05))
    with open_stream(http, "POST", "/v1/threads/runs", json={
            "message": message("held"), "onDisconnect": "continue"}) as (_, events):
        held = read_until(events, lambda seen: text_of(seen) != "")
    held_thread, held_run = held[0].data["threadId"], held[0].data["runId"]

    refused = [http.post(path, json=body) for path, body in starts(thread_id, first_run, "no")]
    # Decided before the key is checked (401) or the body parsed (400): nothing is read.
    refused.append(http.post(f"/v1/threads/{thread_id}/runs", content=b"{not json",
                             headers={"x-api-key": "not-a-key"}))
    ready = http.get("/ready")
    for response in refused:
        assert response.status_code == 503, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == "OVERLOADED"
        assert response.json()["reason"] == "GATEWAY_MAX_ACTIVE_RUNS"  # no figure of the load
        assert int(response.headers["retry-after"]) > 0
    assert ready.status_code == 503 and ready.json()["code"] == "OVERLOADED"
    assert "1 runs going or starting" in ready.json()["detail"]  # the operator's view
    assert refusals(http) == (counted[0] + 4, counted[1] + 4)
    status = http.get(f"/v1/threads/{held_thread}/runs/{held_run}",
                      headers={"accept": "application/json"}).json()
    assert status["status"] == "running"  # the admitted run goes on
    assert http.get(f"/v1/threads/{thread_id}").status_code == 200  # reads are answered

    http.delete(f"/v1/threads/{held_thread}/runs/{held_run}")
    assert http.get("/ready").status_code == 200
    for path, body in starts(thread_id, first_run, "again"):
        scripted_model.enqueue_for("again", [{"content": "Admitted."}])
        events = run_events(http, "POST", path, json=body)
        assert text_of(events) == "Admitted.", path
        assert events[-1].type == "RUN_FINISHED", path


def test_a_saturated_process_refuses_a_timbal_message_in_timbal_s_shape(
        one_run: httpx.Client, scripted_model: ScriptedModel) -> None:
    http, thread_id, user = one_run, str(uuid.uuid4()), {"userKey": "timbal-overload"}
    scripted_model.enqueue_for("held", slow_turn(400, 0.05))
    with open_stream(http, "POST", "/v1/threads/runs", json={
            "message": message("held"), "onDisconnect": "continue"}) as (_, events):
        held = read_until(events, lambda seen: text_of(seen) != "")
        # Creating a thread starts no run: it goes through while the process is saturated.
        assert http.post(f"/v1/timbal/threads/{thread_id}", json=user).status_code == 201
        sent = http.post(f"/v1/timbal/threads/{thread_id}/messages", params=user,
                         json={"content": "hi"})
    assert sent.status_code == 503 and sent.headers["retry-after"] == "1"
    assert sent.json()["details"]["code"] == "OVERLOADED" and sent.json()["retryAfter"] == 1
    http.delete(f"/v1/threads/{held[0].data['threadId']}/runs/{held[0].data['runId']}")


@pytest.mark.sqlite_only  # the server's protocol; the refusal itself is tested on both above
def test_gateway_serve_refuses_in_the_callback_that_read_the_request_and_keeps_the_connection(
        scripted_model: ScriptedModel, tmp_path: Path) -> None:
    """Through `gateway serve` itself, whose protocol takes a request's first step where it
    read the request (`gateway/server/serve_http.py`): the door's refusal is written before the body
    is parsed, even a body that arrives over many packets after it, and is the same 503 as
    in-process; the connection then serves the next request (keep-alive, one connection)."""
    server = GatewayServer(tmp_path, scripted_env(scripted_model,
                                                  GATEWAY_MAX_ACTIVE_RUNS="1",
                                                  GATEWAY_DRAIN_SECONDS="1")).start()
    scripted_model.enqueue_for("held", slow_turn(400, 0.05))
    key = {"x-api-key": "test-key"}
    try:
        with httpx.Client(base_url=server.url, event_hooks=USER, timeout=30, headers=key) as http, \
                httpx.Client(base_url=server.url, event_hooks=USER, timeout=30, headers=key,
                             limits=httpx.Limits(max_connections=1)) as one:
            with open_stream(http, "POST", "/v1/threads/runs", json={
                    "message": message("held"), "onDisconnect": "continue"}) as (_, events):
                held = read_until(events, lambda seen: text_of(seen) != "")
                answers = [one.post("/v1/threads/runs", json={"message": message(text)})
                           for text in ("no", "x" * 300_000)]
                answers.append(one.get("/ready"))
                answers.append(one.get(f"/v1/threads/{held[0].data['threadId']}"))
            for refused in answers[:2]:
                assert refused.status_code == 503, refused.text
                assert refused.headers["content-type"] == "application/problem+json"
                assert refused.json()["code"] == "OVERLOADED"
                assert refused.headers["retry-after"] == "1" and refused.headers["x-request-id"]
            assert answers[2].status_code == 503 and answers[3].status_code == 200
            peers = {answer.extensions["network_stream"].get_extra_info("client_addr")
                     for answer in answers}
            assert len(peers) == 1  # one connection throughout
            http.delete(f"/v1/threads/{held[0].data['threadId']}/runs/{held[0].data['runId']}")
    finally:
        server.stop()
