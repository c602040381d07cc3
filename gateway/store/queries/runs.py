"""The run aggregate: the thread's run lock, run rows, leases and cancel flags."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Table, and_, bindparam, func, insert, literal, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import SQLModel

from .. import cursors
from ..base import (
    ACTIVE_RUN_STATUSES,
    FrameEntry,
    Page,
    Queries,
    _page,
    first_as,
    is_active,
    operation,
    rows_as,
    table,
    values_of,
)
from ..engines.chain import Chain, Rows, Step
from ..engines.prepared import Prepared
from ..engines.transaction import Transaction
from ..tables import MessageRow, RunFrameRow, RunRow, ThreadRow, WebhookDeliveryRow
from .frames import FRAMES
from .usage import USAGE

_threads, _runs, _messages = table(ThreadRow), table(RunRow), table(MessageRow)
_frames = table(RunFrameRow)


def _all(of: Table, *leaving: str) -> tuple[str, ...]:
    return tuple(column.key for column in of.columns if column.key not in leaving)


_RUN, _THREAD = Rows(_runs, _all(_runs)), Rows(_threads, _all(_threads))
_MESSAGES = Rows(_messages, _all(_messages, "seq"))  # `seq`: numbered by the database
_webhooks = table(WebhookDeliveryRow)
_WEBHOOK = Rows(_webhooks, _all(_webhooks))

# The statements of a run's start and end, built once (see `base.table`).
_LOCK = (update(_threads)
         .where(_threads.c.id == bindparam("thread_id"), _threads.c.run_status == "idle")
         .values(run_status="waiting", current_run_id=bindparam("run_id"),
                 last_run_cancelled=False, last_run_error=None, pending_tool_calls=None,
                 updated_ms=bindparam("now")))
_LOCK_IDLE = _LOCK.where(_threads.c.last_completed_run_id.is_(None))
_LOCK_AFTER = _LOCK.where(_threads.c.last_completed_run_id == bindparam("last"))
# A continuation that answers a pause: only while the pause is still open (ending a pause,
# `end_pause`, marks the thread's last run cancelled), so its results and the cancellation's
# can never both be written.
_LOCK_PAUSED = _LOCK_AFTER.where(_threads.c.last_run_cancelled.is_(False))
_FINISH = (update(_runs).where(_runs.c.id == bindparam("run_id"))
           .values(status=bindparam("to_status"), finished_ms=bindparam("now"),
                   pending_tool_calls=bindparam("pending"), error=bindparam("run_error"),
                   first_token_ms=bindparam("first_token"),
                   lease_owner=None, lease_expires_ms=None))
_FINISH_FENCED = _FINISH.where(is_active(_runs.c.status),
                               _runs.c.lease_owner == bindparam("owner"))
_RELEASE = (update(_threads)
            .where(_threads.c.id == bindparam("thread_id"),
                   _threads.c.current_run_id == bindparam("run_id"))
            .values(run_status="idle", current_run_id=None,
                    last_completed_run_id=bindparam("run_id"),
                    last_run_cancelled=bindparam("cancelled"),
                    last_run_error=bindparam("thread_error"),
                    pending_tool_calls=bindparam("pending"), updated_ms=bindparam("now")))

# A run's start and end as chains (`engines.chain`: step by step on SQLite, one statement on
# PostgreSQL): the thread's lock (one of these), then the run and its input if it was taken;
# the run's end, fenced or not, then (if it matched) its answer, the rest of its log, its usage
# and the thread's release.
START = {name: Chain(Step(lock), [("new_run", _RUN), ("new_input", _MESSAGES),
                                   ("new_webhook", _WEBHOOK)])
         for name, lock in (("idle", _LOCK_IDLE), ("after", _LOCK_AFTER),
                            ("paused", _LOCK_PAUSED))}
START_ON_NEW_THREAD = Chain(None, [("new_thread", _THREAD), ("new_run", _RUN),
                                   ("new_input", _MESSAGES), ("new_webhook", _WEBHOOK)])
FINISH = {fenced: Chain(Step(finish), [("new_answer", _MESSAGES), ("new_frames", FRAMES),
                                       ("new_usage", USAGE)], [("released", Step(_RELEASE))])
          for fenced, finish in ((False, _FINISH), (True, _FINISH_FENCED))}
NEXT_QUEUED = Prepared(select(_runs.c.id)
                       .where(_runs.c.thread_id == bindparam("thread_id"),
                              _runs.c.status == "queued")
                       .order_by(_runs.c.created_ms, _runs.c.id).limit(1))
# A thread's runs from one back along the previous-run links (the thread's order), while they
# ended at or after `since`, at most `depth`: one query of a few primary-key lookups.
_CHAIN = (select(_runs.c.id, _runs.c.previous_run_id, literal(1).label("depth"))
          .where(_runs.c.id == bindparam("last"), _runs.c.finished_ms >= bindparam("since"))
          .cte("chain", recursive=True))
_CHAIN = _CHAIN.union_all(
    select(_runs.c.id, _runs.c.previous_run_id, _CHAIN.c.depth + 1)
    .where(_runs.c.id == _CHAIN.c.previous_run_id, _runs.c.finished_ms >= bindparam("since"),
           _CHAIN.c.depth < bindparam("depth")))
ENDED_SINCE = select(_CHAIN.c.id, _CHAIN.c.previous_run_id).order_by(_CHAIN.c.depth)
# The active runs flagged for cancellation (`request_cancel` flags only active ones): few, found
# by the status index, so one fixed statement serves any set of runs asked about.
CANCEL_FLAGGED = Prepared(select(_runs.c.id)
                          .where(or_(*(_runs.c.status == s for s in ACTIVE_RUN_STATUSES)),
                                 _runs.c.cancel_requested_ms.is_not(None)))


class RunQueries(Queries):

    @operation
    async def start_run(self, run: RunRow, inputs: Sequence[MessageRow], now: int,
                        last_completed_run_id: str | None, paused: bool = False,
                        webhook: WebhookDeliveryRow | None = None) -> str:
        """Take the thread's run lock, persist the run, its input and its `webhook` if it
        names one, in one transaction.

        The lock is taken only if the thread is idle *and* still has the `lastCompletedRunId`
        the caller validated the request against (every terminal state changes it), so a
        request can never start on a thread state it did not check, and a crash can never
        leave a lock without its run. Returns `started`, `conflict` (busy, or changed since
        it was read: re-read and decide) or `duplicate` (the run's idempotency key is taken).
        `paused`: the thread was validated with pending tool calls, which must still be open.
        """
        kind = "idle" if last_completed_run_id is None else "paused" if paused else "after"
        params = {"thread_id": run.thread_id, "last": last_completed_run_id, "run_id": run.id,
                  "now": now}

        def work(connection: Transaction) -> str:
            locked = START[kind].write(connection, params, {
                "new_run": [values_of(run)], "new_input": [values_of(m) for m in inputs],
                "new_webhook": _rows(webhook)})
            return "started" if locked == 1 else "conflict"

        try:
            return await self.hot(work)
        except IntegrityError:
            return "duplicate"

    @operation
    async def start_run_on_new_thread(self, thread: ThreadRow, messages: Sequence[MessageRow],
                                      run: RunRow, inputs: Sequence[MessageRow],
                                      webhook: WebhookDeliveryRow | None = None) -> None:
        """Create a thread with its first run (and its `webhook`, if it names one) already
        holding its lock, in one transaction:
        nobody can know a thread before it exists, so there is nothing to lock against, and a
        new-thread start costs one commit instead of a thread insert, a re-read and a lock."""
        thread.run_status, thread.current_run_id = "waiting", run.id

        def work(connection: Transaction) -> None:
            START_ON_NEW_THREAD.write(connection, {}, {
                "new_thread": [values_of(thread)], "new_run": [values_of(run)],
                "new_input": [values_of(m) for m in [*messages, *inputs]],
                "new_webhook": _rows(webhook)})

        await self.hot(work)

    @operation
    async def next_queued_run(self, thread_id: str) -> RunRow | None:
        """The oldest run waiting for the thread (`multitaskStrategy: enqueue`). Asked after
        every run's end, and almost always answered "none": a key lookup first, the run only if
        there is one."""
        found = await self.transaction(
            lambda connection: NEXT_QUEUED.rows(connection, {"thread_id": thread_id}))
        return await self.get_run(found[0][0]) if found else None

    @operation
    async def enqueue_run(self, run: RunRow, webhook: WebhookDeliveryRow | None = None) -> None:
        """Write a queued run (and its `webhook`, if it names one) while holding its thread's
        row lock (PostgreSQL; SQLite has one writer at a time anyway). A run ending on the
        thread looks for queued runs in its end's transaction, after releasing the thread
        (`finish_run`; on PostgreSQL just after its commit): it either waits for this
        transaction, or begins its lookup after this commit, and then sees the run, or it
        released the thread before this commit, and then the enqueuer's own `promote_next`
        finds the thread idle."""
        lock = select(_threads.c.id).where(_threads.c.id == run.thread_id).with_for_update()

        def work(tx: Transaction) -> None:
            tx.execute(lock).all()
            tx.execute(insert(_runs), values_of(run))
            if webhook is not None:
                tx.execute(insert(_webhooks), values_of(webhook))

        await self.transaction(work)

    @operation
    async def promote_run(self, run_id: str, thread_id: str, last_completed_run_id: str | None,
                          inputs: Sequence[MessageRow], owner: str, lease_until: int,
                          now: int) -> bool:
        """Start a queued run: take the thread's lock (idle and still after
        `last_completed_run_id`, as `start_run`), make the run `running` under `owner`'s lease
        after that run, and write its input, in one transaction; False if the thread is busy
        or changed, or the run is no longer queued (cancelled, or promoted by another
        process)."""
        lock = _LOCK_IDLE if last_completed_run_id is None else _LOCK_AFTER
        start = (update(_runs).where(_runs.c.id == run_id, _runs.c.status == "queued")
                 .values(status="running", started_ms=now, lease_owner=owner,
                         lease_expires_ms=lease_until, previous_run_id=last_completed_run_id))

        def work(tx: Transaction) -> bool:
            locked = tx.execute(lock, {"thread_id": thread_id, "last": last_completed_run_id,
                                       "run_id": run_id, "now": now})
            started = tx.execute(start)
            if locked.rowcount != 1 or started.rowcount != 1:
                tx.rollback()
                return False
            if inputs:
                tx.execute(insert(_messages), [values_of(m) for m in inputs])
            return True

        return await self.transaction(work)

    @operation
    async def set_run_model(self, run_id: str, model: str) -> None:
        """The model that answered the run, when a fallback did (the run is written with the
        model it expects to call)."""
        await self._update(run_id, model=model)

    @operation
    async def finish_run(
        self,
        run_id: str,
        thread_id: str,
        status: str,
        now: int,
        *,
        pending: list[dict[str, Any]] | None = None,
        error: Mapping[str, Any] | None = None,
        owner: str | None = None,
        frames: Sequence[FrameEntry] = (),
        usage: Sequence[dict[str, Any]] = (),
        first_token_ms: int | None = None,
        queued: list[str] | None = None,
        messages: Sequence[MessageRow] = (),
    ) -> bool:
        """Record a run's terminal state, the rest of its log, and release the thread, in one
        transaction: once a run reads as finished, its log is complete on disk.

        Every terminal state sets `lastCompletedRunId`: the clients send it back as
        `previousRunId` whatever the outcome. With `owner` (a fencing token) nothing is written
        unless that process still holds the run's lease and the run is still active; a reaper
        that already failed the run wins, and False is returned. `usage`: the run's
        `run_usage` rows (`store.queries.usage.usage_rows`), whatever the terminal state;
        `first_token_ms`: when its first streamed token was logged, if one was. `messages`: the
        run's messages not written yet (its answer, `RunRecorder.finish`). `queued`: a
        list to put the id of the thread's oldest queued run in, if it has one, looked up in
        the same transaction after the thread is released (on PostgreSQL right after it, the
        end being one statement): `enqueue_run` explains why nothing queued is missed.
        """
        finishing = {"run_id": run_id, "owner": owner, "to_status": status, "now": now,
                     "pending": pending, "run_error": error, "first_token": first_token_ms}
        releasing = _release_values(run_id, thread_id, status, now, pending, error)

        def work(connection: Transaction) -> bool:
            if FINISH[owner is not None].write(connection, {**finishing, **releasing}, {
                    "new_answer": [values_of(m) for m in messages],
                    "new_frames": [{"run_id": run_id, "seq": seq, "ts_ms": ts, "frame": frame}
                                   for seq, ts, frame in frames],
                    "new_usage": usage}) != 1:
                return False
            _queued_after(connection, thread_id, queued)
            return True

        try:
            return await self.hot(work)
        except IntegrityError:  # another writer took these log positions: we were fenced
            return False

    @operation
    async def end_pause(self, run_id: str, thread_id: str, now: int, error: Mapping[str, Any],
                        results: MessageRow) -> bool:
        """End a paused run (`awaiting_input`) as cancelled and write `results` (its pending
        calls answered with errors) to the thread, in one transaction; the thread stays idle,
        without pending calls, its last run cancelled.

        Only while the pause is the thread's current state: the thread idle, that run its last,
        not already ended (False otherwise, and nothing is written). A continuation racing it
        loses on `last_run_cancelled` (`start_run`'s `paused` lock), or it wins and this
        finds the thread moved on.
        """
        release = (update(_threads).where(_threads.c.id == thread_id,
                                          _threads.c.run_status == "idle",
                                          _threads.c.last_completed_run_id == run_id,
                                          _threads.c.last_run_cancelled.is_(False))
                   .values(last_run_cancelled=True, last_run_error=None,
                           pending_tool_calls=None, updated_ms=now))
        end = (update(_runs).where(_runs.c.id == run_id, _runs.c.status == "awaiting_input")
               .values(status="cancelled", error=error, pending_tool_calls=None))

        def work(tx: Transaction) -> bool:
            released, ended = tx.execute(release), tx.execute(end)
            if released.rowcount != 1 or ended.rowcount != 1:
                tx.rollback()
                return False
            tx.execute(insert(_messages), [values_of(results)])
            return True

        return await self.transaction(work)

    @operation
    async def end_orphaned_run(self, run: RunRow, now: int, status: str,
                               error: Mapping[str, Any], frame: Mapping[str, Any],
                               salvaged: Sequence[FrameEntry] = (),
                               shown_ahead: int = 0) -> bool:
        """End a run whose owner process is gone (its lease expired), from any process.

        Fenced on the lease as it was read: if the owner renewed it meanwhile (it was only
        slow), nothing happens. In the same transaction, the `salvaged` entries that follow the
        last persisted frame without a gap are saved (what the dead owner had shown and not
        written: its live tail, read from where other processes followed it), then the
        terminal frame, `shown_ahead` positions past the last persisted one at least: its
        owner may have shown that many more that nobody can read back, and no position may
        name two events. A reconnect replays what was saved, then this frame.
        """
        r = _runs
        owner = r.c.lease_owner
        end = (update(r)
               .where(r.c.id == run.id, r.c.status.in_(ACTIVE_RUN_STATUSES),
                      owner.is_(None) if run.lease_owner is None else owner == run.lease_owner,
                      or_(r.c.lease_expires_ms < now, r.c.lease_expires_ms.is_(None)))
               .values(status=status, finished_ms=now, error=error, lease_owner=None,
                       lease_expires_ms=None))
        last = select(func.max(_frames.c.seq)).where(_frames.c.run_id == run.id)

        def work(tx: Transaction) -> bool:
            if tx.execute(end).rowcount != 1:
                tx.rollback()
                return False
            persisted = tail = tx.execute(last).scalar_one_or_none() or 0
            kept = []
            for seq, ts, salvaged_frame in salvaged:
                if seq == tail + 1:
                    kept.append({"run_id": run.id, "seq": seq, "ts_ms": ts,
                                 "frame": salvaged_frame})
                    tail = seq
            if kept:
                tx.execute(insert(_frames), kept)
            seq = max(tail, persisted + shown_ahead) + 1
            tx.execute(insert(_frames).values(run_id=run.id, seq=seq, ts_ms=now, frame=frame))
            tx.execute(_RELEASE, _release_values(run.id, run.thread_id, status, now, None,
                                                 error))
            return True

        return await self.transaction(work)

    async def _update(self, run_id: str, **values: Any) -> None:
        statement = update(_runs).where(_runs.c.id == run_id).values(**values)
        await self.transaction(lambda tx: tx.execute(statement))

    # -- runs ---------------------------------------------------------------------------------

    @operation
    async def get_run(self, run_id: str) -> RunRow | None:
        query = select(_runs).where(_runs.c.id == run_id)
        return first_as(RunRow, await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def get_run_by_client_id(self, project_id: str, client_id: str) -> RunRow | None:
        """The project's run an AG-UI client calls `client_id` (its `runId`), else a run that has
        no such name (begun by the Tambo endpoints, or before AG-UI names existed) whose own id
        it is."""
        return await self.by_client_id(RunRow, project_id, client_id)

    @operation
    async def find_run_by_idempotency_key(self, thread_id: str, key: str) -> RunRow | None:
        query = (select(_runs).where(_runs.c.thread_id == thread_id,
                                     _runs.c.idempotency_key == key).limit(1))
        return first_as(RunRow, await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def runs_ended_since(self, last_run_id: str, since_ms: int,
                               limit: int) -> list[tuple[str, str | None]]:
        """`ENDED_SINCE`: each run from `last_run_id` back with the run before it, newest first:
        the runs a request that arrived at `since_ms` could not see end (`multitask`)."""
        params = {"last": last_run_id, "since": since_ms, "depth": limit}
        rows = await self.transaction(lambda tx: tx.execute(ENDED_SINCE, params).all())
        return [(row[0], row[1]) for row in rows]

    @operation
    async def forget_run_idempotency_key(self, run_id: str) -> None:
        """Let an expired key be used again on the thread (its unique constraint)."""
        await self._update(run_id, idempotency_key=None)

    @operation
    async def list_runs(self, thread_id: str, limit: int, cursor: str | None) -> Page:
        r = _runs
        query = select(r).where(r.c.thread_id == thread_id)
        if cursor:
            created, run_id = cursors.decode(cursor, (int, str))
            query = query.where(or_(r.c.created_ms < created,
                                    and_(r.c.created_ms == created, r.c.id < run_id)))
        query = query.order_by(r.c.created_ms.desc(), r.c.id.desc()).limit(limit + 1)
        rows = rows_as(RunRow, await self.transaction(lambda tx: tx.execute(query).all()))
        return _page(rows, limit, lambda row: [row.created_ms, row.id])

    @operation
    async def renew_leases(self, run_ids: Sequence[str], owner: str, until: int) -> set[str]:
        """Extend `owner`'s leases; returns the runs it still holds (the others were reaped)."""
        if not run_ids:
            return set()
        r, ids = _runs, list(run_ids)
        renew = (update(r).where(r.c.id.in_(ids), r.c.lease_owner == owner,
                                 r.c.status.in_(ACTIVE_RUN_STATUSES))
                 .values(lease_expires_ms=until))
        held = select(r.c.id).where(r.c.id.in_(ids), r.c.lease_owner == owner)

        def work(tx: Transaction) -> set[str]:
            tx.execute(renew)
            return set(tx.execute(held).scalars())

        return await self.transaction(work)

    @operation
    async def expired_runs(self, now: int) -> list[RunRow]:
        # Queued runs have no owner and no lease: they wait for their thread, not a process.
        r = _runs
        query = select(r).where(r.c.status == "running",
                                or_(r.c.lease_expires_ms < now, r.c.lease_expires_ms.is_(None)))
        return rows_as(RunRow, await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def request_cancel(self, run_id: str, now: int) -> bool:
        """Flag an active run for cancellation by whichever process owns it."""
        r = _runs
        flag = (update(r).where(r.c.id == run_id, r.c.status.in_(ACTIVE_RUN_STATUSES),
                                r.c.cancel_requested_ms.is_(None))
                .values(cancel_requested_ms=now))
        return await self.transaction(lambda tx: tx.execute(flag).rowcount == 1)

    @operation
    async def cancel_requested(self, run_ids: Sequence[str]) -> list[str]:
        """Which of these runs another process asked to cancel: one query for all of them, in
        one store transaction. Every process polls this every `cancel_poll_seconds` while it
        runs anything, so it is one more member of the group commit's trip on SQLite (not a
        hold of the one connection of its own, which every start would queue behind), and on
        PostgreSQL one statement run `alone`, without `BEGIN` and `COMMIT`."""
        if not run_ids:
            return []
        flagged = await self.alone(lambda connection: CANCEL_FLAGGED.rows(connection, {}))
        wanted = set(run_ids)
        return [run_id for (run_id,) in flagged if run_id in wanted]

    @operation
    async def touch_watched(self, run_id: str, now: int) -> None:
        await self._update(run_id, watched_ms=now)


def _rows(row: SQLModel | None) -> list[dict[str, Any]]:
    return [] if row is None else [values_of(row)]


def _queued_after(connection: Transaction, thread_id: str, queued: list[str] | None) -> None:
    """The thread's oldest queued run into `queued`, if asked for (`finish_run`)."""
    if queued is not None:
        queued[:] = [row[0] for row in NEXT_QUEUED.rows(connection, {"thread_id": thread_id})]


def _release_values(run_id: str, thread_id: str, status: str, now: int,
                    pending: list[dict[str, Any]] | None,
                    error: Mapping[str, Any] | None) -> dict[str, Any]:
    return {"thread_id": thread_id, "run_id": run_id, "cancelled": status == "cancelled",
            "thread_error": _thread_error(error), "pending": pending, "now": now}


def _thread_error(error: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not error or error.get("code") == "CANCELLED":
        return None
    return {"message": error.get("message", ""), "code": error.get("code")}
