"""The operator API (`/v1/admin/...`) and its console (`GET /admin`).

The API answers admin keys only (`auth/caller.py`, `resolve_admin`): a project's threads and
runs across user scopes, with filters; one run with its error, time to first token and usage;
its stored log frames; and usage summed by key, user, agent, model or UTC day. Every listing is a bounded page
(keyset cursor) over a bounded time window (`MAX_WINDOW_DAYS`), so no call scans without end.

The console is a static page like the playground (`gateway/web/admin.*`, same CSP, no outside
asset) that asks for an admin key, keeps it in the tab's sessionStorage and calls this API with
it in the `x-api-key` header: never in a URL, so never in an access log.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast, get_args

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from ..engine.agents.agent import AgentRegistry
from ..protocol.admin import (
    AdminFrame,
    AdminFrameList,
    AdminRun,
    AdminRunDetail,
    AdminRunError,
    AdminRunList,
    AdminThread,
    AdminThreadList,
    AdminUsage,
    AdminUsageGroup,
    AdminUsageReport,
)
from ..protocol.clock import iso_ms, now_ms
from ..protocol.problems import ApiError, Problem, echo
from ..protocol.tambo import wire
from ..store.cursors import InvalidCursor
from ..store.queries.admin import AdminGrouping, AgentFilter, Window
from .context import admin_caller, int_param, query_user_key, services
from .playground import FILES, PAGE_HEADERS, POLICY

DAY_MS = 86_400_000
DEFAULT_WINDOW_DAYS = 30
MAX_WINDOW_DAYS = 366
RUN_STATUSES = ("queued", "running", "completed", "awaiting_input", "failed", "cancelled")
GROUPINGS: tuple[str, ...] = get_args(AdminGrouping)
MAX_GROUPS = 1000
ERROR_FIELDS = ("code", "message", "category")


async def console(_: Request) -> Response:
    return FileResponse(FILES / "admin.html", media_type="text/html",
                        headers={"Content-Security-Policy": POLICY, **PAGE_HEADERS})


# -- parameters -----------------------------------------------------------------------------------

def _instant(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        at = datetime.fromisoformat(raw.replace("Z", "+00:00") if raw.endswith("Z") else raw)
    except ValueError:
        raise ApiError(Problem.VALIDATION_ERROR, f"{name} must be an ISO-8601 date or time",
                       errors={name: "not an ISO-8601 date or time"}) from None
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    return int(at.timestamp() * 1000)


def window(request: Request, since: str = "since", until: str = "until") -> Window:
    """The time window of a call: `until` defaults to now, `since` to `DEFAULT_WINDOW_DAYS`
    before it; at most `MAX_WINDOW_DAYS` long. Only an admin key gets this far."""
    project = admin_caller(request).project
    end = _instant(request, until)
    end = now_ms() + 1 if end is None else end
    start = _instant(request, since)
    start = end - DEFAULT_WINDOW_DAYS * DAY_MS if start is None else start
    if start >= end:
        raise ApiError(Problem.VALIDATION_ERROR, f"{since} must be before {until}")
    if end - start > MAX_WINDOW_DAYS * DAY_MS:
        raise ApiError(Problem.VALIDATION_ERROR, f"The window from {since} to {until} is "
                       f"longer than {MAX_WINDOW_DAYS} days")
    return Window(project, start, end)


def _agent_filter(request: Request) -> AgentFilter | None:
    name = request.query_params.get("agent")
    if not name:
        return None
    registry: AgentRegistry = request.app.state.agents
    return AgentFilter(name[:64], or_unset=name == registry.default_name)


def _statuses(request: Request) -> list[str]:
    raw = request.query_params.get("status")
    statuses = [s for s in (raw or "").split(",") if s]
    unknown = [s for s in statuses if s not in RUN_STATUSES]
    if unknown:
        raise ApiError(Problem.VALIDATION_ERROR, f"status must be among {', '.join(RUN_STATUSES)}",
                       errors={"status": f"unknown status {unknown[0][:32]!r}"})
    return statuses


# -- rendering ------------------------------------------------------------------------------------

def _agent_of(request: Request, agent: str | None) -> str:
    registry: AgentRegistry = request.app.state.agents
    return agent or registry.default_name


def _run(request: Request, row: Any, usage: dict[str, Any] | None) -> dict[str, Any]:
    error = row.error if isinstance(row.error, dict) else None
    return {"id": row.id, "threadId": row.thread_id, "userKey": row.user_key,
            "agent": _agent_of(request, row.thread_agent), "model": row.model,
            "status": row.status, "apiKeyId": usage.get("apiKeyId") if usage else None,
            "createdAt": iso_ms(row.created_ms),
            "startedAt": iso_ms(row.started_ms) if row.started_ms else None,
            "finishedAt": iso_ms(row.finished_ms) if row.finished_ms else None,
            "durationMs": (row.finished_ms - row.started_ms
                           if row.finished_ms and row.started_ms else None),
            "queuedMs": row.started_ms - row.created_ms if row.started_ms else None,
            "error": AdminRunError(code=error.get("code"), message=str(error.get("message", "")),
                                   category=error.get("category")) if error else None,
            "usage": AdminUsage(**{k: v for k, v in usage.items() if k != "apiKeyId"})
            if usage else None}


# -- routes ---------------------------------------------------------------------------------------

async def list_threads(request: Request) -> Response:
    span = window(request, "updatedSince", "updatedUntil")
    status = request.query_params.get("status")
    if status not in (None, "", "idle", "running"):
        raise ApiError(Problem.VALIDATION_ERROR, "status must be idle or running",
                       errors={"status": "idle or running"})
    try:
        page = await services(request).store.admin_threads(
            span, int_param(request, "limit", 50, 1, 200), request.query_params.get("cursor"),
            user_key=query_user_key(request), agent=_agent_filter(request),
            busy=None if not status else status == "running")
    except InvalidCursor:
        raise ApiError(Problem.INVALID_CURSOR, "The cursor is not valid") from None
    threads = [AdminThread(
        id=t.id, name=t.name, userKey=t.user_key, agent=_agent_of(request, t.agent),
        status="idle" if t.run_status == "idle" else "running", currentRunId=t.current_run_id,
        lastRunError={k: t.last_run_error.get(k) for k in ("code", "message")}
        if isinstance(t.last_run_error, dict) else None,
        createdAt=iso_ms(t.created_ms), updatedAt=iso_ms(t.updated_ms)) for t in page.rows]
    return JSONResponse(wire(AdminThreadList(threads=threads, hasMore=page.has_more,
                                             nextCursor=page.next_cursor)))


async def list_runs(request: Request) -> Response:
    span, statuses = window(request), _statuses(request)
    store = services(request).store
    try:
        page = await store.admin_runs(
            span, int_param(request, "limit", 50, 1, 200), request.query_params.get("cursor"),
            statuses=statuses, user_key=query_user_key(request), agent=_agent_filter(request),
            thread_id=request.query_params.get("threadId") or None)
    except InvalidCursor:
        raise ApiError(Problem.INVALID_CURSOR, "The cursor is not valid") from None
    usage = await store.admin_runs_usage([row.id for row in page.rows])
    runs = [AdminRun(**_run(request, row, usage.get(row.id))) for row in page.rows]
    return JSONResponse(wire(AdminRunList(runs=runs, hasMore=page.has_more,
                                          nextCursor=page.next_cursor)))


async def _found_run(request: Request) -> Any:
    run_id = request.path_params["run_id"]
    row = await services(request).store.admin_run(admin_caller(request).project, run_id)
    if row is None:
        raise ApiError(Problem.RUN_NOT_FOUND, f"Run {echo(run_id)} not found",
                       runId=echo(run_id))
    return row


async def get_run(request: Request) -> Response:
    row = await _found_run(request)
    store = services(request).store
    usage = (await store.admin_runs_usage([row.id])).get(row.id)
    last = await store.last_frame(row.id)
    first = row.first_token_ms  # stored with the run's end (`runs/log/recorder.py`)
    detail = AdminRunDetail(**_run(request, row, usage), frames=last.seq if last else 0,
                            firstTokenMs=first - row.started_ms
                            if first is not None and row.started_ms else None)
    return JSONResponse(wire(detail))


async def run_frames(request: Request) -> Response:
    row = await _found_run(request)
    after = int_param(request, "after", 0, 0, 2**62)
    limit = int_param(request, "limit", 200, 1, 1000)
    frames = await services(request).store.read_frames(row.id, after, limit + 1)
    more = len(frames) > limit
    frames = frames[:limit]
    body = AdminFrameList(frames=[AdminFrame(seq=f.seq, at=iso_ms(f.ts_ms), frame=f.frame)
                                  for f in frames], hasMore=more,
                          nextAfter=frames[-1].seq if more else None)
    return JSONResponse(wire(body))


async def usage(request: Request) -> Response:
    span = window(request)
    by = request.query_params.get("by", "day")
    if by not in GROUPINGS:
        raise ApiError(Problem.VALIDATION_ERROR, f"by must be one of {', '.join(GROUPINGS)}",
                       errors={"by": "unknown grouping"})
    rows = await services(request).store.admin_usage(span, cast(AdminGrouping, by), MAX_GROUPS)
    groups = [AdminUsageGroup(**{**row, "name": _group_name(by, row["name"])}) for row in rows]
    total = {key: sum(getattr(g, key) for g in groups)
             for key in ("calls", "inputTokens", "outputTokens", "totalTokens",
                         "reasoningTokens", "cachedInputTokens", "unpriced")}
    costs = [g.costUsd for g in groups if g.costUsd is not None]
    report = AdminUsageReport(by=cast(Any, by), since=iso_ms(span.since),
                              until=iso_ms(span.until), groups=groups,
                              total=AdminUsage(**total, costUsd=sum(costs) if costs else None))
    return JSONResponse(wire(report))


def _group_name(by: str, name: Any) -> str | None:
    if by == "day":
        return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=name)).date().isoformat()
    return None if name is None else str(name)


routes = [
    Route("/admin", console, methods=["GET"]),
    Route("/v1/admin/threads", list_threads, methods=["GET"]),
    Route("/v1/admin/runs", list_runs, methods=["GET"]),
    Route("/v1/admin/runs/{run_id}", get_run, methods=["GET"]),
    Route("/v1/admin/runs/{run_id}/frames", run_frames, methods=["GET"]),
    Route("/v1/admin/usage", usage, methods=["GET"]),
]
