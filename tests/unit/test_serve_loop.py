"""`gateway serve`'s event loop takes every waiting connection at once.

On uvloop's own loop a listening socket gives up one connection per turn of the loop, so a
busy process (turns of 50 to 200 ms) left new connections, refusals included, seconds in the
kernel's queue (docs/decisions/0001-batch-accept.md). Counted here in turns of the loop,
not in time: connections made before the server starts all wait in the kernel's queue, and
every one must reach its protocol within a few turns.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

pytest.importorskip("uvloop")

from gateway.server.serve import event_loop  # noqa: E402
from gateway.server.serve_loop import Loop  # noqa: E402

WAITING = 64


class Counted(asyncio.Protocol):
    made: list[asyncio.BaseTransport] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        Counted.made.append(transport)


@contextmanager
def waiting_connections(listener: socket.socket, count: int) -> Iterator[list[socket.socket]]:
    """`count` clients connected (the kernel completes the handshake) and not yet accepted."""
    with ExitStack() as stack:
        clients = [stack.enter_context(socket.create_connection(listener.getsockname()))
                   for _ in range(count)]
        yield clients


def listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    return sock


async def turns_until(count: int, limit: int) -> int:
    """Turns of the loop until `count` connections reached their protocol (`limit` at most)."""
    for turn in range(1, limit + 1):
        await asyncio.sleep(0)
        if len(Counted.made) >= count:
            return turn
    return limit


def serve_and_count(loop: asyncio.AbstractEventLoop, sock: socket.socket,
                    limit: int = WAITING) -> tuple[asyncio.AbstractServer, int]:
    Counted.made = []
    server = loop.run_until_complete(loop.create_server(Counted, sock=sock, backlog=1024))
    return server, loop.run_until_complete(turns_until(WAITING, limit))


def close(loop: asyncio.AbstractEventLoop, server: asyncio.AbstractServer) -> None:
    server.close()
    loop.run_until_complete(server.wait_closed())
    for transport in Counted.made:
        transport.close()
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()


def test_the_waiting_connections_are_all_taken_within_a_few_turns_of_the_loop() -> None:
    loop = Loop()
    with listening() as sock, waiting_connections(sock, WAITING):
        server, turns = serve_and_count(loop, sock)
        assert len(Counted.made) == WAITING and turns <= 8, turns
        close(loop, server)


def test_uvloops_own_server_takes_one_a_turn_which_is_why_the_gateway_has_its_own() -> None:
    import uvloop

    loop = uvloop.new_event_loop()
    with listening() as sock, waiting_connections(sock, WAITING):
        server, turns = serve_and_count(loop, sock, limit=16)
        assert len(Counted.made) < WAITING // 2, "uvloop now accepts in batches: drop ours?"
        close(loop, server)


def test_a_socket_passed_on_by_descriptor_is_served_as_tcp() -> None:
    """`--workers`: uvicorn rebuilds the listening socket with `socket.fromfd(fd, AF_UNIX, ...)`
    in each worker; its connections are still TCP connections, with their peer's address."""
    loop = Loop()
    with listening() as sock, socket.fromfd(sock.fileno(), socket.AF_UNIX,
                                            socket.SOCK_STREAM) as given:
        with waiting_connections(sock, WAITING) as clients:
            server, _ = serve_and_count(loop, given)
            peers = {t.get_extra_info("peername") for t in Counted.made}
            assert peers == {c.getsockname() for c in clients}
            close(loop, server)


def test_a_closed_server_takes_no_more_connections() -> None:
    loop = Loop()
    with listening() as sock:
        server, _ = serve_and_count(loop, sock, limit=1)
        server.close()
        loop.run_until_complete(server.wait_closed())
        assert not server.is_serving()
        with waiting_connections(sock, 3):
            loop.run_until_complete(turns_until(1, 8))
            assert Counted.made == []
        close(loop, server)


def test_gateway_serve_runs_on_it() -> None:
    assert event_loop() == "gateway.server.serve_loop:new_event_loop"


def test_out_of_descriptors_it_pauses_then_takes_the_waiting_connections(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """EMFILE: the listening socket stays readable, so retrying at once would spin; it stops
    reading it for a moment (as asyncio's loop does), then serves what waited."""
    from gateway.server import serve_loop

    monkeypatch.setattr(serve_loop, "RETRY_SECONDS", 0.3)  # long beside a few turns
    loop = Loop()
    Counted.made = []
    with listening() as sock:
        server = loop.run_until_complete(loop.create_server(Counted, sock=sock))
        assert isinstance(server, serve_loop.BatchAcceptServer)
        listener = OutOfDescriptorsOnce(server.listener)
        monkeypatch.setattr(server, "listener", listener)
        with waiting_connections(sock, 3):
            loop.run_until_complete(turns_until(1, 4))
            assert listener.failed and Counted.made == [] and server.resume is not None
            loop.run_until_complete(asyncio.wait_for(server_made(3), 30))
            assert len(Counted.made) == 3
        close(loop, server)


class OutOfDescriptorsOnce:
    """The listening socket, whose first `accept` fails as a process out of descriptors."""

    def __init__(self, real: socket.socket) -> None:
        self.real, self.failed = real, False

    def accept(self) -> tuple[socket.socket, object]:
        if not self.failed:
            self.failed = True
            raise OSError(errno.EMFILE, "Too many open files")
        return self.real.accept()

    def fileno(self) -> int:
        return self.real.fileno()

    def close(self) -> None:
        self.real.close()


async def server_made(count: int) -> None:
    while len(Counted.made) < count:
        await asyncio.sleep(0.005)
