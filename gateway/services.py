"""The composition root: every long-lived object of a gateway process, built and closed in one
place.

`open_services(settings)` builds them in order (the database and its migrations, the model, the
server tools, the backend that reaches the other processes, the run manager and its two
background tasks) on one `AsyncExitStack`, and yields them as one `Services`; leaving it closes
them in the reverse order, and so does a failure halfway through building them. The app's
lifespan, the tests that need a whole gateway without HTTP, and the benchmarks all open the same
services. What only a serving process does (signal handlers, garbage-collector tuning) stays in
`app.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .auth.identity import IdentityProviders
from .auth.keyring import KeyRing
from .backends import open_backend
from .config import DEMO_MODEL, Settings
from .engine.agents.agent import AgentDefaults, AgentRegistry
from .engine.agents.file import registry_for
from .engine.assist import CompletionModel
from .engine.loop import Model, ServerToolSpec
from .engine.models.adapters import AdapterError, adapter_for, load_litellm, model_adapter
from .engine.models.direct import DirectModel
from .engine.models.native import NativeModel
from .engine.tools.approval_rules import ApprovalRule
from .engine.tools.python_tools import load_python_tools
from .observability import tracing
from .observability.metrics import StoreTimer
from .runs.admission.schedules import Scheduler
from .runs.admission.submit import Admission
from .runs.automation.webhooks import WebhookSender
from .runs.backend import Backend
from .runs.execution import LoopSetup
from .runs.limits import RunLimits
from .runs.manager import RunManager
from .runs.supervisor import RunSupervisor
from .runs.timings import Timings
from .server.loop_lag import monitor_loop_lag
from .store.db import create_engine, migrate
from .store.pruning import prune_periodically
from .store.repository import Store

log = logging.getLogger("gateway")
# On exit, how long the background tasks may take to stop (a query they are in finishes).
BACKGROUND_STOP_SECONDS = 2.0


class ServedModel(Model, CompletionModel, Protocol):
    """The model a gateway serves: streamed for runs, completed for titles and suggestions."""


@dataclass(frozen=True)
class Services:
    settings: Settings
    store: Store
    model: ServedModel
    backend: Backend  # how this process reaches the others; `/ready` pings it
    runs: RunManager
    identity: IdentityProviders
    keyring: KeyRing
    agents: AgentRegistry  # the operator's agents (`engine/agents/agent.py`)
    admission: Admission  # the one door of every run start (`runs/admission/submit.py`)
    # Timbal WebSockets open on this process, per API key (GATEWAY_KEY_WEBSOCKETS).
    sockets: Counter[str] = field(default_factory=Counter)


def prices_of(settings: Settings) -> dict[str, tuple[float, float, float | None]]:
    """`GATEWAY_MODEL_PRICES` as each run's usage reads it (`engine.usage.Prices`)."""
    return {model: (price.input, price.output, price.cachedInput)
            for model, price in settings.model_prices.items()}


@contextlib.asynccontextmanager
async def open_services(settings: Settings, *, model: ServedModel | None = None,
                        timings: Timings | None = None, agents: AgentRegistry | None = None
                        ) -> AsyncIterator[Services]:
    """The services of one process, closed on exit. `model` replaces the configured model (a
    test's scripted one); `timings` the settings' waits (a test's shrunken ones); `agents` the
    agents `create_app` already checked (else those of the settings)."""
    agents = agents if agents is not None else registry_for(settings)
    load_litellm()
    from .engine.models import demo  # imports litellm: only after `load_litellm`

    demo.set_speed(settings.demo_tokens_per_second)
    async with contextlib.AsyncExitStack() as stack:
        store = await _open_store(settings, stack)
        served = model if model is not None else await _open_model(settings, stack)
        tracing.start()
        stack.callback(tracing.stop)
        server_tools = await open_server_tools(settings, stack)
        timings = timings or Timings.from_settings(settings)
        backend = open_backend(settings, store, timings)
        stack.push_async_callback(backend.close)
        setup = LoopSetup(served, settings.model, server_tools, agents,
                          await agent_tools(settings, agents, stack, server_tools),
                          agent_models(settings, agents, stack) if model is None else {},
                          prices=prices_of(settings))
        check_subagent_names(setup)
        manager = RunManager(store, setup, backend, RunLimits.from_settings(settings), timings)
        manager.components.max_state_bytes = settings.max_component_state_bytes
        stack.push_async_callback(manager.shutdown)
        _start_background(manager, settings, stack)
        services = Services(settings, store, served, backend, manager, _identity(settings),
                            KeyRing(store, settings.key_cache_seconds,
                                    settings.failed_key_lookups_per_minute), agents,
                            Admission(settings, agents, manager))
        _start_automation(services, stack)
        await _warn_about_defaults(services)
        yield services


