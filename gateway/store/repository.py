"""Queries. Every write that must be atomic is one statement or one transaction here, so the
callers (`runs`, `api`) never hold a session across an await on anything else."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, delete, func, insert, or_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from . import cursors
from .db import session_factory
from .tables import ComponentRow, IdempotencyKeyRow, MessageRow, RunFrameRow, RunRow, ThreadRow

ACTIVE_RUN_STATUSES = ("queued", "running")

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


async def _insert_frames(session: AsyncSession, run_id: str, entries: Sequence[FrameEntry]
                         ) -> None:
    """One Core INSERT for a batch of log frames: an ORM object per frame cost ~45 us each,
    most of the gateway's own per-token CPU (bench/README.md)."""
    if entries:
        await session.execute(insert(RunFrameRow), [
            {"run_id": run_id, "seq": seq, "ts_ms": ts, "frame": frame}
            for seq, ts, frame in entries])


class Store:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sessions = session_factory(engine)

    def session(self) -> AsyncSession:
        return self._sessions()

    # -- threads ------------------------------------------------------------------------------

    async def add(self, *rows: Any) -> None:
        async with self.session() as session:
            session.add_all(rows)
            await session.commit()

    async def get_thread(self, project_id: str, thread_id: str) -> ThreadRow | None:
        async with self.session() as session:
            row = await session.get(ThreadRow, thread_id)
            return row if row is not None and row.project_id == project_id else None

    async def list_threads(
        self, project_id: str, user_key: str | None, limit: int, cursor: str | None
    ) -> Page:
        query = select(ThreadRow).where(ThreadRow.project_id == project_id)
        if user_key is not None:
            query = query.where(ThreadRow.user_key == user_key)
        if cursor:
            created, thread_id = cursors.decode(cursor, (int, str))
            query = query.where(
                or_(ThreadRow.created_ms < created,
                    and_(ThreadRow.created_ms == created, ThreadRow.id < thread_id))
            )
        query = query.order_by(ThreadRow.created_ms.desc(), ThreadRow.id.desc()).limit(limit + 1)
        async with self.session() as session:
            rows = list((await session.exec(query)).all())
        return _page(rows, limit, lambda row: [row.created_ms, row.id])

    async def update_thread(self, thread_id: str, **values: Any) -> None:
        async with self.session() as session:
            await session.execute(update(ThreadRow).where(ThreadRow.id == thread_id).values(**values))
            await session.commit()

    async def delete_thread(self, thread_id: str) -> None:
        async with self.session() as session:
            run_ids = select(RunRow.id).where(RunRow.thread_id == thread_id)
            await session.execute(delete(RunFrameRow).where(RunFrameRow.run_id.in_(run_ids)))
            for table in (RunRow, MessageRow, ComponentRow):
                await session.execute(delete(table).where(table.thread_id == thread_id))
            await session.execute(delete(ThreadRow).where(ThreadRow.id == thread_id))
            await session.commit()

    # -- the run lock --------------------------------------------------------------------------

    async def start_run(self, run: RunRow, inputs: Sequence[MessageRow], now: int,
                        last_completed_run_id: str | None) -> str:
        """Take the thread's run lock, persist the run and its input, in one transaction.

        The lock is taken only if the thread is idle *and* still has the `lastCompletedRunId`
        the caller validated the request against (every terminal state changes it), so a
        request can never start on a thread state it did not check, and a crash can never
        leave a lock without its run. Returns `started`, `conflict` (busy, or changed since
        it was read: re-read and decide) or `duplicate` (the run's idempotency key is taken).
        """
        last = ThreadRow.last_completed_run_id
        async with self.session() as session:
            result = await session.execute(update(ThreadRow)
                .where(ThreadRow.id == run.thread_id, ThreadRow.run_status == "idle",
                       last.is_(None) if last_completed_run_id is None
                       else last == last_completed_run_id)
                .values(run_status="waiting", current_run_id=run.id, last_run_cancelled=False,
                        last_run_error=None, pending_tool_calls=None, updated_ms=now)
            )
            if result.rowcount != 1:
                await session.rollback()
                return "conflict"
            session.add(run)
            session.add_all(inputs)
            try:
                await session.commit()
            except IntegrityError:
                await session.rollback()
                return "duplicate"
            return "started"

    async def mark_running(self, run_id: str, thread_id: str, owner: str, now: int,
                           lease_until: int) -> bool:
        """queued -> running, only while `owner` still holds the run's lease."""
        async with self.session() as session:
            result = await session.execute(update(RunRow)
                .where(RunRow.id == run_id, RunRow.lease_owner == owner,
                       RunRow.status.in_(ACTIVE_RUN_STATUSES))
                .values(status="running", started_ms=now, lease_expires_ms=lease_until)
            )
            if result.rowcount != 1:
                await session.rollback()
                return False
            await session.execute(update(ThreadRow)
                .where(ThreadRow.id == thread_id, ThreadRow.current_run_id == run_id)
                .values(run_status="streaming")
            )
            await session.commit()
            return True

    async def finish_run(
        self,
        run_id: str,
        thread_id: str,
        status: str,
        now: int,
        *,
        pending: list[dict[str, Any]] | None = None,
        error: dict[str, Any] | None = None,
        owner: str | None = None,
        frames: Sequence[FrameEntry] = (),
    ) -> bool:
        """Record a run's terminal state, the rest of its log, and release the thread, in one
        transaction: once a run reads as finished, its log is complete on disk.

        Every terminal state sets `lastCompletedRunId`: the clients send it back as
        `previousRunId` whatever the outcome. With `owner` (a fencing token) nothing is written
        unless that process still holds the run's lease and the run is still active; a reaper
        that already failed the run wins, and False is returned.
        """
        async with self.session() as session:
            query = update(RunRow).where(RunRow.id == run_id)
            if owner is not None:
                query = query.where(RunRow.status.in_(ACTIVE_RUN_STATUSES),
                                    RunRow.lease_owner == owner)
            result = await session.execute(
                query.values(status=status, finished_ms=now, pending_tool_calls=pending,
                             error=error, lease_owner=None, lease_expires_ms=None)
            )
            if result.rowcount != 1:
                await session.rollback()
                return False
            try:
                await _insert_frames(session, run_id, frames)
                await self._release_thread(session, run_id, thread_id, status, now, pending,
                                           error)
                await session.commit()
            except IntegrityError:  # another writer took these log positions: we were fenced
                await session.rollback()
                return False
            return True

    async def end_orphaned_run(self, run: RunRow, now: int, status: str,
                               error: dict[str, Any], frame: dict[str, Any]) -> bool:
        """End a run whose owner process is gone (its lease expired), from any process.

        Fenced on the lease as it was read: if the owner renewed it meanwhile (it was only
        slow), nothing happens. The terminal frame goes after the last persisted frame, in the
        same transaction, so a reconnect replays what was saved and then this frame.
        """
        async with self.session() as session:
            owner = RunRow.lease_owner
            result = await session.execute(update(RunRow)
                .where(RunRow.id == run.id, RunRow.status.in_(ACTIVE_RUN_STATUSES),
                       owner.is_(None) if run.lease_owner is None else owner == run.lease_owner,
                       or_(RunRow.lease_expires_ms < now, RunRow.lease_expires_ms.is_(None)))
                .values(status=status, finished_ms=now, error=error, lease_owner=None,
                        lease_expires_ms=None)
            )
            if result.rowcount != 1:
                await session.rollback()
                return False
            last = (await session.exec(
                select(func.max(RunFrameRow.seq)).where(RunFrameRow.run_id == run.id))).one()
            session.add(RunFrameRow(run_id=run.id, seq=(last or 0) + 1, ts_ms=now, frame=frame))
            await self._release_thread(session, run.id, run.thread_id, status, now, None, error)
            await session.commit()
            return True

    @staticmethod
    async def _release_thread(session: AsyncSession, run_id: str, thread_id: str, status: str,
                              now: int, pending: list[dict[str, Any]] | None,
                              error: dict[str, Any] | None) -> None:
        await session.execute(update(ThreadRow)
            .where(ThreadRow.id == thread_id, ThreadRow.current_run_id == run_id)
            .values(run_status="idle", current_run_id=None, last_completed_run_id=run_id,
                    last_run_cancelled=status == "cancelled",
                    last_run_error=_thread_error(error), pending_tool_calls=pending,
                    updated_ms=now)
        )

    # -- runs ---------------------------------------------------------------------------------

    async def get_run(self, run_id: str) -> RunRow | None:
        async with self.session() as session:
            return await session.get(RunRow, run_id)

    async def find_run_by_idempotency_key(self, thread_id: str, key: str) -> RunRow | None:
        async with self.session() as session:
            query = select(RunRow).where(RunRow.thread_id == thread_id,
                                         RunRow.idempotency_key == key)
            return (await session.exec(query)).first()

    async def forget_run_idempotency_key(self, run_id: str) -> None:
        """Let an expired key be used again on the thread (its unique constraint)."""
        async with self.session() as session:
            await session.execute(update(RunRow).where(RunRow.id == run_id)
                                  .values(idempotency_key=None))
            await session.commit()

    async def list_runs(self, thread_id: str, limit: int, cursor: str | None) -> Page:
        query = select(RunRow).where(RunRow.thread_id == thread_id)
        if cursor:
            created, run_id = cursors.decode(cursor, (int, str))
            query = query.where(or_(RunRow.created_ms < created,
                                    and_(RunRow.created_ms == created, RunRow.id < run_id)))
        query = query.order_by(RunRow.created_ms.desc(), RunRow.id.desc()).limit(limit + 1)
        async with self.session() as session:
            rows = list((await session.exec(query)).all())
        return _page(rows, limit, lambda row: [row.created_ms, row.id])

    async def renew_leases(self, run_ids: Sequence[str], owner: str, until: int) -> set[str]:
        """Extend `owner`'s leases; returns the runs it still holds (the others were reaped)."""
        if not run_ids:
            return set()
        ids = list(run_ids)
        async with self.session() as session:
            await session.execute(update(RunRow)
                .where(RunRow.id.in_(ids), RunRow.lease_owner == owner,
                       RunRow.status.in_(ACTIVE_RUN_STATUSES))
                .values(lease_expires_ms=until)
            )
            held = (await session.exec(select(RunRow.id).where(
                RunRow.id.in_(ids), RunRow.lease_owner == owner))).all()
            await session.commit()
            return set(held)

    async def expired_runs(self, now: int) -> list[RunRow]:
        query = select(RunRow).where(RunRow.status.in_(ACTIVE_RUN_STATUSES),
                                     or_(RunRow.lease_expires_ms < now,
                                         RunRow.lease_expires_ms.is_(None)))
        async with self.session() as session:
            return list((await session.exec(query)).all())

    async def request_cancel(self, run_id: str, now: int) -> bool:
        """Flag an active run for cancellation by whichever process owns it."""
        async with self.session() as session:
            result = await session.execute(update(RunRow)
                .where(RunRow.id == run_id, RunRow.status.in_(ACTIVE_RUN_STATUSES),
                       RunRow.cancel_requested_ms.is_(None))
                .values(cancel_requested_ms=now)
            )
            await session.commit()
            return result.rowcount == 1

    async def cancel_requested(self, run_ids: Sequence[str]) -> list[str]:
        """Which of these runs another process asked to cancel: one query for all of them."""
        if not run_ids:
            return []
        query = select(RunRow.id).where(RunRow.id.in_(list(run_ids)),
                                        RunRow.cancel_requested_ms.is_not(None))
        async with self.session() as session:
            return list((await session.exec(query)).all())

    async def touch_watched(self, run_id: str, now: int) -> None:
        async with self.session() as session:
            await session.execute(update(RunRow).where(RunRow.id == run_id)
                                  .values(watched_ms=now))
            await session.commit()

    # -- idempotency keys of new-thread runs ------------------------------------------------------

    async def claim_idempotency_key(self, project_id: str, key: str,
                                    now: int) -> IdempotencyKeyRow | None:
        """Claim a key for this request; None if claimed now, else the existing claim."""
        async with self.session() as session:
            session.add(IdempotencyKeyRow(project_id=project_id, key=key, created_ms=now))
            try:
                await session.commit()
                return None
            except IntegrityError:
                await session.rollback()
            return await session.get(IdempotencyKeyRow, (project_id, key))

    async def get_idempotency_key(self, project_id: str, key: str) -> IdempotencyKeyRow | None:
        async with self.session() as session:
            return await session.get(IdempotencyKeyRow, (project_id, key))

    async def set_idempotency_key(self, project_id: str, key: str, **values: Any) -> None:
        async with self.session() as session:
            await session.execute(update(IdempotencyKeyRow)
                .where(IdempotencyKeyRow.project_id == project_id, IdempotencyKeyRow.key == key)
                .values(**values))
            await session.commit()

    async def release_idempotency_key(self, project_id: str, key: str) -> None:
        async with self.session() as session:
            await session.execute(delete(IdempotencyKeyRow).where(
                IdempotencyKeyRow.project_id == project_id, IdempotencyKeyRow.key == key))
            await session.commit()

    # -- the run log --------------------------------------------------------------------------

    async def append_frames(self, run_id: str, entries: Sequence[FrameEntry]) -> bool:
        """Persist a batch of the log; False if a position was already taken (another
        process ended this run after our lease expired: we are fenced out)."""
        if not entries:
            return True
        async with self.session() as session:
            try:  # the Core INSERT fails at execute time, before the commit
                await _insert_frames(session, run_id, entries)
                await session.commit()
            except IntegrityError:
                await session.rollback()
                return False
            return True

    async def append_frames_batch(self, batches: Sequence[tuple[str, Sequence[FrameEntry]]]
                                  ) -> set[str]:
        """Persist batches of several runs' logs in one transaction; returns the runs that
        were fenced out (see `append_frames`). The common case is one commit for all of them;
        if a position was taken, each run is retried on its own to find which."""
        async with self.session() as session:
            try:
                for run_id, entries in batches:
                    await _insert_frames(session, run_id, entries)
                await session.commit()
                return set()
            except IntegrityError:
                await session.rollback()
        return {run_id for run_id, entries in batches
                if not await self.append_frames(run_id, entries)}

    async def read_frames(self, run_id: str, after_seq: int = 0,
                          limit: int | None = None) -> list[RunFrameRow]:
        query = (select(RunFrameRow)
                 .where(RunFrameRow.run_id == run_id, RunFrameRow.seq > after_seq)
                 .order_by(RunFrameRow.seq))
        if limit is not None:
            query = query.limit(limit)
        async with self.session() as session:
            return list((await session.exec(query)).all())

    # -- messages -----------------------------------------------------------------------------

    async def history(self, thread_id: str) -> list[MessageRow]:
        query = select(MessageRow).where(MessageRow.thread_id == thread_id).order_by(MessageRow.seq)
        async with self.session() as session:
            return list((await session.exec(query)).all())

    async def list_messages(
        self, thread_id: str, limit: int, cursor: str | None, descending: bool
    ) -> Page:
        query = select(MessageRow).where(MessageRow.thread_id == thread_id)
        if cursor:
            (seq,) = cursors.decode(cursor, (int,))
            query = query.where(MessageRow.seq < seq if descending else MessageRow.seq > seq)
        order = MessageRow.seq.desc() if descending else MessageRow.seq
        query = query.order_by(order).limit(limit + 1)
        async with self.session() as session:
            rows = list((await session.exec(query)).all())
        return _page(rows, limit, lambda row: [row.seq])

    async def get_message(self, thread_id: str, message_id: str) -> MessageRow | None:
        query = select(MessageRow).where(MessageRow.thread_id == thread_id,
                                         MessageRow.id == message_id)
        async with self.session() as session:
            return (await session.exec(query)).first()

    async def save_message_parts(self, message_id: str, parts: list[dict[str, Any]],
                                 cancelled: bool = False) -> None:
        async with self.session() as session:
            await session.execute(update(MessageRow).where(MessageRow.id == message_id)
                               .values(parts=parts, is_cancelled=cancelled))
            await session.commit()

    async def save_message_meta(self, message_id: str, meta: dict[str, Any]) -> None:
        async with self.session() as session:
            await session.execute(update(MessageRow).where(MessageRow.id == message_id)
                                  .values(meta=meta))
            await session.commit()

    # -- components ---------------------------------------------------------------------------

    async def components_of(self, thread_id: str) -> dict[str, ComponentRow]:
        query = select(ComponentRow).where(ComponentRow.thread_id == thread_id)
        async with self.session() as session:
            return {row.id: row for row in (await session.exec(query)).all()}

    async def get_component(self, thread_id: str, component_id: str) -> ComponentRow | None:
        async with self.session() as session:
            row = await session.get(ComponentRow, component_id)
            return row if row is not None and row.thread_id == thread_id else None

    async def put_component(self, row: ComponentRow) -> None:
        """Create the component, or refresh its props, name and message if it exists.

        Never touches an existing row's state, revision or schema: after creation the state
        belongs to `set_component_state`, so a run finishing its props cannot undo an update.
        """
        async with self.session() as session:
            result = await session.execute(update(ComponentRow)
                .where(ComponentRow.id == row.id)
                .values(props=row.props, name=row.name, message_id=row.message_id)
            )
            if result.rowcount == 0:
                session.add(row)
            await session.commit()

    async def set_component_state(self, component_id: str, expected_revision: int,
                                  state: dict[str, Any], now: int) -> bool:
        """Compare-and-set: store `state` as revision `expected_revision + 1`, only if the
        component is still at `expected_revision`; False means another writer got there first."""
        async with self.session() as session:
            result = await session.execute(update(ComponentRow)
                .where(ComponentRow.id == component_id,
                       ComponentRow.revision == expected_revision)
                .values(state=state, revision=expected_revision + 1, updated_ms=now)
            )
            await session.commit()
            return result.rowcount == 1


def _thread_error(error: dict[str, Any] | None) -> dict[str, Any] | None:
    if not error or error.get("code") == "CANCELLED":
        return None
    return {"message": error.get("message", ""), "code": error.get("code")}
