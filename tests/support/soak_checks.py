"""What a user would check after a soak, from outside, over the public API.

`settle()` waits for every run to be terminal and every thread idle; `verify()` then checks each
run: its reader saw each event exactly once (ids 1..n over all its connections, no gap, no
duplicate) and the same events as the run's replayed log; a finished run's stored text is
exactly what the upstream sent; a cancelled one was cancelled by its client or by the disconnect
grace, never otherwise. `new_run_on_each_thread()`: no thread is left locked.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.support.run_stream import message
from tests.support.soak import ENDING_EVENTS, TERMINAL, RunRecord, SoakResult, http_client
from tests.support.sse import SseEvent, aiter_events, text_of

BATCH = 30  # checks made at once after the soak
T = TypeVar("T")


async def settle(base_url: str, result: SoakResult, timeout: float) -> list[str]:
    """Wait until every run is terminal and every thread idle; what did not get there."""
    problems: list[str] = []
    deadline = time.monotonic() + timeout
    async with http_client(base_url, 20) as http:
        for record in result.runs:
            status = await _wait_json(http, f"/v1/threads/{record.thread_id}/runs/"
                                      f"{record.run_id}", "status", TERMINAL, deadline)
            if status not in TERMINAL:
                problems.append(f"run {record.run_id} ({record.plan}) is still {status}")
        for thread_id in sorted(result.threads):
            status = await _wait_json(http, f"/v1/threads/{thread_id}", "runStatus", {"idle"},
                                      deadline)
            if status != "idle":
                problems.append(f"thread {thread_id} is left {status}")
    return problems


async def _wait_json(http: httpx.AsyncClient, url: str, key: str, wanted: set[str],
                     deadline: float) -> str | None:
    value = None
    while True:
        try:
            response = await http.get(url, headers={"accept": "application/json"})
            value = response.json().get(key) if response.status_code == 200 else None
        except httpx.HTTPError:
            value = None
        if value in wanted or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.2)


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)  # RUN_ERROR codes seen at the end
    reconnected_readers: int = 0
    exact_texts: int = 0


async def verify(base_url: str, result: SoakResult, grace: float,
                 allowed_errors: frozenset[str] = frozenset()) -> Verdict:
    """Check every run from outside (see the module docstring). `allowed_errors`: `RUN_ERROR`
    codes a run may legitimately end with (besides `CANCELLED` for a cancel), e.g. those of a
    database outage."""
    verdict = Verdict()
    async with http_client(base_url, BATCH) as http:
        stored: dict[str, tuple[str, bool]] = {}
        for texts in await batched([stored_texts(http, t) for t in sorted(result.threads)]):
            stored.update(texts)
        await batched([check_run(http, record, stored, grace, allowed_errors, verdict)
                       for record in result.runs])
    return verdict


async def batched(calls: list[Awaitable[T]]) -> list[T]:
    """Await `calls` at most `BATCH` at a time (the checks must not become a load of their
    own)."""
    done: list[T] = []
    for start in range(0, len(calls), BATCH):
        done += await asyncio.gather(*calls[start:start + BATCH])
    return done


async def stored_texts(http: httpx.AsyncClient, thread_id: str) -> dict[str, tuple[str, bool]]:
    """Per run id, the text of its assistant messages as stored, and whether it was cancelled."""
    texts: dict[str, tuple[str, bool]] = {}
    cursor: str | None = None
    while True:
        params = {"limit": "200", **({"cursor": cursor} if cursor else {})}
        page = (await http.get(f"/v1/threads/{thread_id}/messages", params=params)).json()
        for msg in page["messages"]:
            if msg["role"] != "assistant" or not msg.get("runId"):
                continue
            text = "".join(b["text"] for b in msg["content"] if b["type"] == "text")
            before, cancelled = texts.get(msg["runId"], ("", False))
            texts[msg["runId"]] = (before + text, cancelled or bool(msg.get("isCancelled")))
        cursor = page.get("nextCursor")
        if not page.get("hasMore") or not cursor:
            return texts


def in_place(ids: list[int | None]) -> bool:
    """Ids 1..n, each event once, in order; the last one may be further on: the end of a run
    whose process died goes past every event that process can have shown (issue 41)."""
    return ids[:-1] == list(range(1, len(ids))) and (not ids or (ids[-1] or 0) >= len(ids))


def describe_event(event: SseEvent | None) -> str:
    """An event as a problem line shows it: its type and the start of its data."""
    return "nothing" if event is None else f"{event.type} {json.dumps(event.data)[:300]}"


async def check_run(http: httpx.AsyncClient, record: RunRecord,
                    stored: dict[str, tuple[str, bool]], grace: float,
                    allowed_errors: frozenset[str], verdict: Verdict) -> None:
    run_url = f"/v1/threads/{record.thread_id}/runs/{record.run_id}"
    name = f"run {record.run_id} ({record.plan}, client {record.client})"
    problems = verdict.problems
    status = (await http.get(run_url, headers={"accept": "application/json"})).json()
    verdict.statuses[status["status"]] = verdict.statuses.get(status["status"], 0) + 1
    async with http.stream("GET", run_url, headers={"accept": "text/event-stream"}) as response:
        replay = [e async for e in aiter_events(response)]
    error = next((e.data.get("code") for e in replay if e.type == "RUN_ERROR"), None)
    if error:
        verdict.errors[error] = verdict.errors.get(error, 0) + 1
    text, cancelled_message = stored.get(record.run_id, ("", False))

    if status["status"] not in TERMINAL:
        problems.append(f"{name}: {status['status']} after the soak")
    if not in_place([e.id for e in replay]):
        problems.append(f"{name}: replayed ids are not 1..n")
    if not replay or replay[-1].type not in ENDING_EVENTS or sum(
            e.type in ENDING_EVENTS for e in replay) != 1:
        problems.append(f"{name}: the log does not end with exactly one last event")
    # The reader: each event exactly once, in order, the same as the run's log.
    seen = record.events
    if record.reconnected:
        verdict.reconnected_readers += 1
    if not in_place([e.id for e in seen]):
        problems.append(f"{name}: the reader's ids are not 1..n over {len(record.visits)} "
                        f"connections: {[e.id for e in seen][:80]}")
    elif [(e.id, e.data) for e in seen] != [(e.id, e.data) for e in replay[:len(seen)]]:
        pairs = zip(seen, replay, strict=False)  # the log may be shorter than what was read
        first = next((n for n, (a, b) in enumerate(pairs) if a.data != b.data), len(replay))
        read = seen[first] if first < len(seen) else None
        logged = replay[first] if first < len(replay) else None
        problems.append(f"{name}: the reader saw events that differ from the run's log, from "
                        f"event {first + 1} of {len(seen)} read ({len(replay)} logged): read "
                        f"{describe_event(read)}, logged {describe_event(logged)}")
    if record.read_to_end and len(seen) != len(replay):
        problems.append(f"{name}: the reader ended after {len(seen)} events, the log has "
                        f"{len(replay)}")
    if record.read_to_end and text_of(seen) != text:
        problems.append(f"{name}: {status['status']}, the reader's text differs from the "
                        f"stored text: {text_of(seen)[-30:]!r} vs {text[-30:]!r} (log: "
                        f"{text_of(replay)[-30:]!r})")
    # The run's outcome, as a user would judge it.
    if status["status"] == "completed":
        if text != record.upstream_text:
            problems.append(f"{name}: completed, but its stored text differs from what the "
                            f"upstream sent: {text[:80]!r} vs {record.upstream_text[:80]!r}")
        else:
            verdict.exact_texts += 1
    elif not record.upstream_text.startswith(text):
        problems.append(f"{name}: {status['status']}, and its stored text is not a prefix of "
                        f"what the upstream sent: {text[:80]!r}")
    if status["status"] == "cancelled":
        unattended = record.plan == "abandon" or record.longest_absence >= grace
        if not (record.cancelled_by_client or unattended):
            problems.append(f"{name}: cancelled, but the client did not cancel it and was "
                            f"never away for the grace ({record.longest_absence:.1f} s)")
        if error != "CANCELLED":
            problems.append(f"{name}: cancelled, but its log ends with {error!r}")
        if text and text != record.upstream_text and not cancelled_message:
            # (A message the model had finished before the cancel arrived stands as it is.)
            problems.append(f"{name}: cancelled mid-message, but its message is not marked "
                            f"cancelled: {text[-40:]!r}")
    if status["status"] == "failed" and error not in allowed_errors:
        problems.append(f"{name}: failed with {error!r}: {status.get('error')}")


async def new_run_on_each_thread(base_url: str, result: SoakResult) -> list[str]:
    """No thread is left locked: a new (echoed) run on each one finishes."""
    problems: list[str] = []

    async def one(http: httpx.AsyncClient, thread_id: str) -> None:
        owner = result.owners[thread_id]
        thread = (await http.get(f"/v1/threads/{thread_id}", params={"userKey": owner})).json()
        body: dict[str, Any] = {"message": message("after the soak"), "userKey": owner}
        if thread.get("lastCompletedRunId"):
            body["previousRunId"] = thread["lastCompletedRunId"]
        async with http.stream("POST", f"/v1/threads/{thread_id}/runs", json=body,
                               headers={"accept": "text/event-stream"}) as response:
            if response.status_code != 200:
                await response.aread()
                problems.append(f"thread {thread_id}: a new run got {response.status_code} "
                                f"{response.text[:200]}")
                return
            events = [e async for e in aiter_events(response)]
        if not events or events[-1].type != "RUN_FINISHED":
            problems.append(f"thread {thread_id}: a new run ended with "
                            f"{events[-1].data if events else 'nothing'}")

    async with http_client(base_url, BATCH) as http:
        await batched([one(http, t) for t in sorted(result.threads)])
    return problems


def rss_kib(pid: int) -> int:
    """Resident set size of a process, from `/proc/<pid>/status` (VmRSS, in KiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


async def idle_gauges(urls: list[str]) -> dict[str, dict[str, float]]:
    """`gateway_active_runs` and `gateway_active_subscribers` of each process (`/metrics`)."""
    gauges: dict[str, dict[str, float]] = {}
    async with httpx.AsyncClient(timeout=30) as http:
        for url in urls:
            text = (await http.get(f"{url}/metrics")).text
            gauges[url] = {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
                           if line.startswith(("gateway_active_runs ",
                                               "gateway_active_subscribers "))}
    return gauges
