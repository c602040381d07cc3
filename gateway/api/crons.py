"""Schedules: `POST /v1/crons`, `GET /v1/crons`, `DELETE /v1/crons/{cron_id}`. A schedule
belongs to the credential and user scope that created it, and is listed and deleted as that
scope's threads are; its runs are started by `runs/admission/schedules.py`, through the door."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..protocol.clock import iso_ms, new_id, now_ms
from ..protocol.problems import ApiError, Problem, echo
from ..protocol.tambo import UserKey
from ..runs.admission.threads import check_metadata
from ..runs.automation import cron, webhooks
from ..runs.automation.schedule import check, next_due
from ..store.tables import CronRow
from .context import (
    admission,
    caller,
    int_param,
    json_body,
    may_see,
    project_of,
    required_user_scope,
    services,
)

MAX_CRON_MESSAGE_CHARS = 32_000


class CronExpression(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cron: str = Field(max_length=cron.MAX_EXPRESSION_CHARS,
                      description="Five fields: minute hour day-of-month month day-of-week "
                                  "(`*`, numbers, names, `a-b`, `/n`, lists).")
    timezone: str = Field("UTC", max_length=64, description="An IANA time zone name.")


class Interval(BaseModel):
    model_config = ConfigDict(extra="forbid")

    every: int = Field(gt=0, le=366 * 86400, description="Seconds between two runs (at least "
                                                          "`GATEWAY_CRON_MIN_INTERVAL_SECONDS`).")


class CronCreate(BaseModel):
    """`POST /v1/crons`."""

    model_config = ConfigDict(extra="forbid", title="CronCreateRequest")

    schedule: CronExpression | Interval
    agent: str | None = Field(None, max_length=64, description="The agent each run starts "
                                                                "(default: the caller's).")
    userKey: UserKey | None = None
    threadId: str | None = Field(None, max_length=64, description="Run on this thread "
                                 "(through `multitaskStrategy` when it is busy); omitted: "
                                 "each run on a new thread.")
    message: str = Field(min_length=1, max_length=MAX_CRON_MESSAGE_CHARS,
                         description="The user message each run starts with.")
    metadata: dict[str, Any] | None = Field(None, description="Kept with the schedule and "
                                            "given to each run (with `cronId` and `dueAt`).")
    webhook: str | None = Field(None, max_length=2048, description="Where each run's end is "
                                "POSTed (docs/webhooks.md).")
    multitaskStrategy: Literal["reject", "interrupt", "rollback", "enqueue"] = Field(
        "enqueue", description="On `threadId` when a run is going: as a run request's.")


class CronOut(BaseModel):
    """A schedule as `GET /v1/crons` lists it."""

    model_config = ConfigDict(title="Cron")

    id: str
    schedule: dict[str, Any]
    agent: str | None = None
    userKey: str
    threadId: str | None = None
    message: str
    metadata: dict[str, Any] | None = None
    webhook: str | None = None
    createdAt: str
    nextRunAt: str | None = None
    lastRunId: str | None = None
    lastError: str | None = Field(None, description="Why the last due time started no run "
                                                    "(a problem code).")
    runsStarted: int = 0


class CronList(BaseModel):
    model_config = ConfigDict(title="CronList")

    crons: list[CronOut]


def cron_model(row: CronRow) -> CronOut:
    return CronOut(id=row.id, schedule=row.schedule, agent=row.agent, userKey=row.user_key,
                   threadId=row.thread_id, message=row.message, metadata=row.metadata_,
                   webhook=row.webhook, createdAt=iso_ms(row.created_ms),
                   nextRunAt=iso_ms(row.next_due_ms) if row.next_due_ms is not None else None,
                   lastRunId=row.last_run_id, lastError=row.last_error,
                   runsStarted=row.runs_started)


async def create_cron(request: Request) -> Response:
    body: CronCreate = await json_body(request, CronCreate)
    who = caller(request)
    user_key = required_user_scope(request, body.userKey)
    svc = services(request)
    settings = svc.settings
    asked = body.schedule
    schedule = (check(settings, asked.every) if isinstance(asked, Interval)
                else check(settings, None, asked.cron, asked.timezone))
    webhooks.check(settings, body.webhook)
    check_metadata(settings, body.metadata)
    thread = None
    if body.threadId is not None:
        thread = await svc.store.get_thread(who.project, body.threadId)
        if thread is None or not may_see(request, thread, user_key):
            raise ApiError(Problem.THREAD_NOT_FOUND, f"Thread {echo(body.threadId)} not found",
                           threadId=echo(body.threadId))
    agent = admission(request).agent(who, thread, body.agent)
    if await svc.store.count_crons(who.project) >= settings.max_crons_per_project:
        raise ApiError(Problem.CRON_LIMIT_REACHED, "The project has "
                       f"{settings.max_crons_per_project} schedules already")
    now = now_ms()
    row = CronRow(id=new_id("cron_"), project_id=who.project, user_key=user_key,
                  key_id=who.key_id, signed_in_scope=who.signed_in_scope, agent=agent.name,
                  thread_id=body.threadId, schedule=schedule, message=body.message,
                  metadata_=body.metadata, webhook=body.webhook,
                  multitask_strategy=body.multitaskStrategy, created_ms=now,
                  next_due_ms=next_due(schedule, now, now))
    await svc.store.add_cron(row)
    return JSONResponse(cron_model(row).model_dump(exclude_none=True), status_code=201)


async def list_crons(request: Request) -> Response:
    rows = await services(request).store.list_crons(
        project_of(request), required_user_scope(request), int_param(request, "limit", 100, 1,
                                                                     1000))
    return JSONResponse(CronList(crons=[cron_model(r) for r in rows])
                        .model_dump(exclude_none=True))


async def delete_cron(request: Request) -> Response:
    cron_id = request.path_params["cron_id"]
    if not await services(request).store.delete_cron(project_of(request), cron_id,
                                                     required_user_scope(request)):
        raise ApiError(Problem.CRON_NOT_FOUND, f"Schedule {echo(cron_id)} not found",
                       cronId=echo(cron_id))
    return Response(status_code=204)


routes = [
    Route("/v1/crons", create_cron, methods=["POST"]),
    Route("/v1/crons", list_crons, methods=["GET"]),
    Route("/v1/crons/{cron_id}", delete_cron, methods=["DELETE"]),
]
