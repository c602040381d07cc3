"""An SSE reader that stops reading is disconnected after the bound (`BoundedEventSource`, with
its own per-send timeout), logged as one line, and the run's subscription (the response's
iterator) is closed; a reader that reads gets every event. The NDJSON and WebSocket bounds are
tested against a real server in tests/integration/test_timbal_views.py."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.server.sse import BoundedEventSource

SCOPE = {"type": "http", "method": "GET", "path": "/v1/threads/t/runs/r", "headers": []}


async def _never_disconnects() -> dict[str, Any]:
    await asyncio.Event().wait()
    return {}


async def test_a_reader_that_stops_reading_is_disconnected_and_its_stream_closed(
        caplog: pytest.LogCaptureFixture) -> None:
    closed = asyncio.Event()

    async def events() -> AsyncIterator[dict[str, str]]:
        try:
            for k in range(1000):
                yield {"data": f"event {k}"}
        finally:
            closed.set()

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if len(sent) > 3:  # the socket's buffer is full: this send never completes
            await asyncio.Event().wait()

    response = BoundedEventSource(events(), send_timeout=0.05, ping=600)
    with caplog.at_level(logging.INFO, logger="gateway.server.sse"):
        await asyncio.wait_for(response(SCOPE, _never_disconnects, send), 10)
    assert closed.is_set()
    assert len(sent) == 4  # the start and three events, then nothing more was tried
    assert [r.getMessage() for r in caplog.records] == [
        "a reader of /v1/threads/t/runs/r read nothing for 0.05 s: disconnected"]


async def test_a_reader_that_reads_gets_every_event() -> None:
    async def events() -> AsyncIterator[dict[str, str]]:
        for k in range(100):
            yield {"data": f"event {k}"}

    bodies: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            bodies.append(message["body"])

    response = BoundedEventSource(events(), send_timeout=0.05, ping=600, sep="\n")
    await asyncio.wait_for(response(SCOPE, _never_disconnects, send), 10)
    assert b"".join(bodies).decode().split("\n\n")[:-1] == [f"data: event {k}" for k in range(100)]


async def test_a_reader_that_leaves_ends_the_stream_and_closes_its_iterator() -> None:
    # The run's subscription must end when its reader goes (its departure arms the run's
    # disconnect policy); the response's tasks are the gateway's own, not sse-starlette's.
    closed, left = asyncio.Event(), asyncio.Event()

    async def events() -> AsyncIterator[dict[str, str]]:
        try:
            yield {"data": "first"}
            await asyncio.Event().wait()  # a run with nothing more to say for now
            yield {"data": "never"}
        finally:
            closed.set()

    async def receive() -> dict[str, Any]:
        await left.wait()
        return {"type": "http.disconnect"}

    bodies: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            bodies.append(message["body"])
            left.set()  # the reader leaves after the first event

    response = BoundedEventSource(events(), send_timeout=5, ping=600, sep="\n")
    await asyncio.wait_for(response(SCOPE, receive, send), 10)
    assert closed.is_set()
    assert bodies == [b"data: first\n\n"]


async def test_a_stream_that_fails_raises_its_error() -> None:
    async def events() -> AsyncIterator[dict[str, str]]:
        yield {"data": "first"}
        raise RuntimeError("the stream broke")

    async def send(message: dict[str, Any]) -> None:
        return None

    response = BoundedEventSource(events(), send_timeout=5, ping=600)
    with pytest.raises(RuntimeError, match="the stream broke"):
        await asyncio.wait_for(response(SCOPE, _never_disconnects, send), 10)


async def _idle_events(closed: asyncio.Event) -> AsyncIterator[dict[str, str]]:
    try:
        yield {"data": "first"}
        await asyncio.Event().wait()  # a run with nothing more to say for now
    finally:
        closed.set()


async def test_an_idle_stream_is_pinged_and_ended_by_the_servers_shutdown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The response runs sse-starlette's parts itself (`_streamed`): the pings go out as its
    # comments, and the server's shutdown ends the stream.
    from sse_starlette.sse import AppStatus

    closed = asyncio.Event()
    bodies: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            bodies.append(message["body"])
            if len(bodies) == 3:  # the first event and two pings: the server stops
                monkeypatch.setattr(AppStatus, "should_exit", True)

    response = BoundedEventSource(_idle_events(closed), send_timeout=5, ping=0.02, sep="\n")
    await asyncio.wait_for(response(SCOPE, _never_disconnects, send), 10)
    assert closed.is_set()
    assert bodies[0] == b"data: first\n\n"
    assert len(bodies) >= 3 and all(b.startswith(b": ping - ") and b.endswith(b"\n\n")
                                    for b in bodies[1:])


async def test_a_ping_the_reader_does_not_read_disconnects_it(
        caplog: pytest.LogCaptureFixture) -> None:
    closed = asyncio.Event()
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if len(sent) > 2:  # the start and the first event went; the first ping never does
            await asyncio.Event().wait()

    response = BoundedEventSource(_idle_events(closed), send_timeout=0.05, ping=0.02)
    with caplog.at_level(logging.INFO, logger="gateway.server.sse"):
        await asyncio.wait_for(response(SCOPE, _never_disconnects, send), 10)
    assert closed.is_set()
    assert len(sent) == 3
    assert [r.getMessage() for r in caplog.records] == [
        "a reader of /v1/threads/t/runs/r read nothing for 0.05 s: disconnected"]


async def test_a_send_that_waits_less_than_the_bound_goes_out_and_its_errors_are_its_own(
) -> None:
    # A send is started at once and timed only once it waits (`bounded`): one that waits for
    # its drain within the bound completes; one that fails after waiting raises its own error.
    from gateway.server.sse import bounded

    drained = asyncio.Event()
    done: list[str] = []

    async def send(fail: bool) -> None:
        await drained.wait()
        await asyncio.sleep(0)
        if fail:
            raise ConnectionResetError("the reader went away")
        done.append("sent")

    asyncio.get_running_loop().call_later(0.01, drained.set)
    await bounded(5, send(False))
    assert done == ["sent"]
    with pytest.raises(ConnectionResetError):
        await bounded(5, send(True))
    drained.clear()
    with pytest.raises(TimeoutError):
        await bounded(0.01, send(False))
    assert done == ["sent"]
