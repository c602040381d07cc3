"""`GET /ready` follows the database and Redis: 200 while they answer, 503
`DATABASE_UNAVAILABLE` / `REDIS_UNAVAILABLE` while one is down (stopped under a running gateway),
200 again once it is back, while `/health` (liveness) stays 200 throughout."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.engines import RedisServer
from tests.support.gateway_server import free_port
from tests.support.inprocess_app import InProcessGateway
from tests.support.run_stream import wait_for

# Starts its own PostgreSQL and Redis whatever the configuration: the same test in both.
pytestmark = pytest.mark.sqlite_only

PG_BIN = Path("/usr/lib/postgresql/15/bin")
needs_postgres = pytest.mark.skipif(not (PG_BIN / "initdb").exists(),
                                    reason="PostgreSQL 15 is not installed (scripts/test "
                                           "installs it)")
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server is not installed (scripts/test installs it)")


class ThrowawayPostgres:
    """A PostgreSQL cluster in a temporary directory on a free loopback port (run as the
    `postgres` user when the tests run as root: initdb refuses root)."""

    def __init__(self, root: Path) -> None:
        self.dir, self.port = root / "pg", free_port()

    def _run(self, *argv: object) -> None:
        command = [str(a) for a in argv]
        if os.getuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, cwd="/")

    def start(self) -> None:
        if not self.dir.exists():
            self.dir.mkdir(parents=True)
            if os.getuid() == 0:
                user = pwd.getpwnam("postgres")
                os.chown(self.dir, user.pw_uid, user.pw_gid)
            self._run(PG_BIN / "initdb", "-D", self.dir / "data", "-U", "postgres",
                      "--auth=trust", "--no-sync")
        self._run(PG_BIN / "pg_ctl", "-D", self.dir / "data", "-l", self.dir / "log", "-w",
                  "-o", f"-h 127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(PG_BIN / "pg_ctl", "-D", self.dir / "data", "-m", mode, "-w", "stop")

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"


@pytest.fixture
def postgres() -> Iterator[ThrowawayPostgres]:
    # Not under pytest's temporary directory: that one is private to the test user, and the
    # server runs as `postgres`.
    root = Path(tempfile.mkdtemp(prefix="gateway-ready-"))
    os.chmod(root, 0o755)
    server = ThrowawayPostgres(root)
    try:
        server.start()
        yield server
    finally:
        try:
            server.stop("immediate")
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(root, ignore_errors=True)


@needs_postgres
def test_ready_fails_while_the_database_is_down(postgres: ThrowawayPostgres, tmp_path: Path):
    gateway = InProcessGateway(tmp_path / "gw", {"GATEWAY_DATABASE_URL": postgres.url}).start()
    try:
        with gateway.client(timeout=30) as client:
            assert client.get("/ready").status_code == 200
            postgres.stop()
            assert_unready_until_back(client, "DATABASE_UNAVAILABLE", postgres.start)
    finally:
        gateway.stop()


def assert_unready_until_back(client: httpx.Client, code: str, restart: Callable[[], object]
                              ) -> None:
    """With a dependency down: /ready is a 503 problem with `code` while /health stays 200;
    after `restart()`, /ready is 200 again (the gateway reconnects by itself)."""
    down = client.get("/ready")
    assert down.status_code == 503
    assert down.headers["content-type"] == "application/problem+json"
    assert down.json()["code"] == code
    assert client.get("/health").status_code == 200
    restart()
    wait_for(lambda: client.get("/ready").status_code == 200 or None, 30,
             what="/ready to recover")


@needs_redis
def test_ready_fails_while_redis_is_down(tmp_path: Path):
    redis = RedisServer(tmp_path).start()
    gateway = InProcessGateway(tmp_path / "gw", {"GATEWAY_REDIS_URL": redis.url}).start()
    try:
        with gateway.client(timeout=30) as client:
            up = client.get("/ready")
            assert up.status_code == 200
            assert up.json()["checks"]["redis"] == "ok"
            assert redis.process is not None
            redis.process.send_signal(signal.SIGSTOP)  # hung: connected, but no answer
            try:
                hung = client.get("/ready")
            finally:
                redis.process.send_signal(signal.SIGCONT)
            assert hung.status_code == 503
            assert hung.json()["code"] == "REDIS_UNAVAILABLE"
            redis.stop()  # gone: connection refused
            assert_unready_until_back(client, "REDIS_UNAVAILABLE", redis.start)
    finally:
        gateway.stop()
        redis.stop()
