"""create_app(settings): routes, middleware, and the lifespan that opens the services
(`services.open_services`) for as long as the app serves."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

from .api import admin as admin_api
from .api import agents as agents_api
from .api import assist, audio, components, door, oauth, operations, playground, threads
from .api.errors import HANDLERS
from .auth import development, keyring
from .config import Settings, load_settings
from .dialects import registry
from .engine.agents.agent import Agent
from .engine.agents.file import registry_for
from .observability import metrics
from .observability.logs import configure_levels
from .openapi import docs
from .server.front import Checks, Front
from .server.shutdown import DrainOnSignals
from .services import open_services

log = logging.getLogger("gateway")
SWITCH_INTERVAL_SECONDS = 0.0005
# Garbage collection thresholds of a serving process (young, middle, old generations).
GC_THRESHOLDS = (20_000, 50, 100)


class Gateway(Starlette):
    """Starlette whose whole middleware stack is the front (`server/front.py`): one pure-ASGI
    layer that does what starlette's server-error and exception middlewares and the gateway's
    own (request id, metrics, development guard, CORS, door, body limit, key lookup) did, in
    the same order, with one `send` wrapper instead of one each."""

    def __init__(self, settings: Settings, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings

    def build_middleware_stack(self) -> ASGIApp:
        cors = CORSMiddleware(self.router, allow_origins=list(self.settings.cors_origins),
                              allow_methods=["*"], allow_headers=["*"],
                              expose_headers=["X-Run-Id", "X-Thread-Id", "X-Run-Queued", "ETag",
                                              "X-Request-Id", "Retry-After"], max_age=600)
        checks = Checks(development.refused, door.Door(), keyring.find_credentials)
        return Front(self.router, self.settings, cors, self.exception_handlers, checks)


# How `serve --workers` hands its `--log-level` to its workers (fresh interpreters).
WORKER_LOG_LEVEL = "_GATEWAY_WORKER_LOG_LEVEL"


def app_from_environment() -> Starlette:
    """The app of one `gateway serve --workers N` worker (each reads the environment itself;
    the parent has already validated it), logging as the parent does."""
    settings = load_settings()
    configure_levels(os.environ.get(WORKER_LOG_LEVEL, "info"), settings.log_format)
    return create_app(settings, drain_on_signals=True)


def tune_for_serving() -> None:
    """The interpreter's settings for a process that serves many streams at once."""
    # litellm's import leaves hundreds of thousands of long-lived objects; a full garbage
    # collection that walks them stalls the event loop (every stream, cancel and heartbeat)
    # for hundreds of ms. Freezing them keeps collections to what requests allocate.
    gc.collect()
    gc.freeze()
    # With hundreds of runs streaming, the default thresholds (700, 10, 10) ran about a
    # hundred collections a second and a full one every few seconds, each over every live
    # run's objects: single pauses of up to 130 ms at 300 runs. Most of what a token
    # allocates dies young without a cycle (reference counting frees it), so collecting
    # far less often costs little memory (bench/README.md, "Concurrency").
    gc.set_threshold(*GC_THRESHOLDS)
    # Every SQLite call is a hop to aiosqlite's thread and back; while the event loop is
    # busy, that thread waits for the GIL until the loop thread's switch interval runs out
    # (5 ms by default), several times per query. At 200 runs started at once, 0.5 ms
    # brought the last first token from about 4.0 s to 2.6 s (bench/README.md).
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)


def create_app(settings: Settings, *, drain_on_signals: bool = False,
               agents: Sequence[Agent] | None = None) -> Starlette:
    """The gateway as an ASGI app. `drain_on_signals`: on SIGTERM/SIGINT, drain the runs before
    the server that runs the app stops (`gateway.server.shutdown`); `gateway serve` sets it, an app
    embedded in another server leaves signals to that server.

    `agents`: the operator's agents, declared in Python instead of `GATEWAY_AGENTS_FILE`;
    checked here (an `AgentError` names the agent and the field), kept on `app.state.agents`.
    """
    agent_registry = registry_for(settings, agents)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_services(settings, agents=agent_registry) as services:
            app.state.services = services
            signals = DrainOnSignals.install(services.runs) if drain_on_signals else None
            tune_for_serving()
            try:
                async with contextlib.AsyncExitStack() as dialects:
                    for dialect in registry.DIALECTS:
                        if dialect.background is not None:
                            await dialects.enter_async_context(dialect.background(app))
                    yield
            finally:
                if signals is not None:
                    signals.uninstall()
                metrics.process_exited()

    app = Gateway(
        settings,
        routes=[*operations.routes,
                *(route for dialect in registry.DIALECTS for route in dialect.routes),
                *threads.routes, *assist.routes, *components.routes, *oauth.routes, *audio.routes,
                *docs.routes, *playground.routes, *agents_api.routes,
                *admin_api.routes],
        exception_handlers=HANDLERS,
        lifespan=lifespan,
    )
    app.state.agents = agent_registry
    return app
