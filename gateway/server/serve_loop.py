"""The event loop `gateway serve` runs on: uvloop, taking every waiting connection at once.

libuv (under uvloop) accepts one connection per turn of the event loop (libuv 1.45, "don't
accept() connections in a loop"), and relies on the listening socket staying readable for the
next. On a busy process (hundreds of streams, starts being written) a turn is long, so the
process takes connections more slowly than they arrive: the rest wait in the kernel's accept
queue, where no limit of the gateway can see or refuse them, and a refusal the app gives at once
reaches its client only once its connection is accepted. The load balancer sees a connection
that was accepted by the kernel, so it does not try another process either
(docs/decisions/0001-batch-accept.md).

So the listening socket is served here instead: when it is readable, up to `ACCEPT_BATCH`
connections are accepted in one callback (what asyncio's own loop does) and each is handed to
uvloop as an accepted socket; everything else (the connections' I/O, timers) is uvloop's.
A server with TLS, or created from a host and port rather than a socket, is uvloop's own.
Where uvloop is not installed (it is optional), uvicorn runs asyncio's own loop, which accepts
in batches already; `GATEWAY_STOCK_RUNTIME=loop` runs uvloop's own server
(`gateway.server.serve.event_loop`).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import socket
from collections.abc import Callable, Coroutine
from typing import Any

import uvloop

log = logging.getLogger(__name__)

ACCEPT_BATCH = 128  # connections taken per wake-up; the rest at the next turn of the loop
# Out of descriptors or memory: stop accepting for a moment rather than spin (as asyncio does).
RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
RETRY_SECONDS = 1.0


class BatchAcceptServer:
    """What uvicorn needs of an `asyncio.Server` (`close`, `wait_closed`), over a listening
    socket whose waiting connections are accepted together."""

    def __init__(self, loop: asyncio.AbstractEventLoop, factory: Callable[[], Any],
                 sock: socket.socket, backlog: int) -> None:
        # A socket of its own on the same descriptor, with its real family (uvicorn's
        # `--workers` passes one made by `socket.fromfd(..., AF_UNIX, ...)`); closing it stops
        # this server, and the caller still closes the socket it gave.
        self.listener = socket.socket(fileno=socket.dup(sock.fileno()))
        self.listener.setblocking(False)
        self.listener.listen(backlog)
        self.loop, self.factory = loop, factory
        self.sockets = [sock]
        self.closed = asyncio.Event()
        self.resume: asyncio.TimerHandle | None = None
        loop.add_reader(self.listener.fileno(), self.accept)

    def accept(self) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno not in RESOURCE_ERRORS:
                    raise
                log.error("cannot accept a connection (%s); pausing %g s", exc, RETRY_SECONDS)
                self.loop.remove_reader(self.listener.fileno())
                self.resume = self.loop.call_later(RETRY_SECONDS, self.listen_again)
                return
            self.hand_over(self.loop.connect_accepted_socket(self.factory, conn), conn)

    def hand_over(self, making: Coroutine[Any, Any, Any], conn: socket.socket,
                  _: object = None) -> None:
        """Steps uvloop's `connect_accepted_socket` now rather than in a task of its own,
        whose first step would wait a turn of the loop: its transport is made in this callback
        (the protocol's `connection_made` follows at the next turn), and the step after it
        when the future it waits for is done (`_` is that future)."""
        try:
            waiting = making.send(None)
        except StopIteration:
            return
        except Exception:  # the client went away before its transport was made, or the loop
            conn.close()  # is closing: the connection is dropped, as uvloop's own would be
            return
        waiting.add_done_callback(functools.partial(self.hand_over, making, conn))

    def listen_again(self) -> None:
        self.resume = None
        if not self.closed.is_set():
            self.loop.add_reader(self.listener.fileno(), self.accept)

    def is_serving(self) -> bool:
        return not self.closed.is_set()

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        if self.resume is not None:
            self.resume.cancel()
        self.loop.remove_reader(self.listener.fileno())
        self.listener.close()

    async def wait_closed(self) -> None:
        await self.closed.wait()


class Loop(uvloop.Loop):
    async def create_server(self, protocol_factory: Callable[[], Any], host: Any = None,
                            port: Any = None, *, sock: socket.socket | None = None,
                            backlog: int = 100, ssl: Any = None, **kwargs: Any) -> Any:
        if sock is None or ssl is not None or host is not None or port is not None or kwargs:
            return await super().create_server(protocol_factory, host, port, sock=sock,
                                               backlog=backlog, ssl=ssl, **kwargs)
        return BatchAcceptServer(self, protocol_factory, sock, backlog)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvicorn's loop factory (`gateway.server.serve.event_loop`)."""
    return Loop()
