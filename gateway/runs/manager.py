"""The run manager: the runs of this process, from their start to their end.

A run outlives its HTTP request: its task belongs to this process, writes to the run's log, and
every SSE response is only a subscriber of that log. Each phase of a run's life has its module:
`admission` (validation and the thread's lock), `execution` (the task, to its committed end),
`registry` (the runs this process executes), `subscription` (reading a log, and the policy when
the last subscriber leaves), `supervisor` (leases and the reaper), `pauses` (ending a run that
waits for client tools), `multitask` (a run request on a busy thread); how cancels and logs reach
other processes is the backend's (`backend`, `gateway/backends/`). This module only wires them
together.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from typing import Any

from ..engine.loop import ServerToolSpec
from ..engine.usage import RunUsage
from ..observability import metrics
from ..protocol import timbal
from ..protocol.clock import new_id, now_ms
from ..protocol.problems import ApiError, Problem
from ..protocol.run_spec import RunSpec
from ..store.repository import ACTIVE_RUN_STATUSES, Store
from ..store.tables import RunRow, ThreadRow
from .admission.admit import StartedRun, admit, admit_new_thread
from .admission.lateness import LoopLateness
from .admission.multitask import follow_ended, make_room, queued_input, queued_run, run_in_the_way
from .admission.quotas import NO_QUOTA, Quotas, Ticket
from .admission.start_gate import StartGate
from .admission.threads import ThreadRows
from .automation import webhooks
from .backend import Backend, RunFeed, Signals
from .components.state import ComponentStates
from .execution import CANCELLED_ERROR, LoopSetup, RunExecutor
from .limits import RunLimits
from .log.live import Entry, LiveLog
from .log.subscription import Subscriptions
from .log.writer import LogWriter
from .pauses import abandon_stale_pause, end_pause
from .phase import RunPhase
from .registry import ActiveRun, RunRegistry
from .salvage import end_dead_run
from .timings import Timings

log = logging.getLogger(__name__)
# Starts a request with `interrupt` or `rollback` tries, each after cancelling the run in its
# way: racing requests interrupt each other in turn, and this bounds how long one keeps losing.
MULTITASK_ATTEMPTS = 4


class RunManager:
    def __init__(self, store: Store, setup: LoopSetup, backend: Backend, limits: RunLimits,
                 timings: Timings) -> None:
        self.store, self.model = store, setup.model
        self.limits, self.timings = limits, timings
        # Run requests take turns at it (the API's run-start handlers hold it, see `start_gate`).
        # Past what the process can carry, it refuses new runs at once (503 OVERLOADED).
        # Watched by a background task (`services`) while runs go or requests read it.
        self.lateness = LoopLateness(busy=lambda: bool(self.registry.active))
        self.start_gate = StartGate(limits.start_concurrency, limits.max_active_runs,
                                    limits.max_start_wait_seconds,
                                    lambda: len(self.registry.active),
                                    max_lag=limits.max_loop_lag_seconds,
                                    lag=self.lateness.sustained,
                                    max_share=limits.max_loop_cpu,
                                    share=self.lateness.cpu_share)
        # Runs per minute, concurrent runs and daily tokens per API key and user scope.
        self.quotas = Quotas(backend.counters, backend.local_counters, limits.quota_outage)
        self.idempotency_ttl_seconds = limits.idempotency_ttl_seconds
        self.model_name = setup.model_name  # the configured model, written on runs that name none
        self.setup = setup
        # Where runs of other processes are read from, and how cancels reach them.
        self.remote_feed: RunFeed = backend.feed
        self._publishes = getattr(backend.feed, "publishes", True)  # a task per run if so
        self.signals: Signals = backend.signals
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{new_id()}"
        self.registry = RunRegistry()
        self.subscriptions = Subscriptions(store, timings, self.registry, backend.feed,
                                           self.request_local_cancel)
        # Set while the process drains for shutdown: makes the error a new run is refused with.
        self.refusal: Callable[[], Exception] | None = None
        # Log flushes of all runs share transactions (see `log_writer`).
        self.log_writer = LogWriter(store)
        self._publishing: set[asyncio.Task[None]] = set()
        # Component state updates from the API and from server tools (`run_components()`).
        self.components = ComponentStates(store, self, self.signals.publish_thread_event)
        self.executor = RunExecutor(store, setup, limits, timings, self)

    @property
    def active(self) -> dict[str, ActiveRun]:
        return self.registry.active

    # -- starting -------------------------------------------------------------------------------

    async def start(self, thread: ThreadRow | ThreadRows, spec: RunSpec,
                    ticket: Ticket | None = None, *, client_run_id: str | None = None,
                    extra_tools: dict[str, ServerToolSpec] | None = None) -> StartedRun:
        """Start a run on `thread` (a thread's rows: created in the run's own transaction), or
        attach to the run the spec's idempotency key already started. The one way a run is
        started: `admission.submit` decides who may start what, and calls this last.

        On a thread, a new user message may first end the thread's pause (`pauses`), and a
        busy thread is made room on (or the run queued) as the spec's multitask strategy says
        (`multitask`). `ticket` holds the run's quota slots (taken by `submit`): the run holds
        them until it ends, and they go back at once if nothing is started (refused, attached
        or queued). `client_run_id` is the client's own name for the run (AG-UI clients choose
        one), kept beside the gateway's id. `extra_tools`: server tools for this run only,
        besides its agent's."""
        ticket = ticket or Ticket(self.quotas, NO_QUOTA)
        try:
            self.refuse_if_closed()
        except BaseException:
            await ticket.release()
            raise
        if isinstance(thread, ThreadRows):
            admission: Awaitable[StartedRun] = admit_new_thread(
                self.store, self.owner, self.timings.lease_ms, thread, spec,
                self.setup.model_of(spec), client_run_id)
        else:
            admission = self._admit(thread.project_id, thread, spec, client_run_id)
        return await self._launched(ticket, admission, extra_tools)

    async def _admit(self, project_id: str, thread: ThreadRow, spec: RunSpec,
                     client_run_id: str | None) -> StartedRun:
        """`admission.admit`, after ending a pause the request abandons (`pauses`), and
        making room on a busy thread when the request's strategy says so (`multitask`)."""
        if await abandon_stale_pause(self.store, thread, spec,
                                     self.limits.pending_tool_ttl_seconds):
            thread = await self.store.get_thread(project_id, thread.id) or thread
        attempts = MULTITASK_ATTEMPTS
        while True:
            try:
                return await admit(self.store, self.owner, self.timings.lease_ms, project_id,
                                   thread, spec, self.idempotency_ttl_seconds, client_run_id,
                                   self.setup.model_of(spec))
            except ApiError as refused:
                if spec.multitask_strategy == "enqueue" and refused.problem is \
                        Problem.CONCURRENT_RUN and not spec.tool_results:
                    return await self._enqueue(thread, spec, client_run_id)
                attempts -= 1
                in_the_way = run_in_the_way(refused, spec) if attempts else None
                room = None
                if in_the_way:
                    room = await make_room(self.store, self.cancel, in_the_way, spec)
                elif attempts:  # runs that ended after the request arrived (`multitask`)
                    room = await follow_ended(self.store, refused, spec)
                if room is None:
                    raise
            spec = room
            thread = await self.store.get_thread(project_id, thread.id) or thread

    def refuse_if_closed(self) -> None:
        """While the process drains for shutdown, no new run starts here (see `shutdown`)."""
        if self.refusal is not None:
            error = self.refusal()
            metrics.REFUSALS.labels(getattr(error, "code", "REFUSED")).inc()
            raise error

    async def _enqueue(self, thread: ThreadRow, spec: RunSpec,
                       client_run_id: str | None) -> StartedRun:
        """Write the run as queued on the busy thread (`multitask`), then promote the thread's
        next run in case the one in the way ended meanwhile."""
        run = queued_run(thread, spec, client_run_id, self.setup.model_of(spec))
        await self.store.enqueue_run(run, webhooks.delivery(run, spec.webhook))
        await self.promote_next(thread.id)
        return StartedRun(await self.store.get_run(run.id) or run, attached=False, queued=True)

    async def promote_next(self, thread_id: str) -> None:
        """Start the thread's oldest queued run here if the thread is free (and not paused for
        client tools); a no-op when another process got there first."""
        run = await self.store.next_queued_run(thread_id)
        if run is None or self.refusal is not None:
            return
        thread = await self.store.get_thread(run.project_id, thread_id)
        if thread is None or thread.run_status != "idle" or thread.pending_tool_calls:
            return
        now = now_ms()
        if await self.store.promote_run(run.id, thread_id, thread.last_completed_run_id,
                                        queued_input(run, now), self.owner,
                                        now + self.timings.lease_ms, now):
            started = await self.store.get_run(run.id)
            if started is not None:
                self._launch(StartedRun(started, attached=False), Ticket(self.quotas, NO_QUOTA))

    async def _launched(self, ticket: Ticket, admission: Awaitable[StartedRun],
                        extra_tools: dict[str, ServerToolSpec] | None = None) -> StartedRun:
        """Launch the run `admission` persists, holding `ticket`'s quota slots; the slots go
        back at once if nothing is started (refused, or a retry attached to its run)."""
        try:
            started = await admission
        except BaseException:
            await ticket.release()
            raise
        if started.attached or started.queued:
            await ticket.release()
        else:
            self._launch(started, ticket, extra_tools or {})
        return started

    def _launch(self, started: StartedRun, ticket: Ticket,
                extra_tools: dict[str, ServerToolSpec] | None = None) -> None:
        run = started.run
        # The spec it was admitted with; a queued run's, from its row.
        spec = started.spec or RunSpec.from_row(run.request)
        active = ActiveRun(row=run, live=LiveLog(run.id), ticket=ticket,
                           history=started.history, extra_tools=extra_tools or {}, spec=spec,
                           usage=RunUsage(self.setup.prices))
        if self.setup.agents is not None:  # for its usage and metrics
            active.agent = spec.agent or self.setup.agents.default_name
        self.registry.add(active)
        metrics.RUNS_STARTED.inc()
        metrics.ACTIVE_RUNS.inc()
        active.task = asyncio.create_task(self.executor.execute(active), name=f"run {run.id}")
        if not self._publishes:  # the database feed: its log goes by the recorder's writes
            return
        publishing = asyncio.create_task(
            self.remote_feed.publish(active.live, lambda: active.phase is RunPhase.LOST),
            name=f"publish {run.id}")
        self._publishing.add(publishing)
        publishing.add_done_callback(self._publishing.discard)

    # -- cancelling -----------------------------------------------------------------------------

    async def cancel(self, run_id: str, row: RunRow | None = None) -> RunRow | None:
        """Cancel a run wherever it executes; the run as it stands afterwards (None: unknown).
        `row` is the run as the caller just read it, which saves reading it again before the
        signal leaves.

        Here, its task is cancelled at once. In another process, the cancel is signalled to it
        (`signals`); this waits (bounded) for the outcome. A run whose process died (lease
        expired) is ended here. A paused run (`awaiting_input`) ends as cancelled, its pending
        calls answered as cancelled (`pauses`). Idempotent: a run that already ended is left as
        it ended.
        """
        active = self.active.get(run_id)
        if active is not None:
            self.request_local_cancel(run_id)
            await asyncio.shield(active.done.wait())
            return await self.store.get_run(run_id)
        if row is None:
            row = await self.store.get_run(run_id)
        if row is not None and row.status == "awaiting_input":
            await end_pause(self.store, row.thread_id, row.id, row.pending_tool_calls or [])
            await self.promote_next(row.thread_id)
            return await self.store.get_run(run_id)
        if row is None or row.status not in ACTIVE_RUN_STATUSES:
            return row
        now = now_ms()
        if row.lease_expires_ms is None or row.lease_expires_ms < now:
            # Its process died: end it here, keeping what it had said (as the reaper does).
            if await end_dead_run(self.store, self.remote_feed, row, now, "cancelled",
                                  CANCELLED_ERROR, {"c": timbal.RUN_CANCELLED}):
                await self.promote_next(row.thread_id)
        else:
            await self.signals.request_cancel(run_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timings.remote_cancel_wait_seconds
        while True:
            row = await self.store.get_run(run_id)
            if row is None or row.status not in ACTIVE_RUN_STATUSES or loop.time() > deadline:
                return row
            await asyncio.sleep(self.timings.remote_cancel_poll_seconds)

    def request_local_cancel(self, run_id: str) -> None:
        """Cancel a run of this process unless it is already ending (idempotent)."""
        active = self.active.get(run_id)
        if active is None or active.task is None or not active.phase.live:
            return
        active.cancel_requested = True
        active.phase = RunPhase.ENDING
        active.task.cancel()

    def lose(self, run_id: str) -> None:
        """Stop a run another process has ended (our lease on it expired) without writing."""
        active = self.active.get(run_id)
        if active is None or active.task is None or not active.phase.live:
            return
        log.warning("lost the lease on run %s; stopping it here", run_id)
        active.phase = RunPhase.LOST
        if active.recorder is not None:
            active.recorder.fenced = True
        active.task.cancel()

    async def listen_for_signals(self) -> None:
        """Cancel the runs of this process that another process was asked to cancel, and
        deliver other processes' thread events to the runs of this process."""
        await self.signals.listen(self.registry, self.request_local_cancel,
                                  self.components.deliver)

    # -- reading --------------------------------------------------------------------------------

    def active_run_for_thread(self, thread_id: str) -> ActiveRun | None:
        return self.registry.for_thread(thread_id)

    def live_log(self, run_id: str) -> LiveLog | None:
        return self.registry.live_log(run_id)

    def entries(self, run_id: str, after: int = 0) -> AsyncGenerator[Entry, None]:
        """The run's log from after `after`, then live until it ends (`subscription`).

        Leaving before the end is a disconnect: the run goes on, and its policy decides
        whether it is cancelled later."""
        return self.subscriptions.follow(run_id, after)

    def batches(self, run_id: str, after: int = 0) -> AsyncGenerator[list[Entry], None]:
        """`entries`, as many at a time as the log has beyond the reader when it wakes up."""
        return self.subscriptions.batches(run_id, after)

    def retire(self, active: ActiveRun) -> None:
        """The run ended: forget it (its log lingers a little) and its disconnect policy, and
        start the thread's next queued run, if any."""
        self.registry.retire(active)
        self.subscriptions.run_ended(active.run_id)
        if active.queued_after == []:  # its end's transaction found none waiting
            return
        self._in_background(self.promote_next(active.row.thread_id),
                            f"promote after {active.run_id}")

    def _in_background(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._publishing.add(task)
        task.add_done_callback(self._publishing.discard)

    async def shutdown(self) -> None:
        """Stop every run this process owns; each ends with a retryable RUN_ERROR."""
        tasks = [a.task for a in self.active.values() if a.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # Let the tails of those runs' endings reach the other processes, briefly.
        if self._publishing:
            await asyncio.wait([*self._publishing], timeout=self.timings.publish_wait_seconds)
        await self.log_writer.close()
