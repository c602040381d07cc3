"""The soak: many clients at once, used the way the Tambo client uses the API, then checked.

Each simulated client loops until the soak's time is up: it starts a run (`POST`), reads its SSE
stream, and follows one plan per run, picked at random:

- `whole`: reads the stream to its end;
- `reconnect`: drops the connection one to three times after a random number of events, stays
  away up to a second, and comes back with its cursor (`Last-Event-ID` or `?after=N`, at random);
- `cancel`: reads a little, then `DELETE`s the run (connected or not) and reads on to the end;
- `abandon`: reads a little and leaves for good (the disconnect grace ends the run), then goes
  on in a new thread.

Every run's reply is scripted for its own prompt (`ScriptedModel.enqueue_for`), so the text the
upstream sent is known exactly. `soak()` drives the clients and returns what they saw;
`soak_checks` checks it from outside and `soak_report.run_soak` puts it all together (warm-up,
RSS, soak, checks). The size comes from `SOAK_CLIENTS` / `SOAK_SECONDS` / `SOAK_TOKEN_INTERVAL`
(`SoakSize.from_env`), so the CI test and `bench/soak.py` run the same code.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.support.run_stream import message
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import SseEvent, aiter_events

HEADERS = {"x-api-key": "test-key"}
TERMINAL = {"completed", "cancelled", "failed"}
ENDING_EVENTS = {"RUN_FINISHED", "RUN_ERROR"}
PLANS = {"whole": 0.25, "reconnect": 0.4, "cancel": 0.2, "abandon": 0.15}


@dataclass(frozen=True)
class SoakSize:
    # The CI size (tests/integration/test_soak.py): every plan runs many times over, at twelve
    # times the concurrency of the two cores; bench/soak.py runs 200 clients for 60 s.
    clients: int = 24
    seconds: float = 6.0
    token_interval: float = 0.05  # seconds between the upstream's chunks
    tokens: tuple[int, int] = (10, 60)  # a run's reply length, drawn in this range
    max_away: float = 1.0  # longest a reconnecting reader stays away

    @classmethod
    def from_env(cls, **defaults: Any) -> "SoakSize":
        """`SOAK_CLIENTS`, `SOAK_SECONDS` and `SOAK_TOKEN_INTERVAL` override the defaults."""
        size = cls(**defaults)
        return cls(clients=int(os.environ.get("SOAK_CLIENTS", size.clients)),
                   seconds=float(os.environ.get("SOAK_SECONDS", size.seconds)),
                   token_interval=float(os.environ.get("SOAK_TOKEN_INTERVAL",
                                                       size.token_interval)),
                   tokens=size.tokens, max_away=size.max_away)


@dataclass
class Visit:
    """One connection's share of a run's stream."""

    how: str  # "post", "last-event-id" or "after"
    cursor: int  # the last event id the reader had when it connected
    events: list[SseEvent] = field(default_factory=list)
    opened: float = 0.0  # monotonic, when the response headers arrived
    left: float | None = None  # monotonic, when the reader dropped it on purpose


@dataclass
class RunRecord:
    client: int
    plan: str
    prompt: str
    upstream_text: str  # what the scripted upstream sends for this run
    thread_id: str = ""
    run_id: str = ""
    visits: list[Visit] = field(default_factory=list)
    cancelled_by_client: bool = False
    read_to_end: bool = False
    cut: int = 0  # streams that ended (or broke) before the run's last event

    @property
    def events(self) -> list[SseEvent]:
        return [e for visit in self.visits for e in visit.events]

    @property
    def reconnected(self) -> bool:
        return len(self.visits) > 1

    @property
    def longest_absence(self) -> float:
        """Longest time with no connection: from a drop to the next response's headers."""
        pairs = zip(self.visits, self.visits[1:], strict=False)
        gaps = [after.opened - before.left for before, after in pairs if before.left is not None]
        return max(gaps, default=0.0)


@dataclass
class SoakResult:
    runs: list[RunRecord] = field(default_factory=list)
    threads: set[str] = field(default_factory=set)
    # Each thread's user scope: a read without one does not say whose thread it is.
    owners: dict[str, str] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)  # run starts answered with an error
    seconds: float = 0.0

    def count(self, plan: str) -> int:
        return sum(1 for r in self.runs if r.plan == plan)


