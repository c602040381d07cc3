"""The frame log of each run, written in batches and read in pages."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from .base import FrameEntry, Queries, holds_lease
from .tables import RunFrameRow


async def insert_frames(session: AsyncSession, run_id: str, entries: Sequence[FrameEntry]
                         ) -> None:
    """One Core INSERT for a batch of log frames: an ORM object per frame cost ~45 us each,
    most of the gateway's own per-token CPU (bench/README.md)."""
    if entries:
        await session.execute(insert(RunFrameRow), [
            {"run_id": run_id, "seq": seq, "ts_ms": ts, "frame": frame}
            for seq, ts, frame in entries])


class LeaseLost(Exception):
    """A batch of a run whose lease was taken over: the shared transaction is abandoned."""


class FrameLog(Queries):

    async def append_frames(self, run_id: str, entries: Sequence[FrameEntry],
                            owner: str | None = None) -> bool:
        """Persist a batch of the log; False if we are fenced out: with `owner` (the lease's
        fencing token) nothing is written unless that process still holds the run's lease, and
        a position already taken (another process ended this run) refuses the whole batch.

        See `base.holds_lease` for why a concurrent reaper cannot interleave.
        """
        if not entries:
            return True
        async with self.session() as session:
            if not await holds_lease(session, (run_id, owner) if owner else None):
                await session.rollback()
                return False
            try:  # the Core INSERT fails at execute time, before the commit
                await insert_frames(session, run_id, entries)
                await session.commit()
            except IntegrityError:
                await session.rollback()
                return False
            return True

    async def append_frames_batch(
            self, batches: Sequence[tuple[str, Sequence[FrameEntry], str | None]]) -> set[str]:
        """Persist batches of several runs' logs (run id, entries, lease owner) in one
        transaction; returns the runs that were fenced out (see `append_frames`). The common
        case is one commit for all of them; if a run's lease is gone or a position was taken,
        each run is retried on its own to find which."""
        async with self.session() as session:
            try:
                for run_id, entries, owner in batches:
                    if not await holds_lease(session, (run_id, owner) if owner else None):
                        raise LeaseLost(run_id)
                    await insert_frames(session, run_id, entries)
                await session.commit()
                return set()
            except (IntegrityError, LeaseLost):
                await session.rollback()
        return {run_id for run_id, entries, owner in batches
                if not await self.append_frames(run_id, entries, owner)}

    async def read_frames(self, run_id: str, after_seq: int = 0,
                          limit: int | None = None) -> list[RunFrameRow]:
        query = (select(RunFrameRow)
                 .where(RunFrameRow.run_id == run_id, RunFrameRow.seq > after_seq)
                 .order_by(RunFrameRow.seq))
        if limit is not None:
            query = query.limit(limit)
        async with self.session() as session:
            return list((await session.exec(query)).all())


    async def last_frame(self, run_id: str) -> RunFrameRow | None:
        query = (select(RunFrameRow).where(RunFrameRow.run_id == run_id)
                 .order_by(RunFrameRow.seq.desc()).limit(1))
        async with self.session() as session:
            return (await session.exec(query)).first()
