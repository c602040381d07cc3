"""Chorus: agents' connection strings (by the secret's hash) and the messages that wait for
their channel's thread."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, update
from sqlmodel import select

from .base import Queries, operation
from .tables import ChorusConnectionRow, ChorusDeliveryRow


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
        """The thread's oldest waiting message."""
        async with self.session() as session:
            query = (select(ChorusDeliveryRow).where(ChorusDeliveryRow.thread_id == thread_id)
                     .order_by(ChorusDeliveryRow.created_ms, ChorusDeliveryRow.id).limit(1))
            return (await session.exec(query)).first()

    @operation
    async def delete_chorus_delivery(self, delivery_id: str) -> None:
        async with self.session() as session:
            await session.execute(delete(ChorusDeliveryRow).where(
                ChorusDeliveryRow.id == delivery_id))
            await session.commit()
