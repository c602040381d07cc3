"""Helpers for run lifecycle tests: long scripted answers, partial reads, polling a run's state.

Everything goes over plain HTTP, the way a browser or a proxy would see the gateway.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx

from tests.support.sse import SseEvent, iter_events

T = TypeVar("T")
HEADERS = {"accept": "text/event-stream", "x-api-key": "test-key"}


def slow_turn(count: int, interval: float) -> list[dict[str, Any]]:
    """A model answer of `count` numbered tokens ("t1 t2 ..."), one chunk every `interval` s."""
    return [{"slow": {"count": count, "interval": interval}}]


def slow_text(count: int) -> str:
    """What `slow_turn(count, ...)` sends, as one string."""
    return "".join(f"t{i} " for i in range(1, count + 1))


def message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


@contextmanager
def open_stream(client: httpx.Client, method: str, url: str,
                **kwargs: Any) -> Iterator[tuple[httpx.Response, Iterator[SseEvent]]]:
    """An SSE response and its events; leaving the block closes the connection mid-stream."""
    headers = {**HEADERS, **kwargs.pop("headers", {})}
    with client.stream(method, url, headers=headers, **kwargs) as response:
        if response.status_code != 200:
            response.read()
            raise AssertionError(f"{response.status_code}: {response.text}")
        yield response, iter_events(response)


def read_until(events: Iterator[SseEvent], stop: Callable[[list[SseEvent]], bool]
               ) -> list[SseEvent]:
    """Read events until `stop(seen)` holds (or the stream ends)."""
    seen: list[SseEvent] = []
    for event in events:
        seen.append(event)
        if stop(seen):
            break
    return seen


def texts(seen: list[SseEvent]) -> int:
    return sum(1 for e in seen if e.type == "TEXT_MESSAGE_CONTENT")


def read_and_leave(client: httpx.Client, url: str, body: dict[str, Any],
                   text_events: int) -> list[SseEvent]:
    """Start a run, read until `text_events` text deltas arrived, then drop the connection."""
    with open_stream(client, "POST", url, json=body) as (_, events):
        return read_until(events, lambda seen: texts(seen) >= text_events)


def resume(client: httpx.Client, run: tuple[str, str], after: int | None = None
           ) -> list[SseEvent]:
    """Reconnect to a run (after event `after`, or from the start) and read to its end."""
    headers = {"last-event-id": str(after)} if after is not None else {}
    with open_stream(client, "GET", ids(run), headers=headers) as (_, events):
        return list(events)


def wait_for(probe: Callable[[], T | None], timeout: float = 30.0, every: float = 0.05,
             what: str = "condition") -> T:
    """Poll until `probe()` returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def run_status(client: httpx.Client, thread_id: str, run_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/threads/{thread_id}/runs/{run_id}",
                          headers={"accept": "application/json"})
    assert response.status_code == 200, response.text
    return response.json()


def wait_for_status(client: httpx.Client, thread_id: str, run_id: str, *statuses: str,
                    timeout: float = 30.0) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        body = run_status(client, thread_id, run_id)
        return body if body["status"] in statuses else None

    return wait_for(probe, timeout, what=f"run {run_id} to be {'/'.join(statuses)}")


def ids(run: tuple[str, str]) -> str:
    thread_id, run_id = run
    return f"/v1/threads/{thread_id}/runs/{run_id}"


def started_ids(seen: list[SseEvent]) -> tuple[str, str]:
    """(threadId, runId) from the RUN_STARTED event."""
    first = seen[0]
    assert first.type == "RUN_STARTED", first
    return first.data["threadId"], first.data["runId"]


def agui_path(body: dict[str, Any]) -> str:
    """The AG-UI path of the run an AG-UI input started (by the client's ids)."""
    return f"/v1/agui/threads/{body['threadId']}/runs/{body['runId']}"


def gateway_ids(client: httpx.Client, body: dict[str, Any], **headers: str) -> tuple[str, str]:
    """The gateway's own (thread id, run id) of the run an AG-UI input started, which the
    Tambo endpoints use: an AG-UI client's ids are its names for them (`X-Thread-Id` and
    `X-Run-Id` of its AG-UI stream carry the gateway's)."""
    with client.stream("GET", agui_path(body), headers=headers) as response:
        assert response.status_code == 200, response.read()
        return response.headers["x-thread-id"], response.headers["x-run-id"]


def disconnects_after(model: Any, since: float) -> list[float]:
    """Monotonic times of upstream streams the gateway closed after `since`."""
    return [t for t, _ in model.disconnects if t >= since]
