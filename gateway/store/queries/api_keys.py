"""Managed API keys: created, listed and revoked by `gateway keys`, looked up by their hash."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, or_, update
from sqlmodel import select

from ..base import Queries, operation, table
from ..tables import ApiKeyRow

_keys = table(ApiKeyRow)


class ApiKeyQueries(Queries):

    @operation
    async def add_api_key(self, row: ApiKeyRow) -> None:
        async with self.session() as session:
            session.add(row)
            await session.commit()

    @operation
    async def find_api_key(self, key_hash: str) -> ApiKeyRow | None:
        """The key with this hash, revoked or expired ones included (the caller judges)."""
        async with self.session() as session:
            result = await session.exec(select(ApiKeyRow).where(ApiKeyRow.key_hash == key_hash))
            return result.first()

    @operation
    async def list_api_keys(self, project_id: str | None = None) -> Sequence[ApiKeyRow]:
        query = select(ApiKeyRow).order_by(ApiKeyRow.project_id, ApiKeyRow.created_ms)
        if project_id is not None:
            query = query.where(ApiKeyRow.project_id == project_id)
        async with self.session() as session:
            return (await session.exec(query)).all()

    @operation
    async def revoke_api_key(self, key_id: str, project_id: str, now: int) -> bool:
        """Revoke a key of the project; False if there is no such key or it was revoked."""
        async with self.session() as session:
            result = await session.execute(update(ApiKeyRow).where(
                ApiKeyRow.id == key_id, ApiKeyRow.project_id == project_id,
                ApiKeyRow.revoked_ms.is_(None)).values(revoked_ms=now))
            await session.commit()
            return result.rowcount == 1

    @operation
    async def get_api_key(self, key_id: str) -> ApiKeyRow | None:
        """The key with this id (a gateway access token names the key it was exchanged with),
        revoked or expired ones included (the caller judges)."""
        async with self.session() as session:
            return await session.get(ApiKeyRow, key_id)

    @operation
    async def count_api_keys(self) -> int:
        """Every key ever made, revoked and expired ones included: once there is one,
        development mode is over for good (authentication never switches itself off)."""
        async with self.session() as session:
            result = await session.execute(select(func.count()).select_from(ApiKeyRow))
            return int(result.scalar_one())

    @operation
    async def touch_api_key(self, key_id: str, now: int) -> None:
        """Note that the key was used at `now` (a later use already noted is kept)."""
        k = _keys
        statement = update(k).where(k.c.id == key_id, or_(k.c.last_used_ms.is_(None),
                                                          k.c.last_used_ms < now))
        async with self.engine.begin() as connection:
            await connection.execute(statement.values(last_used_ms=now))
