"""Completion webhooks: when a run that named a `webhook` ends (completed, paused for a human or
a client tool, failed, cancelled, lost), the gateway POSTs its outcome there.

The run's start writes the wish with the run, in its own transaction (`delivery`: a
`webhook_deliveries` row), so a run that started has its webhook kept; every process
looks for rows whose run has ended (`WebhookSender`), and the one whose conditional update
claims a row sends it, so a run's end is delivered successfully at most once however many
processes run. The body is signed with HMAC-SHA256 over `<timestamp>.<body>` with
`GATEWAY_WEBHOOK_SECRET` (`X-Gateway-Timestamp`, `X-Gateway-Signature: v1=<hex>`), so a
receiver can tell it is the gateway's and reject a replay. A failed attempt (no answer, or not
a 2xx) is retried with doubling waits for `GATEWAY_WEBHOOK_RETRY_SECONDS`, at most
`GATEWAY_WEBHOOK_MAX_ATTEMPTS` times; every attempt goes through the same outbound checks as
Chorus's callbacks (`outbound.py`: the allow-list, no private address unless listed, the
checked address pinned, bounded time and answer), and is logged with the run and the host
only, never the URL's path or query, the body or the signature.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from typing import Any

import httpx

from ...config import Settings
from ...protocol.clock import now_ms
from ...protocol.problems import ApiError, Problem
from ...protocol.run_spec import RunSpec
from ...store.repository import Store
from ...store.tables import RunRow, WebhookDeliveryRow
from . import outbound

log = logging.getLogger("gateway.webhooks")
SETTING = "GATEWAY_WEBHOOK_ALLOWED_HOSTS"
TIMESTAMP_HEADER = "X-Gateway-Timestamp"
SIGNATURE_HEADER = "X-Gateway-Signature"
DELIVERY_HEADER = "X-Gateway-Delivery"
MAX_BACKOFF_SECONDS = 900
BATCH = 16  # deliveries one process sends at once
# A claim outlasts one attempt (its connect, send and read are each bounded by the timeout).
CLAIM_MS = 60_000
# Ended deliveries are kept this long (the console lists the recent ones), then forgotten.
KEEP_MS = 30 * 86_400_000
PRUNE_EVERY_MS = 3_600_000


def check(settings: Settings, url: str | None) -> None:
    """Refuse a `webhook` the gateway may not call, before anything starts: webhooks off (no
    secret), or a host the allow-list does not name. Its addresses are checked at each send
    (a name may resolve elsewhere by then)."""
    if url is None:
        return
    if settings.webhook_secret is None:
        raise ApiError(Problem.WEBHOOK_NOT_ALLOWED, "Webhooks are off on this gateway "
                       "(GATEWAY_WEBHOOK_SECRET is not set)", errors={"webhook": "not allowed"})
    try:
        outbound.check_url(url, settings.webhook_allowed_hosts, SETTING)
    except outbound.NotAllowed as exc:
        raise ApiError(Problem.WEBHOOK_NOT_ALLOWED, f"webhook: {exc}",
                       errors={"webhook": str(exc)}) from None


def delivery(run: RunRow, url: str | None) -> WebhookDeliveryRow | None:
    """The row that keeps the run's webhook until its end is delivered, written by the run's
    start (`admission.admit`, a queued run's `enqueue_run`); None without a webhook."""
    if url is None:
        return None
    return WebhookDeliveryRow(run_id=run.id, thread_id=run.thread_id,
                              project_id=run.project_id, url=url, created_ms=run.created_ms,
                              next_attempt_ms=run.created_ms)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header's value: `v1=` and the hex HMAC-SHA256 of `<timestamp>.<body>`."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "v1=" + digest.hexdigest()


def status_of(run: RunRow) -> str:
    """The run's end as the webhook says it: its status, `lost` for a run whose process died."""
    if run.status == "failed" and (run.error or {}).get("code") == "RUN_LOST":
        return "lost"
    return run.status


def payload(run: RunRow, usage: list[dict[str, Any]]) -> dict[str, Any]:
    """`{runId, threadId, status, error?, usage, metadata}` of an ended run."""
    body: dict[str, Any] = {"runId": run.id, "threadId": run.thread_id,
                            "status": status_of(run), "usage": usage,
                            "metadata": RunSpec.from_row(run.request).metadata}
    if run.error:
        body["error"] = {k: run.error[k] for k in ("code", "message") if k in run.error}
    if run.status == "awaiting_input":
        body["pendingToolCalls"] = [
            {"toolCallId": c.get("toolCallId") or c.get("id"),
             "name": c.get("name") or c.get("toolName")}
            for c in run.pending_tool_calls or [] if isinstance(c, dict)]
    return body


def backoff_ms(settings: Settings, attempts: int) -> int:
    """The wait after the `attempts`-th failed attempt: doubling, capped."""
    seconds = settings.webhook_backoff_seconds * 2 ** max(attempts - 1, 0)
    return int(min(seconds, MAX_BACKOFF_SECONDS) * 1000)


class WebhookSender:
    """One process's sender: looks for ended runs' pending webhooks, claims and sends them."""

    def __init__(self, settings: Settings, store: Store, owner: str) -> None:
        self.settings, self.store, self.owner = settings, store, owner
        secret = settings.webhook_secret
        self.secret = secret.get_secret_value() if secret is not None else ""
        self.client = httpx.AsyncClient(timeout=outbound.TIMEOUT, follow_redirects=False,
                                        limits=httpx.Limits(max_connections=BATCH))

    async def run(self) -> None:
        """Until cancelled: a round every `GATEWAY_CRON_POLL_SECONDS`; once an hour, ended
        deliveries older than 30 days are forgotten."""
        pruned = 0
        try:
            while True:
                try:
                    await self.round()
                    if now_ms() - pruned > PRUNE_EVERY_MS:
                        pruned = now_ms()
                        await self.store.prune_webhook_deliveries(pruned - KEEP_MS)
                except Exception as exc:  # the database away for a moment: next round
                    log.warning("webhook round failed: %s", type(exc).__name__)
                await asyncio.sleep(self.settings.cron_poll_seconds)
        finally:
            await self.client.aclose()

    async def round(self) -> int:
        """Send what is ready now; how many were attempted."""
        now = now_ms()
        ready = await self.store.ready_webhook_deliveries(now, BATCH)
        claimed = [(row, run) for row, run in ready
                   if await self.store.claim_webhook_delivery(row.run_id, self.owner,
                                                              now + CLAIM_MS, now)]
        await asyncio.gather(*(self.attempt(row, run) for row, run in claimed))
        return len(claimed)

    async def attempt(self, row: WebhookDeliveryRow, run: RunRow | None) -> None:
        """One attempt, and what it leaves: delivered, failed for good, or a later retry."""
        now = now_ms()
        first = row.first_attempt_ms or now
        attempts = row.attempts + 1
        status: int | None = None
        error: str | None = None
        if run is None:
            error = "the run is gone (its thread was deleted)"
        else:
            try:
                status = await self.send(row, run)
            except outbound.NotAllowed as exc:
                error = str(exc)[:255]
            except httpx.HTTPError as exc:
                error = type(exc).__name__
        delivered = status is not None and 200 <= status < 300
        wait = backoff_ms(self.settings, attempts)
        give_up = (run is None or attempts >= self.settings.webhook_max_attempts
                   or now + wait > first + self.settings.webhook_retry_seconds * 1000)
        state = "delivered" if delivered else "failed" if give_up else "pending"
        host = httpx.URL(row.url).host
        log.info("webhook of run %s to %s: attempt %d, %s", row.run_id, host, attempts,
                 status if status is not None else error, extra={"run_id": row.run_id})
        await self.store.webhook_attempted(
            row.run_id, self.owner, state=state, attempts=attempts,
            next_attempt_ms=now + wait, first_attempt_ms=first, status=status,
            error=None if delivered else error or f"HTTP {status}", now=now_ms())

    async def send(self, row: WebhookDeliveryRow, run: RunRow) -> int:
        """POST the run's end, signed; the answer's status."""
        target = await outbound.check(row.url, self.settings.webhook_allowed_hosts, SETTING)
        body = json.dumps(payload(run, await self.store.run_usage(run.id)),
                          separators=(",", ":")).encode()
        timestamp = str(now_ms() // 1000)
        headers = {TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: sign(self.secret, timestamp,
                                                                        body),
                   DELIVERY_HEADER: row.run_id, "user-agent": "gateway-webhooks"}
        return await outbound.post(self.client, target, None, headers=headers, content=body)
