"""The gateway's ASGI app in the test process: `create_app(settings)` with its lifespan run, no
socket and no subprocess.

A `gateway serve` process costs seconds to start (litellm's import) and its requests cross a
socket; most integration tests only check what an HTTP client sees, for which the app itself is
enough. `InProcessGateway` has the interface of `GatewayServer` (tests/support/gateway_server.py):
built from the same environment variables (read by `load_settings`, as `gateway serve` does),
`start()`, `stop()`, `log()`, `env`, and `client()` for an `httpx.Client` that reaches it.

The app runs on an event loop of its own thread, as it would in its own process: the tests stay
plain synchronous code, a run goes on while a test blocks on a read, and the app's lifespan is
entered and left in one task (as uvicorn does: MCP sessions need that). Requests cross to that
loop through `StreamingASGITransport` (tests/support/asgi_stream.py), so a response streams as
the app writes it and closing it disconnects. The model is still reached over loopback HTTP:
the scripted model behind litellm's real streaming path.

`InProcessCluster`: several apps on one PostgreSQL + Redis behind a round-robin transport, what
`GatewayCluster` is with processes: each request lands on the next app.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import itertools
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx

from gateway.app import create_app
from gateway.config import ENV_PREFIX, Settings, load_settings
from gateway.observability.logs import ContextFilter, JsonFormatter
from tests.support import engines
from tests.support.asgi_stream import CLOSE_WAIT_SECONDS, StreamingASGITransport

T = TypeVar("T")
# The base URL of in-process clients: loopback, as for a client on the gateway's machine; no
# socket is ever opened to it.
URL = "http://127.0.0.1"
START_TIMEOUT_SECONDS = 90.0
_environment = threading.Lock()


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """The process environment as `gateway serve` would see it with `env`: these variables set
    and no other `GATEWAY_*` one (those of the test process do not leak in), then restored."""
    with _environment:
        saved = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX) or k in env}
        try:
            for name in saved:
                del os.environ[name]
            os.environ.update(env)
            yield
        finally:
            for name in env:
                os.environ.pop(name, None)
            os.environ.update(saved)


def settings_from(env: dict[str, str]) -> Settings:
    """The settings `gateway serve` would read from exactly these variables."""
    with environment(env):
        return load_settings()


class _LogLines(logging.Handler):
    """The app's log, as the process's stderr would hold it: JSON lines, warnings and up (the
    fixtures' processes run with `--log-level warning`). Whatever else logs in this process
    while the app runs is in it too: more than the app's own, never less, so a test that finds
    no secret in it has looked at everything."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self.setFormatter(JsonFormatter())
        self.addFilter(ContextFilter())

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


class InProcessGateway:
    """`create_app` on its own event loop thread; see the module docstring."""

    url = URL

    def __init__(self, workdir: Path, env: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        storage = (engines.ENGINES.env_for(workdir) if engines.ENGINES is not None else
                   {"GATEWAY_DATABASE_URL": f"sqlite+aiosqlite:///{workdir / 'gateway.db'}"})
        self.env = {**storage, "GATEWAY_DRAIN_SECONDS": "3",
                    # Refusing a start for its wall time, the loop's or its CPU is timing: a
                    # loaded CI machine would refuse the suite's own starts
                    # (tests/inprocess/runs/test_start_gate.py tests them on clocks of its own).
                    "GATEWAY_MAX_START_WAIT_SECONDS": "0", "GATEWAY_MAX_LOOP_LAG_SECONDS": "0",
                    "GATEWAY_MAX_LOOP_CPU": "0",
                    **(env or {})}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name=f"gateway app {workdir.name}")
        self.logs = _LogLines()
        self._stop = asyncio.Event()
        self._serving: asyncio.Task[None] | None = None
        self._process_state = (sys.getswitchinterval(), gc.get_threshold())

    def start(self, timeout: float = START_TIMEOUT_SECONDS) -> InProcessGateway:
        settings = settings_from(self.env)
        self.thread.start()
        logging.getLogger().addHandler(self.logs)
        self.app = create_app(settings)
        self.transport = StreamingASGITransport(self.app)
        try:
            # What the app reads from the environment itself while it starts (OpenTelemetry's
            # standard variables) comes from `env` too, as it would in a process of its own.
            with environment(self.env):
                self.call(self._open(), timeout)
        except BaseException:
            self.stop()
            raise
        return self

    async def _open(self) -> None:
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._serving = asyncio.create_task(self._serve(opened), name="gateway lifespan")
        await opened

    async def _serve(self, opened: asyncio.Future[None]) -> None:
        """The lifespan, entered and left in this one task, as a server runs it."""
        try:
            async with self.app.router.lifespan_context(self.app):
                opened.set_result(None)
                await self._stop.wait()
        except BaseException as error:
            if opened.done():
                raise
            opened.set_exception(error)

    def stop(self) -> None:
        """Leave the lifespan (runs still going are drained as on SIGTERM), then cancel what
        is left (responses no client closed) and end the thread."""
        if self.thread.is_alive():
            self.call(self._close(), 60)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()
        logging.getLogger().removeHandler(self.logs)
        # The lifespan tunes the process for serving; this process goes on running tests.
        switch_interval, thresholds = self._process_state
        sys.setswitchinterval(switch_interval)
        gc.set_threshold(*thresholds)
        gc.unfreeze()

    async def _close(self) -> None:
        self._stop.set()
        if self._serving is not None:
            await asyncio.gather(self._serving, return_exceptions=True)
        current = asyncio.current_task()
        left = [task for task in asyncio.all_tasks() if task is not current]
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the app's loop and wait for its result."""
        return wait(asyncio.run_coroutine_threadsafe(coroutine, self.loop), timeout)

    def log(self) -> str:
        return "\n".join(self.logs.lines)[-20000:]

    def sync_transport(self) -> httpx.BaseTransport:
        return _ThreadBridge(self)

    def async_transport(self) -> httpx.AsyncBaseTransport:
        return _LoopBridge(self)

    def client(self, **options: Any) -> httpx.Client:
        """A client of this app (the options of `httpx.Client`: headers, timeout, ...)."""
        return httpx.Client(transport=self.sync_transport(), base_url=self.url, **options)

    def async_client(self, **options: Any) -> httpx.AsyncClient:
        """An async client of this app, usable from any event loop (`asyncio.run` in a test)."""
        return httpx.AsyncClient(transport=self.async_transport(), base_url=self.url, **options)


class InProcessCluster:
    """Several in-process apps on one database (and Redis), requests dealt round robin."""

    url = URL

    def __init__(self, workdir: Path, env: dict[str, str] | None = None, size: int = 2) -> None:
        self.workdir = workdir
        self.servers = [InProcessGateway(workdir, env) for _ in range(size)]

    @property
    def env(self) -> dict[str, str]:
        return self.servers[0].env

    def start(self) -> InProcessCluster:
        for server in self.servers:
            server.start()
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def log(self) -> str:
        return "\n".join(server.log() for server in self.servers)

    def sync_transport(self) -> httpx.BaseTransport:
        return _RoundRobin([server.sync_transport() for server in self.servers])

    def async_transport(self) -> httpx.AsyncBaseTransport:
        return _AsyncRoundRobin([server.async_transport() for server in self.servers])

    def client(self, **options: Any) -> httpx.Client:
        return httpx.Client(transport=self.sync_transport(), base_url=self.url, **options)

    def async_client(self, **options: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=self.async_transport(), base_url=self.url, **options)


# What tests/integration's `gateway` fixture is, in one configuration or the other.
InProcess = InProcessGateway | InProcessCluster


def processes(gateway: InProcess) -> list[InProcessGateway]:
    """Each app of the cluster (each one a process in production), or the one app."""
    return gateway.servers if isinstance(gateway, InProcessCluster) else [gateway]


@contextlib.contextmanager
def refusing_runs(gateway: InProcess) -> Iterator[None]:
    """Every app refuses new runs, as while it drains for a shutdown (503 `SHUTTING_DOWN`),
    until the block ends."""
    from gateway.server.shutdown import ShuttingDown

    apps = processes(gateway)
    for app in apps:
        app.app.state.services.runs.refusal = ShuttingDown
    try:
        yield
    finally:
        for app in apps:
            app.app.state.services.runs.refusal = None


def wait(future: concurrent.futures.Future[T], timeout: float | None) -> T:
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise httpx.ReadTimeout(f"no answer from the in-process app in {timeout} s") from None


def _read_timeout(request: httpx.Request) -> float | None:
    timeout: dict[str, float | None] = request.extensions.get("timeout", {})
    return timeout.get("read")


async def _next(chunks: AsyncIterator[bytes]) -> bytes | None:
    return await anext(chunks, None)


class _ThreadBridge(httpx.BaseTransport):
    """A synchronous client's request, handled on the app's loop; the body streams back."""

    def __init__(self, gateway: InProcessGateway) -> None:
        self.gateway = gateway

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        timeout = _read_timeout(request)
        response = self.gateway.call(self.gateway.transport.handle_async_request(request), timeout)
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_ThreadBody(self.gateway, response, timeout))


