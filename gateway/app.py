"""create_app(settings): routes, middleware, and the lifespan that opens the services
(`services.open_services`) for as long as the app serves."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Sequence

from starlette.applications import Starlette

from .api import admin as admin_api
from .api import agents as agents_api
from .api import assist, audio, components, crons, door, oauth, operations, playground, threads
from .api.errors import HANDLERS
from .auth import development, keyring
from .config import Settings, load_settings
from .dialects import registry
from .engine.agents.agent import Agent
from .engine.agents.file import registry_for
from .observability import metrics
from .observability.logs import configure_levels
from .openapi import docs
from .server.front import Checks
from .server.interpreter import tune_for_serving
from .server.shutdown import DrainOnSignals
from .server.stack import FrontedApp
from .services import open_services

log = logging.getLogger("gateway")


# How `serve --workers` hands its `--log-level` to its workers (fresh interpreters).
WORKER_LOG_LEVEL = "_GATEWAY_WORKER_LOG_LEVEL"


def app_from_environment() -> Starlette:
    """The app of one `gateway serve --workers N` worker (each reads the environment itself;
    the parent has already validated it), logging as the parent does."""
    settings = load_settings()
    configure_levels(os.environ.get(WORKER_LOG_LEVEL, "info"), settings.log_format)
    return create_app(settings, drain_on_signals=True)


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
            if settings.stock_runtime:  # a measurement setting: say so where it is seen
                log.warning("stock runtime: %s (GATEWAY_STOCK_RUNTIME; the libraries' own path "
                            "instead of the gateway's, for measuring)",
                            ", ".join(settings.stock_runtime))
            if "gc" not in settings.stock_runtime:
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

    app = FrontedApp(
        settings, Checks(development.refused, door.Door(), keyring.find_credentials),
        routes=[*operations.routes,
                *(route for dialect in registry.DIALECTS for route in dialect.routes),
                *threads.routes, *assist.routes, *components.routes, *oauth.routes, *audio.routes,
                *docs.routes, *playground.routes, *agents_api.routes,
                *admin_api.routes, *crons.routes],
        exception_handlers=HANDLERS,
        lifespan=lifespan,
    )
    app.state.agents = agent_registry
    return app
