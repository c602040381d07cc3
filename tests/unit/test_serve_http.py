"""`gateway serve` answers a request that needs no wait in as few turns of the event loop as it can.

On a busy process every turn of the loop is tens of milliseconds, and a refusal at the door waits
for each turn between its bytes' arrival and its answer (docs/decisions/0002-eager-request-task.md).
Counted here in turns, not time: a client's request is written before
the server sees it, and the answer must be on the client's socket within two turns (the
connection accepted and its transport made; its bytes read and answered), where uvicorn's own
protocol over libuv's accept took four.
"""

from __future__ import annotations

import asyncio
import contextvars
import socket
from typing import Any

import pytest

pytest.importorskip("uvloop")
pytest.importorskip("httptools")

import uvicorn  # noqa: E402

from gateway.server.serve import http_protocol  # noqa: E402
from gateway.server.serve_http import eager_task  # noqa: E402
from gateway.server.serve_loop import Loop  # noqa: E402

REQUEST = (b"POST /v1/threads/runs HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json"
           b"\r\ncontent-length: 2\r\n\r\n{}")


async def refuse(scope: Any, receive: Any, send: Any) -> None:
    """What the door does for a saturated process: answers before reading the body."""
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"content-length", b"2"), (b"retry-after", b"1")]})
    await send({"type": "http.response.body", "body": b"{}"})


async def turns_to_answer(http: str) -> list[int]:
    """For 3 requests one after another: the turns of the loop from a request written to its
    answer readable on the client's socket."""
    config = uvicorn.Config(refuse, http=http, lifespan="off", log_level="error")
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)  # what `Server.serve` sets before startup
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        await server.startup(sockets=[sock])
        counted = []
        for _ in range(3):
            with socket.create_connection(sock.getsockname()) as client:
                client.setblocking(False)
                client.sendall(REQUEST)
                counted.append(await turns_until_readable(client))
                assert client.recv(64).startswith(b"HTTP/1.1 503")
        await server.shutdown(sockets=[sock])
    return counted


async def turns_until_readable(client: socket.socket, limit: int = 50) -> int:
    for turn in range(limit):
        try:
            if client.recv(1, socket.MSG_PEEK):
                return turn
        except BlockingIOError:
            pass
        await asyncio.sleep(0)
    return limit


def on_gateway_loop(coro: Any) -> Any:
    loop = Loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def test_a_request_answered_without_waiting_leaves_within_two_turns_of_the_loop() -> None:
    assert on_gateway_loop(turns_to_answer(http_protocol())) == [2, 2, 2]


def test_uvicorns_own_protocol_waits_a_turn_more_for_the_apps_task() -> None:
    assert on_gateway_loop(turns_to_answer("httptools")) == [3, 3, 3], "drop server/serve_http.py?"


SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="")


def test_an_eager_task_steps_first_in_its_own_context_as_the_current_task() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        started = asyncio.Event()
        woken = loop.create_future()
        steps: list[object] = []

        async def request() -> str:
            SEEN.set("inside")
            steps.append(asyncio.current_task())
            started.set()
            await woken
            steps.append(asyncio.current_task())
            return SEEN.get()

        # As uvicorn's protocol does, from a callback of the loop (no task running).
        made: list[asyncio.Task[Any]] = []
        loop.call_soon(lambda: made.append(eager_task(loop, request())))
        await asyncio.sleep(0)
        task = made[0]
        assert started.is_set() and steps == [task]  # its first step ran in that callback
        assert SEEN.get() == ""  # in the task's context, not the caller's
        woken.set_result(None)
        assert await task == "inside" and steps == [task, task]

    on_gateway_loop(main())


def test_an_eager_task_that_finishes_or_fails_at_once_gives_its_result_or_error() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def done() -> int:
            return 7

        async def fails() -> None:
            raise ValueError("at once")

        made: list[asyncio.Task[Any]] = []
        loop.call_soon(lambda: made.extend([eager_task(loop, done()), eager_task(loop, fails())]))
        await asyncio.sleep(0)
        assert await made[0] == 7
        with pytest.raises(ValueError, match="at once"):
            await made[1]

    on_gateway_loop(main())


def test_an_eager_task_cancelled_before_its_next_step_is_cancelled_where_it_waits() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        cleaned: list[str] = []

        async def waits() -> None:
            try:
                await loop.create_future()
            finally:
                cleaned.append("cleaned")

        made: list[asyncio.Task[Any]] = []

        def start() -> None:
            made.append(eager_task(loop, waits()))
            made[0].cancel()  # before the task has taken a step of its own

        loop.call_soon(start)
        await asyncio.sleep(0)
        with pytest.raises(asyncio.CancelledError):
            await made[0]
        assert cleaned == ["cleaned"]

    on_gateway_loop(main())
