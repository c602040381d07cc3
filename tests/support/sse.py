"""A plain SSE reader for tests: what a browser's EventSource or a raw fetch would see."""

from __future__ import annotations

import json
from collections.abc import Iterator
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


def iter_events(response: httpx.Response) -> Iterator[SseEvent]:
    """Parse a streaming response frame by frame; comments (heartbeats) are skipped."""
    event_id: int | None = None
    data: list[str] = []
    for line in response.iter_lines():
        if line == "":
            if data:
                yield SseEvent(event_id, json.loads("\n".join(data)))
            event_id, data = None, []
        elif line.startswith(":"):
            continue
        elif line.startswith("id:"):
            event_id = int(line[3:].strip())
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


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
