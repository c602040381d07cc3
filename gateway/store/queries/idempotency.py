"""Idempotency keys of new-thread runs (`runs.admission.idempotency` explains the protocol)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from ..base import Queries, first_as, operation, table
from ..engines.transaction import Transaction
from ..tables import IdempotencyKeyRow

_keys = table(IdempotencyKeyRow)


def _get(tx: Transaction, project_id: str, key: str) -> IdempotencyKeyRow | None:
    query = select(_keys).where(_keys.c.project_id == project_id, _keys.c.key == key)
    return first_as(IdempotencyKeyRow, tx.execute(query).all())


class IdempotencyKeys(Queries):

    @operation
    async def claim_idempotency_key(self, project_id: str, key: str,
                                    now: int) -> IdempotencyKeyRow | None:
        """Claim a key for this request; None if claimed now, else the existing claim."""
        claim = insert(_keys).values(project_id=project_id, key=key, created_ms=now)
        try:
            await self.transaction(lambda tx: tx.execute(claim))
            return None
        except IntegrityError:
            return await self.get_idempotency_key(project_id, key)

    @operation
    async def get_idempotency_key(self, project_id: str, key: str) -> IdempotencyKeyRow | None:
        return await self.transaction(lambda tx: _get(tx, project_id, key))

    @operation
    async def set_idempotency_key(self, /, project_id: str, key: str, **values: Any) -> None:
        statement = (update(_keys).where(_keys.c.project_id == project_id, _keys.c.key == key)
                     .values(**values))
        await self.transaction(lambda tx: tx.execute(statement))

    @operation
    async def release_idempotency_key(self, project_id: str, key: str) -> None:
        statement = delete(_keys).where(_keys.c.project_id == project_id, _keys.c.key == key)
        await self.transaction(lambda tx: tx.execute(statement))
