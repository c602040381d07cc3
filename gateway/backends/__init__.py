"""How this process reaches the others: one module per technology, opened in one place.

Each module gives the run lifecycle a `runs.backend.Backend` (a run feed, signals, quota
counters, the parts `/ready` pings): `database` (polled feeds and the polled cancel flag, for
SQLite, or several processes sharing one file), `postgres` (the same with LISTEN/NOTIFY in front
of the flag), `redis` (streams, pub/sub and shared counters), `memory` (the counters of one
process, which the first two use). A new backend is a module here and a line in `open_backend`.
"""

from __future__ import annotations

from sqlalchemy.engine import make_url

from ..config import Settings
from ..runs.backend import Backend
from ..runs.limits import RunLimits
from ..runs.timings import Timings
from ..store.repository import Store
from .database import database_backend


def open_backend(settings: Settings, store: Store, timings: Timings) -> Backend:
    """Redis streams and pub/sub with `GATEWAY_REDIS_URL`; else database polling for run feeds
    and, on PostgreSQL, LISTEN/NOTIFY for signals (on SQLite, the database flag alone: one
    process, or a few sharing a file). Close it with `backend.close()`."""
    if settings.redis_url:
        from .redis import redis_backend

        slot_ttl_ms = RunLimits.from_settings(settings).quota_slot_ms(timings.lease_seconds)
        return redis_backend(settings.redis_url, store, timings, slot_ttl_ms)
    url = make_url(settings.database_url)
    if url.get_backend_name() == "postgresql":
        from .postgres import postgres_backend

        dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        return postgres_backend(dsn, store, timings)
    return database_backend(store, timings)
