"""What a load balancer and a monitoring system ask: `/health`, `/ready` and `/metrics`.

`/health` only says the process is alive. `/ready` says whether it should get traffic: not while
the database does not answer a trivial query, while Redis (when configured) does not answer a
PING (a load balancer then sends requests elsewhere instead of to runs that would fail or lag),
or while the process drains for shutdown, or while it is saturated and refuses new runs
(`runs/admission/start_gate.py`: 503 `OVERLOADED` with the reason). What is pinged is the backend's
(`runs.backend.Backend.ping`), each part within two seconds. `/metrics` is the Prometheus text of
`gateway.observability.metrics`.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..observability import outages
from ..observability.metrics import exposition
from ..protocol.problems import Problem
from ..runs.admission.start_gate import RETRY_AFTER_SECONDS
from ..runs.backend import Unreachable
from ..server.problem_json import problem
from .context import services


async def health(_: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def ready(request: Request) -> Response:
    svc = services(request)
    if svc.runs.refusal is not None:
        return problem(Problem.SHUTTING_DOWN, "The gateway is shutting down")
    saturation = svc.runs.start_gate.saturation()
    if saturation is not None:  # new runs are refused here: send them elsewhere meanwhile
        response = problem(Problem.OVERLOADED, f"This process is at capacity: "
                           f"{saturation.detail} ({saturation.setting})",
                           reason=saturation.setting)
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    try:
        answered = await svc.backend.ping()
    except Unreachable as unreachable:
        # Which parts are out and since when (Unix ms), as this process found them.
        return problem(unreachable.probe.problem, unreachable.probe.detail,
                       unavailable={part: {"since": since}
                                    for part, since in outages.current().items()})
    return JSONResponse({"status": "ready", "checks": dict.fromkeys(answered, "ok")})


async def metrics(_: Request) -> Response:
    body, media_type = exposition()
    return Response(body, media_type=media_type)


routes = [
    Route("/health", health, methods=["GET"]),
    Route("/ready", ready, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
