"""The start gate from outside: with `GATEWAY_START_CONCURRENCY=1`, run starts take turns one at
a time, and a turn ends when the run has started, not when its stream ends: runs keep starting
and finishing while an earlier one streams."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import scripted_env
from tests.support.gateway_server import DEFAULT_USER
from tests.support.inprocess_app import InProcessGateway
from tests.support.run_stream import (
    message,
    open_stream,
    read_until,
    slow_turn,
    started_ids,
    texts,
)
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import SseEvent, iter_events

HEADERS = {"accept": "text/event-stream", "x-api-key": "test-key"}


@pytest.fixture(scope="module")
def one_at_a_time(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[InProcessGateway]:
    server = InProcessGateway(tmp_path_factory.mktemp("start-gate"),
                           scripted_env(scripted_model, GATEWAY_START_CONCURRENCY="1"))
    server.start()
    yield server
    server.stop()


def run_to_end(server: InProcessGateway, prompt: str) -> list[SseEvent]:
    body = {"message": message(prompt), "thread": {"userKey": DEFAULT_USER}}
    with server.client(timeout=60) as http:
        with http.stream("POST", "/v1/threads/runs", json=body, headers=HEADERS) as response:
            assert response.status_code == 200, response.read()
            return list(iter_events(response))


def answer(events: list[SseEvent]) -> str:
    return "".join(e.data["delta"] for e in events if e.type == "TEXT_MESSAGE_CONTENT")


def test_runs_start_and_finish_one_turn_at_a_time_while_another_streams(
        one_at_a_time: InProcessGateway, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue_for("hold the line", slow_turn(300, 0.1))  # 30 s unless cancelled
    with one_at_a_time.client(timeout=60, headers={"x-api-key": "test-key"}) as http:
        body = {"message": message("hold the line"), "thread": {"userKey": DEFAULT_USER}}
        with open_stream(http, "POST", "/v1/threads/runs", json=body) as (_, events):
            seen = read_until(events, lambda s: texts(s) >= 1)
            thread_id, run_id = started_ids(seen)

            prompts = [f"burst number {i}" for i in range(8)]
            with ThreadPoolExecutor(len(prompts)) as pool:
                results = list(pool.map(lambda p: run_to_end(one_at_a_time, p), prompts))

            for prompt, events_of_run in zip(prompts, results, strict=True):
                assert events_of_run[-1].type == "RUN_FINISHED", events_of_run[-1]
                assert answer(events_of_run) == f"You said: {prompt}"
            status = http.get(f"/v1/threads/{thread_id}/runs/{run_id}",
                              headers={"accept": "application/json"}).json()
            assert status["status"] == "running"  # the held run never blocked the others
            http.delete(f"/v1/threads/{thread_id}/runs/{run_id}")
            rest = list(events)
        assert rest[-1].type == "RUN_ERROR" and rest[-1].data["code"] == "CANCELLED"

        metrics = http.get("/metrics").text
        assert re.search(r"^gateway_starts_waiting 0\.0$", metrics, re.M), metrics