def reply_for(prompt: str, rng: random.Random, size: SoakSize, tokens: int | None = None
              ) -> tuple[dict[str, Any], str]:
    """A scripted streamed turn of distinct words and its text (distinct: litellm aborts
    after 100 identical chunks)."""
    count = tokens or rng.randint(*size.tokens)
    tag = prompt.replace(" ", "-")
    text = " ".join(f"{tag}.{i}" for i in range(count))
    turn = {"steps": [{"slow": {"text": text, "interval": size.token_interval}}],
            "stream": True}
    return turn, text


class Client:
    """One simulated user of the API (see the module docstring)."""

    def __init__(self, number: int, http: httpx.AsyncClient, model: ScriptedModel,
                 size: SoakSize, grace: float, rng: random.Random, result: SoakResult,
                 plans: dict[str, float], seed: int) -> None:
        self.number, self.http, self.model, self.size = number, http, model, size
        self.plans, self.seed = plans, seed
        self.grace, self.rng, self.result = grace, rng, result
        self.user = f"soak-{number}"
        self.thread_id: str | None = None
        self.runs = 0
        self.give_up = 0.0

    async def loop(self, deadline: float) -> None:
        self.give_up = deadline + 120  # a reader keeps reconnecting until then at most
        while time.monotonic() < deadline:
            plan = self.rng.choices(list(self.plans), list(self.plans.values()))[0]
            record = await self.start(plan)
            if record is None:
                await asyncio.sleep(0.5)  # refused (counted); try again a little later
                self.thread_id = None
                continue
            await self.follow(record)
            if plan == "abandon" or not await self.thread_at_rest(record.thread_id):
                self.thread_id = None  # the abandoned thread is busy until the grace ends
            await asyncio.sleep(self.rng.uniform(0, 0.3))

    async def start(self, plan: str) -> RunRecord | None:
        self.runs += 1
        prompt = f"soak{self.seed} {self.number} {self.runs}"  # unique across rounds
        # An abandoned run outlasts the grace, so the disconnect policy is what ends it.
        tokens = int((self.grace + 3) / self.size.token_interval) if plan == "abandon" else None
        turn, text = reply_for(prompt, self.rng, self.size, tokens)
        self.model.enqueue_for(prompt, turn)
        record = RunRecord(self.number, plan, prompt, text)
        body: dict[str, Any] = {"message": message(prompt), "userKey": self.user}
        visit = Visit("post", 0)
        try:
            if self.thread_id is not None:
                response = await self.http.get(f"/v1/threads/{self.thread_id}")
                if response.status_code != 200:
                    self.result.refused.append(f"{response.status_code} {response.text[:300]}")
                    return None
                url = f"/v1/threads/{self.thread_id}/runs"
                if response.json().get("lastCompletedRunId"):
                    body["previousRunId"] = response.json()["lastCompletedRunId"]
            else:
                url, body["thread"] = "/v1/threads/runs", {"userKey": self.user}
            async with self.http.stream("POST", url, json=body,
                                        headers={"accept": "text/event-stream"}) as response:
                if response.status_code != 200:
                    await response.aread()
                    self.result.refused.append(f"{response.status_code} {response.text[:300]}")
                    return None
                visit.opened = time.monotonic()
                record.thread_id = response.headers["x-thread-id"]
                record.run_id = response.headers["x-run-id"]
                self.thread_id = record.thread_id
                self.result.threads.add(record.thread_id)
                self.result.owners[record.thread_id] = self.user
                self.result.runs.append(record)
                record.visits.append(visit)
                await self.read(record, visit, response, self.first_stop(plan))
        except httpx.HTTPError as exc:
            if not record.run_id:
                self.result.refused.append(f"{type(exc).__name__}: {exc}")
                return None
            record.cut += 1
            visit.left = time.monotonic()
        return record

    def first_stop(self, plan: str) -> int | None:
        """After how many events of the first connection the plan acts (None: read it all)."""
        return None if plan == "whole" else self.rng.randint(1, 12)

    async def read(self, record: RunRecord, visit: Visit, response: httpx.Response,
                   stop_after: int | None) -> None:
        """Read `response` until the run's last event, or drop it after `stop_after` events."""
        async for event in aiter_events(response):
            if event.id is None and event.type == "RUN_ERROR" and event.data.get("isRetryable"):
                break  # this stream failed, not the run (STREAM_FAILED): reconnect, as told
            visit.events.append(event)
            if event.type in ENDING_EVENTS:
                record.read_to_end = True
                return
            if stop_after is not None and len(visit.events) >= stop_after:
                visit.left = time.monotonic()
                return
        record.cut += 1  # the stream ended without the run's last event
        visit.left = time.monotonic()

    async def follow(self, record: RunRecord) -> None:
        """Carry out the rest of the record's plan, after its first connection."""
        if record.read_to_end or not record.run_id:
            return
        run_url = f"/v1/threads/{record.thread_id}/runs/{record.run_id}"
        if record.plan == "abandon":
            return
        if record.plan == "cancel":
            record.cancelled_by_client = True
            response = await self.http.delete(run_url)
            if response.status_code not in (200, 202):
                self.result.refused.append(f"DELETE {response.status_code} {response.text[:300]}")
        drops = self.rng.randint(1, 3) if record.plan == "reconnect" else 0
        while not record.read_to_end and time.monotonic() < self.give_up:
            last = record.visits[-1]
            if last.left is not None:
                await asyncio.sleep(self.rng.uniform(0.05, self.size.max_away))
            stop = self.rng.randint(1, 15) if drops > 0 else None
            drops -= 1
            await self.reconnect(record, run_url, stop)

    async def reconnect(self, record: RunRecord, run_url: str, stop_after: int | None) -> None:
        cursor = next((e.id for e in reversed(record.events) if e.id is not None), 0)
        how = self.rng.choice(("last-event-id", "after"))
        headers = {"accept": "text/event-stream"}
        params = {}
        if how == "after":
            params["after"] = str(cursor)
        else:
            headers["last-event-id"] = str(cursor)
        visit = Visit(how, cursor)
        record.visits.append(visit)
        try:
            async with self.http.stream("GET", run_url, headers=headers,
                                        params=params) as response:
                visit.opened = time.monotonic()
                if response.status_code != 200:
                    await response.aread()
                    self.result.refused.append(
                        f"GET {response.status_code} {response.text[:300]}")
                    record.cut += 1
                    visit.left = time.monotonic()
                    return
                await self.read(record, visit, response, stop_after)
        except httpx.HTTPError:
            record.cut += 1
            visit.left = time.monotonic()

    async def thread_at_rest(self, thread_id: str, timeout: float = 15.0) -> bool:
        """Wait for the thread to be idle again after its run ended (a new run needs it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                response = await self.http.get(f"/v1/threads/{thread_id}")
                if response.status_code == 200 and response.json()["runStatus"] == "idle":
                    return True
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
        return False


def http_client(base_url: str, clients: int) -> httpx.AsyncClient:
    """One connection pool for all simulated clients, with room for every one of them."""
    limits = httpx.Limits(max_connections=clients * 3, max_keepalive_connections=clients)
    return httpx.AsyncClient(base_url=base_url, headers=HEADERS, limits=limits,
                             timeout=httpx.Timeout(60.0, connect=30.0))


async def soak(base_url: str, model: ScriptedModel, size: SoakSize, grace: float,
               seed: int = 1, fault: Callable[[], Awaitable[None]] | None = None,
               fault_at: float = 0.4, plans: dict[str, float] = PLANS) -> SoakResult:
    """Run `size.clients` clients for `size.seconds`; `fault`, if given, is awaited alongside,
    starting `fault_at` of the way through (for an outage mid-soak)."""
    result = SoakResult()
    started = time.monotonic()
    deadline = started + size.seconds

    async def later() -> None:
        if fault is not None:
            await asyncio.sleep(size.seconds * fault_at)
            await fault()

    async with http_client(base_url, size.clients) as http:
        clients = [Client(n, http, model, size, grace, random.Random(seed * 100_003 + n), result,
                          plans, seed) for n in range(size.clients)]
        await asyncio.gather(later(), *(c.loop(deadline) for c in clients))
    result.seconds = time.monotonic() - started
    return result
