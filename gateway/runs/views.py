"""Reading a run's log, live or from the database, and translating it into a dialect.

An event's SSE id is its position in the translated stream (1, 2, ...). Translation is
deterministic, so a reader that resumes after event `n` re-translates from the first frame and
skips the first `n` events: no gaps, no duplicates, whatever the process that serves it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Callable

from ..protocol import timbal
from ..protocol.agui_tambo import TamboTranslator
from ..store.repository import Store
from .log import Entry, LiveLog

POLL_SECONDS = 0.25


async def follow(live: LiveLog | None, store: Store, run_id: str,
                 is_active: Callable[[], "asyncio.Future[bool] | Any"]) -> AsyncIterator[Entry]:
    """Every entry of the run's log, then live ones until the run ends."""
    if live is not None:
        live.subscribers += 1
        try:
            index = 0
            while True:
                while index < len(live.entries):
                    yield live.entries[index]
                    index += 1
                if live.closed:
                    return
                await live.wait_beyond(index)
        finally:
            live.subscribers -= 1
    seq = 0
    while True:
        rows = await store.read_frames(run_id, seq)
        for row in rows:
            seq = row.seq
            yield Entry(row.seq, row.ts_ms, row.frame)
            if timbal.is_terminal(row.frame):
                return
        if not await is_active():
            return
        await asyncio.sleep(POLL_SECONDS)


async def tambo_events(entries: AsyncIterator[Entry], after: int = 0
                       ) -> AsyncIterator[tuple[int, dict[str, Any]]]:
    translator = TamboTranslator()
    position = 0
    async for entry in entries:
        for event in translator.feed(entry.frame):
            position += 1
            if position > after:
                yield position, {**event, "timestamp": entry.ts}
