"""Usage: what runs consumed, per run and model (`run_usage`), and the sums people ask for.

A run's rows are written in the transaction that ends it (`RunQueries.finish_run`), so a run
that reads as ended has its usage on disk; the thread's user scope is copied in by the insert
itself, with no read before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from sqlalchemy import ColumnElement, case, func, select
from sqlalchemy.sql.selectable import NamedFromClause

from ..base import Queries, table
from ..engines.chain import Rows
from ..tables import RunRow, RunUsageRow, ThreadRow

_usage, _threads = table(RunUsageRow), table(ThreadRow)
# Rows whose cost litellm's price map did not know.
_UNPRICED = func.sum(case((_usage.c.cost_usd.is_(None), 1), else_=0))

# entry key (wire, camelCase) -> column
COLUMNS = {"calls": "calls", "inputTokens": "input_tokens", "outputTokens": "output_tokens",
           "reasoningTokens": "reasoning_tokens", "cachedInputTokens": "cached_input_tokens"}
GROUPS = {"agent": _usage.c.agent, "key": _usage.c.api_key_id, "user": _usage.c.user_key,
          "model": _usage.c.model, "project": _usage.c.project_id}
Grouping = Literal["agent", "key", "user", "model", "project"]


def usage_rows(run: RunRow, agent: str, api_key_id: str | None,
               entries: Sequence[Mapping[str, Any]], now: int) -> list[dict[str, Any]]:
    """A run's usage entries as `run_usage` column values (the user scope is added on insert)."""
    return [{"run_id": run.id, "model": entry["model"][:255], "thread_id": run.thread_id,
             "project_id": run.project_id, "agent": agent, "api_key_id": api_key_id,
             "cost_usd": entry["costUsd"], "created_ms": now,
             "estimated_calls": entry.get("estimatedCalls", 0),
             **{column: entry[key] for key, column in COLUMNS.items()}}
            for entry in entries]


def _user_key(given: NamedFromClause) -> ColumnElement[Any]:
    """The user scope of the usage row's thread, copied in by the insert."""
    return (select(_threads.c.user_key).where(_threads.c.id == given.c.thread_id)
            .scalar_subquery())


# A run's `usage_rows` (one per model it used, one or two), written with its end
# (`runs.FINISH`), with the user scope of its thread.
USAGE = Rows(_usage, tuple(column.key for column in _usage.columns if column.key != "user_key"),
             (("user_key", _user_key),))


def entry_of(row: Any) -> dict[str, Any]:
    """A row (or a grouped row with the same column names) as a usage entry."""
    entry = {"model": row.model, "costUsd": row.cost_usd,
             **{key: int(getattr(row, column) or 0) for key, column in COLUMNS.items()}}
    entry["totalTokens"] = entry["inputTokens"] + entry["outputTokens"]
    estimated = int(getattr(row, "estimated_calls", 0) or 0)
    if estimated:  # present only when some calls were cut off (`engine.usage.estimate`)
        entry["estimatedCalls"] = estimated
    return entry


class UsageQueries(Queries):

    async def run_usage(self, run_id: str) -> list[dict[str, Any]]:
        query = select(_usage).where(_usage.c.run_id == run_id).order_by(_usage.c.model)
        rows = await self.transaction(lambda tx: tx.execute(query).all())
        return [entry_of(row) for row in rows]

    async def runs_usage(self, run_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """`run_usage` of each of `run_ids` (a page of a run list), in one query."""
        if not run_ids:
            return {}
        query = (select(_usage).where(_usage.c.run_id.in_(list(run_ids)))
                 .order_by(_usage.c.run_id, _usage.c.model))
        entries: dict[str, list[dict[str, Any]]] = {}
        for row in await self.transaction(lambda tx: tx.execute(query).all()):
            entries.setdefault(row.run_id, []).append(entry_of(row))
        return entries

    async def thread_usage(self, thread_id: str) -> list[dict[str, Any]]:
        """The thread's usage per model, over all its runs; a model's cost is null if any of
        its runs' cost was unknown."""
        query = (select(_usage.c.model, func.sum(_usage.c.cost_usd).label("cost_usd"),
                        _UNPRICED.label("unpriced"),
                        func.sum(_usage.c.estimated_calls).label("estimated_calls"),
                        *(func.sum(_usage.c[c]).label(c) for c in COLUMNS.values()))
                 .where(_usage.c.thread_id == thread_id).group_by(_usage.c.model)
                 .order_by(_usage.c.model))
        rows = await self.transaction(lambda tx: tx.execute(query).all())
        entries = []
        for row in rows:
            entry = entry_of(row)
            if row.unpriced:
                entry["costUsd"] = None
            entries.append(entry)
        return entries

    async def usage_report(self, since_ms: int, by: Grouping) -> list[dict[str, Any]]:
        """Sums since `since_ms` grouped `by` agent, key, user, model or project, largest
        input first: runs, calls, tokens, the cost of the priced ones, and how many run-model
        rows had no price."""
        group = GROUPS[by]
        query = (select(group.label("name"),
                        func.count(func.distinct(_usage.c.run_id)).label("runs"),
                        func.sum(_usage.c.cost_usd).label("cost_usd"),
                        _UNPRICED.label("unpriced"),
                        *(func.sum(_usage.c[c]).label(c) for c in COLUMNS.values()))
                 .where(_usage.c.created_ms >= since_ms).group_by(group)
                 .order_by(func.sum(_usage.c.input_tokens).desc()))
        rows = await self.transaction(lambda tx: tx.execute(query).all())
        return [{"name": row.name, "runs": int(row.runs), "costUsd": row.cost_usd,
                 "unpriced": int(row.unpriced or 0),
                 **{key: int(getattr(row, column) or 0) for key, column in COLUMNS.items()}}
                for row in rows]