async def _open_store(settings: Settings, stack: contextlib.AsyncExitStack) -> Store:
    engine = create_engine(settings.database_url, settings.database_pool_size)
    stack.push_async_callback(engine.dispose)
    await migrate(engine)
    return Store(engine, hooks=StoreTimer())


async def _open_model(settings: Settings, stack: contextlib.AsyncExitStack) -> ServedModel:
    """The configured model adapter (measured by the runs' loop hooks, `runs/run_hooks.py`)."""
    try:
        adapter = adapter_for(settings)
    except AdapterError as error:  # an embedding app's start-up: say why, in one line
        log.error("cannot start: %s", error)
        raise
    if isinstance(adapter, (DirectModel, NativeModel)):
        adapter.open()
        stack.push_async_callback(adapter.aclose)
    return adapter


def _start_background(manager: RunManager, settings: Settings,
                      stack: contextlib.AsyncExitStack) -> None:
    """Lease renewal and failing the runs of dead processes (at start-up too); cancels and
    thread events signalled by other processes; the event loop's lateness for admission
    control, and its lag log, if asked for; the retention prune, if set. Stopped first on exit."""
    tasks = [asyncio.create_task(RunSupervisor(manager).run(), name="run supervisor"),
             asyncio.create_task(manager.listen_for_signals(), name="signals")]
    if settings.max_loop_lag_seconds:  # admission control reads it (`runs/admission/lateness.py`)
        tasks.append(asyncio.create_task(manager.lateness.watch(), name="loop lateness"))
    if settings.loop_lag_log_seconds:
        tasks.append(asyncio.create_task(monitor_loop_lag(settings.loop_lag_log_seconds),
                                         name="loop lag"))
    if settings.retention_days:
        tasks.append(asyncio.create_task(
            prune_periodically(manager.store, settings.retention_days), name="retention"))

    async def stop() -> None:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=BACKGROUND_STOP_SECONDS)

    stack.push_async_callback(stop)


def _start_automation(services: Services, stack: contextlib.AsyncExitStack) -> None:
    """The schedules' firing and the completion webhooks' sending (every process takes part;
    the store decides which one fires or sends each). Stopped before the run manager."""
    tasks = [asyncio.create_task(Scheduler(services.settings, services.admission,
                                           services.keyring).run(), name="schedules"),
             asyncio.create_task(WebhookSender(services.settings, services.store,
                                               services.runs.owner).run(), name="webhooks")]

    async def stop() -> None:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=BACKGROUND_STOP_SECONDS)

    stack.push_async_callback(stop)


def _identity(settings: Settings) -> IdentityProviders:
    return IdentityProviders(
        settings.oidc_issuers, settings.oidc_audience,
        settings.oauth_hs256_secret.get_secret_value() if settings.oauth_hs256_secret else None,
        settings.token_secret.get_secret_value() if settings.token_secret else None,
        settings.token_ttl_seconds, settings.oauth_hs256_issuer)


async def _warn_about_defaults(services: Services) -> None:
    settings = services.settings
    if await services.keyring.development(settings):
        log.warning("development mode: every x-api-key is accepted, all callers share one "
                    "project, and only this machine is answered (loopback clients, Host names "
                    "and origins). Create a key (gateway keys create) or set GATEWAY_API_KEYS "
                    "to serve others.")
    if settings.model == DEMO_MODEL:
        log.warning("Using the built-in demo model (%s): it is a scripted stand-in, not a "
                    "real LLM. Set GATEWAY_MODEL to use a real one.", DEMO_MODEL)


async def open_server_tools(settings: Settings, stack: contextlib.AsyncExitStack
                            ) -> dict[str, ServerToolSpec]:
    """The project's server tools: Python functions (GATEWAY_TOOLS) and MCP servers (closed
    with `stack`). A tools module or MCP server the operator must fix is logged and raised."""
    try:
        tools = await _server_tools(settings, stack)
    except Exception as exc:
        reason = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        log.error("cannot start: the server tools failed to load: %s: %s",
                  type(exc).__name__, reason)
        raise
    if tools:
        log.info("server tools: %s", ", ".join(sorted(tools)))
    return tools


