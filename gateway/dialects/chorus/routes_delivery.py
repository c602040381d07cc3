"""Chorus deliveries: a channel's messages run one at a time on its thread, and each run's
output is POSTed to that message's callback, in order.

A message is stored (`chorus_deliveries`) before it is answered, so a message that arrives
while its channel's thread is busy waits there, in order, instead of being dropped. Whoever
may start the next run tries (`pump`): the process that took the message, the process whose
run on the thread just ended, and any process's sweeper (`routes_sweeper.py`), which finds
messages nobody is starting (their process died). Only a channel's oldest message is ever
started, and only by the process that claimed it in the database (a claim lasts a lease, so
a dead claimant's message is taken over); the thread's lock decides against runs of others,
and the run's id is derived from the delivery's (unique per project), so a message can never
run twice. The run goes on whoever watches; the process that started it follows its
log and POSTs the callback events (`translate.py`): `lifecycle processing`, one event per
completed message, `error` if it failed, `lifecycle idle`. The message's row is kept, with its
callback only, until its run's end is reported: the one that deletes it reports it, the
process that relays the run (it holds a claim on the row, renewed while it relays) or, once
that claim has run out (the process died), another's sweeper.

The message's MCP servers (`mcp`) are connected for its run only: their tools are the run's
`extra_tools`, named `<server>__<tool>`, and the connections close when the run has ended.

A callback that fails (5xx, no connection, timeout) is retried with backoff, a few times; one
that keeps failing is logged and given up for the rest of the run (the run and its answer are
kept in the thread either way). A 4xx drops that event only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import httpx
from starlette.requests import Request

from ...api.context import services
from ...engine.tools.mcp import RunMcpTools, open_run_tools
from ...engine.tools.mcp_pinned import Pin
from ...protocol import timbal
from ...protocol.clock import new_id, now_ms
from ...protocol.problems import ApiError, Problem
from ...runs.admission.threads import OnThread
from ...runs.automation import outbound
from ...services import Services
from ...store.tables import ChorusDeliveryRow, RunRow
from . import input as chorus_input
from . import routes_quota as quota
from . import translate

log = logging.getLogger("gateway.chorus")

ATTEMPTS = 4  # per event
BACKOFF_SECONDS = 0.5  # doubled after each failed attempt
MCP_CONNECT_SECONDS = 10.0


class Callback:
    """One delivery's callback: its events in order, each retried, until it gives up."""

    def __init__(self, client: httpx.AsyncClient, url: str, allowed: tuple[str, ...]) -> None:
        self.client, self.url, self.allowed = client, url, allowed
        self.failed = False

    async def send(self, event: translate.Event) -> None:
        if self.failed:
            return
        delay = BACKOFF_SECONDS
        for attempt in range(1, ATTEMPTS + 1):
            try:
                status = await outbound.post(self.client,
                                             await outbound.check(self.url, self.allowed), event)
            except outbound.NotAllowed as exc:
                log.warning("chorus callback refused: %s", exc)
                self.failed = True
                return
            except httpx.HTTPError as exc:
                status, why = 0, type(exc).__name__
            else:
                why = f"status {status}"
            if 200 <= status < 300:
                return
            if 400 <= status < 500:
                log.warning("chorus callback answered %s to a %s event; dropped", status,
                            event["type"])
                return
            if attempt < ATTEMPTS:
                await asyncio.sleep(delay)
                delay *= 2
        log.warning("chorus callback failed %s times (%s); giving up on it for this run",
                    ATTEMPTS, why)
        self.failed = True


