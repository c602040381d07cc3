"""What the operator API's calls take: a time window (at most `MAX_WINDOW_DAYS`, by default the
`DEFAULT_WINDOW_DAYS` before now), agent and status filters. Only an admin key gets a window:
asking for one checks the caller first."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request

from ...engine.agents.agent import AgentRegistry
from ...protocol.clock import now_ms
from ...protocol.problems import ApiError, Problem
from ...store.queries.admin import AgentFilter, Window
from .access import admin_project

DAY_MS = 86_400_000
DEFAULT_WINDOW_DAYS = 30
MAX_WINDOW_DAYS = 366
RUN_STATUSES = ("queued", "running", "completed", "awaiting_input", "failed", "cancelled")


def instant(request: Request, name: str) -> int | None:
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
    before it; at most `MAX_WINDOW_DAYS` long."""
    project = admin_project(request)
    end = instant(request, until)
    end = now_ms() + 1 if end is None else end
    start = instant(request, since)
    start = end - DEFAULT_WINDOW_DAYS * DAY_MS if start is None else start
    if start >= end:
        raise ApiError(Problem.VALIDATION_ERROR, f"{since} must be before {until}")
    if end - start > MAX_WINDOW_DAYS * DAY_MS:
        raise ApiError(Problem.VALIDATION_ERROR, f"The window from {since} to {until} is "
                       f"longer than {MAX_WINDOW_DAYS} days")
    return Window(project, start, end)


def agent_filter(request: Request) -> AgentFilter | None:
    name = request.query_params.get("agent")
    if not name:
        return None
    registry: AgentRegistry = request.app.state.agents
    return AgentFilter(name[:64], or_unset=name == registry.default_name)


def agent_of(request: Request, agent: str | None) -> str:
    """A thread's agent as shown: a thread from before agents runs the default one."""
    registry: AgentRegistry = request.app.state.agents
    return agent or registry.default_name


def statuses(request: Request) -> list[str]:
    raw = request.query_params.get("status")
    found = [s for s in (raw or "").split(",") if s]
    unknown = [s for s in found if s not in RUN_STATUSES]
    if unknown:
        raise ApiError(Problem.VALIDATION_ERROR, f"status must be among {', '.join(RUN_STATUSES)}",
                       errors={"status": f"unknown status {unknown[0][:32]!r}"})
    return found
