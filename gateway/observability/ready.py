"""`GET /ready`: whether this process should get traffic (`/health` only says it is alive).

Not ready while the database does not answer a trivial query (a load balancer then sends
requests elsewhere instead of to runs that would fail) or while the process drains for shutdown.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy import text
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..api.context import services
from ..api.errors import problem

log = logging.getLogger(__name__)

DATABASE_TIMEOUT_SECONDS = 2.0


async def ready(request: Request) -> Response:
    svc = services(request)
    if svc.runs.refusal is not None:
        return problem(503, "SHUTTING_DOWN", "The gateway is shutting down")
    try:
        async with asyncio.timeout(DATABASE_TIMEOUT_SECONDS):
            async with svc.store.engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
    except Exception as exc:  # any driver error or the timeout: the answer is the same
        log.warning("not ready: the database does not answer: %s",
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return problem(503, "DATABASE_UNAVAILABLE", "The database cannot be reached")
    return JSONResponse({"status": "ready", "checks": {"database": "ok"}})
