"""Components of a thread, their props and their revisioned state, and the states they had
as of earlier messages (for forks)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import func, insert, select, update

from ..base import Fence, Queries, first_as, lease_held, operation, rows_as, table, values_of
from ..engines.transaction import Transaction
from ..tables import ComponentRow, ComponentStateHistoryRow, MessageRow

_components, _history = table(ComponentRow), table(ComponentStateHistoryRow)
_messages = table(MessageRow)


def _put(tx: Transaction, row: ComponentRow, fence: Fence | None) -> bool:
    if not lease_held(tx, fence):
        tx.rollback()
        return False
    refreshed = tx.execute(update(_components).where(_components.c.id == row.id)
                           .values(props=row.props, name=row.name, message_id=row.message_id))
    if refreshed.rowcount == 0:
        row.message_seq = _newest_message(tx, row.thread_id)
        tx.execute(insert(_components), values_of(row))
    return True


def _set_state(tx: Transaction, current: ComponentRow, state: dict[str, Any], now: int) -> bool:
    newest = _newest_message(tx, current.thread_id) or 0
    result = tx.execute(update(_components)
                        .where(_components.c.id == current.id,
                               _components.c.revision == current.revision)
                        .values(state=state, revision=current.revision + 1, updated_ms=now,
                                message_seq=newest))
    if result.rowcount != 1:
        tx.rollback()
        return False
    if (current.message_seq or 0) < newest:
        tx.execute(insert(_history).values(
            component_id=current.id, revision=current.revision, thread_id=current.thread_id,
            state=current.state, message_seq=current.message_seq or 0))
    return True


def _newest_message(tx: Transaction, thread_id: str) -> int | None:
    """The `seq` of the thread's newest message (None: it has none)."""
    query = select(func.max(_messages.c.seq)).where(_messages.c.thread_id == thread_id)
    newest: int | None = tx.execute(query).scalar_one_or_none()
    return newest


class ComponentQueries(Queries):

    @operation
    async def components_of(self, thread_id: str) -> dict[str, ComponentRow]:
        query = select(_components).where(_components.c.thread_id == thread_id)
        rows = rows_as(ComponentRow, await self.transaction(lambda tx: tx.execute(query).all()))
        return {row.id: row for row in rows}

    @operation
    async def get_component(self, thread_id: str, component_id: str) -> ComponentRow | None:
        query = select(_components).where(_components.c.id == component_id,
                                          _components.c.thread_id == thread_id)
        return first_as(ComponentRow, await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def put_component(self, row: ComponentRow, fence: Fence | None = None) -> bool:
        """Create the component, or refresh its props, name and message if it exists.

        Never touches an existing row's state, revision or schema: after creation the state
        belongs to `set_component_state`, so a run finishing its props cannot undo an update.
        """
        return await self.transaction(lambda tx: _put(tx, row, fence))

    @operation
    async def set_component_state(self, current: ComponentRow, state: dict[str, Any],
                                  now: int) -> bool:
        """Compare-and-set: store `state` as revision `current.revision + 1`, only if the
        component is still at `current.revision` (the row as the caller read it); False means
        another writer got there first.

        If a message arrived on the thread since `current`'s state was written, that state was
        the thread's state as of that message: it is kept in `ComponentStateHistoryRow` (in the
        same transaction) for a fork at that message to copy.
        """
        return await self.transaction(lambda tx: _set_state(tx, current, state, now))

    @operation
    async def component_states_as_of(self, component_ids: Collection[str], message_seq: int
                                     ) -> dict[str, ComponentStateHistoryRow]:
        """Of these components, the kept states that held at message `message_seq` (the newest
        kept state of each written at or before it); a component without one is absent."""
        if not component_ids:
            return {}
        h = _history
        query = (select(h).where(h.c.component_id.in_(list(component_ids)),
                                 h.c.message_seq <= message_seq)
                 .order_by(h.c.revision))
        rows = rows_as(ComponentStateHistoryRow,
                       await self.transaction(lambda tx: tx.execute(query).all()))
        return {row.component_id: row for row in rows}
