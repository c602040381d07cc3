"""Reading a run's log, live or from the database, and translating it into a dialect.

An event's SSE id is its position in the translated stream (1, 2, ...). Translation is
deterministic, so a reader that resumes after event `n` re-translates from the first frame and
skips the first `n` events: no gaps, no duplicates, whatever the process that serves it.

One exception, after a crash: a reader may have seen events built from frames its process never
persisted. Such a cursor can point past the end of the log as saved; the reader still gets the
run's `RUN_LOST` error (at its own, lower, position) so it always learns how the run ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from ..protocol import timbal
from ..protocol.agui_tambo import TamboTranslator
from ..protocol.clock import now_ms
from ..store.repository import ACTIVE_RUN_STATUSES, Store
from .log import Entry, LiveLog

# A follower in another process than the run's polls the database: soon after new frames
# (the owner flushes every 100 ms), backing off to POLL_SECONDS while nothing arrives.
MIN_POLL_SECONDS = 0.05
POLL_SECONDS = 0.25
PAGE_FRAMES = 1000  # replay from the database in pages, never one giant read
WATCH_TOUCH_MS = 1000  # how often a follower in another process says it is still watching
RUN_LOST = "RUN_LOST"


async def follow(live: LiveLog | None, store: Store, run_id: str
                 ) -> AsyncGenerator[Entry, None]:
    """Every entry of the run's log, then live ones until the run ends.

    With the run's live log (it runs, or just ended, in this process) entries come from memory.
    Otherwise they come from the database, polled while the run is active elsewhere; such a
    follower also marks the run as watched, so the owner's disconnect policy knows about it.
    """
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
    seq, touched, delay = 0, 0, MIN_POLL_SECONDS
    while True:
        # Read the status first: a run's terminal state commits together with the end of its
        # log, so if it had ended by now, the reads below see its last frame.
        row = await store.get_run(run_id)
        active = row is not None and row.status in ACTIVE_RUN_STATUSES
        before = seq
        while True:
            rows = await store.read_frames(run_id, seq, PAGE_FRAMES)
            for frame_row in rows:
                seq = frame_row.seq
                yield Entry(frame_row.seq, frame_row.ts_ms, frame_row.frame)
                if timbal.is_terminal(frame_row.frame):
                    return
            if len(rows) < PAGE_FRAMES:
                break
        if not active:
            return
        now = now_ms()
        if now - touched >= WATCH_TOUCH_MS:
            touched = now
            await store.touch_watched(run_id, now)
        delay = MIN_POLL_SECONDS if seq > before else min(delay * 2, POLL_SECONDS)
        await asyncio.sleep(delay)


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
