"""Chorus: agents' connection strings (by the secret's hash) and the messages that wait for
their channel's thread, with the claim of the process starting one (so that another process
starts it when that one died: `dialects/chorus/routes_delivery.py`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, or_, select, update

from ..base import Queries, first_as, operation, row_as, rows_as, table
from ..tables import ChorusConnectionRow, ChorusDeliveryRow, RunRow, ThreadRow

_connections, _deliveries = table(ChorusConnectionRow), table(ChorusDeliveryRow)
_runs, _threads = table(RunRow), table(ThreadRow)
# A run in one of these has not ended (a started delivery waits for its end).
_GOING = ("queued", "running")


class ChorusQueries(Queries):

    @operation
    async def find_chorus_connection(self, secret_hash: str) -> ChorusConnectionRow | None:
        """The connection with this secret's hash, revoked ones included (the caller judges)."""
        query = select(_connections).where(_connections.c.secret_hash == secret_hash).limit(1)
        return first_as(ChorusConnectionRow,
                        await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def list_chorus_connections(self) -> Sequence[ChorusConnectionRow]:
        query = select(_connections).order_by(_connections.c.created_ms)
        return rows_as(ChorusConnectionRow,
                       await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def revoke_chorus_connection(self, connection_id: str, now: int) -> bool:
        """False if there is no such connection or it was revoked already."""
        statement = (update(_connections)
                     .where(_connections.c.id == connection_id,
                            _connections.c.revoked_ms.is_(None))
                     .values(revoked_ms=now))
        return await self.transaction(lambda tx: tx.execute(statement).rowcount == 1)

    @operation
    async def next_chorus_delivery(self, thread_id: str) -> ChorusDeliveryRow | None:
        """The thread's oldest waiting message (not started yet)."""
        d = _deliveries
        query = (select(d).where(d.c.thread_id == thread_id, d.c.run_id.is_(None))
                 .order_by(d.c.created_ms, d.c.id).limit(1))
        return first_as(ChorusDeliveryRow,
                        await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def delete_chorus_delivery(self, delivery_id: str) -> None:
        statement = delete(_deliveries).where(_deliveries.c.id == delivery_id)
        await self.transaction(lambda tx: tx.execute(statement))

    @operation
    async def take_chorus_delivery(self, delivery_id: str) -> bool:
        """Delete a started message's row to report its run's end: True for the one caller that
        deleted it (the others must not report it again)."""
        statement = delete(_deliveries).where(_deliveries.c.id == delivery_id)
        return await self.transaction(lambda tx: tx.execute(statement).rowcount == 1)

    @operation
    async def start_chorus_delivery(self, delivery_id: str, run_id: str, callback: str,
                                    owner: str | None = None, until: int | None = None) -> None:
        """The message's run started: keep its row, with the run's id and its callback only
        (its MCP servers' headers are no longer needed), until the run's end is reported;
        claimed by `owner` (the process relaying the run) until `until`, renewed meanwhile."""
        statement = (update(_deliveries).where(_deliveries.c.id == delivery_id)
                     .values(run_id=run_id, payload={"callback": callback}, claimed_by=owner,
                             claim_until_ms=until))
        await self.transaction(lambda tx: tx.execute(statement))

    @operation
    async def ended_chorus_deliveries(self, now: int, limit: int
                                      ) -> list[tuple[ChorusDeliveryRow, RunRow | None]]:
        """Started messages whose run has ended and that no live claim holds, with the run:
        nobody is reporting their end (the process relaying them died). A message whose run
        is gone (its thread was deleted, by hand or by retention, before its end was
        reported) comes with None: left alone, it would hold its channel's next message back
        from the sweeper for good (`stranded_chorus_threads`)."""
        d, r = _deliveries, _runs
        runs = select(r).subquery("run")
        query = (select(d, runs)
                 .join(runs, runs.c.id == d.c.run_id, isouter=True)
                 .where(d.c.run_id.is_not(None),
                        or_(runs.c.id.is_(None), runs.c.status.not_in(_GOING)),
                        or_(d.c.claimed_by.is_(None), d.c.claim_until_ms < now))
                 .order_by(d.c.created_ms).limit(limit))
        width = len(d.columns)

        def found(rows: Sequence[Sequence[object]]) -> list[tuple[ChorusDeliveryRow,
                                                                   RunRow | None]]:
            pairs = []
            for row in rows:
                delivery = dict(zip(d.columns.keys(), row[:width], strict=True))
                run = dict(zip(r.columns.keys(), row[width:], strict=True))
                pairs.append((row_as(ChorusDeliveryRow, delivery),
                              row_as(RunRow, run) if run["id"] is not None else None))
            return pairs

        return found(await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def claim_chorus_delivery(self, delivery_id: str, owner: str, until: int,
                                    now: int) -> bool:
        """Claim a waiting message for `owner` until `until`: False while another process's
        claim holds (it is starting the message's run), or when the message is gone."""
        d = _deliveries
        statement = (update(d).where(d.c.id == delivery_id,
                                     or_(d.c.claimed_by.is_(None), d.c.claimed_by == owner,
                                         d.c.claim_until_ms < now))
                     .values(claimed_by=owner, claim_until_ms=until))
        return await self.transaction(lambda tx: tx.execute(statement).rowcount == 1)

    @operation
    async def release_chorus_claim(self, delivery_id: str, owner: str) -> None:
        """Give a claim up (the thread was busy): the message waits for anyone again."""
        d = _deliveries
        statement = (update(d).where(d.c.id == delivery_id, d.c.claimed_by == owner)
                     .values(claimed_by=None, claim_until_ms=None))
        await self.transaction(lambda tx: tx.execute(statement))

    @operation
    async def stranded_chorus_threads(self, now: int, limit: int) -> list[tuple[str, str]]:
        """(project, thread) of idle threads with a message waiting that no live claim holds:
        nobody is starting it (the process that stored it died, or its run's end woke no one).
        A thread whose last started message's end is not reported yet waits for that first,
        so a channel hears of its messages in order."""
        d, t = _deliveries, _threads
        other = d.alias("other")
        started = (select(other.c.id)
                   .where(other.c.thread_id == t.c.id, other.c.run_id.is_not(None))
                   .exists())
        query = (select(t.c.project_id, t.c.id).distinct()
                 .join(d, d.c.thread_id == t.c.id)
                 .where(t.c.run_status == "idle", d.c.run_id.is_(None),
                        or_(d.c.claimed_by.is_(None), d.c.claim_until_ms < now), ~started)
                 .limit(limit))
        rows = await self.transaction(lambda tx: tx.execute(query).all())
        return [(row[0], row[1]) for row in rows]
