"""The store: one object with the queries of every aggregate, so call sites stay simple.

Each aggregate's queries live in their own module (`threads`, `runs`, `frames`, `components`,
`thread_search`, `idempotency`, `api_keys`, `usage`, `chorus`, `admin`, `crons`, `webhooks`); this
facade only puts them together on one engine.
"""

from __future__ import annotations

from .base import ACTIVE_RUN_STATUSES, UNAVAILABLE, FrameEntry, Page
from .queries.admin import AdminQueries
from .queries.api_keys import ApiKeyQueries
from .queries.chorus import ChorusQueries
from .queries.components import ComponentQueries
from .queries.crons import CronQueries
from .queries.frames import FrameLog
from .queries.idempotency import IdempotencyKeys
from .queries.retention import RetentionQueries
from .queries.runs import RunQueries
from .queries.thread_search import ThreadSearchQueries
from .queries.threads import ThreadQueries
from .queries.usage import UsageQueries
from .queries.webhooks import WebhookQueries

__all__ = ["ACTIVE_RUN_STATUSES", "UNAVAILABLE", "FrameEntry", "Page", "Store"]


class Store(ThreadQueries, ThreadSearchQueries, RunQueries, FrameLog, ComponentQueries,
            IdempotencyKeys, ApiKeyQueries, UsageQueries, RetentionQueries, ChorusQueries,
            AdminQueries, CronQueries, WebhookQueries):
    """Threads and their search, runs and leases, the frame log, components, idempotency
    keys, API keys, usage, retention, Chorus deliveries, schedules and webhook deliveries, and
    the operator console's listings."""
