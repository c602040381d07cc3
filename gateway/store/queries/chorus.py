"""Chorus: agents' connection strings (by the secret's hash) and the messages that wait for
their channel's thread, with the claim of the process starting one (so that another process
starts it when that one died: `dialects/chorus/routes_delivery.py`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, or_, update
from sqlalchemy.orm import aliased
from sqlmodel import select

from ..base import Queries, operation
from ..tables import ChorusConnectionRow, ChorusDeliveryRow, RunRow, ThreadRow

# A run in one of these has not ended (a started delivery waits for its end).
_GOING = ("queued", "running")


class ChorusQueries(Queries):

    @operation
    async def find_chorus_connection(self, secret_hash: str) -> ChorusConnectionRow | None:
        """The connection with this secret's hash, revoked ones included (the caller judges)."""
        async with self.session() as session:
            query = select(ChorusConnectionRow).where(
                ChorusConnectionRow.secret_hash == secret_hash)
            return (await session.exec(query)).first()

    @operation
    async def list_chorus_connections(self) -> Sequence[ChorusConnectionRow]:
        async with self.session() as session:
            query = select(ChorusConnectionRow).order_by(ChorusConnectionRow.created_ms)
            return (await session.exec(query)).all()

    @operation
    async def revoke_chorus_connection(self, connection_id: str, now: int) -> bool:
        """False if there is no such connection or it was revoked already."""
        async with self.session() as session:
            result = await session.execute(update(ChorusConnectionRow).where(
                ChorusConnectionRow.id == connection_id,
                ChorusConnectionRow.revoked_ms.is_(None)).values(revoked_ms=now))
            await session.commit()
            return result.rowcount == 1

    @operation
    async def next_chorus_delivery(self, thread_id: str) -> ChorusDeliveryRow | None:
        """The thread's oldest waiting message (not started yet)."""
        async with self.session() as session:
            query = (select(ChorusDeliveryRow).where(ChorusDeliveryRow.thread_id == thread_id,
                                                     ChorusDeliveryRow.run_id.is_(None))
                     .order_by(ChorusDeliveryRow.created_ms, ChorusDeliveryRow.id).limit(1))
            return (await session.exec(query)).first()

    @operation
    async def delete_chorus_delivery(self, delivery_id: str) -> None:
        async with self.session() as session:
            await session.execute(delete(ChorusDeliveryRow).where(
                ChorusDeliveryRow.id == delivery_id))
            await session.commit()

    @operation
    async def take_chorus_delivery(self, delivery_id: str) -> bool:
        """Delete a started message's row to report its run's end: True for the one caller that
        deleted it (the others must not report it again)."""
        async with self.session() as session:
            result = await session.execute(delete(ChorusDeliveryRow).where(
                ChorusDeliveryRow.id == delivery_id))
            await session.commit()
            return result.rowcount == 1

    @operation
    async def start_chorus_delivery(self, delivery_id: str, run_id: str, callback: str,
                                    owner: str | None = None, until: int | None = None) -> None:
        """The message's run started: keep its row, with the run's id and its callback only
        (its MCP servers' headers are no longer needed), until the run's end is reported;
        claimed by `owner` (the process relaying the run) until `until`, renewed meanwhile."""
        async with self.session() as session:
            await session.execute(update(ChorusDeliveryRow).where(
                ChorusDeliveryRow.id == delivery_id).values(
                    run_id=run_id, payload={"callback": callback}, claimed_by=owner,
                    claim_until_ms=until))
            await session.commit()

    @operation
    async def ended_chorus_deliveries(self, now: int, limit: int
                                      ) -> list[tuple[ChorusDeliveryRow, RunRow | None]]:
        """Started messages whose run has ended and that no live claim holds, with the run:
        nobody is reporting their end (the process relaying them died). A message whose run
        is gone (its thread was deleted, by hand or by retention, before its end was
        reported) comes with None: left alone, it would hold its channel's next message back
        from the sweeper for good (`stranded_chorus_threads`)."""
        query = (select(ChorusDeliveryRow, RunRow)
                 .join(RunRow, RunRow.id == ChorusDeliveryRow.run_id, isouter=True)
                 .where(ChorusDeliveryRow.run_id.is_not(None),
                        or_(RunRow.id.is_(None), RunRow.status.not_in(_GOING)),
                        or_(ChorusDeliveryRow.claimed_by.is_(None),
                            ChorusDeliveryRow.claim_until_ms < now))
                 .order_by(ChorusDeliveryRow.created_ms).limit(limit))
        async with self.session() as session:
            return [(delivery, run) for delivery, run in (await session.exec(query)).all()]

    @operation
    async def claim_chorus_delivery(self, delivery_id: str, owner: str, until: int,
                                    now: int) -> bool:
        """Claim a waiting message for `owner` until `until`: False while another process's
        claim holds (it is starting the message's run), or when the message is gone."""
        async with self.session() as session:
            result = await session.execute(update(ChorusDeliveryRow).where(
                ChorusDeliveryRow.id == delivery_id,
                or_(ChorusDeliveryRow.claimed_by.is_(None),
                    ChorusDeliveryRow.claimed_by == owner,
                    ChorusDeliveryRow.claim_until_ms < now)
            ).values(claimed_by=owner, claim_until_ms=until))
            await session.commit()
            return result.rowcount == 1

    @operation
    async def release_chorus_claim(self, delivery_id: str, owner: str) -> None:
        """Give a claim up (the thread was busy): the message waits for anyone again."""
        async with self.session() as session:
            await session.execute(update(ChorusDeliveryRow).where(
                ChorusDeliveryRow.id == delivery_id, ChorusDeliveryRow.claimed_by == owner
            ).values(claimed_by=None, claim_until_ms=None))
            await session.commit()

    @operation
    async def stranded_chorus_threads(self, now: int, limit: int) -> list[tuple[str, str]]:
        """(project, thread) of idle threads with a message waiting that no live claim holds:
        nobody is starting it (the process that stored it died, or its run's end woke no one).
        A thread whose last started message's end is not reported yet waits for that first,
        so a channel hears of its messages in order."""
        other = aliased(ChorusDeliveryRow)
        started = (select(other.id)
                   .where(other.thread_id == ThreadRow.id, other.run_id.is_not(None))
                   .exists())
        query = (select(ThreadRow.project_id, ThreadRow.id).distinct()
                 .join(ChorusDeliveryRow, ChorusDeliveryRow.thread_id == ThreadRow.id)
                 .where(ThreadRow.run_status == "idle", ChorusDeliveryRow.run_id.is_(None),
                        or_(ChorusDeliveryRow.claimed_by.is_(None),
                            ChorusDeliveryRow.claim_until_ms < now), ~started)
                 .limit(limit))
        async with self.session() as session:
            return [(project, thread) for project, thread in (await session.exec(query)).all()]
