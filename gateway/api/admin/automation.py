"""`GET /v1/admin/crons` and `GET /v1/admin/webhooks`: the project's schedules (every user
scope's) with what their last due time did, and its most recent completion webhooks with
their outcome, for the console's Schedules tab. A webhook's URL is shown by its host only:
its path or query may carry the receiver's token."""

from __future__ import annotations

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...protocol.admin import AdminCron, AdminCronList, AdminWebhookDelivery, AdminWebhookList
from ...protocol.clock import iso_ms
from ...protocol.tambo import wire
from ...store.tables import CronRow, WebhookDeliveryRow
from ..context import int_param, services
from .access import admin_project


def host_of(url: str | None) -> str | None:
    if url is None:
        return None
    try:
        return httpx.URL(url).host or None
    except httpx.InvalidURL:
        return None


def _iso(ms: int | None) -> str | None:
    return iso_ms(ms) if ms is not None else None


def cron_model(row: CronRow) -> AdminCron:
    return AdminCron(id=row.id, userKey=row.user_key, agent=row.agent, threadId=row.thread_id,
                     schedule=row.schedule, message=row.message,
                     webhookHost=host_of(row.webhook), createdAt=iso_ms(row.created_ms),
                     nextRunAt=_iso(row.next_due_ms), lastRunId=row.last_run_id,
                     lastError=row.last_error, runsStarted=row.runs_started)


def delivery_model(row: WebhookDeliveryRow) -> AdminWebhookDelivery:
    return AdminWebhookDelivery(
        runId=row.run_id, threadId=row.thread_id, host=host_of(row.url) or "",
        state=row.state, attempts=row.attempts,
        lastStatus=row.last_status, lastError=row.last_error, createdAt=iso_ms(row.created_ms),
        doneAt=_iso(row.done_ms),
        nextAttemptAt=iso_ms(row.next_attempt_ms) if row.state == "pending" else None)


async def list_crons(request: Request) -> Response:
    rows = await services(request).store.list_crons(
        admin_project(request), None, int_param(request, "limit", 200, 1, 1000))
    return JSONResponse(wire(AdminCronList(crons=[cron_model(r) for r in rows])))


async def list_webhooks(request: Request) -> Response:
    rows = await services(request).store.list_webhook_deliveries(
        admin_project(request), int_param(request, "limit", 50, 1, 200))
    return JSONResponse(wire(AdminWebhookList(deliveries=[delivery_model(r) for r in rows])))


routes = [
    Route("/v1/admin/crons", list_crons, methods=["GET"]),
    Route("/v1/admin/webhooks", list_webhooks, methods=["GET"]),
]
