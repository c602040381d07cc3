"""Translating a run's log (read through a `feed`) into a dialect.

An event's SSE id is its position in the translated stream (1, 2, ...). Translation is
deterministic, so a reader that resumes after event `n` re-translates from the first frame and
skips the first `n` events: no gaps, no duplicates, whatever the process that serves it.

One exception, after a crash: a reader may have seen events built from frames its process never
persisted. Such a cursor can point past the end of the log as saved; the reader still gets the
run's `RUN_LOST` error (at its own, lower, position) so it always learns how the run ended.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ..protocol import timbal
from ..protocol.agui_tambo import TamboTranslator
from .log import Entry

RUN_LOST = "RUN_LOST"


def is_lost(frame: timbal.Frame) -> bool:
    """The frame a reaper writes for a run whose process died."""
    return frame.get("c") == timbal.ERROR and frame.get("code") == RUN_LOST


async def tambo_events(entries: AsyncIterator[Entry], after: int = 0
                       ) -> AsyncIterator[tuple[int, dict[str, Any]]]:
    translator = TamboTranslator()
    position = 0
    for_lost: tuple[int, dict[str, Any]] | None = None
    async for entry in entries:
        for event in translator.feed(entry.frame):
            position += 1
            if position > after:
                yield position, {**event, "timestamp": entry.ts}
            elif is_lost(entry.frame):
                for_lost = position, {**event, "timestamp": entry.ts}
    if for_lost is not None:
        yield for_lost
