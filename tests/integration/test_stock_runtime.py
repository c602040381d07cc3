"""`GATEWAY_STOCK_RUNTIME=true`: a `gateway serve` on uvicorn's, starlette's and sse-starlette's
stock path (uvloop's own accept, uvicorn's HTTP protocol and main loop, starlette's middleware
a layer per check, sse-starlette's own response, the interpreter's defaults) serves a run as the
gateway's own runtime does: streamed whole, resumed after a reconnect, cancelled mid-stream,
and the drain on SIGTERM still ends the process cleanly. It is a measurement setting
(docs/decisions/): what a client sees must not depend on it."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import scripted_env
from tests.support.gateway_server import DEFAULT_USER, USER, GatewayServer
from tests.support.inprocess_app import InProcessGateway
from tests.support.run_stream import (
    ids,
    message,
    open_stream,
    read_and_leave,
    read_until,
    resume,
    run_status,
    slow_text,
    slow_turn,
    started_ids,
    texts,
)
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of

BODY = {"message": message("go"), "thread": {"userKey": DEFAULT_USER}}


@pytest.fixture(scope="module")
def stock(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[GatewayServer]:
    server = GatewayServer(tmp_path_factory.mktemp("stock"),
                           scripted_env(scripted_model, GATEWAY_STOCK_RUNTIME="true"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def http(stock: GatewayServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stock.url, event_hooks=USER, timeout=30,
                      headers={"x-api-key": "test-key"}) as client:
        yield client


def test_it_says_it_runs_the_stock_path(stock: GatewayServer) -> None:
    assert "stock runtime: loop, http, server, front, sse, gc" in stock.log()


def streams_whole(http: httpx.Client, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue(slow_turn(20, 0.01))
    events = run_events(http, "POST", "/v1/threads/runs", json=BODY)
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == "RUN_STARTED" and events[-1].type == "RUN_FINISHED"
    assert text_of(events) == slow_text(20)


def test_a_run_streams_whole(http: httpx.Client, scripted_model: ScriptedModel) -> None:
    streams_whole(http, scripted_model)


def test_a_cancel_ends_the_stream_and_frees_the_thread(
        http: httpx.Client, scripted_model: ScriptedModel) -> None:
    cancels_mid_stream(http, scripted_model)


def test_a_reader_that_left_resumes_after_its_last_event(
        http: httpx.Client, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue(slow_turn(40, 0.03))
    first = read_and_leave(http, "/v1/threads/runs", {**BODY, "onDisconnect": "continue"}, 5)
    run = started_ids(first)
    rest = resume(http, run, first[-1].id)
    both = first + rest
    assert [e.id for e in both] == list(range(1, len(both) + 1))
    assert text_of(both) == slow_text(40) and rest[-1].type == "RUN_FINISHED"


def cancels_mid_stream(http: httpx.Client, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue(slow_turn(400, 0.05), [{"content": "After."}])
    with open_stream(http, "POST", "/v1/threads/runs", json=BODY) as (_, events):
        run = started_ids(read_until(events, lambda seen: texts(seen) >= 3))
        cancelled = http.delete(ids(run))
        rest = list(events)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert rest[-1].type == "RUN_ERROR" and rest[-1].data["code"] == "CANCELLED"
    assert run_status(http, *run)["status"] == "cancelled"
    follow_up = run_events(http, "POST", f"/v1/threads/{run[0]}/runs",
                           json={"message": message("next"), "previousRunId": run[1]})
    assert text_of(follow_up) == "After."


@pytest.mark.parametrize("part", ["front", "sse"])
def test_each_app_part_alone_streams_and_cancels(
        part: str, scripted_model: ScriptedModel, tmp_path: Path) -> None:
    """The app's parts one at a time, in-process: starlette's middleware with the gateway's
    SSE response, and the front with sse-starlette's own (the front marks the request)."""
    server = InProcessGateway(tmp_path, scripted_env(
        scripted_model, GATEWAY_STOCK_RUNTIME=part)).start()
    try:
        with server.client(event_hooks=USER, timeout=30,
                           headers={"x-api-key": "test-key"}) as client:
            streams_whole(client, scripted_model)
            cancels_mid_stream(client, scripted_model)
    finally:
        server.stop()


def test_sigterm_drains_and_ends_the_process(stock: GatewayServer) -> None:
    """Last in this module: it stops the process."""
    assert stock.process is not None
    stock.process.send_signal(signal.SIGTERM)
    began = time.monotonic()
    # uvicorn re-raises the signal once it has shut down, as the gateway's own server does.
    assert stock.process.wait(timeout=15) == -signal.SIGTERM
    assert time.monotonic() - began < 10
    assert "Traceback" not in stock.log()
