"""What every query class shares: a session factory on one engine, and keyset pages."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from asyncpg.exceptions import CannotConnectNowError
from sqlalchemy import update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession

from . import cursors
from .db import session_factory
from .tables import RunRow

ACTIVE_RUN_STATUSES = ("queued", "running")

# What a query raises when the database is unreachable for a moment (a restart, a network
# blip): connecting fails with the driver's own error or the OS's, a dropped connection with
# SQLAlchemy's. Callers that can wait it out catch these, and nothing else.
UNAVAILABLE: tuple[type[Exception], ...] = (DBAPIError, OSError, CannotConnectNowError)

# A frame of the run log as written: (seq, timestamp ms, Timbal frame).
FrameEntry = tuple[int, int, dict[str, Any]]


@dataclass(frozen=True)
class Page:
    rows: Sequence[Any]
    has_more: bool
    next_cursor: str | None


def _page(rows: list[Any], limit: int, key: Callable[[Any], list[Any]]) -> Page:
    """A page from `limit + 1` rows: the extra row only tells that there is more."""
    has_more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, has_more, cursors.encode(key(rows[-1])) if has_more else None)



# A run's fencing token as its writes carry it: (run id, lease owner).
Fence = tuple[str, str]


async def holds_lease(session: AsyncSession, fence: Fence | None) -> bool:
    """In `session`'s transaction: does the fence's owner still hold the run's lease? The no-op
    UPDATE takes the run row's lock, so a reaper ending the run concurrently waits for this
    transaction (and then finds the writes in it) or has already taken the lease (and then
    this returns False and the caller writes nothing)."""
    if fence is None:
        return True
    run_id, owner = fence
    held = await session.execute(update(RunRow)
        .where(RunRow.id == run_id, RunRow.lease_owner == owner,
               RunRow.status.in_(ACTIVE_RUN_STATUSES))
        .values(lease_owner=owner))
    return held.rowcount == 1


class Queries:
    """Every write that must be atomic is one statement or one transaction in a subclass, so the
    callers (`runs`, `api`) never hold a session across an await on anything else."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sessions = session_factory(engine)

    def session(self) -> AsyncSession:
        return self._sessions()
