"""`GET /ready`: whether this process should get traffic (`/health` only says it is alive).

Not ready while the database does not answer a trivial query, while Redis (when configured)
does not answer a PING (a load balancer then sends requests elsewhere instead of to runs that
would fail or lag), or while the process drains for shutdown.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import text
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..api.context import services
from ..api.errors import problem

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 2.0


async def ready(request: Request) -> Response:
    svc = services(request)
    if svc.runs.refusal is not None:
        return problem(503, "SHUTTING_DOWN", "The gateway is shutting down")

    async def database() -> None:
        async with svc.store.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))

    if not await _answers("database", database):
        return problem(503, "DATABASE_UNAVAILABLE", "The database cannot be reached")
    checks = {"database": "ok"}
    if svc.redis is not None:
        if not await _answers("Redis", svc.redis.ping):
            return problem(503, "REDIS_UNAVAILABLE", "Redis cannot be reached")
        checks["redis"] = "ok"
    return JSONResponse({"status": "ready", "checks": checks})


async def _answers(what: str, probe: Callable[[], Awaitable[Any]]) -> bool:
    try:
        async with asyncio.timeout(TIMEOUT_SECONDS):
            await probe()
    except Exception as exc:  # any driver error or the timeout: the answer is the same
        log.warning("not ready: %s does not answer: %s", what,
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return False
    return True
