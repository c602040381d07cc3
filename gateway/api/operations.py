"""What a load balancer and a monitoring system ask: `/health`, `/ready` and `/metrics`.

`/health` only says the process is alive. `/ready` says whether it should get traffic: not while
the database does not answer a trivial query, while Redis (when configured) does not answer a
PING (a load balancer then sends requests elsewhere instead of to runs that would fail or lag),
or while the process drains for shutdown. `/metrics` is the Prometheus text of
`gateway.observability.metrics`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..protocol.problems import Problem
from .context import services
from .errors import problem

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 2.0


async def health(_: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def ready(request: Request) -> Response:
    svc = services(request)
    if svc.runs.refusal is not None:
        return problem(Problem.SHUTTING_DOWN, "The gateway is shutting down")

    async def database() -> None:
        async with svc.store.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))

    if not await _answers("database", database):
        return problem(Problem.DATABASE_UNAVAILABLE, "The database cannot be reached")
    checks = {"database": "ok"}
    if svc.redis is not None:
        if not await _answers("Redis", svc.redis.ping):
            return problem(Problem.REDIS_UNAVAILABLE, "Redis cannot be reached")
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


async def metrics(_: Request) -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


routes = [
    Route("/health", health, methods=["GET"]),
    Route("/ready", ready, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