async def _server_tools(settings: Settings, stack: contextlib.AsyncExitStack
                        ) -> dict[str, ServerToolSpec]:
    tools: dict[str, ServerToolSpec] = {}
    if settings.tools_module:
        tools.update(load_python_tools(settings.tools_module))
    if settings.mcp_servers:
        from .engine.tools.mcp import open_mcp_tools

        for name, spec in (await open_mcp_tools(settings.mcp_servers, stack)).items():
            if name in tools:
                raise ValueError(f"MCP tool {name!r} has the name of a Python server tool")
            tools[name] = spec
    return tools


def agent_models(settings: Settings, agents: AgentRegistry,
                 stack: contextlib.AsyncExitStack) -> dict[str, Model]:
    """The model object of each agent whose fallbacks are not the environment's: its model
    and its own `fallbacks`, through litellm's Router (as `GATEWAY_MODEL_FALLBACKS` are), so a
    failure before the stream's content moves on down the agent's list. Every other agent
    streams through the configured adapter (with the environment's fallbacks, on the
    environment's model)."""
    inherited = AgentDefaults.from_settings(settings).fallbacks
    key = settings.model_api_key.get_secret_value() if settings.model_api_key else None
    models: dict[str, Model] = {}
    for agent in agents:
        on_configured = agent.model == settings.model
        if agent.fallbacks == (inherited if on_configured else ()):
            continue
        adapter = model_adapter(agent.model, settings.model_api_base, key,
                                settings.model_adapter, agent.fallbacks, settings.model_retries)
        if isinstance(adapter, (DirectModel, NativeModel)):
            adapter.open()
            stack.push_async_callback(adapter.aclose)
        models[agent.name] = adapter
        log.info("agent %s: model %s, fallbacks %s", agent.name, agent.model,
                 ", ".join(f.model for f in agent.fallbacks) or "none")
    return models


def check_subagent_names(setup: LoopSetup) -> None:
    """A sub-agent is offered to its calling agent's model under its own name: none of that
    agent's server tools (its Python tools, its MCP servers') may have the same name."""
    for agent in setup.agents or ():
        taken = set(agent.subagents) & set(setup.tools_of(agent))
        if taken:
            raise ValueError(f"agent {agent.name}: its sub-agent {sorted(taken)[0]!r} has the "
                             "name of one of its server tools")


async def agent_tools(settings: Settings, agents: AgentRegistry,
                      stack: contextlib.AsyncExitStack,
                      project_tools: dict[str, ServerToolSpec] | None = None
                      ) -> dict[str, dict[str, ServerToolSpec]]:
    """The server tools of each agent that does not simply have the project's: its own Python
    tools (`tools`, else GATEWAY_TOOLS) and its MCP servers' (each file connected once), with
    the tools its `approval` list names marked to ask first."""
    own: dict[str, dict[str, ServerToolSpec]] = {}
    connected: dict[str, dict[str, ServerToolSpec]] = {}
    for agent in agents:
        if agent.tools is None and agent.mcp_servers == (settings.mcp_servers or None):
            if agent.approval or agent.approval_rules:
                own[agent.name] = asking_first(agent.name, agent.approval,
                                               dict(project_tools or {}), agent.approval_rules)
            continue
        tools = dict(agent.tools if agent.tools is not None else
                     load_python_tools(settings.tools_module) if settings.tools_module else {})
        if agent.mcp_servers:
            if agent.mcp_servers not in connected:
                from .engine.tools.mcp import open_mcp_tools

                connected[agent.mcp_servers] = await open_mcp_tools(agent.mcp_servers, stack)
            for name, spec in connected[agent.mcp_servers].items():
                if name in tools:
                    raise ValueError(f"agent {agent.name}: MCP tool {name!r} has the name of "
                                     "one of its Python server tools")
                tools[name] = spec
        own[agent.name] = asking_first(agent.name, agent.approval, tools, agent.approval_rules)
    return own


def asking_first(agent: str, names: Sequence[str], tools: dict[str, ServerToolSpec],
                 rules: Mapping[str, ApprovalRule] | None = None
                 ) -> dict[str, ServerToolSpec]:
    """`tools` with those `names` marked for approval, and those `rules` name marked to ask
    when their rule holds; a name the agent has no tool of stops start-up (a typo must not
    leave a tool that should ask first running unasked)."""
    for name in [*names, *(rules or {})]:
        if name not in tools:
            raise ValueError(f"agent {agent}: approval names {name!r}, which is not one of its "
                             f"server tools ({', '.join(sorted(tools)) or 'none'})")
    for name in names:
        tools[name] = dataclasses.replace(tools[name], approval=True, approval_rule=None)
    for name, rule in (rules or {}).items():
        tools[name] = dataclasses.replace(tools[name], approval=True, approval_rule=rule)
    return tools
