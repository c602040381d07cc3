"""`gateway serve --workers N`: N processes on one port (PostgreSQL only)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import USER, GatewayServer, read_store
from tests.support.run_stream import (
    message,
    open_stream,
    read_until,
    slow_text,
    slow_turn,
    started_ids,
    texts,
)
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import SseEvent, run_events, text_of


@pytest.mark.sqlite_only  # its own SQLite URL
def test_several_workers_on_sqlite_are_refused_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", "1", "--workers", "2"],
        capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "GATEWAY_DATABASE_URL": f"sqlite:///{tmp_path}/g.db"})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--workers 2 needs PostgreSQL" in lines[0], result.stderr
    assert not (tmp_path / "g.db").exists()


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(engines.backend() != "postgres",
                    reason="needs the PostgreSQL + Redis configuration")
def test_two_workers_serve_runs_on_one_port_and_sigterm_drains_each(
        scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Runs and metrics across both workers, then SIGTERM to the supervisor reaches each
    worker, and each drains as one process does. One `--workers 2` gateway for both halves:
    each of its processes imports the gateway afresh (they cannot be forked from the test
    session's fork server), which costs more CPU than anything else here."""
    server = GatewayServer(tmp_path_factory.mktemp("workers"),
                           scripted_env(scripted_model, GATEWAY_DRAIN_SECONDS="3"),
                           args=("--workers", "2", "--log-level", "info"))
    # Three interpreters import everything at once: on a loaded 2-core machine that took over
    # 90 s (the default). The timeout stops a stuck start; it measures nothing.
    server.start(timeout=300)
    assert server.process is not None
    workers = children(server.process.pid)
    try:
        assert len(workers) >= 2, "two worker processes"
        serve_runs_and_count_them_in_every_worker(server, scripted_model)
        sigterm_drains_every_worker(server, scripted_model)
    finally:
        server.kill()
        for pid in workers:  # a SIGKILLed supervisor leaves its workers behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    # Every process logs as one `serve` does (JSON: stderr is not a terminal), uvicorn's own
    # lines included: an operator's log pipeline parses every line.
    lines = [line for line in server.log_path.read_text().splitlines() if line.strip()]
    assert any("Started server process" in line for line in lines)
    for line in lines:
        record = json.loads(line)
        assert {"time", "level", "logger", "message"} <= record.keys(), line


def serve_runs_and_count_them_in_every_worker(server: GatewayServer,
                                              scripted_model: ScriptedModel) -> None:
    for n in range(4):
        scripted_model.enqueue({"steps": [{"content": f"Answer {n}."}], "stream": True})

    def one_run(_: int) -> str:
        with httpx.Client(base_url=server.url, timeout=30,
                          headers={"x-api-key": "test-key"}) as client:
            events = run_events(client, "POST", "/v1/threads/runs",
                                json={"message": message("hi"), "thread": {"userKey": "u"}})
            assert events[-1].type == "RUN_FINISHED"
            return text_of(events)

    with ThreadPoolExecutor(4) as pool:
        answers = sorted(pool.map(one_run, range(4)))
    assert answers == [f"Answer {n}." for n in range(4)]
    # Whichever worker a scrape reaches counts every worker's runs and requests
    # (Prometheus multiprocess mode).
    for _ in range(4):
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for family in text_string_to_metric_families(
                       httpx.get(f"{server.url}/metrics", timeout=30).text)
                   for s in family.samples}
        assert samples[("gateway_runs_started_total", ())] == 4
        assert samples[("gateway_http_requests_total", (
            ("method", "POST"), ("route", "/v1/threads/runs"), ("status", "200")))] == 4


def sigterm_drains_every_worker(server: GatewayServer, scripted_model: ScriptedModel) -> None:
    """A run that fits in the drain finishes, the others end with one retryable RUN_ERROR,
    and every thread is released."""
    assert server.process is not None
    streams: list[tuple[httpx.Client, Any, Iterator[SseEvent], list[SseEvent]]] = []
    try:
        # Long runs until both workers hold one: which worker accepts is the kernel's choice,
        # so keep trying, a little apart, for up to 30 s. The runs outlast that (60 s);
        # SIGTERM and the 3 s drain end them.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            scripted_model.enqueue({"steps": slow_turn(1200, 0.05), "stream": True})
            client = httpx.Client(base_url=server.url, timeout=30, event_hooks=USER,
                                  headers={"x-api-key": "test-key"})
            context = open_stream(client, "POST", "/v1/threads/runs",
                                  json={"message": message("long")})
            _, events = context.__enter__()
            streams.append((client, context, events,
                            read_until(events, lambda seen: texts(seen) >= 1)))
            owners = read_store(server, lambda store: _owners(store, streams))
            if len(owners) >= 2:
                break
            time.sleep(0.5)
        assert len(owners) == 2, f"runs on one worker only: {owners}"
        scripted_model.enqueue({"steps": slow_turn(10, 0.1), "stream": True})
        with httpx.Client(base_url=server.url, timeout=30, event_hooks=USER,
                          headers={"x-api-key": "test-key"}) as client:
            with open_stream(client, "POST", "/v1/threads/runs",
                             json={"message": message("short")}) as (_, events):
                short = read_until(events, lambda seen: texts(seen) >= 1)
                server.process.send_signal(signal.SIGTERM)
                short += list(events)
        for _, _, events, seen in streams:
            seen += list(events)
        server.process.wait(timeout=60)
    finally:
        for client, context, _, _ in streams:
            context.__exit__(None, None, None)
            client.close()

    assert short[-1].type == "RUN_FINISHED" and text_of(short) == slow_text(10)
    for _, _, _, seen in streams:
        errors = [e for e in seen if e.type == "RUN_ERROR"]
        assert len(errors) == 1 and seen[-1] is errors[0], [e.type for e in seen[-3:]]
        assert errors[0].data["code"] == "SERVER_SHUTDOWN"
        assert errors[0].data["isRetryable"] is True
    thread_ids = [started_ids(seen)[0] for _, _, _, seen in streams]
    threads = read_store(server, lambda store: _threads(store, thread_ids))
    assert all(thread.run_status == "idle" for thread in threads), threads


async def _owners(store: Any, streams: list[Any]) -> set[str]:
    """The worker processes (pid in the lease owner) of the streams' runs."""
    owners = set()
    for _, _, _, seen in streams:
        thread_id, run_id = started_ids(seen)
        run = await store.get_run(run_id)
        if run is not None and run.lease_owner:
            owners.add(run.lease_owner.split(":")[1])
    return owners


async def _threads(store: Any, thread_ids: list[str]) -> list[Any]:
    return [await store.get_thread("default", thread_id) for thread_id in thread_ids]
