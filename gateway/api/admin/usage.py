"""`GET /v1/admin/usage`: the project's usage summed by key, user, agent, model or UTC day, as
JSON or (`format=csv`) as the CSV that `gateway usage --format csv` prints for the same window:
one query (`AdminQueries.admin_usage`) and one text form (`protocol.admin.usage_cells`) for
both, so the console and the command line never disagree."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...protocol.admin import AdminUsage, AdminUsageGroup, AdminUsageReport, usage_csv
from ...protocol.clock import iso_ms
from ...protocol.problems import ApiError, Problem
from ...protocol.tambo import wire
from ...store.queries.admin import AdminGrouping
from ..context import services
from .params import window

GROUPINGS = ("key", "user", "agent", "model", "day")  # within one project: never by project
MAX_GROUPS = 1000
TOTALS = ("calls", "inputTokens", "outputTokens", "totalTokens", "reasoningTokens",
          "cachedInputTokens", "unpriced")


def group_name(by: str, name: Any) -> str | None:
    """A group's name as shown: a day as its UTC date, anything else as text."""
    if by == "day":
        return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=name)).date().isoformat()
    return None if name is None else str(name)


async def usage(request: Request) -> Response:
    span = window(request)
    by = request.query_params.get("by", "day")
    if by not in GROUPINGS:
        raise ApiError(Problem.VALIDATION_ERROR, f"by must be one of {', '.join(GROUPINGS)}",
                       errors={"by": "unknown grouping"})
    text = request.query_params.get("format", "json")
    if text not in ("json", "csv"):
        raise ApiError(Problem.VALIDATION_ERROR, "format must be json or csv",
                       errors={"format": "json or csv"})
    rows = await services(request).store.admin_usage(span, cast(AdminGrouping, by), MAX_GROUPS)
    named = [{**row, "name": group_name(by, row["name"])} for row in rows]
    if text == "csv":
        return Response(usage_csv(by, named), media_type="text/csv; charset=utf-8", headers={
            "Content-Disposition": f'attachment; filename="usage-by-{by}.csv"'})
    groups = [AdminUsageGroup(**row) for row in named]
    total = {key: sum(getattr(g, key) for g in groups) for key in TOTALS}
    costs = [g.costUsd for g in groups if g.costUsd is not None]
    report = AdminUsageReport(project=span.project or "", by=cast(Any, by),
                              since=iso_ms(span.since),
                              until=iso_ms(span.until), groups=groups,
                              total=AdminUsage(**total, costUsd=sum(costs) if costs else None))
    return JSONResponse(wire(report))


routes = [Route("/v1/admin/usage", usage, methods=["GET"])]
