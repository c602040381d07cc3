"""A plain SSE reader for tests: what a browser's EventSource or a raw fetch would see."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class SseEvent:
    id: int | None
    data: dict[str, Any]

    @property
    def type(self) -> str:
        return self.data["type"]


class _Frames:
    """Lines in, events out: the SSE framing shared by the sync and the async reader."""

    def __init__(self) -> None:
        self.event_id: int | None = None
        self.data: list[str] = []

    def feed(self, line: str) -> Iterable[SseEvent]:
        if line == "":
            if self.data:
                yield SseEvent(self.event_id, json.loads("\n".join(self.data)))
            self.event_id, self.data = None, []
        elif line.startswith(":"):
            return
        elif line.startswith("id:"):
            self.event_id = int(line[3:].strip())
        elif line.startswith("data:"):
            self.data.append(line[5:].removeprefix(" "))


def iter_events(response: httpx.Response) -> Iterator[SseEvent]:
    """Parse a streaming response frame by frame; comments (heartbeats) are skipped."""
    frames = _Frames()
    for line in response.iter_lines():
        yield from frames.feed(line)


def events_of(body: str) -> list[SseEvent]:
    """The events of a whole SSE body already read."""
    frames = _Frames()
    return [event for line in body.splitlines() for event in frames.feed(line)]


async def aiter_events(response: httpx.Response) -> AsyncIterator[SseEvent]:
    """`iter_events` for an `httpx.AsyncClient` stream (many readers in one event loop)."""
    frames = _Frames()
    async for line in response.aiter_lines():
        for event in frames.feed(line):
            yield event


def run_events(client: httpx.Client, method: str, url: str, **kwargs: Any) -> list[SseEvent]:
    """Issue a request that answers with SSE and read the whole stream."""
    headers = {"accept": "text/event-stream", "x-api-key": "test-key", **kwargs.pop("headers", {})}
    with client.stream(method, url, headers=headers, **kwargs) as response:
        if response.status_code != 200:
            response.read()
            raise AssertionError(f"{response.status_code}: {response.text}")
        return list(iter_events(response))


def text_of(events: list[SseEvent]) -> str:
    return "".join(e.data["delta"] for e in events if e.type == "TEXT_MESSAGE_CONTENT")
