"""Firing schedules: every process looks for due schedules, and each due time is fired by the
one process whose conditional update moves the schedule's `next_due_ms` from that due time to
the next (`store/queries/crons.py`, `take_due_time`); the others' updates find it moved and do
nothing. So a due time fires once however many processes run, and none is lost while one is up.

A firing starts its run through the door (`Admission.submit`) as its owner: the credential
that created the schedule, rebuilt as a `Caller` (its limits, its agent binding, the user
scope), so the run is checked, metered and counted against quotas as a request of that
caller would be. A schedule whose key was revoked (or removed from `GATEWAY_API_KEYS`) starts
nothing: its `lastError` says so.

After an outage, due times no process fired are fired if they are at most
`GATEWAY_CRON_CATCHUP_SECONDS` old; older ones are skipped. A due time whose run cannot start
for a moment (a 503: the process drains for a restart, is overloaded, or its database or Redis
is away) is given back, and a later look fires it, within the same window; a refusal of the
owner's (a quota, a revoked key) spends it.
"""

from __future__ import annotations

import asyncio
import logging

from ...auth.caller import Caller, env_key_id, key_caller, visible
from ...auth.keyring import ENV_KEY_PREFIX, KeyRing
from ...config import Settings
from ...protocol.clock import iso_ms, now_ms
from ...protocol.problems import ApiError, Problem
from ...protocol.run_spec import MultitaskStrategy, RunSpec, UserInput
from ...store.tables import CronRow
from ..automation.schedule import next_due
from .submit import Admission
from .threads import NewThread, OnThread, Target

log = logging.getLogger("gateway.crons")
BATCH = 32  # due schedules read at once
ROUNDS = 10  # reads per wake-up while due schedules remain (catching up)
OWNER_GONE = "OWNER_KEY_REVOKED"


async def owner_of(settings: Settings, keyring: KeyRing, row: CronRow) -> Caller | None:
    """The caller that created the schedule, as it is now; None if its key is gone."""
    project, scope = row.project_id, row.signed_in_scope
    if row.key_id is None:
        return key_caller(settings, project, None, scope=scope, development=True)
    if row.key_id.startswith(ENV_KEY_PREFIX):
        if any(env_key_id(key) == row.key_id and owner == project
               for key, owner in settings.api_keys.items()):
            return key_caller(settings, project, row.key_id, scope=scope)
        return None
    managed = await keyring.resolve_id(row.key_id)
    if managed is None or managed.project != project:
        return None
    return key_caller(settings, project, managed.id, managed, scope=scope)


class Scheduler:
    """One process's share of the schedules: it fires the due times it wins."""

    def __init__(self, settings: Settings, admission: Admission, keyring: KeyRing) -> None:
        self.settings, self.admission, self.keyring = settings, admission, keyring
        self.store = admission.store

    async def run(self) -> None:
        """Until cancelled: a look every `GATEWAY_CRON_POLL_SECONDS`."""
        while True:
            try:
                for _ in range(ROUNDS):
                    if not await self.round():
                        break
            except Exception as exc:  # the database away for a moment: next look
                log.warning("schedules round failed: %s", type(exc).__name__)
            await asyncio.sleep(self.settings.cron_poll_seconds)

    async def round(self) -> int:
        """Take and fire what is due now; how many due times this process took and spent (one
        given back waits for the next poll)."""
        now = now_ms()
        window = self.settings.cron_catchup_seconds * 1000
        taken = 0
        for row in await self.store.due_crons(now, BATCH):
            due = row.next_due_ms
            assert due is not None
            following = next_due(row.schedule, row.created_ms, max(due, now - window))
            if not await self.store.take_due_time(row.id, due, following):
                continue  # another process took it
            if now - due > window:
                taken += 1
                log.info("schedule %s: due time %s skipped (older than the catch-up window)",
                         row.id, iso_ms(due))
                continue
            taken += await self.fire(row, due, following)
        return taken

    async def fire(self, row: CronRow, due: int, following: int | None) -> bool:
        """Start the run of one due time, as the schedule's owner; record what happened. A
        run that cannot start for a moment (`Problem.momentary`) gives the due time back, to
        be fired at a later look (this process's or another's: False); any other outcome
        spends it."""
        caller = await owner_of(self.settings, self.keyring, row)
        if caller is None:
            log.warning("schedule %s: its owner's key is gone; nothing started", row.id)
            await self.store.cron_fired(row.id, None, OWNER_GONE)
            return True
        try:
            target, previous = await self._target(caller, row)
            strategy: MultitaskStrategy = row.multitask_strategy  # type: ignore[assignment]
            spec = RunSpec(
                user=UserInput([{"type": "text", "text": row.message}]), agent=row.agent,
                metadata={**(row.metadata_ or {}), "cronId": row.id, "dueAt": iso_ms(due)},
                webhook=row.webhook, on_disconnect="continue", previous_run_id=previous,
                multitask_strategy=strategy if row.thread_id else None)
            async with self.admission.runs.start_gate.turn():
                started = await self.admission.submit(caller, target, spec)
        except ApiError as exc:
            if exc.problem.momentary and await self.store.give_back_due_time(
                    row.id, due, following, exc.code):
                log.info("schedule %s: due time %s waits: %s", row.id, iso_ms(due), exc.code)
                return False
            log.warning("schedule %s: run refused: %s", row.id, exc.code)
            await self.store.cron_fired(row.id, None, exc.code)
            return True
        except Exception as exc:  # the database away mid-start: the due time is spent
            log.warning("schedule %s: run not started: %s", row.id, type(exc).__name__)
            await self.store.cron_fired(row.id, None, "START_FAILED")
            return True
        log.info("schedule %s: started run %s", row.id, started.run.id,
                 extra={"run_id": started.run.id})
        await self.store.cron_fired(row.id, started.run.id, None)
        return True

    async def _target(self, caller: Caller, row: CronRow) -> tuple[Target, str | None]:
        """Where the run goes: the schedule's thread (if its owner may still see it), or a new
        one in the owner's user scope; and the run it continues."""
        if row.thread_id is None:
            return NewThread(row.user_key, {"cronId": row.id}), None
        thread = await self.store.get_thread(row.project_id, row.thread_id)
        if thread is None or not visible(caller, thread.user_key, row.user_key):
            raise ApiError(Problem.THREAD_NOT_FOUND, "The schedule's thread is gone")
        return OnThread(thread), thread.last_completed_run_id
