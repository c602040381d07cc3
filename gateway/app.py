"""create_app(settings): routes, middleware and the lifespan that wires the services."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import sys
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from .api import agui, assist, audio, components, docs, oauth, playground, runs, threads, timbal
from .api.body_limit import BodyLimitMiddleware
from .api.context import Services
from .api.errors import HANDLERS
from .api.identity import IdentityProviders
from .api.keyring import KeyRing, KeyRingMiddleware
from .config import DEMO_MODEL, Settings, load_settings
from .engine.adapters import model_adapter
from .engine.direct_model import DirectModel
from .engine.loop import ServerToolSpec
from .engine.routed_model import Deployment
from .engine.tools import load_python_tools
from .loop_lag import monitor_loop_lag
from .observability import tracing
from .observability.logs import RequestIdMiddleware, configure_levels
from .observability.metrics import MeteredModel, metrics_endpoint, time_store_operations
from .observability.ready import ready
from .runs.fanout import fanout_over
from .runs.manager import RunManager
from .runs.quotas import MemoryCounters, Quotas, RedisCounters
from .runs.supervisor import RunSupervisor
from .runs.timings import Timings
from .shutdown import DrainOnSignals
from .store.db import create_engine, migrate
from .store.repository import Store

log = logging.getLogger("gateway")
SWITCH_INTERVAL_SECONDS = 0.0005
# Garbage collection thresholds of a serving process (young, middle, old generations).
GC_THRESHOLDS = (20_000, 50, 100)


def load_litellm() -> None:
    """Import litellm once, offline: no cost-map download, no `.env` loading."""
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    import litellm  # noqa: F401  (about 5 s; done at start-up, never per request)

    from .engine import demo_model

    demo_model.register()
    litellm.suppress_debug_info = True
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):  # one INFO line per request
        logging.getLogger(name).setLevel(logging.WARNING)


async def open_server_tools(settings: Settings, stack: contextlib.AsyncExitStack
                            ) -> dict[str, ServerToolSpec]:
    """The project's server tools: Python functions (GATEWAY_TOOLS) and MCP servers."""
    tools: dict[str, ServerToolSpec] = {}
    if settings.tools_module:
        tools.update(load_python_tools(settings.tools_module))
    if settings.mcp_servers:
        from .engine.mcp_tools import open_mcp_tools

        try:
            for name, spec in (await open_mcp_tools(settings.mcp_servers, stack)).items():
                if name in tools:
                    raise ValueError(f"MCP tool {name!r} has the name of a Python server tool")
                tools[name] = spec
        except BaseException:
            await stack.aclose()  # stop the MCP servers already started
            raise
    if tools:
        log.info("server tools: %s", ", ".join(sorted(tools)))
    return tools


async def health(_: Request) -> Response:
    return JSONResponse({"status": "ok"})


# Outside the server-error handler, in this order: CORS, then the request id (so the 500 of an
# unexpected error carries both, and its log line names the request).
OUTERMOST = (CORSMiddleware, RequestIdMiddleware)


class CorsOutermost(Starlette):
    """Starlette with its CORS middleware moved outside the server-error handler.

    Starlette nests user middleware inside `ServerErrorMiddleware`, which writes the 500
    problem+json of an unexpected error; that response would leave without CORS headers, and a
    browser app would see a bare network failure ("Connection error.") instead of the problem.
    The request id middleware moves out with it, for the same reason.
    """

    def build_middleware_stack(self) -> ASGIApp:
        cors = [m for m in self.user_middleware if m.cls in OUTERMOST]
        self.user_middleware = [m for m in self.user_middleware if m.cls not in OUTERMOST]
        app = super().build_middleware_stack()
        for middleware in reversed(cors):
            app = middleware.cls(app, *middleware.args, **middleware.kwargs)
        return app


# How `serve --workers` hands its `--log-level` to its workers (fresh interpreters).
WORKER_LOG_LEVEL = "_GATEWAY_WORKER_LOG_LEVEL"


def app_from_environment() -> Starlette:
    """The app of one `gateway serve --workers N` worker (each reads the environment itself;
    the parent has already validated it), logging as the parent does."""
    settings = load_settings()
    configure_levels(os.environ.get(WORKER_LOG_LEVEL, "info"), settings.log_format)
    return create_app(settings, drain_on_signals=True)


