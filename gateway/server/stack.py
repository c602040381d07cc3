"""The app's middleware stack: the front (`front.py`), or the same checks as starlette's own
middleware when `GATEWAY_STOCK_RUNTIME` names `front` (`stock_front.py`)."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

from ..config import Settings
from .front import Checks, Front
from .stock_front import stock_front


def cors_options(settings: Settings) -> dict[str, Any]:
    """starlette's `CORSMiddleware` options: the configured origins, the headers a browser's
    script may read (the run's ids, the request id, `Retry-After`)."""
    return {"allow_origins": list(settings.cors_origins), "allow_methods": ["*"],
            "allow_headers": ["*"], "max_age": 600,
            "expose_headers": ["X-Run-Id", "X-Thread-Id", "X-Run-Queued", "ETag",
                               "X-Request-Id", "Retry-After"]}


class FrontedApp(Starlette):
    """Starlette whose whole middleware stack is the front: one pure-ASGI layer that does what
    starlette's server-error and exception middlewares and the gateway's own checks (request id,
    metrics, development guard, CORS, door, body limit, key lookup) did, in the same order, with
    one `send` wrapper instead of one each (docs/decisions/0004-one-layer-front.md). `checks`
    are what the front asks of the layers above the runtime (given by the app)."""

    def __init__(self, settings: Settings, checks: Checks, **options: Any) -> None:
        super().__init__(**options)
        self.settings, self.checks = settings, checks

    def build_middleware_stack(self) -> ASGIApp:
        cors = cors_options(self.settings)
        if "front" in self.settings.stock_runtime:
            return stock_front(self.router, self.settings, cors, self.exception_handlers,
                               self.checks)
        return Front(self.router, self.settings, CORSMiddleware(self.router, **cors),
                     self.exception_handlers, self.checks)
