"""The store: one object with the queries of every aggregate, so call sites stay simple.

Each aggregate's queries live in their own module (`threads`, `runs`, `frames`, `components`,
`idempotency`, `api_keys`, `usage`, `chorus`, `admin`); this facade only puts them together on one engine.
"""

from __future__ import annotations

from .admin import AdminQueries
from .api_keys import ApiKeyQueries
from .base import ACTIVE_RUN_STATUSES, UNAVAILABLE, FrameEntry, Page
from .chorus import ChorusQueries
from .components import ComponentQueries
from .frames import FrameLog
from .idempotency import IdempotencyKeys
from .retention import RetentionQueries
from .runs import RunQueries
from .threads import ThreadQueries
from .usage import UsageQueries

__all__ = ["ACTIVE_RUN_STATUSES", "UNAVAILABLE", "FrameEntry", "Page", "Store"]


class Store(ThreadQueries, RunQueries, FrameLog, ComponentQueries, IdempotencyKeys,
            ApiKeyQueries, UsageQueries, RetentionQueries, ChorusQueries, AdminQueries):
    """Threads, runs and leases, the frame log, components, idempotency keys, API keys,
    usage, retention, Chorus deliveries, and the operator console's listings."""