class _ThreadBody(httpx.SyncByteStream):
    def __init__(self, gateway: InProcessGateway, response: httpx.Response,
                 timeout: float | None) -> None:
        self.gateway, self.response, self.timeout = gateway, response, timeout

    def __iter__(self) -> Iterator[bytes]:
        assert isinstance(self.response.stream, httpx.AsyncByteStream)
        chunks = aiter(self.response.stream)
        while (chunk := self.gateway.call(_next(chunks), self.timeout)) is not None:
            yield chunk

    def close(self) -> None:
        if self.gateway.thread.is_alive():
            self.gateway.call(self.response.aclose(), CLOSE_WAIT_SECONDS + 5)


class _LoopBridge(httpx.AsyncBaseTransport):
    """An async client's request (on another loop), handled on the app's loop."""

    def __init__(self, gateway: InProcessGateway) -> None:
        self.gateway = gateway

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        response = await self._on_app(self.gateway.transport.handle_async_request(request))
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_LoopBody(self, response))

    async def _on_app(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self.gateway.loop)
        return await asyncio.wrap_future(future)


class _LoopBody(httpx.AsyncByteStream):
    def __init__(self, bridge: _LoopBridge, response: httpx.Response) -> None:
        self.bridge, self.response = bridge, response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        assert isinstance(self.response.stream, httpx.AsyncByteStream)
        chunks = aiter(self.response.stream)
        while (chunk := await self.bridge._on_app(_next(chunks))) is not None:
            yield chunk

    async def aclose(self) -> None:
        if self.bridge.gateway.thread.is_alive():
            await self.bridge._on_app(self.response.aclose())


class _RoundRobin(httpx.BaseTransport):
    def __init__(self, transports: list[httpx.BaseTransport]) -> None:
        self.next = itertools.cycle(transports).__next__

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.next().handle_request(request)


class _AsyncRoundRobin(httpx.AsyncBaseTransport):
    def __init__(self, transports: list[httpx.AsyncBaseTransport]) -> None:
        self.next = itertools.cycle(transports).__next__

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.next().handle_async_request(request)


@contextlib.contextmanager
def root_log_kept() -> Iterator[None]:
    """Keep the root logger's handlers and level across a command run in this process: the
    command line (`gateway.cli.main`) sets up the process's logging as an entry point does,
    replacing the root handlers, and with them the `_LogLines` of every gateway running here
    (whose `log()` a later test reads)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
