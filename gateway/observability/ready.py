"""`GET /ready`: whether this process should get traffic (`/health` only says it is alive).

Not ready while the database does not answer a trivial query, while Redis (when configured)
does not answer a PING (a load balancer then sends requests elsewhere instead of to runs that
would fail or lag), or while the process drains for shutdown. What is pinged is the backend's
(`runs.backend.Backend.ping`), each part within two seconds.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..api.context import services
from ..api.errors import problem
from ..runs.backend import Unreachable


async def ready(request: Request) -> Response:
    svc = services(request)
    if svc.runs.refusal is not None:
        return problem(503, "SHUTTING_DOWN", "The gateway is shutting down")
    try:
        answered = await svc.backend.ping()
    except Unreachable as unreachable:
        return problem(503, unreachable.probe.code, unreachable.probe.detail)
    return JSONResponse({"status": "ready", "checks": dict.fromkeys(answered, "ok")})
