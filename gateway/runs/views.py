"""Reading a run's log, live or from the database.

Which dialect a reader gets is the API's choice (`protocol.dialects`); this module only hands out
the frames, in order, from memory or from the database.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from ..protocol import timbal
from ..protocol.clock import now_ms
from ..store.repository import ACTIVE_RUN_STATUSES, Store
from .log import Entry, LiveLog

# A follower in another process than the run's polls the database: soon after new frames
# (the owner flushes every 100 ms), backing off to POLL_SECONDS while nothing arrives.
MIN_POLL_SECONDS = 0.05
POLL_SECONDS = 0.25
PAGE_FRAMES = 1000  # replay from the database in pages, never one giant read
WATCH_TOUCH_MS = 1000  # how often a follower in another process says it is still watching


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
