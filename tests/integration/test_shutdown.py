"""SIGTERM to a real gateway process during runs: new runs are refused with 503 and
`Retry-After`, a run that finishes within `GATEWAY_DRAIN_SECONDS` finishes, one that does not
ends with exactly one retryable `RUN_ERROR`, and its thread is free at once for another process
on the same database."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import scripted_env
from tests.support.gateway_server import USER, GatewayServer
from tests.support.run_stream import (
    message,
    open_stream,
    read_until,
    run_status,
    slow_text,
    slow_turn,
    started_ids,
    texts,
)
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of


def http(server: GatewayServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, event_hooks=USER, timeout=30,
                        headers={"x-api-key": "test-key"})


@pytest.fixture
def shared_db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"


def start(scripted_model: ScriptedModel, workdir: Path, db: str, drain: str
          ) -> GatewayServer:
    return GatewayServer(workdir, scripted_env(
        scripted_model, GATEWAY_DATABASE_URL=db, GATEWAY_DRAIN_SECONDS=drain)).start()


@pytest.fixture
def other(scripted_model: ScriptedModel, tmp_path: Path, shared_db: str
          ) -> Iterator[GatewayServer]:
    """A second process on the same database, as behind a load balancer."""
    server = start(scripted_model, tmp_path / "other", shared_db, "20")
    yield server
    server.stop()


def test_sigterm_ends_a_long_run_retryably_and_frees_its_thread(
        scripted_model: ScriptedModel, tmp_path: Path, shared_db: str, other: GatewayServer):
    draining = start(scripted_model, tmp_path / "draining", shared_db, "1.5")
    scripted_model.enqueue(slow_turn(400, 0.05), [{"content": "Picked up elsewhere."}])
    try:
        with http(draining) as client:
            with open_stream(client, "POST", "/v1/threads/runs",
                             json={"message": message("long")}) as (_, events):
                seen = read_until(events, lambda seen: texts(seen) >= 5)
                assert draining.process is not None
                draining.process.send_signal(signal.SIGTERM)
                time.sleep(0.3)
                refused = client.post("/v1/threads/runs", json={"message": message("new")})
                not_ready = client.get("/ready")
                seen += list(events)
        draining.process.wait(timeout=30)
    finally:
        draining.kill()

    assert refused.status_code == 503
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["code"] == "SHUTTING_DOWN"
    assert int(refused.headers["retry-after"]) > 0
    assert not_ready.status_code == 503

    errors = [e for e in seen if e.type == "RUN_ERROR"]
    assert len(errors) == 1 and seen[-1] is errors[0]
    assert errors[0].data["code"] == "SERVER_SHUTDOWN"
    assert errors[0].data["isRetryable"] is True
    assert slow_text(400).startswith(text_of(seen))

    thread_id, run_id = started_ids(seen)
    with http(other) as client:
        thread = client.get(f"/v1/threads/{thread_id}").json()
        assert thread["runStatus"] == "idle"
        assert run_status(client, thread_id, run_id)["status"] == "failed"
        follow_up = run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
                               json={"message": message("again"), "previousRunId": run_id})
    assert follow_up[-1].type == "RUN_FINISHED"
    assert text_of(follow_up) == "Picked up elsewhere."


def test_sigterm_lets_a_short_run_finish_within_the_drain(
        scripted_model: ScriptedModel, tmp_path: Path, shared_db: str):
    draining = start(scripted_model, tmp_path / "draining", shared_db, "20")
    scripted_model.enqueue(slow_turn(30, 0.05))
    try:
        with http(draining) as client:
            with open_stream(client, "POST", "/v1/threads/runs",
                             json={"message": message("short")}) as (_, events):
                seen = read_until(events, lambda seen: texts(seen) >= 3)
                assert draining.process is not None
                draining.process.send_signal(signal.SIGTERM)
                seen += list(events)
        draining.process.wait(timeout=30)
    finally:
        draining.kill()
    assert seen[-1].type == "RUN_FINISHED"
    assert not [e for e in seen if e.type == "RUN_ERROR"]
    assert text_of(seen) == slow_text(30)
