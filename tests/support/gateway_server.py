"""A real gateway process on a loopback port, started the way a user starts it (`gateway serve`).

It is forked from the session's fork server (tests/support/fork_server.py), which has imported
the gateway once, unless its environment or arguments need a plain `exec`.

Tests talk to it over HTTP only. It can be stopped, killed (SIGKILL, for crash recovery tests)
and restarted on the same database.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from tests.support.fork_server import ForkedProcess, fork_server

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")

if TYPE_CHECKING:
    from gateway.store.repository import Store


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class GatewayServer:
    def __init__(self, workdir: Path, env: dict[str, str] | None = None,
                 args: tuple[str, ...] = ()) -> None:
        self.workdir, self.args = workdir, args
        self.workdir.mkdir(parents=True, exist_ok=True)
        from tests.support import engines  # the selected configuration's database and Redis

        storage = (engines.ENGINES.env_for(workdir) if engines.ENGINES is not None else
                   {"GATEWAY_DATABASE_URL": f"sqlite+aiosqlite:///{workdir / 'gateway.db'}"})
        # `stop()` is a SIGTERM: runs left going by a test get a short drain, not 20 s.
        self.env = {**storage, "GATEWAY_DRAIN_SECONDS": "3",
                    # Refusing a start for its wall time, the loop's or its CPU is timing: a
                    # loaded CI machine would refuse the suite's own starts
                    # (tests/inprocess/runs/test_start_gate.py tests them on clocks of its own).
                    "GATEWAY_MAX_START_WAIT_SECONDS": "0", "GATEWAY_MAX_LOOP_LAG_SECONDS": "0",
                    "GATEWAY_MAX_LOOP_CPU": "0",
                    **(env or {})}
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | ForkedProcess | None = None
        self.log_path = workdir / f"gateway-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> "GatewayServer":
        self.spawn()
        return self.wait_ready(timeout)

    def spawn(self) -> None:
        """Start the process without waiting for it (`GatewayCluster` starts its processes
        together, then waits for each)."""
        env = {**os.environ, **self.env}
        for name in ("GATEWAY_MODEL", "GATEWAY_MODEL_API_BASE", "GATEWAY_MODEL_API_KEY",
                     "GATEWAY_API_KEYS"):
            if name not in self.env:
                env.pop(name, None)
        args = ["serve", "--host", "127.0.0.1", "--port", str(self.port), "--log-level",
                "warning", *self.args]
        forks = fork_server()
        if forks is not None and forks.can_fork(args, env):
            self.process = forks.spawn(args, env, self.workdir, self.log_path)
            return
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "gateway", *args],
                                            cwd=self.workdir, env=env, stdout=log,
                                            stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 90.0) -> "GatewayServer":
        assert self.process is not None, "spawn() first"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gateway exited early:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.kill()  # not left running behind the failed test
        raise RuntimeError(f"gateway did not start in {timeout} s:\n{self.log()}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to clean up, as in a crash."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-20000:]

    def client(self, **options: Any) -> httpx.Client:
        """A client of this process (the options of `httpx.Client`), as `InProcessGateway`
        gives one of the app in the test process."""
        return httpx.Client(base_url=self.url, **options)


def gateway_command(args: list[str], env: dict[str, str] | None = None,
                    cwd: Path | None = None, timeout: float = 120,
                    base: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m gateway *args` run to its end with `env` over `base` (the test process's
    environment unless given), its output captured as `subprocess.run(...,
    capture_output=True, text=True)` captures it; forked from the fork server when it can be
    (a command imports what `serve` does)."""
    full_env = {**(os.environ if base is None else base), **(env or {})}
    cwd = cwd or Path.cwd()
    forks = fork_server()
    if forks is None or not forks.can_fork(args, full_env):
        return subprocess.run([sys.executable, "-m", "gateway", *args], env=full_env, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout)
    with tempfile.TemporaryDirectory() as output:
        stdout, stderr = Path(output) / "stdout", Path(output) / "stderr"
        stdout.touch()
        stderr.touch()
        process = forks.spawn(args, full_env, cwd, stdout, stderr)
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        return subprocess.CompletedProcess(process.args, code, stdout.read_text(),
                                           stderr.read_text())


