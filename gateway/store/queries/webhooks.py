"""Completion webhooks: a row per run that asked for one, claimed by the one process that
sends it (a conditional update), so a run's end is delivered successfully at most once."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, or_, select, update

from ..base import (
    ACTIVE_RUN_STATUSES,
    Queries,
    first_as,
    operation,
    row_as,
    rows_as,
    table,
)
from ..tables import RunRow, WebhookDeliveryRow

_deliveries, _runs = table(WebhookDeliveryRow), table(RunRow)


class WebhookQueries(Queries):

    @operation
    async def ready_webhook_deliveries(self, now: int, limit: int
                                       ) -> list[tuple[WebhookDeliveryRow, RunRow | None]]:
        """Pending deliveries whose next attempt has come, whose run has ended (or is gone),
        and that no live claim holds, with their run."""
        d, r = _deliveries, _runs
        runs = select(r).subquery("run")
        query = (select(d, runs).join(runs, runs.c.id == d.c.run_id, isouter=True)
                 .where(d.c.state == "pending", d.c.next_attempt_ms <= now,
                        or_(runs.c.id.is_(None), runs.c.status.not_in(ACTIVE_RUN_STATUSES)),
                        or_(d.c.claim_until_ms.is_(None), d.c.claim_until_ms < now))
                 .order_by(d.c.next_attempt_ms).limit(limit))
        width = len(d.columns)
        rows = await self.transaction(lambda tx: tx.execute(query).all())
        pairs = []
        for row in rows:
            delivery = dict(zip(d.columns.keys(), row[:width], strict=True))
            run = dict(zip(r.columns.keys(), row[width:], strict=True))
            pairs.append((row_as(WebhookDeliveryRow, delivery),
                          row_as(RunRow, run) if run["id"] is not None else None))
        return pairs

    @operation
    async def claim_webhook_delivery(self, run_id: str, owner: str, until: int,
                                     now: int) -> bool:
        """Claim a pending delivery for `owner` until `until`: True for one process only."""
        d = _deliveries
        statement = (update(d).where(d.c.run_id == run_id, d.c.state == "pending",
                                     or_(d.c.claim_until_ms.is_(None),
                                         d.c.claim_until_ms < now))
                     .values(claimed_by=owner, claim_until_ms=until))
        return await self.transaction(lambda tx: tx.execute(statement).rowcount == 1)

    @operation
    async def webhook_attempted(self, run_id: str, owner: str, *, state: str, attempts: int,
                                next_attempt_ms: int, first_attempt_ms: int,
                                status: int | None, error: str | None, now: int) -> None:
        """An attempt's outcome, written by the process holding the claim, which it gives up."""
        d = _deliveries
        statement = (update(d).where(d.c.run_id == run_id, d.c.claimed_by == owner)
                     .values(state=state, attempts=attempts, next_attempt_ms=next_attempt_ms,
                             first_attempt_ms=first_attempt_ms, last_status=status,
                             last_error=error, claimed_by=None, claim_until_ms=None,
                             done_ms=None if state == "pending" else now))
        await self.transaction(lambda tx: tx.execute(statement))

    @operation
    async def list_webhook_deliveries(self, project_id: str, limit: int
                                      ) -> Sequence[WebhookDeliveryRow]:
        """The project's most recent deliveries, newest first (the operator console)."""
        d = _deliveries
        query = (select(d).where(d.c.project_id == project_id)
                 .order_by(d.c.created_ms.desc()).limit(limit))
        return rows_as(WebhookDeliveryRow,
                       await self.transaction(lambda tx: tx.execute(query).all()))

    @operation
    async def prune_webhook_deliveries(self, before_ms: int) -> int:
        """Forget deliveries that ended (delivered or failed) before `before_ms`."""
        d = _deliveries
        statement = delete(d).where(d.c.state != "pending", d.c.done_ms < before_ms)
        return await self.transaction(lambda tx: int(tx.execute(statement).rowcount))

    @operation
    async def get_webhook_delivery(self, run_id: str) -> WebhookDeliveryRow | None:
        query = select(_deliveries).where(_deliveries.c.run_id == run_id)
        return first_as(WebhookDeliveryRow,
                        await self.transaction(lambda tx: tx.execute(query).all()))
