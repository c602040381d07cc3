"""Managed API keys: created, listed and revoked by `gateway keys`, looked up by their hash."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, insert, or_, select, update

from ..base import Queries, first_as, operation, rows_as, table, values_of
from ..tables import ApiKeyRow

_keys = table(ApiKeyRow)


class ApiKeyQueries(Queries):

    @operation
    async def add_api_key(self, row: ApiKeyRow) -> None:
        await self.transaction(lambda tx: tx.execute(insert(_keys), values_of(row)))

    @operation
    async def find_api_key(self, key_hash: str) -> ApiKeyRow | None:
        """The key with this hash, revoked or expired ones included (the caller judges)."""
        query = select(_keys).where(_keys.c.key_hash == key_hash).limit(1)
        return first_as(ApiKeyRow, await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def list_api_keys(self, project_id: str | None = None) -> Sequence[ApiKeyRow]:
        query = select(_keys).order_by(_keys.c.project_id, _keys.c.created_ms)
        if project_id is not None:
            query = query.where(_keys.c.project_id == project_id)
        return rows_as(ApiKeyRow, await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def revoke_api_key(self, key_id: str, project_id: str, now: int) -> bool:
        """Revoke a key of the project; False if there is no such key or it was revoked."""
        statement = (update(_keys).where(_keys.c.id == key_id, _keys.c.project_id == project_id,
                                         _keys.c.revoked_ms.is_(None))
                     .values(revoked_ms=now))
        return await self.transaction(lambda tx: tx.execute(statement).rowcount == 1)

    @operation
    async def get_api_key(self, key_id: str) -> ApiKeyRow | None:
        """The key with this id (a gateway access token names the key it was exchanged with),
        revoked or expired ones included (the caller judges)."""
        query = select(_keys).where(_keys.c.id == key_id)
        return first_as(ApiKeyRow, await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def count_api_keys(self) -> int:
        """Every key ever made, revoked and expired ones included: once there is one,
        development mode is over for good (authentication never switches itself off)."""
        query = select(func.count()).select_from(_keys)
        return int(await self.transaction(lambda tx: tx.execute(query).scalar_one()))

    @operation
    async def touch_api_key(self, key_id: str, now: int) -> None:
        """Note that the key was used at `now` (a later use already noted is kept)."""
        k = _keys
        statement = (update(k).where(k.c.id == key_id, or_(k.c.last_used_ms.is_(None),
                                                           k.c.last_used_ms < now))
                     .values(last_used_ms=now))
        await self.transaction(lambda tx: tx.execute(statement))