class Deliveries:
    """This process's side of Chorus: the runs it starts for waiting messages, and their
    callbacks."""

    def __init__(self, svc: Services) -> None:
        self.svc = svc
        self.client = httpx.AsyncClient(timeout=outbound.TIMEOUT, follow_redirects=False)
        # httpx logs every request's URL at INFO, and a callback URL carries its credential.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        self._tasks: dict[str, asyncio.Task[None]] = {}  # thread id -> its pump here
        self._woken: set[str] = set()  # threads woken while their pump here was going
        self._closing: dict[str, RunMcpTools] = {}  # run id -> its MCP servers, until it ends

    def wake(self, project: str, thread_id: str) -> None:
        """Start the thread's next waiting message if its thread is free (in the background);
        a thread this process pumps already is left to that pump."""
        pumping = self._tasks.get(thread_id)
        if pumping is not None and not pumping.done():
            self._woken.add(thread_id)  # it looks again before it stops
            return
        task = asyncio.create_task(self.pump(project, thread_id), name=f"chorus {thread_id}")
        self._tasks[thread_id] = task
        task.add_done_callback(
            lambda done: self._tasks.pop(thread_id) if self._tasks.get(thread_id) is done
            else None)

    async def close(self) -> None:
        """Stop following runs (at shutdown): the runs go on; their waiting messages stay."""
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        for tools in self._closing.values():
            await tools.close()
        await self.client.aclose()

    async def pump(self, project: str, thread_id: str) -> None:
        store, owner = self.svc.store, self.svc.runs.owner
        try:
            while True:
                self._woken.discard(thread_id)
                row = await store.next_chorus_delivery(thread_id)
                if row is None:
                    if thread_id in self._woken:
                        continue  # a message came in while it looked
                    return
                now = now_ms()
                if not await store.claim_chorus_delivery(
                        row.id, owner, now + self.svc.runs.timings.lease_ms, now):
                    return  # another process is starting it
                run, more = await self._start(project, row)
                if not more:  # the thread is busy: its run's end (or a sweeper) starts it
                    await store.release_chorus_claim(row.id, owner)
                    return
                if run is not None:
                    try:
                        await self.relay(run, row)
                    finally:
                        await self._closing.pop(run.id).close()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("chorus delivery on thread %s failed", thread_id)

    async def _start(self, project: str, row: ChorusDeliveryRow) -> tuple[RunRow | None, bool]:
        """Start the delivery's run: (the run, or None; whether the next may start now). A
        delivery whose run already started (a racing process) or that cannot run is removed."""
        store = self.svc.store
        run_id = chorus_input.run_id(row.id)
        thread = await store.get_thread(project, row.thread_id)
        ticket = quota.run_ticket(self.svc.runs.quotas, row)
        existing = await store.get_run_by_client_id(project, run_id)
        if existing is not None:  # started by a process that died before it said so
            await store.start_chorus_delivery(row.id, existing.id, row.payload["callback"])
            return None, True  # its run holds the slot; the sweeper reports its end
        if thread is None:
            await store.delete_chorus_delivery(row.id)
            await ticket.release()
            return None, True
        if thread.run_status != "idle":
            return None, False
        delivery = chorus_input.Delivery.model_validate(row.payload)
        spec = chorus_input.run_spec(delivery, new_id(), thread.last_completed_run_id)
        tools = await self._mcp_tools(delivery)
        try:
            # A refusal releases the slot, even when the message goes on waiting (the thread
            # was taken between the look and the start, rarely): it waits uncounted then.
            started = await self.svc.admission.submit(
                quota.delivery_caller(project, row, thread.agent), OnThread(thread), spec,
                client_run_id=run_id, extra_tools=tools.tools, reserved=ticket)
        except ApiError as exc:
            await tools.close()
            if exc.problem is Problem.CONCURRENT_RUN:
                return None, False
            if exc.problem is Problem.INVALID_PREVIOUS_RUN:
                return None, True  # a run ended meanwhile: read the thread again
            if exc.problem.momentary:  # the message waits (unclaimed), and a sweeper, this
                # process's or another's, starts it when one can (nothing is dropped).
                log.info("chorus message on thread %s waits: %s", thread.id, exc.code)
                return None, False
            log.warning("chorus message refused on thread %s: %s", thread.id, exc.code)
            await store.delete_chorus_delivery(row.id)
            await self._callback(row.payload["callback"]).send(
                {"type": "error", "message": exc.detail, "code": exc.code})
            return None, True
        await store.start_chorus_delivery(row.id, started.run.id, row.payload["callback"],
                                          self.svc.runs.owner, self._claim_until())
        self._closing[started.run.id] = tools
        return started.run, True

    async def _mcp_tools(self, delivery: chorus_input.Delivery) -> RunMcpTools:
        """The message's MCP servers that may still be called (the allow-list is checked
        again: a name may resolve elsewhere now), connected for its run at the addresses
        checked (`engine/tools/mcp_pinned.py`)."""
        servers = []
        for server in delivery.mcp or []:
            try:
                target = await outbound.check(server.url, self.svc.settings.chorus_allowed_hosts)
            except outbound.NotAllowed as exc:
                log.warning("chorus MCP server %r refused: %s", server.name, exc)
                continue
            pin = Pin(target.url.host, outbound.port(target.url), target.address)
            servers.append((server.name, server.url, server.headers or {}, pin))
        if not servers:
            return RunMcpTools()
        return await open_run_tools(servers, MCP_CONNECT_SECONDS)

    def _claim_until(self) -> int:
        return now_ms() + self.svc.runs.timings.lease_ms

    async def _hold(self, row: ChorusDeliveryRow) -> None:
        """Renew this process's claim on a started message while it relays its run (every
        third of a lease): while the claim holds, no sweeper reports the run's end."""
        owner, every = self.svc.runs.owner, self.svc.runs.timings.lease_seconds / 3
        while True:
            await asyncio.sleep(every)
            try:
                await self.svc.store.claim_chorus_delivery(row.id, owner, self._claim_until(),
                                                           now_ms())
            except Exception:  # noqa: BLE001  (the next renewal tries again)
                log.warning("renewing the claim on chorus message %s failed", row.id)

    def _callback(self, url: str) -> Callback:
        return Callback(self.client, url, self.svc.settings.chorus_allowed_hosts)

    async def relay(self, run: RunRow, row: ChorusDeliveryRow) -> None:
        """POST the run's output to the message's callback, in order, until the run ends; its
        end (`error`, `lifecycle idle`) only if this process is the one to report it (the row
        is taken: a run lost here may have been reported by another process already)."""
        callback = self._callback(row.payload["callback"])
        hold = asyncio.create_task(self._hold(row), name=f"chorus claim {row.id}")
        try:
            await callback.send(translate.PROCESSING)
            ending: list[translate.Event] = []
            async with contextlib.aclosing(self.svc.runs.entries(run.id)) as entries:
                async for entry in entries:
                    if timbal.is_terminal(entry.frame):
                        ending = translate.events(entry.frame)
                        break
                    for event in translate.events(entry.frame):
                        await callback.send(event)
            if await self.svc.store.take_chorus_delivery(row.id):
                for event in [*ending, translate.IDLE]:
                    await callback.send(event)
        finally:
            hold.cancel()

    async def report_end(self, row: ChorusDeliveryRow, run: RunRow | None) -> None:
        """POST the end of a run whose process did not report it (it died): `error` if it
        failed or was cancelled, then `lifecycle idle` (only that when the run is gone with
        its thread: how it ended is not known).
        The caller took the row (`take_chorus_delivery`), so it is reported once."""
        callback = self._callback(row.payload["callback"])
        ending = translate.ended(run.status, run.error) if run is not None else []
        for event in [*ending, translate.IDLE]:
            await callback.send(event)


def deliveries(request: Request) -> Deliveries:
    """The process's `Deliveries` (made on first use)."""
    state = request.app.state
    found: Deliveries | None = getattr(state, "chorus", None)
    if found is None or found.svc is not services(request):
        found = state.chorus = Deliveries(services(request))
    return found
