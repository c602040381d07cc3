"""`gateway serve --workers N`: N processes on one port (PostgreSQL only)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import GatewayServer
from tests.support.run_stream import message
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of


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
def test_two_workers_serve_runs_on_one_port(scripted_model: ScriptedModel,
                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    server = GatewayServer(tmp_path_factory.mktemp("workers"), scripted_env(scripted_model),
                           args=("--workers", "2"))
    server.start()
    try:
        assert server.process is not None
        assert len(children(server.process.pid)) >= 2, "two worker processes"
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
    finally:
        server.stop()
