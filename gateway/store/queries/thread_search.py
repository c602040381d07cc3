"""Thread search: the thread list narrowed by metadata values, the thread's run status, its
agent, a name prefix and created/updated ranges, whether an AG-UI client named it (its list,
`GET /v1/agui/threads`), and a bounded count of the matches.

Every search is inside one project and one user scope (the caller's, as the plain list is), so
the scope's indexes bound the rows read. On PostgreSQL a metadata filter is a JSONB containment
(`@>`), which the expression index of migration 0026 serves; on SQLite it is `json_extract` over
the scope's threads. Only string values match: a query string carries text, and a number that
happens to print the same is a different value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, cast, func, select
from sqlalchemy.dialects.postgresql import JSONB

from ..base import Page, Queries, operation, table
from ..tables import ThreadRow
from .admin import AgentFilter, _agent_clause
from .threads import newest_first, thread_page

_threads = table(ThreadRow)


@dataclass(frozen=True)
class ThreadFilter:
    """What a thread must match (every field that is set). Times are epoch milliseconds:
    `*_after` inclusive, `*_before` exclusive."""

    metadata: tuple[tuple[str, str], ...] = ()
    status: str | None = None
    agent: AgentFilter | None = None
    name_prefix: str | None = None
    created_after: int | None = None
    created_before: int | None = None
    updated_after: int | None = None
    updated_before: int | None = None
    active: bool = False  # only threads a run holds (not `idle`)
    named: bool = False  # only threads an AG-UI client named (its `threadId`: `client_id`)


class ThreadSearchQueries(Queries):

    @operation
    async def search_threads(self, project_id: str, user_key: str | None, match: ThreadFilter,
                             limit: int, cursor: str | None) -> Page:
        """A page of the scope's threads that match, newest first (the plain list's order and
        cursor)."""
        query = select(_threads).where(*self._clauses(project_id, user_key, match))
        page = newest_first(query, limit, cursor)
        return thread_page(await self.transaction(lambda tx: tx.execute(page).all()), limit)

    @operation
    async def count_matching_threads(self, project_id: str, user_key: str | None,
                                     match: ThreadFilter, at_most: int) -> int:
        """How many of the scope's threads match, counted up to `at_most` (the work stays
        bounded however many there are)."""
        query = select(_threads.c.id).where(*self._clauses(project_id, user_key, match))
        counted = select(func.count()).select_from(query.limit(at_most).subquery())
        return int(await self.transaction(lambda tx: tx.execute(counted).scalar_one()))

    def _clauses(self, project_id: str, user_key: str | None, match: ThreadFilter
                 ) -> list[Any]:
        c = _threads.c
        postgres = self.engine.dialect.name == "postgresql"
        clauses: list[Any] = [c.project_id == project_id]
        if user_key is not None:
            clauses.append(c.user_key == user_key)
        meta: Any = c.metadata
        for key, value in match.metadata:
            if postgres:
                clauses.append(cast(meta, JSONB).contains({key: value}))
            else:
                path = f'$."{key}"'  # the key is letters, digits, '_' and '-' (the API's)
                clauses.append(and_(func.json_type(meta, path) == "text",
                                    func.json_extract(meta, path) == value))
        if match.status is not None:
            clauses.append(c.run_status == match.status)
        if match.active:
            clauses.append(c.run_status != "idle")
        if match.named:
            clauses.append(c.client_id.is_not(None))
        agent = _agent_clause(c.agent, match.agent)
        if agent is not None:
            clauses.append(agent)
        if match.name_prefix:
            name: Any = c.name
            # Case-sensitive on both databases (SQLite's LIKE is not): LIKE with the prefix
            # escaped on PostgreSQL (its pattern index serves it), a substring on SQLite.
            clauses.append(name.startswith(match.name_prefix, autoescape=True)
                           if postgres else
                           func.substr(name, 1, len(match.name_prefix)) == match.name_prefix)
        for column, low, high in ((c.created_ms, match.created_after,
                                   match.created_before),
                                  (c.updated_ms, match.updated_after,
                                   match.updated_before)):
            if low is not None:
                clauses.append(column >= low)
            if high is not None:
                clauses.append(column < high)
        return clauses
