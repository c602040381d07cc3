"""How `gateway serve` runs uvicorn: which event loop, which HTTP protocol, which main loop.

Each of the three is one of the gateway's own (`serve_loop`, `serve_http`, `QuietServer`) unless
`GATEWAY_STOCK_RUNTIME` names it (`loop`, `http`, `server`), in which case uvicorn's own runs:
uvloop's server (or asyncio's loop without uvloop), uvicorn's httptools protocol (or its choice
without httptools) and uvicorn's `Server.main_loop`. Why each exists and when to drop it:
docs/decisions/ (0001, 0002, 0003). The command line calls `serve` and `serve_workers`; nothing
else of the gateway names uvicorn's classes.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import logging
import socket
from collections.abc import Callable, Collection
from types import FrameType
from typing import Any

import uvicorn

DATE_HEADER_SECONDS = 1.0  # how often `QuietServer` refreshes the responses' `Date` header
# ASGI wrappers `serve` puts around the app, each outside the one before: a benchmark's probe
# adds one to see each request as the server hands it over (bench/phases/sitecustomize.py).
# Empty unless such a probe is loaded into the process.
APP_PROBES: list[Callable[[Any], Any]] = []
# How long uvicorn lets open connections finish once the drain has ended (`server/shutdown.py`).
GRACEFUL_SHUTDOWN_SECONDS = 5


def event_loop(stock: Collection[str] = ()) -> str:
    """uvicorn's `loop`: uvloop with every waiting connection accepted at once
    (`serve_loop.py`), or uvicorn's own choice (`auto`: uvloop's server) when `loop` is stock;
    asyncio's, which accepts in batches already, where uvloop is not installed."""
    if not importlib.util.find_spec("uvloop"):
        return "asyncio"
    return "auto" if "loop" in stock else "gateway.server.serve_loop:new_event_loop"


def http_protocol(stock: Collection[str] = ()) -> str:
    """uvicorn's `http`: httptools' protocol with each request's task taking its first step at
    once (`serve_http.py`), or uvicorn's choice (`auto`) when `http` is stock or without
    httptools."""
    if "http" in stock or not importlib.util.find_spec("httptools"):
        return "auto"
    return "gateway.server.serve_http:HttpProtocol"


class ListeningServer(uvicorn.Server):
    """uvicorn's server, saying where it listens once started (uvicorn is silent about a socket
    it is given). The drain on SIGTERM is the app's own (`server/shutdown.DrainOnSignals`)."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            url = f"http://{self.config.host}:{self.config.port}"
            logging.getLogger("gateway").info(
                "listening on %s (playground: %s/, API reference: %s/docs)", url, url, url)


class QuietServer(ListeningServer):
    """uvicorn's main loop wakes every 0.1 s to see whether it should exit, and refreshes the
    `Date` header at every tenth. This one wakes once a second for the header, and at once when
    told to exit (`handle_exit`): an idle process stays asleep (docs/decisions/0003)."""

    exit_now: Callable[[], object] = staticmethod(lambda: None)

    async def main_loop(self) -> None:
        loop, told = asyncio.get_running_loop(), asyncio.Event()
        self.exit_now = functools.partial(loop.call_soon_threadsafe, told.set)
        while not await self.on_tick(0):  # 0: uvicorn's tick that refreshes the header
            timer = loop.call_later(DATE_HEADER_SECONDS, told.set)
            await told.wait()
            timer.cancel()
            told.clear()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)  # from a signal handler, or the drain's task
        self.exit_now()


def serve(app: Any, sock: socket.socket, *, host: str, port: int, log_level: str,
          stock: Collection[str] = (), ws_max_size: int = 16 * 1024 * 1024) -> bool:
    """Serve `app` on the bound socket until told to stop; whether it started (uvicorn
    returns, rather than exiting, when the app's start-up failed). A WebSocket message over
    `ws_max_size` bytes closes its socket (1009) as its frame header arrives, before it is
    read."""
    for probe in APP_PROBES:
        app = probe(app)
    # log_config=None: uvicorn's loggers go through the root handler (JSON or text) too.
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, log_config=None,
                            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
                            loop=event_loop(stock), http=http_protocol(stock),
                            ws_max_size=ws_max_size)
    server = (ListeningServer if "server" in stock else QuietServer)(config)
    server.run(sockets=[sock])
    return server.started


def serve_workers(app_factory: str, sock: socket.socket, *, workers: int, log_level: str,
                  stock: Collection[str] = (), ws_max_size: int = 16 * 1024 * 1024) -> None:
    """uvicorn's supervisor and `workers` processes sharing the socket, each building its app
    with `app_factory` ("module:function"); each keeps uvicorn's own main loop."""
    # log_config=None: uvicorn leaves logging alone; each worker configures it itself.
    uvicorn.run(app_factory, factory=True, workers=workers, fd=sock.fileno(),
                log_level=log_level, log_config=None,
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
                loop=event_loop(stock), http=http_protocol(stock), ws_max_size=ws_max_size)
