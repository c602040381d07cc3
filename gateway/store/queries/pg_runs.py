"""A run's start and end on PostgreSQL: the writes of `runs.RunQueries.start_run`,
`start_run_on_new_thread` and `finish_run`, each as one statement (`one_statement` says why
and how). SQLite keeps its transactions (`engines.sqlite`), where statements cost no trip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Table, Update, select
from sqlalchemy.sql.selectable import NamedFromClause

from ..base import table, values_of
from ..engines.one_statement import Guard, OneStatement, Rows
from ..engines.transaction import Transaction
from ..tables import MessageRow, RunRow, RunUsageRow, ThreadRow
from .frames import ROWS as FRAME_ROWS

_threads, _runs, _messages = table(ThreadRow), table(RunRow), table(MessageRow)
_usage = table(RunUsageRow)


def _all(of: Table, *leaving: str) -> tuple[str, ...]:
    return tuple(column.key for column in of.columns if column.key not in leaving)


_RUN, _THREAD = Rows(_runs, _all(_runs)), Rows(_threads, _all(_threads))
_MESSAGES = Rows(_messages, _all(_messages, "seq"))  # `seq`: numbered by the database
_FRAMES = FRAME_ROWS


def _user_key(given: NamedFromClause) -> Any:
    """The user scope of the usage row's thread, copied in by the insert (`usage._INSERT`)."""
    return (select(_threads.c.user_key).where(_threads.c.id == given.c.thread_id)
            .scalar_subquery())


_USAGE = Rows(_usage, _all(_usage, "user_key"), (("user_key", _user_key),))


def start_statements(locks: Mapping[str, Update]) -> dict[str, OneStatement]:
    """`start_run`'s: the thread's lock (one of `locks`), then the run and its input if it
    was taken."""
    return {name: OneStatement(Guard("locked", lock.returning(_threads.c.id)),
                               [("new_run", _RUN), ("new_input", _MESSAGES)])
            for name, lock in locks.items()}


NEW_THREAD = OneStatement(None, [("new_thread", _THREAD), ("new_run", _RUN),
                                 ("new_input", _MESSAGES)])


def finish_statements(finish: Update, fenced: Update,
                      release: Update) -> dict[bool, OneStatement]:
    """`finish_run`'s, fenced or not: the run's end, then (if it matched) its answer, the rest
    of its log, its usage and the thread's release."""
    return {is_fenced: OneStatement(
        Guard("finished", statement.returning(_runs.c.id)),
        [("new_answer", _MESSAGES), ("new_frames", _FRAMES), ("new_usage", _USAGE)],
        [("released", release)])
        for is_fenced, statement in ((False, finish), (True, fenced))}


def fits(messages: Sequence[MessageRow]) -> bool:
    """Messages the statements can write: none numbered already (`seq` is the database's)."""
    return all(message.seq is None for message in messages)


def start(statement: OneStatement, connection: Transaction, params: dict[str, Any],
          run: RunRow, inputs: Sequence[MessageRow]) -> int:
    """How many thread locks were taken (1: the run and its input are written)."""
    return statement.execute(connection, params, {
        "new_run": [values_of(run)], "new_input": [values_of(m) for m in inputs]})


def start_on_new_thread(connection: Transaction, thread: ThreadRow, run: RunRow,
                        messages: Sequence[MessageRow]) -> None:
    NEW_THREAD.execute(connection, {}, {
        "new_thread": [values_of(thread)], "new_run": [values_of(run)],
        "new_input": [values_of(m) for m in messages]})


def finish(statement: OneStatement, connection: Transaction, params: dict[str, Any],
           messages: Sequence[MessageRow], frames: Sequence[tuple[int, int, Any]],
           usage: Sequence[dict[str, Any]]) -> int:
    """1 if the run was ended (and the rest written), 0 if fenced out."""
    run_id = params["run_id"]
    return statement.execute(connection, params, {
        "new_answer": [values_of(m) for m in messages],
        "new_frames": [{"run_id": run_id, "seq": seq, "ts_ms": ts, "frame": frame}
                       for seq, ts, frame in frames],
        "new_usage": usage})