def create_app(settings: Settings, *, drain_on_signals: bool = False) -> Starlette:
    """The gateway as an ASGI app. `drain_on_signals`: on SIGTERM/SIGINT, drain the runs before
    the server that runs the app stops (`gateway.shutdown`); `gateway serve` sets it, an app
    embedded in another server leaves signals to that server."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        load_litellm()
        engine = create_engine(settings.database_url, settings.database_pool_size)
        await migrate(engine)
        store = time_store_operations(Store(engine))
        adapter = model_adapter(
            settings.model, settings.model_api_base,
            settings.model_api_key.get_secret_value() if settings.model_api_key else None,
            settings.model_adapter,
            [Deployment(f.model, f.api_base, f.api_key.get_secret_value() if f.api_key else None)
             for f in settings.model_fallbacks], settings.model_retries)
        model = MeteredModel(adapter, settings.model)
        tracing.start()
        stack = contextlib.AsyncExitStack()
        try:
            server_tools = await open_server_tools(settings, stack)
        except Exception as exc:  # a tools module or MCP server the operator must fix
            reason = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            log.error("cannot start: the server tools failed to load: %s: %s",
                      type(exc).__name__, reason)
            await engine.dispose()
            raise
        timings = Timings.from_settings(settings)
        fanout = fanout_over(settings.redis_url, store, timings)
        # A quota slot outlives a crashed process by at most a run's longest life.
        slot_ttl_ms = int((settings.run_max_seconds + settings.lease_seconds) * 1000)
        quotas = Quotas(RedisCounters(fanout.redis, slot_ttl_ms) if fanout.redis is not None
                        else MemoryCounters())
        manager = RunManager(store, model, max_steps=settings.max_steps,
                             tool_timeout=settings.tool_timeout_seconds, timings=timings,
                             server_tools=server_tools,
                             idempotency_ttl_seconds=settings.idempotency_ttl_seconds,
                             remote_feed=fanout.feed, signals=fanout.signals, quotas=quotas,
                             run_max_seconds=settings.run_max_seconds,
                             max_output_tokens=settings.run_max_output_tokens or None,
                             model_name=settings.model,
                             start_concurrency=settings.start_concurrency)
        manager.components.max_state_bytes = settings.max_component_state_bytes
        # Lease renewal and failing the runs of dead processes (at start-up too); cancels
        # signalled by other processes: two background tasks for the whole process.
        supervisor = asyncio.create_task(RunSupervisor(manager).run(), name="run supervisor")
        cancels = asyncio.create_task(manager.listen_for_signals(), name="signals")
        lag_monitor = (asyncio.create_task(monitor_loop_lag(settings.loop_lag_log_seconds))
                       if settings.loop_lag_log_seconds else None)
        identity = IdentityProviders(
            settings.oidc_issuers, settings.oidc_audience,
            settings.oauth_hs256_secret.get_secret_value() if settings.oauth_hs256_secret else None,
            settings.token_secret.get_secret_value() if settings.token_secret else None,
            settings.token_ttl_seconds)
        keyring = KeyRing(store, settings.key_cache_seconds)
        app.state.services = Services(settings=settings, store=store, runs=manager, model=model,
                                      identity=identity, keyring=keyring, redis=fanout.redis)
        signals = DrainOnSignals.install(manager) if drain_on_signals else None
        if settings.development_mode and not await keyring.any_usable():
            log.warning("GATEWAY_API_KEYS is not set: development mode, every x-api-key is "
                        "accepted and all callers share one project. Set it before exposing "
                        "the gateway.")
        if settings.model == DEMO_MODEL:
            log.warning("Using the built-in demo model (%s): it is a scripted stand-in, not a "
                        "real LLM. Set GATEWAY_MODEL to use a real one.", DEMO_MODEL)
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
        try:
            yield
        finally:
            if signals is not None:
                signals.uninstall()
            supervisor.cancel()
            if lag_monitor is not None:
                lag_monitor.cancel()
            cancels.cancel()
            await manager.shutdown()
            await stack.aclose()
            await fanout.close()
            if isinstance(adapter, DirectModel):
                await adapter.aclose()
            await engine.dispose()
            tracing.stop()

    return CorsOutermost(
        routes=[Route("/health", health, methods=["GET"]),
                Route("/ready", ready, methods=["GET"]),
                Route("/metrics", metrics_endpoint, methods=["GET"]), *runs.routes,
                *threads.routes, *assist.routes, *components.routes, *oauth.routes, *audio.routes,
                *docs.routes, *playground.routes, *agui.routes, *timbal.routes],
        middleware=[Middleware(CORSMiddleware, allow_origins=list(settings.cors_origins),
                               allow_methods=["*"], allow_headers=["*"],
                               expose_headers=["X-Run-Id", "X-Thread-Id", "ETag",
                                               "X-Request-Id", "Retry-After"], max_age=600),
                    Middleware(RequestIdMiddleware),
                    Middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes),
                    Middleware(KeyRingMiddleware)],
        exception_handlers=HANDLERS,
        lifespan=lifespan,
    )
