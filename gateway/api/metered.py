"""Model calls outside a run (thread names, suggestions, transcription), metered like runs.

Each takes a quota ticket for the caller's API key and user scope before it calls the model,
exactly as a run start does (`runs/admission/quotas.py`): it counts as a start in the per-minute limits,
holds a concurrency slot while it runs, is refused with the same 429 once the key's daily
token budget is spent, and adds the tokens the model reports to that budget. So no client can
reach the model around the quotas by asking for suggestions instead of runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from starlette.requests import Request

from ..engine.history import to_model_messages
from ..store.repository import Store
from ..store.tables import MessageRow
from .context import caller, services

# Pages of the newest messages read for a transcript's tail, at most (TRANSCRIPT_CHARS first).
TAIL_PAGES, TAIL_PAGE_SIZE = 5, 10


@contextlib.asynccontextmanager
async def metered(request: Request, user_key: str | None
                  ) -> AsyncIterator[Callable[[int], None]]:
    """Admit one model call under the caller's quotas (429 past one); yields the sink the call
    reports its tokens to, which are added to the budget when the call ends."""
    ticket = await services(request).runs.quotas.acquire(
        caller(request).quota_subjects(user_key))
    spent = 0

    def count(tokens: int) -> None:
        nonlocal spent
        spent += tokens

    try:
        yield count
    finally:
        try:
            await ticket.add_tokens(spent)
        finally:
            await ticket.release()


async def recent_history(store: Store, thread_id: str, chars: int) -> list[dict[str, object]]:
    """The thread's newest messages in model form, enough to hold `chars` characters of
    conversation text (at most `TAIL_PAGES` pages): a name or suggestions need the
    conversation's end, not the whole thread read into memory."""
    rows: list[MessageRow] = []
    cursor = None
    for _ in range(TAIL_PAGES):
        page = await store.list_messages(thread_id, TAIL_PAGE_SIZE, cursor, descending=True)
        rows[:0] = reversed(page.rows)
        if not page.has_more or _text_chars(rows) >= chars:
            break
        cursor = page.next_cursor
    return to_model_messages(rows)


def _text_chars(rows: list[MessageRow]) -> int:
    return sum(len(str(part.get("content") or "")) for row in rows for part in row.parts
               if part.get("type") in ("user", "agent"))
