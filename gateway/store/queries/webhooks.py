"""Completion webhooks: a row per run that asked for one, claimed by the one process that
sends it (a conditional update), so a run's end is delivered successfully at most once."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from ..base import ACTIVE_RUN_STATUSES, Queries, operation
from ..tables import RunRow, WebhookDeliveryRow

_D = WebhookDeliveryRow


class WebhookQueries(Queries):

    @operation
    async def add_webhook_delivery(self, row: WebhookDeliveryRow) -> None:
        """Record a run's webhook; a second row for the same run (a retried request attached
        to it) is ignored."""
        try:
            async with self.session() as session:
                session.add(row)
                await session.commit()
        except IntegrityError:
            pass

    @operation
    async def ready_webhook_deliveries(self, now: int, limit: int
                                       ) -> Sequence[tuple[WebhookDeliveryRow, RunRow | None]]:
        """Pending deliveries whose next attempt has come, whose run has ended (or is gone),
        and that no live claim holds, with their run."""
        query = (select(_D, RunRow).join(RunRow, RunRow.id == _D.run_id, isouter=True)
                 .where(_D.state == "pending", _D.next_attempt_ms <= now,
                        or_(RunRow.id.is_(None),
                            RunRow.status.not_in(ACTIVE_RUN_STATUSES)),
                        or_(_D.claim_until_ms.is_(None),
                            _D.claim_until_ms < now))
                 .order_by(_D.next_attempt_ms).limit(limit))
        async with self.session() as session:
            return [(row, run) for row, run in (await session.exec(query)).all()]

    @operation
    async def claim_webhook_delivery(self, run_id: str, owner: str, until: int,
                                     now: int) -> bool:
        """Claim a pending delivery for `owner` until `until`: True for one process only."""
        async with self.session() as session:
            result = await session.execute(update(_D).where(
                _D.run_id == run_id, _D.state == "pending",
                or_(_D.claim_until_ms.is_(None), _D.claim_until_ms < now)
            ).values(claimed_by=owner, claim_until_ms=until))
            await session.commit()
            return result.rowcount == 1

    @operation
    async def webhook_attempted(self, run_id: str, owner: str, *, state: str, attempts: int,
                                next_attempt_ms: int, first_attempt_ms: int,
                                status: int | None, error: str | None, now: int) -> None:
        """An attempt's outcome, written by the process holding the claim, which it gives up."""
        async with self.session() as session:
            await session.execute(update(_D).where(_D.run_id == run_id, _D.claimed_by == owner)
                                  .values(state=state, attempts=attempts,
                                          next_attempt_ms=next_attempt_ms,
                                          first_attempt_ms=first_attempt_ms, last_status=status,
                                          last_error=error, claimed_by=None,
                                          claim_until_ms=None,
                                          done_ms=None if state == "pending" else now))
            await session.commit()

    @operation
    async def list_webhook_deliveries(self, project_id: str, limit: int
                                      ) -> Sequence[WebhookDeliveryRow]:
        """The project's most recent deliveries, newest first (the operator console)."""
        query = (select(_D).where(_D.project_id == project_id)
                 .order_by(_D.created_ms.desc()).limit(limit))
        async with self.session() as session:
            return (await session.exec(query)).all()

    @operation
    async def prune_webhook_deliveries(self, before_ms: int) -> int:
        """Forget deliveries that ended (delivered or failed) before `before_ms`."""
        async with self.session() as session:
            result = await session.execute(delete(_D).where(
                _D.state != "pending", _D.done_ms < before_ms))
            await session.commit()
            return result.rowcount

    @operation
    async def get_webhook_delivery(self, run_id: str) -> WebhookDeliveryRow | None:
        async with self.session() as session:
            return await session.get(_D, run_id)
