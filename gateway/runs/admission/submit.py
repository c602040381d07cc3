"""The one door every run start goes through, and every thread a client creates.

Each entry (a dialect's route, Chorus's deliveries, the console's answers, forks, the
schedules' firings: `schedules.py`) resolves who is calling once (`auth.caller.Caller`), says
where the run goes (`OnThread` or `NewThread`) and what it is (the neutral `RunSpec`), and
calls `Admission.submit`, which decides in one order who may start what:

1. a thread id or name the client chose is one that can travel where ids go;
2. the request itself (`checks.check_request`): the model from the allow-list, the
   attachments, the input's limits (text, tools, components, schemas, metadata, seeds), and
   a `webhook` the gateway may call (`automation/webhooks.py`);
3. the agent (`agents.choose_agent`: the thread's, the one asked for, the credential's, the
   default) and prompt authority (no client system prompt unless the agent takes one);
4. the message's MCP resources embedded (`embedding`), outside the start gate's turn, and
   checked as attachments;
5. whether the message can reach the agent's model at all (`checks.check_fits`);
6. a new thread's caps and room (`threads.new_thread_rows`); a thread created without a run
   (`create_thread`) or forked (`fork`) counts as a start against the caller's runs per
   minute (`Quotas.charge`), a fork also by the bytes it copies;
7. the caller's quotas (`Caller.quota_subjects`; a retry of a request that started its run
   only attaches, with no new slot), unless the start brings the slot it reserved;
8. a new thread's idempotency (a key is claimed for the project before the thread exists:
   `idempotency`); then `RunManager.start`, which ends an abandoned pause, attaches a retry
   to the run its key started, makes room on a busy thread as the multitask strategy says,
   and launches the run.

A refusal at any step is an `ApiError` (a problem+json before any byte of a stream) and leaves
nothing behind: no thread, no run, no quota slot. Nothing here reads an HTTP request, so a
background task starts runs through the same door.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sqlalchemy.exc import IntegrityError

from ...auth.caller import Caller, visible
from ...config import Settings
from ...engine.agents.agent import AgentRegistry, ResolvedAgent
from ...engine.loop import ServerToolSpec
from ...protocol.problems import ApiError, Problem, echo
from ...protocol.run_spec import RunSpec, SeedMessage
from ...store.tables import ThreadRow
from ..automation import webhooks
from ..manager import RunManager
from .admit import StartedRun
from .agents import check_client_prompt, choose_agent
from .checks import check_attachments, check_blocks, check_fits, check_request
from .embedding import embedded, references
from .forks import Fork, fork_of
from .idempotency import start_new_thread_once
from .quotas import FORK_START_BYTES, NO_QUOTA, QuotaExceeded, Ticket
from .threads import (
    NewThread,
    OnThread,
    Target,
    ThreadRows,
    check_chosen_id,
    check_initial_messages,
    check_metadata,
    check_thread_room,
    thread_rows,
)


class Admission:
    """Who may start what, and create which thread: the door in front of `RunManager.start`."""

    def __init__(self, settings: Settings, agents: AgentRegistry, runs: RunManager) -> None:
        self.settings, self.agents, self.runs = settings, agents, runs
        self.store = runs.store

    def agent(self, caller: Caller, thread: ThreadRow | None,
              asked: str | None = None) -> ResolvedAgent:
        """The agent `caller` gets on `thread` (None: a new one) when it asks for `asked`."""
        return choose_agent(self.agents, caller, thread, asked)

    async def submit(self, caller: Caller, target: Target, spec: RunSpec, *,
                     client_run_id: str | None = None,
                     extra_tools: dict[str, ServerToolSpec] | None = None,
                     reserved: Ticket | None = None) -> StartedRun:
        """Start `spec` for `caller` on `target`, or attach to the run its idempotency key
        started (the module's docstring says in which order it is decided).

        `client_run_id`: the client's own name for the run (AG-UI). `extra_tools`: server
        tools for this run only (a Chorus message's MCP servers). `reserved`: the quota slot
        the start took when it was accepted (`reserve`); it goes back if the start is refused.
        A run that names a `webhook` has it written with its start (`admit`)."""
        return await self._submit(caller, target, spec, client_run_id=client_run_id,
                                  extra_tools=extra_tools, reserved=reserved)

    async def _submit(self, caller: Caller, target: Target, spec: RunSpec, *,
                      client_run_id: str | None = None,
                      extra_tools: dict[str, ServerToolSpec] | None = None,
                      reserved: Ticket | None = None) -> StartedRun:
        ticket = None  # a keyed new thread's is taken once its key is claimed (`_once`)
        try:
            spec, agent = await self._checked(caller, target, spec)
            if isinstance(target, NewThread):
                rows = await self._new_thread_rows(caller, target, spec.seed_messages, agent)
            self.runs.refuse_if_closed()
            if isinstance(target, OnThread):
                ticket = reserved or await self._ticket(caller, target.thread, spec)
            elif spec.idempotency is None:
                ticket = reserved or await self.runs.quotas.acquire(
                    caller.quota_subjects(target.user_key))
        except BaseException:
            if reserved is not None:
                await reserved.release()
            raise
        if isinstance(target, OnThread):
            return await self.runs.start(target.thread, spec, ticket,
                                         client_run_id=client_run_id, extra_tools=extra_tools)
        try:
            if spec.idempotency is None:
                return await self.runs.start(rows, spec, ticket, client_run_id=client_run_id,
                                             extra_tools=extra_tools)
            return await self._once(caller, target.user_key, rows, spec, client_run_id,
                                    extra_tools, reserved)
        except IntegrityError:
            if target.chosen is None:
                raise
        # The id (or name) the client chose was taken meanwhile: by a racing request of the
        # project, whose thread the run goes on if the caller may see it; or in another
        # project, whose thread this project never meets: its own takes the id as a name.
        other = await self._elsewhere(caller, target)
        if other is not None:
            return await self._submit(caller, other, spec, client_run_id=client_run_id,
                                      extra_tools=extra_tools)
        return await self._submit(caller, OnThread(await self._named(caller, target)), spec,
                                  client_run_id=client_run_id, extra_tools=extra_tools)

    async def _elsewhere(self, caller: Caller, target: NewThread) -> NewThread | None:
        """`target` with its chosen id as a name beside an id of the gateway's, when that id
        is held by another project only (None: the project has a thread under it)."""
        if target.thread_id is None or target.minted or await self.store.get_thread(
                caller.project, target.thread_id) is not None:
            return None
        return dataclasses.replace(target, thread_id=None, client_id=target.thread_id)

    async def _checked(self, caller: Caller, target: Target, spec: RunSpec
                       ) -> tuple[RunSpec, ResolvedAgent]:
        """Steps 1 to 5: the spec to start (its resources embedded, its agent chosen) and the
        agent."""
        if isinstance(target, NewThread):
            check_chosen_id(target)
        check_request(self.settings, spec)
        webhooks.check(self.settings, spec.webhook)
        thread = target.thread if isinstance(target, OnThread) else None
        agent = choose_agent(self.agents, caller, thread, spec.agent)
        check_client_prompt(agent, spec.seed_messages)
        if references(spec):
            async with self.runs.start_gate.outside():
                spec = await embedded(self.settings, spec, self.runs.setup.tools_of(agent))
            check_attachments(self.settings, spec)
        check_fits(self.settings, spec, agent)
        if spec.agent != agent.name:
            spec = dataclasses.replace(spec, agent=agent.name)
        return spec, agent

    async def _ticket(self, caller: Caller, thread: ThreadRow, spec: RunSpec) -> Ticket:
        """The run's quota slots, for the caller and the thread's user scope. A retry of a
        request that started its run only attaches to it: no new slot, even at the limit."""
        try:
            return await self.runs.quotas.acquire(caller.quota_subjects(thread.user_key))
        except QuotaExceeded:
            if spec.idempotency is None or await self.store.find_run_by_idempotency_key(
                    thread.id, spec.idempotency.key) is None:
                raise
            return Ticket(self.runs.quotas, NO_QUOTA)

    async def _once(self, caller: Caller, user_key: str | None, rows: ThreadRows,
                    spec: RunSpec, client_run_id: str | None,
                    extra_tools: dict[str, ServerToolSpec] | None,
                    reserved: Ticket | None) -> StartedRun:
        """A new thread's run with an idempotency key: a retry gets the thread and run the
        first request created, not a second thread (`idempotency`). Only the request that
        claims the key creates the thread and takes a quota slot."""

        async def create_thread() -> ThreadRow:
            await self.store.add(rows.row, *rows.messages)
            return rows.row

        async def start_on(_: str, thread: ThreadRow, spec: RunSpec) -> StartedRun:
            # The thread was made for this run: if the run is refused, it goes too.
            try:
                ticket = reserved or await self._ticket(caller, thread, spec)
                return await self.runs.start(thread, spec, ticket, client_run_id=client_run_id,
                                             extra_tools=extra_tools)
            except ApiError:
                await self.store.delete_thread(thread.id)
                raise

        return await start_new_thread_once(
            self.store, start_on, self.runs.idempotency_ttl_seconds, self.runs.timings,
            caller.project, create_thread, spec, user_key)

    async def _named(self, caller: Caller, target: NewThread) -> ThreadRow:
        """The thread under the id (or name) `target` chose, if the caller may see it."""
        chosen = target.chosen
        assert chosen is not None
        thread = await (self.store.get_thread(caller.project, chosen) if target.thread_id
                        else self.store.get_thread_by_client_id(caller.project, chosen))
        if thread is None or not visible(caller, thread.user_key, target.user_key):
            raise ApiError(Problem.THREAD_NOT_FOUND, f"Thread {echo(chosen)} not found",
                           threadId=echo(chosen))
        return thread

    async def _new_thread_rows(self, caller: Caller, target: NewThread,
                               seeds: Sequence[SeedMessage], agent: ResolvedAgent,
                               **extra: Any) -> ThreadRows:
        """The rules every new thread is made under: its metadata and seeds within their caps,
        room for it in its user scope and project."""
        check_metadata(self.settings, target.metadata, *target.unkept_metadata)
        check_initial_messages(self.settings, [m.text for m in seeds])
        check_blocks(self.settings, [b for m in seeds for b in m.blocks or []])
        await check_thread_room(self.settings, self.store, caller.project, target.user_key)
        return thread_rows(caller.project, target, seeds, agent.name, **extra)

    async def create_thread(self, caller: Caller, target: NewThread,
                            seeds: Sequence[SeedMessage] = (), asked: str | None = None,
                            **extra: Any) -> ThreadRow:
        """Create a thread without a run (`POST /v1/threads`, the Timbal create), under the same
        rules as a run's new thread: its agent (`asked`, or the caller's, or the default), no
        client system prompt unless the agent takes one, its caps and room. `extra`: other
        columns of the thread. An id the client chose that is taken raises `IntegrityError`."""
        check_chosen_id(target)
        agent = choose_agent(self.agents, caller, None, asked)
        check_client_prompt(agent, seeds)
        rows = await self._new_thread_rows(caller, target, seeds, agent, **extra)
        await self.runs.quotas.charge(caller.quota_subjects(target.user_key))
        try:
            await self.store.add(rows.row, *rows.messages)
        except IntegrityError:
            other = await self._elsewhere(caller, target)
            if other is None:
                raise
            rows = await self._new_thread_rows(caller, other, seeds, agent, **extra)
            await self.store.add(rows.row, *rows.messages)
        return rows.row

    async def fork(self, caller: Caller, original: ThreadRow, message_id: str) -> Fork:
        """A new thread with `original`'s history up to `message_id` (`forks`), for `caller`
        (who may see `original`), within the room of the original's user scope. It counts as
        a start, and one more per `FORK_START_BYTES` it copies, against the caller's runs per
        minute: copying storage is metered, as creating a thread is."""
        fork = await fork_of(self.store, original, message_id)
        await check_thread_room(self.settings, self.store, caller.project, original.user_key)
        await self.runs.quotas.charge(caller.quota_subjects(original.user_key),
                                      1 + fork.copied_bytes // FORK_START_BYTES)
        await self.store.add(fork.thread, *fork.messages, *fork.components)
        return fork

    async def branch(self, caller: Caller, original: ThreadRow, message_id: str | None
                     ) -> ThreadRow:
        """A branch of `original` at `message_id` (None: before its first message) that takes
        over the client's name for it (`ThreadRow.client_id`): a fork, made under the same
        rules, which the client's next requests under that name reach; the run on it is its
        start, and what it copies is metered as a fork's is. 409 `CONCURRENT_RUN` when another
        request branched the thread meanwhile."""
        fork = await fork_of(self.store, original, message_id)
        await check_thread_room(self.settings, self.store, caller.project, original.user_key)
        copied = fork.copied_bytes // FORK_START_BYTES
        if copied:
            await self.runs.quotas.charge(caller.quota_subjects(original.user_key), copied)
        fork.thread.client_id = original.client_id or original.id
        if not await self.store.add_branch(original, fork.thread, *fork.messages,
                                           *fork.components):
            raise ApiError(Problem.CONCURRENT_RUN, "The thread was branched by another request "
                           "meanwhile", threadId=echo(original.client_id or original.id))
        return fork.thread

    async def reserve(self, caller: Caller, spec: RunSpec) -> Ticket:
        """A quota slot for a run that starts later (a Chorus message waits for its channel's
        thread): its agent and its request checked now, as `submit` will, and its slot taken
        now (429 over a limit); `submit(..., reserved=ticket)` starts it."""
        choose_agent(self.agents, caller, None, spec.agent)
        check_request(self.settings, spec)
        return await self.runs.quotas.acquire(caller.quota_subjects(None))
