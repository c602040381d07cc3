"""Execution: a run's task, from `running` through its agent loop to its committed end.

Every way a run can end goes through `_end`: the terminal state is committed with the end of the
log, under the run's lease (a process whose lease was taken over is fenced out and only shows
the run's loss locally).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

from ..engine.agents.agent import AgentRegistry, ResolvedAgent
from ..engine.agents.subagents import Delegation
from ..engine.deltas import ModelError
from ..engine.history import to_model_messages
from ..engine.loop import Model, Outcome, RunInput, ServerToolSpec, run_agent
from ..engine.tools.context import ToolContext, bind_tool_context
from ..engine.tools.shared_state import bind as bind_shared_state
from ..engine.tools.status import StatusBudget
from ..engine.usage import Prices, RunUsage
from ..observability import logs, metrics, tracing
from ..protocol import timbal
from ..protocol.clock import now_ms
from ..protocol.frames_schema import RunAwaitingInputFrame, RunFinishedFrame
from ..protocol.run_errors import ErrorFields, error_frame, run_error
from ..protocol.run_spec import RunSpec
from ..store.queries.usage import usage_rows
from ..store.repository import UNAVAILABLE, FrameEntry, Store
from ..store.tables import MessageRow, RunRow, ThreadRow
from . import approvals
from .admission.multitask import model_history
from .admission.quotas import Ticket
from .components.state import ComponentStates, bind_run
from .components.thread_state import thread_state
from .context_fit import budgeted
from .limits import RunLimits
from .log.recorder import RunRecorder
from .log.writer import LogWriter
from .phase import RunPhase
from .registry import ActiveRun
from .run_hooks import RunHooks
from .salvage import save_failed_message, save_partial_answer
from .supervisor import lost_frame
from .timings import Timings
from .usage import UsageMeter, api_key_id, with_usage

log = logging.getLogger(__name__)

CANCELLED_ERROR: ErrorFields = {"code": "CANCELLED", "message": "Run cancelled"}
SHUTDOWN_ERROR = run_error("SERVER_SHUTDOWN", "The gateway is restarting", retryable=True,
                           status=503)
UNAVAILABLE_ERROR = run_error("DATABASE_UNAVAILABLE",
                              "The gateway lost its database during this run", retryable=True,
                              status=503)
INTERNAL_ERROR = run_error("INTERNAL_ERROR", "An internal error occurred")
# What the run's and the thread's rows keep of a pending call (its `input` is the live frame's).
STORED_PENDING: Final = ("toolCallId", "toolName", "arguments", "approval")


@dataclass(frozen=True)
class LoopSetup:
    """What the agent loop of every run is given: the model, the configured model's name
    (written on runs that name none), the project's server tools, and the operator's agents
    with the server tools each one has (an agent not in `agent_tools` has the project's)."""

    model: Model
    model_name: str | None = None
    server_tools: dict[str, ServerToolSpec] = field(default_factory=dict)
    agents: AgentRegistry | None = None
    agent_tools: dict[str, dict[str, ServerToolSpec]] = field(default_factory=dict)
    # The model object of each agent that streams through its own fallbacks (else `model`).
    agent_models: dict[str, Model] = field(default_factory=dict)
    prices: Prices = field(default_factory=dict)  # GATEWAY_MODEL_PRICES, for each run's usage

    def agent(self, name: str | None) -> ResolvedAgent | None:
        """The run's agent (None: no agents given, as in tests of the loop alone)."""
        if self.agents is None:
            return None
        found = self.agents.get(name) if name is not None else self.agents.default
        if found is None:  # the agents file changed while the run was paused
            raise ModelError("AGENT_NOT_FOUND", f"The run's agent {name!r} is no longer "
                             "configured on this gateway", "client_error", False)
        return found

    def tools_of(self, agent: ResolvedAgent) -> dict[str, ServerToolSpec]:
        return self.agent_tools.get(agent.name, self.server_tools)

    def model_for(self, agent: ResolvedAgent | None) -> Model:
        return self.agent_models.get(agent.name, self.model) if agent else self.model

    def delegation(self, usage: RunUsage, ticket: Ticket | None) -> Delegation | None:
        """How this run's agents call their sub-agents: each sub-agent's calls metered under
        its own model, into the run's usage and quota."""
        if self.agents is None:
            return None

        def hooks(model: str) -> tuple[RunHooks, Callable[[str], Awaitable[None]]]:
            meter = UsageMeter(usage, model, ticket)

            async def served(name: str) -> None:
                meter.served(name)

            return RunHooks(model, meter), served

        return Delegation(self.agents.agents, self.tools_of, self.model_for, hooks,
                          self.agents.max_depth)

    def model_of(self, spec: RunSpec) -> str | None:
        """The model a run calls: the one it picked (allow-listed), else its agent's."""
        if spec.model is not None:
            return spec.model
        agent = self.agents.get(spec.agent or self.agents.default_name) if self.agents else None
        return agent.model if agent is not None else self.model_name


class Host(Protocol):
    """What the executor needs of the manager that launched the run."""

    owner: str  # the lease owner this process writes as
    components: ComponentStates
    log_writer: LogWriter

    def lose(self, run_id: str) -> None: ...
    def retire(self, active: ActiveRun) -> None: ...


class RunExecutor:
    def __init__(self, store: Store, setup: LoopSetup, limits: RunLimits, timings: Timings,
                 host: Host) -> None:
        self.store, self.model, self.components = store, setup.model, host.components
        self.owner, self.timings, self.lease_ms = host.owner, timings, timings.lease_ms
        self.run_max_seconds, self.max_output_tokens = (limits.run_max_seconds,
                                                        limits.max_output_tokens)
        self.max_steps, self.tool_timeout = limits.max_steps, limits.tool_timeout_seconds
        self.approval_ttl = limits.approval_ttl_seconds
        self.server_tools = setup.server_tools
        # Whether any run may call a server tool (the project's, or an agent's own): only
        # then is each run's tool context bound (one read of its thread).
        self.has_tools = bool(setup.server_tools) or any(setup.agent_tools.values())
        self._lose, self._retire = host.lose, host.retire
        self.writer = host.log_writer
        self.limits = limits
        self.model_name = setup.model_name  # the configured model, when a run names none
        self.setup = setup

    async def execute(self, active: ActiveRun) -> None:
        run = active.row  # its spec was read from the row when it was launched
        with tracing.run_span(run.id, run.thread_id, self.setup.model_of(active.spec)):
            await self._execute(active)

    async def _execute(self, active: ActiveRun) -> None:
        run, spec = active.row, active.spec
        logs.run_id.set(run.id)  # this task's context: every line it logs names the run
        schemas = {c.name: c.state_schema for c in spec.components if c.state_schema}
        recorder = RunRecorder(self.store, active.live, run.thread_id, run.id, schemas,
                               owner=self.owner, on_fenced=lambda: self._lose(run.id),
                               writer=self.writer)
        active.recorder = recorder
        bind_run(self.components, run.thread_id)
        thread = await self._bind_tool_context(run) if self.has_tools else None
        if spec.state is not None or thread is not None:
            bind_shared_state(await thread_state(
                self.store, run.thread_id, spec.state, thread.state if thread else None,
                recorder, self.components.max_state_bytes))
        try:
            await recorder.emit({"c": timbal.RUN_STARTED, "threadId": run.thread_id,
                                 "runId": run.id})
            if active.phase is RunPhase.STARTING:
                active.phase = RunPhase.RUNNING
            await self._finish(active, recorder, await self._timed(
                self._agent(active, spec, recorder)))
        except asyncio.CancelledError:
            if active.phase is RunPhase.LOST:  # a reaper ended it; its log on disk says so
                recorder.show(lost_frame())
            elif active.cancel_requested:
                await self._end(active, recorder, "cancelled",
                                [{"c": timbal.RUN_CANCELLED}], error=CANCELLED_ERROR)
            else:  # the process is shutting down: the client may simply retry
                await self._end(active, recorder, "failed",
                                [error_frame(SHUTDOWN_ERROR)],
                                error=SHUTDOWN_ERROR)
                raise
        except ModelError as exc:
            error = run_error(exc.code, exc.message, category=exc.category,
                              retryable=exc.retryable, status=exc.status)
            await self._end(active, recorder, "failed", [error_frame(error)], error=error)
        except UNAVAILABLE as error:
            log.warning("run %s: the database became unreachable (%s); ending it", run.id,
                        type(error).__name__)
            await self._end(active, recorder, "failed",
                            [error_frame(UNAVAILABLE_ERROR)],
                            error=UNAVAILABLE_ERROR)
            await self._keep_answer(run, recorder)
        except Exception:
            log.exception("run %s failed", run.id)
            await self._end(active, recorder, "failed",
                            [error_frame(INTERNAL_ERROR)],
                            error=INTERNAL_ERROR)
        finally:
            try:
                await recorder.close()
            finally:
                if active.ticket is not None:  # every way a run ends passes here
                    await active.ticket.release()
                if active.phase is not RunPhase.LOST:
                    active.phase = RunPhase.DONE
                metrics.ACTIVE_RUNS.dec()
                active.done.set()
                self._retire(active)

    async def _bind_tool_context(self, run: RunRow) -> ThreadRow | None:
        """Tell the run's server tools who it works for (`engine/tools/context.py`); the
        thread, as read for that."""
        thread = await self.store.get_thread(run.project_id, run.thread_id)
        bind_tool_context(ToolContext(project_id=run.project_id, thread_id=run.thread_id,
                                      run_id=run.id,
                                      user_scope=thread.user_key if thread else None))
        return thread

    async def _timed(self, agent: Awaitable[Outcome]) -> Outcome:
        """The agent loop within the run's wall time (`GATEWAY_RUN_MAX_SECONDS`)."""
        limit = asyncio.timeout(self.run_max_seconds)
        try:
            async with limit:
                return await agent
        except TimeoutError:
            if not limit.expired():
                raise
            raise ModelError("RUN_TIME_LIMIT", f"The run exceeded its time limit of "
                             f"{self.run_max_seconds:g} s", "server_error", False) from None

    async def _agent(self, active: ActiveRun, spec: RunSpec, recorder: RunRecorder
                     ) -> Outcome:
        run = active.row
        if active.history is not None:  # a new thread: its history is what the start wrote
            rows, states = active.history, {}
            active.history = None
        else:
            rows, components = await self.store.thread_context(run.thread_id)
            rows = model_history(rows)  # without rolled-back answers (`multitask`)
            states = {cid: c.state for cid, c in components.items()}
        for row in rows:  # the run's input, so that the log is the whole transcript
            if row.run_id == run.id and row.role == "user":
                for part in row.parts:
                    await recorder.emit(timbal.part_frame(part, row.created_ms))
        model = self.setup.model_of(spec)
        meter = UsageMeter(active.usage, model or "", active.ticket)
        statuses = StatusBudget(self.limits.tool_status_max_per_run)
        run_input = self._run_input(active, spec, rows, states, model, meter, statuses)
        answers = approvals.answers_of(rows, run.id)
        if answers:  # approved calls run now; the model then sees every call answered
            asking = await approvals.settle(run_input, answers, rows, recorder)
            if asking:  # a tool asked another question: pause again before the model
                return Outcome(asking)
            rows, components = await self.store.thread_context(run.thread_id)
            rows = model_history(rows)
            states = {cid: c.state for cid, c in components.items()}
            run_input = self._run_input(active, spec, rows, states, model, meter, statuses)
        agent = self.setup.agent(spec.agent)
        model_object = (self.model if agent is None or spec.model is not None
                        else self.setup.model_for(agent))
        run_input = await budgeted(self.store, run, run_input, agent, self.limits, model_object,
                                   recorder)
        return await run_agent(model_object, run_input, recorder)

    def _run_input(self, active: ActiveRun, spec: RunSpec, rows: list[MessageRow],
                   states: dict[str, Any], model: str | None, meter: UsageMeter,
                   statuses: StatusBudget | None = None) -> RunInput:
        """What the agent loop is given: the thread so far, the request's tools and limits,
        as the run's agent runs it. Every call has an output cap: the agent's `max_tokens`,
        else `GATEWAY_MAX_TOKENS`; the request may ask for less."""
        agent = self.setup.agent(spec.agent)
        cap = agent.max_tokens if agent is not None and agent.max_tokens else \
            self.limits.default_max_tokens
        run_input = RunInput(
            history=to_model_messages(rows, states),
            client_tools=spec.client_tools,
            components=spec.components,
            server_tools=self.server_tools,
            tool_choice=spec.tool_choice,
            force_component=spec.force_component,
            max_tokens=output_cap(spec.max_tokens, cap),
            temperature=spec.temperature,
            model=model,
            max_steps=self.max_steps,
            max_output_tokens=self.max_output_tokens,
            tool_timeout=self.tool_timeout,
            approval_ttl=self.approval_ttl,
            allowed_tools=approvals.allowed_tools(rows),
            call_counts=tool_call_counts(rows),
            shown_components={p["name"] for row in rows for p in row.parts
                              if p.get("type") == "x-component"},
            on_model=self._model_recorder(active.row.id, model, meter),
            hooks=RunHooks(model, meter),
            status_budget=statuses,
            on_truncation=self.limits.on_truncation,
            status_messages=spec.status_messages,
        )
        if agent is not None:
            run_input = as_agent(run_input, agent, self.setup.agent_tools)
        if active.extra_tools:  # this run's own (a Chorus message's MCP servers)
            run_input = replace(run_input, server_tools={**run_input.server_tools,
                                                         **active.extra_tools})
        if agent is None:
            return run_input
        delegation = self.setup.delegation(active.usage, active.ticket)
        if delegation is not None:
            run_input.subagents = delegation.tools_of(agent)
        return run_input

    def _model_recorder(self, run_id: str, expected: str | None, meter: UsageMeter
                        ) -> Callable[[str], Awaitable[None]]:
        """Records the model that answered when it is not the one the run started with (a
        fallback served it): one write per change, none on the usual path. The meter counts
        the call's usage under it."""
        recorded = [expected]

        async def record(model: str) -> None:
            meter.served(model)
            if model != recorded[0]:
                # Worth an operator's attention: the run was served, but the model it should
                # have used failed (its error went to the Router, not to the run).
                log.warning("run %s: %s failed; fallback model %s answered", run_id,
                            recorded[0], model)
                recorded[0] = model
                await self.store.set_run_model(run_id, model)

        return record

    async def _keep_answer(self, run: RunRow, recorder: RunRecorder) -> None:
        """After a database outage ended the run: what it had said is in its log (flushed with
        its end), but the writes of its messages failed, so the thread would lose the answer
        the user saw. Write them now, marked failed, as a lost run's partial answer is."""
        try:
            for message_id, parts in recorder.unsaved_messages().items():
                await save_failed_message(self.store, run, message_id, parts, UNAVAILABLE_ERROR)
            await save_partial_answer(self.store, run, UNAVAILABLE_ERROR)
        except UNAVAILABLE as error:  # still away: the log keeps it, the thread does not
            log.error("run %s: could not save its answer to the thread (%s)", run.id,
                      type(error).__name__)

    async def _finish(self, active: ActiveRun, recorder: RunRecorder, outcome: Outcome) -> None:
        finished: RunFinishedFrame = {"c": timbal.RUN_FINISHED}
        if outcome.truncated is not None:  # the answer the run ends with was cut
            finished["truncated"] = outcome.truncated
        if outcome.pending:
            pending: list[dict[str, Any]] = [{k: p[k] for k in STORED_PENDING if k in p}
                                             for p in outcome.pending]
            awaiting: RunAwaitingInputFrame = {"c": timbal.RUN_AWAITING_INPUT,
                                               "pendingToolCalls": outcome.pending}
            await self._end(active, recorder, "awaiting_input", [awaiting, finished],
                            pending=pending)
        else:
            await self._end(active, recorder, "completed", [finished])

    async def _end(self, active: ActiveRun, recorder: RunRecorder, status: str,
                   frames: list[timbal.Frame], *, pending: list[dict[str, Any]] | None = None,
                   error: ErrorFields | None = None) -> None:
        """Commit the terminal state together with the end of the log, then show the terminal
        events: the Tambo client closes the stream the moment it reads `awaiting_input` and
        posts the continuation within milliseconds, so the thread must already be idle."""
        if active.phase.live:
            active.phase = RunPhase.ENDING
        run = active.row
        usage = active.usage.entries()
        frames = with_usage(frames, usage)

        async def commit(entries: list[FrameEntry], messages: list[MessageRow]) -> bool:
            now = now_ms()
            queued: list[str] = []
            ended = await self.store.finish_run(
                run.id, run.thread_id, status, now, pending=pending, error=error,
                owner=self.owner, frames=entries, first_token_ms=recorder.first_token_ms,
                usage=usage_rows(run, active.agent, api_key_id(active.ticket), usage, now),
                queued=queued, messages=messages)
            active.queued_after = queued if ended else None
            # Freed before the client reads the end: a continuation it posts at once (client
            # tools) must find the slot free, as it finds the thread idle.
            if active.ticket is not None:
                await active.ticket.release()
            return ended

        committed = await self._committed(run, recorder, frames, commit)
        code = error["code"] if error is not None else None
        metrics.run_ended(status if committed else "lost", code or "")
        tracing.run_ended(status if committed else "lost", code)
        metrics.record_usage(active.agent, usage)
        if not committed:
            log.warning("run %s was ended by another process (lease lost) before it could "
                        "finish as %s", run.id, status)
            recorder.show(lost_frame())

    async def _committed(self, run: RunRow, recorder: RunRecorder, frames: list[timbal.Frame],
                         commit: Callable[[list[FrameEntry], list[MessageRow]], Awaitable[bool]]
                         ) -> bool:
        """`recorder.finish`, retried while the database is unreachable (a restart, a network
        blip) for up to the lease: the run then ends as decided, once. If the database stays
        away longer, the run is left to the reaper (RUN_LOST) and its subscribers here get a
        retryable error."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.lease_ms / 1000
        while True:
            try:
                return await recorder.finish(frames, commit)
            except Exception as error:
                if loop.time() > deadline:
                    log.error("run %s: could not record its end (%s)", run.id, error)
                    recorder.show(error_frame(UNAVAILABLE_ERROR))
                    return True
                log.warning("run %s: recording its end failed (%s); retrying", run.id, error)
                await asyncio.sleep(self.timings.commit_retry_seconds)


def as_agent(run_input: RunInput, agent: ResolvedAgent,
             agent_tools: dict[str, dict[str, ServerToolSpec]]) -> RunInput:
    """The run as `agent` runs it: its instructions first of all the model receives (a client's
    system prompt, where the agent allows one, comes after them), its tools and step limit, its
    temperature unless the request set one, its `max_tokens` as a ceiling, and its reasoning."""
    history = run_input.history
    if agent.instructions:
        history = [{"role": "system", "content": agent.instructions}, *history]
    max_tokens = min((n for n in (run_input.max_tokens, agent.max_tokens) if n is not None),
                     default=None)
    return replace(
        run_input, history=history, max_steps=agent.max_steps, max_tokens=max_tokens,
        sender=agent.name,
        server_tools=agent_tools.get(agent.name, run_input.server_tools),
        temperature=(run_input.temperature if run_input.temperature is not None
                     else agent.temperature),
        reasoning=agent.reasoning or None)


def output_cap(asked: int | None, cap: int | None) -> int | None:
    """A call's `max_tokens`: what the request asked, never more than `cap`."""
    if cap is None:
        return asked
    return cap if asked is None else min(asked, cap)


def tool_call_counts(rows: list[MessageRow]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        for part in row.parts:
            if part.get("type") == "tool_call":
                counts[part["name"]] = counts.get(part["name"], 0) + 1
    return counts


