"""Idempotency keys of new-thread runs (`runs.admission.idempotency` explains the protocol)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, update
from sqlalchemy.exc import IntegrityError

from ..base import Queries, operation
from ..tables import IdempotencyKeyRow


class IdempotencyKeys(Queries):

    @operation
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

    @operation
    async def get_idempotency_key(self, project_id: str, key: str) -> IdempotencyKeyRow | None:
        async with self.session() as session:
            return await session.get(IdempotencyKeyRow, (project_id, key))

    @operation
    async def set_idempotency_key(self, project_id: str, key: str, **values: Any) -> None:
        async with self.session() as session:
            await session.execute(update(IdempotencyKeyRow)
                .where(IdempotencyKeyRow.project_id == project_id, IdempotencyKeyRow.key == key)
                .values(**values))
            await session.commit()

    @operation
    async def release_idempotency_key(self, project_id: str, key: str) -> None:
        async with self.session() as session:
            await session.execute(delete(IdempotencyKeyRow).where(
                IdempotencyKeyRow.project_id == project_id, IdempotencyKeyRow.key == key))
            await session.commit()

