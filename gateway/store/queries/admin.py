"""What the operator console reads: a project's threads and runs across user scopes, and its
usage summed by key, user, agent, model or day (`api/admin.py`).

Every query is bounded by its caller: a page size (keyset pagination, one row more than asked
to tell that there is more) and a time window. The listings follow the indexes of migration
0013 (`ix_threads_project_updated`, `ix_runs_project_created`); usage rows are found by
`ix_run_usage_created`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import String, and_, cast, func, or_, select

from .. import cursors
from ..base import Page, Queries, _page, operation, table
from ..tables import RunRow, RunUsageRow, ThreadRow
from .usage import _UNPRICED, COLUMNS, GROUPS

_threads, _runs, _usage = table(ThreadRow), table(RunRow), table(RunUsageRow)
DAY_MS = 86_400_000
# What usage is summed by: the console and `gateway usage` alike (the console within its
# project, so never by project).
AdminGrouping = Literal["agent", "key", "user", "model", "day", "project"]


@dataclass(frozen=True)
class Window:
    """Rows of a project between two epoch-ms instants (`since` inclusive, `until` exclusive);
    `project` None: of every project (`gateway usage` on the operator's own machine)."""

    project: str | None
    since: int
    until: int


@dataclass(frozen=True)
class AgentFilter:
    """Rows of one agent; `or_unset`: the default agent, which threads from before agents (no
    agent recorded) run too."""

    name: str
    or_unset: bool = False


def _agent_clause(column: Any, agent: AgentFilter | None) -> Any:
    if agent is None:
        return None
    return or_(column == agent.name, column.is_(None)) if agent.or_unset else column == agent.name


def _after(sort: Any, ident: Any, cursor: str | None) -> Any:
    """Rows after the cursor's (sort key, id), newest first."""
    if not cursor:
        return None
    at, last_id = cursors.decode(cursor, (int, str))
    return or_(sort < at, and_(sort == at, ident < last_id))


def _where(query: Any, *clauses: Any) -> Any:
    return query.where(*(c for c in clauses if c is not None))


def _of_project(column: Any, window: Window) -> Any:
    return None if window.project is None else column == window.project


def _paused(t: Any) -> Any:
    """Threads whose run waits for an answer: idle, with pending calls (a JSON list; the
    column holds SQL NULL or JSON `null` when there are none)."""
    pending = cast(t.c.pending_tool_calls, String)
    return and_(t.c.run_status == "idle", pending.is_not(None), pending != "null",
                pending != "[]")


class AdminQueries(Queries):

    @operation
    async def admin_threads(self, window: Window, limit: int, cursor: str | None, *,
                            user_key: str | None = None, agent: AgentFilter | None = None,
                            busy: bool | None = None, waiting: bool = False) -> Page:
        """Threads updated in the window, most recently updated first; `busy`: only those
        with a run going (True) or only idle ones (False); `waiting`: only those paused for
        an answer (approvals, questions, client tools)."""
        t = _threads
        status = None if busy is None else (t.c.run_status != "idle" if busy
                                            else t.c.run_status == "idle")
        query = _where(select(t), _of_project(t.c.project_id, window),
                       _paused(t) if waiting else None,
                       t.c.updated_ms >= window.since, t.c.updated_ms < window.until,
                       None if user_key is None else t.c.user_key == user_key,
                       _agent_clause(t.c.agent, agent), status,
                       _after(t.c.updated_ms, t.c.id, cursor))
        query = query.order_by(t.c.updated_ms.desc(), t.c.id.desc()).limit(limit + 1)
        rows = await self.transaction(lambda tx: tx.execute(query).all())
        return _page(list(rows), limit, lambda row: [row.updated_ms, row.id])

    @operation
    async def admin_runs(self, window: Window, limit: int, cursor: str | None, *,
                         statuses: Sequence[str] = (), user_key: str | None = None,
                         agent: AgentFilter | None = None, thread_id: str | None = None) -> Page:
        """Runs created in the window, newest first, each with its thread's user scope and
        agent."""
        r, t = _runs, _threads
        query = _where(
            select(r, t.c.user_key, t.c.agent.label("thread_agent"))
            .join(t, t.c.id == r.c.thread_id),
            _of_project(r.c.project_id, window), r.c.created_ms >= window.since,
            r.c.created_ms < window.until,
            r.c.status.in_(statuses) if statuses else None,
            None if user_key is None else t.c.user_key == user_key,
            None if thread_id is None else r.c.thread_id == thread_id,
            _agent_clause(t.c.agent, agent), _after(r.c.created_ms, r.c.id, cursor))
        query = query.order_by(r.c.created_ms.desc(), r.c.id.desc()).limit(limit + 1)
        rows = await self.transaction(lambda tx: tx.execute(query).all())
        return _page(list(rows), limit, lambda row: [row.created_ms, row.id])

    @operation
    async def admin_run(self, project: str, run_id: str) -> Any | None:
        """One run of the project with its thread's user scope and agent (None: no such run)."""
        r, t = _runs, _threads
        query = (select(r, t.c.user_key, t.c.agent.label("thread_agent"))
                 .join(t, t.c.id == r.c.thread_id)
                 .where(r.c.id == run_id, r.c.project_id == project))
        return await self.transaction(lambda tx: tx.execute(query).first())

    @operation
    async def admin_runs_usage(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Each run's usage summed over its models, and the key that started it, by run id."""
        if not run_ids:
            return {}
        u = _usage
        query = (select(u.c.run_id, func.max(u.c.api_key_id).label("api_key_id"),
                        func.sum(u.c.cost_usd).label("cost_usd"), _UNPRICED.label("unpriced"),
                        func.sum(u.c.estimated_calls).label("estimated_calls"),
                        *(func.sum(u.c[c]).label(c) for c in COLUMNS.values()))
                 .where(u.c.run_id.in_(list(run_ids))).group_by(u.c.run_id))
        rows = await self.transaction(lambda tx: tx.execute(query).all())
        return {row.run_id: _sums(row) for row in rows}

    @operation
    async def admin_usage(self, window: Window, by: AdminGrouping,
                          limit: int) -> list[dict[str, Any]]:
        """Usage in the window grouped `by` key, user, agent, model, UTC day or project
        (`name`: the group; a day is its first epoch ms), largest input first (days: newest
        first). What the console shows and `gateway usage` prints: one query for both."""
        u = _usage
        group = (u.c.created_ms // DAY_MS) if by == "day" else GROUPS[by]
        order = group.desc() if by == "day" else func.sum(u.c.input_tokens).desc()
        query = (select(group.label("name"),
                        func.count(func.distinct(u.c.run_id)).label("runs"),
                        func.sum(u.c.cost_usd).label("cost_usd"), _UNPRICED.label("unpriced"),
                        func.sum(u.c.estimated_calls).label("estimated_calls"),
                        *(func.sum(u.c[c]).label(c) for c in COLUMNS.values()))
                 .where(*(c for c in (_of_project(u.c.project_id, window),
                                      u.c.created_ms >= window.since,
                                      u.c.created_ms < window.until) if c is not None))
                 .group_by(group).order_by(order).limit(limit))
        rows = await self.transaction(lambda tx: tx.execute(query).all())
        return [{"name": int(row.name) * DAY_MS if by == "day" else row.name,
                 "runs": int(row.runs), **_sums(row)} for row in rows]

    @operation
    async def admin_models(self, project: str, since: int, limit: int) -> list[str]:
        """The models the project's runs used since `since` (the console's prices)."""
        u = _usage
        query = (select(u.c.model).where(u.c.project_id == project, u.c.created_ms >= since)
                 .group_by(u.c.model).order_by(u.c.model).limit(limit))
        return [row.model for row in await self.transaction(lambda tx: tx.execute(query).all())]


def _sums(row: Any) -> dict[str, Any]:
    sums = {key: int(getattr(row, column) or 0) for key, column in COLUMNS.items()}
    sums["estimatedCalls"] = int(row.estimated_calls or 0)
    sums["totalTokens"] = sums["inputTokens"] + sums["outputTokens"]
    # The priced rows' cost, and how many run-model rows litellm could not price.
    sums["costUsd"], sums["unpriced"] = row.cost_usd, int(row.unpriced or 0)
    if hasattr(row, "api_key_id"):
        sums["apiKeyId"] = row.api_key_id
    return sums