DEFAULT_USER = "test-user"


# The calls that work without a user scope, because the Tambo clients send none there.
SCOPE_OPTIONAL = re.compile(r"^(GET|PATCH) /v1/threads/[^/]+$"
                            r"|^GET /v1/threads/[^/]+/messages$"
                            r"|^(GET|DELETE) /v1/threads/[^/]+/runs/[^/]+$"
                            r"|^POST /v1/threads/[^/]+/generate-name$")


def needs_user_scope(method: str, path: str) -> bool:
    return (path.startswith(("/v1/threads", "/v1/crons"))
            and not SCOPE_OPTIONAL.match(f"{method} {path}"))


def _default_user(request: httpx.Request) -> None:
    """Give a request that names no user scope the default one (`?userKey=`): listing threads,
    creating them and starting runs need one, as on the real server. A request that names its
    own (query, body `userKey`/`contextKey`, `thread.userKey`) or a bearer token is left alone,
    and so are the calls that work without one (`SCOPE_OPTIONAL`)."""
    if not needs_user_scope(request.method, request.url.path):
        return
    if "userKey" in request.url.params or "contextKey" in request.url.params:
        return
    if request.headers.get("authorization"):
        return
    try:
        body = json.loads(request.content or b"null")
    except (ValueError, httpx.RequestNotRead):
        body = None
    if isinstance(body, dict) and (
            body.get("userKey") is not None or body.get("contextKey") is not None
            or isinstance(body.get("thread"), dict) and body["thread"].get("userKey")):
        return
    request.url = request.url.copy_add_param("userKey", DEFAULT_USER)


USER = {"request": [_default_user]}
class GatewayCluster:
    """Several gateway processes on one database behind HAProxy (round robin, no stickiness):
    what an operator runs to scale out. Used as the session gateway in the PostgreSQL + Redis
    configuration, so every test's requests land on whichever process comes next."""

    def __init__(self, workdir: Path, env: dict[str, str] | None = None, size: int = 2,
                 check: str | None = None) -> None:
        self.workdir, self.check = workdir, check  # HAProxy's health check (`HAProxy.check`)
        self.servers = [GatewayServer(workdir, env) for _ in range(size)]
        self.proxy = None

    @property
    def url(self) -> str:
        return self.proxy.url

    @property
    def port(self) -> int:
        return self.proxy.port

    def start(self) -> "GatewayCluster":
        from tests.support.engines import HAProxy

        for server in self.servers:
            server.spawn()
        for server in self.servers:  # as long in all as one by one: they share the CPU
            server.wait_ready(90.0 * len(self.servers))
        ports = [s.port for s in self.servers]
        self.proxy = (HAProxy(self.workdir, ports, self.check) if self.check
                      else HAProxy(self.workdir, ports)).start()
        return self

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        for server in self.servers:
            server.stop()

    def log(self) -> str:
        return "\n".join(server.log() for server in self.servers)

    def client(self, **options: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, **options)


def read_store(server: GatewayServer | GatewayCluster,
               read: Callable[[Store], Awaitable[T]]) -> T:
    """Read a gateway's database through the gateway's own store (SQLite or PostgreSQL)."""
    from gateway.config import normalise_database_url
    from gateway.store.db import create_engine
    from gateway.store.repository import Store

    env = server.servers[0].env if isinstance(server, GatewayCluster) else server.env

    async def go() -> T:
        engine = create_engine(normalise_database_url(env["GATEWAY_DATABASE_URL"]))
        try:
            return await read(Store(engine))
        finally:
            await engine.dispose()
    return asyncio.run(go())
