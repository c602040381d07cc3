"""The per-token hot path on loopback: throughput, added latency, fan-out, streamed props.

    .venv/bin/python -m bench.hot_path [--tokens 2000] [--repeats 5] [--py-spy PATH]

The gateway should do O(1) work per streamed token; this measures what it does against the
limits it cannot beat. Every server is its own process, so a reader in this process
never shares an interpreter lock with what it measures (on 2 cores, the measured server has one
to itself): the scripted model (`tests/support/scripted_model.py`, each numbered text token
stamped with the monotonic time it left), one real gateway (`gateway serve`, SQLite), and a bare
sse-starlette server replaying recorded gateway events with the gateway's framing.

1. throughput: `--tokens` text tokens sent as fast as possible (`{"slow": {"interval": 0}}`),
   read by one SSE client: from the upstream directly, through litellm alone (the gateway's
   adapter, `LiteLLMModel.stream`, in this process), through the gateway, and from the bare
   SSE server. Wall time and the serving process's CPU time per event. The gateway's own cost
   per event is its CPU minus litellm's and minus bare SSE's; a 10-token run gives the part of
   it that is a fixed cost per run.
2. latency: `--paced` tokens 10 ms apart; per token, the time from leaving the upstream to
   reaching the reader (p50 / p99), directly, through litellm and through the gateway.
3. fan-out: the same run with 1, 2, 4, 8 subscribers (the POST plus reconnects with
   `GET /v1/threads/{id}/runs/{runId}`); wall and gateway CPU time, and cost per extra viewer.
4. in-process: our code per model delta (Turn -> LiveLog -> TamboDialect -> JSON), first
   vs last 10 % of a component whose props are one 20 kB (then 40 kB) string in 5-character
   fragments, and of 20,000 text tokens (flat = no O(n) work per token); and the recorder's
   batched log write (`Store.append_frames`) per frame.
5. props: the same component streams through the gateway, per fragment.
6. with `--py-spy PATH`: a profile of the gateway during a long throughput run, summed by area
   (model adapter, database, HTTP/SSE, the rest) and by our functions.

`--only throughput,latency,...` runs some of them. Each figure is the median over `--repeats`
runs (latency percentiles: the run with the median p50), interleaved so that a burst of load
from another job on the machine hits every source alike.
Not part of the pass/fail suite.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from bench.lifecycle import summary
from tests.conftest import scripted_env
from tests.support.gateway_server import ROOT, GatewayServer, free_port
from tests.support.run_stream import HEADERS, message, slow_turn

BODY = {"message": message("bench"), "thread": {"userKey": "bench"}}
NOTE = {"name": "Note", "description": "A note", "propsSchema": {"type": "object"}}
FANOUT = (1, 2, 4, 8)
PACED_INTERVAL = 0.01
FRAGMENT = 5  # characters per streamed props fragment
# A numbered token as the scripted model writes it (`json.dumps` of {"content": "t12 "}).
TOKEN = re.compile(rb'("content": "t\d+) "')
STAMP = re.compile(rb"t\d+@(\d+) ")
FRAME = re.compile(r"(.*) \((.*):-?\d+\)$")  # py-spy raw format: `function (path:line)`
SHORT_RUN = 10  # tokens of the run that measures the gateway's fixed cost per run
CHEAP = 10  # reads per CPU measurement of a source that costs little (or a short run)
PROPS_KB = (20, 40)
TEXT_TOKENS = 20000
ITEM_ID = "01JD0000000000000000000000"  # a Timbal item id, as long as the gateway's


# ---- servers ----------------------------------------------------------------------------

class StampTokens:
    """ASGI wrapper for the scripted model: each numbered token leaves as `t<k>@<ns> `, the
    monotonic time it was handed to the server (one clock for every process on the machine),
    so a reader anywhere can tell how long the token took to reach it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        async def stamped(msg: dict[str, Any]) -> None:
            if msg["type"] == "http.response.body" and msg.get("body"):
                msg = {**msg, "body": TOKEN.sub(
                    lambda m: b'%s@%d "' % (m.group(1), time.monotonic_ns()), msg["body"])}
            await send(msg)

        await self.app(scope, receive, stamped)


def bare_app(events_file: Path) -> Any:
    """The limit: recorded gateway events (already JSON) through sse-starlette, framed exactly
    as `gateway.api.runs.event_stream` frames them, with nothing else per event."""
    from sse_starlette import EventSourceResponse
    from starlette.applications import Starlette
    from starlette.routing import Route

    from gateway.runs.timings import Timings

    events = json.loads(events_file.read_text())

    async def stream(request: Any) -> EventSourceResponse:
        async def frames() -> Any:
            for event_id, data in events:
                yield {"data": data, "id": event_id}

        return EventSourceResponse(frames(), ping=2, sep="\n", send_timeout=Timings().slow_reader_seconds,
                                   headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    return Starlette(routes=[Route("/stream", stream)])


def serve(kind: str, port: int, events_file: Path | None) -> None:
    """Entry of the server subprocesses (`--serve upstream|bare`)."""
    import uvicorn

    if kind == "upstream":
        from tests.support.scripted_model import ScriptedModel

        app = StampTokens(ScriptedModel().app)
    else:
        assert events_file is not None
        app = bare_app(events_file)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                lifespan="off")


class Server:
    """One of the subprocesses above."""

    def __init__(self, kind: str, *extra: str) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.hot_path", "--serve", kind, "--port", str(self.port),
             *extra], cwd=ROOT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"{kind} server did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """As `ScriptedModel.base_url`, for `scripted_env`."""
        return f"{self.url}/v1"

    def enqueue(self, *steps: dict[str, Any]) -> None:
        """One streamed model turn (a background non-streaming call cannot take it)."""
        response = httpx.post(f"{self.url}/_script",
                              json={"turns": [{"steps": list(steps), "stream": True}]})
        response.raise_for_status()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- readers ----------------------------------------------------------------------------

@dataclass
class Reading:
    events: int = 0
    seconds: float = 0.0
    cpu: float = 0.0  # of the serving process
    latencies_ns: list[int] = field(default_factory=list)

    @property
    def us_per_event(self) -> float:
        return self.seconds / self.events * 1e6

    @property
    def cpu_us_per_event(self) -> float:
        return self.cpu / self.events * 1e6


async def read_sse(http: httpx.AsyncClient, method: str, url: str, stamps: bool = False,
                   on_headers: Callable[[httpx.Response], None] | None = None,
                   **kwargs: Any) -> Reading:
    """Read an SSE stream to its end, counting `data:` lines; as little work per event as a
    reader can do (bytes.count), or, with `stamps`, line by line for each token's latency."""
    reading = Reading()
    started = time.perf_counter()
    async with http.stream(method, url, **kwargs) as response:
        if response.status_code != 200:
            await response.aread()
            raise AssertionError(f"{url}: {response.status_code} {response.text}")
        if on_headers is not None:
            on_headers(response)
        if stamps:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    reading.events += 1
                    found = STAMP.search(line.encode())
                    if found:
                        reading.latencies_ns.append(time.monotonic_ns() - int(found.group(1)))
        else:
            tail = b"\n"  # shorter than the marker: no match is counted twice
            async for chunk in response.aiter_raw():
                joined = tail + chunk
                reading.events += joined.count(b"\ndata:")
                tail = joined[-5:]
    reading.seconds = time.perf_counter() - started
    return reading


async def measured(pid: int, read: Callable[[], Awaitable[Reading]], times: int = 1) -> Reading:
    """`times` readings in a row, added up, with the serving process's CPU time over them (the
    kernel counts it in 10 ms ticks: a source that takes little is read several times)."""
    total = Reading()
    before = cpu_seconds(pid)
    for _ in range(times):
        reading = await read()
        total.events += reading.events
        total.seconds += reading.seconds
        total.latencies_ns += reading.latencies_ns
    total.cpu = cpu_seconds(pid) - before
    return total


async def read_litellm(upstream: Server, stamps: bool, adapter: str = "litellm") -> Reading:
    """A model adapter alone in this process (`litellm`: litellm's real OpenAI streaming path;
    `direct`: the direct adapter the gateway uses for this upstream): what the gateway's run
    task does per chunk before any of our code."""
    from gateway.engine.deltas import TextDelta
    from gateway.engine.models.adapters import model_adapter
    from gateway.engine.models.litellm_model import ModelRequest

    model = model_adapter("openai/scripted", upstream.base_url, "sk-bench", adapter)
    reading = Reading()
    started, cpu = time.perf_counter(), time.process_time()
    async for delta in model.stream(ModelRequest([{"role": "user", "content": "bench"}])):
        reading.events += 1
        if stamps and isinstance(delta, TextDelta):
            found = STAMP.search(delta.text.encode())
            if found:
                reading.latencies_ns.append(time.monotonic_ns() - int(found.group(1)))
    reading.seconds = time.perf_counter() - started
    reading.cpu = time.process_time() - cpu
    return reading


def load_litellm() -> None:
    """As the gateway does at start-up (offline, then `gc.freeze()`), so litellm's per-chunk
    cost here is what it is in the gateway."""
    from gateway.services import load_litellm as gateway_load

    gateway_load()
    gc.collect()
    gc.freeze()


async def capture(http: httpx.AsyncClient, url: str, path: Path) -> int:
    """One gateway run's events as sent (id, data), for the bare server."""
    events: list[tuple[str, str]] = []
    event_id = ""
    async with http.stream("POST", url, json=BODY, headers=HEADERS) as response:
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                event_id = line[3:].strip()
            elif line.startswith("data:"):
                events.append((event_id, line[5:].removeprefix(" ")))
    assert json.loads(events[-1][1])["type"] == "RUN_FINISHED", events[-1]
    path.write_text(json.dumps(events))
    return len(events)


# ---- measurements -----------------------------------------------------------------------

@dataclass
class Setup:
    http: httpx.AsyncClient
    upstream: Server
    gateway: GatewayServer
    bare: Server | None = None

    @property
    def gateway_pid(self) -> int:
        assert self.gateway.process is not None
        return self.gateway.process.pid

    def gateway_run(self, stamps: bool = False, body: dict[str, Any] = BODY) -> Awaitable[Reading]:
        return read_sse(self.http, "POST", f"{self.gateway.url}/v1/threads/runs", stamps,
                        json=body, headers=HEADERS)

    def upstream_run(self, stamps: bool = False) -> Awaitable[Reading]:
        return read_sse(
            self.http, "POST", f"{self.upstream.base_url}/chat/completions", stamps,
            json={"model": "scripted", "messages": [{"role": "user", "content": "bench"}],
                  "stream": True, "stream_options": {"include_usage": True}})

    def scripted(self, tokens: int, interval: float,
                 read: Callable[[], Awaitable[Reading]]) -> Callable[[], Awaitable[Reading]]:
        """`read`, after queueing a model turn of `tokens` text tokens `interval` s apart."""
        async def run() -> Reading:
            self.upstream.enqueue(*slow_turn(tokens, interval))
            return await read()

        return run


def median_of(readings: list[Reading], value: Callable[[Reading], float]) -> float:
    return statistics.median(value(r) for r in readings)


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


async def throughput(s: Setup, tokens: int, repeats: int) -> list[str]:
    assert s.bare is not None
    gateway, upstream, bare = s.gateway_pid, s.upstream.process.pid, s.bare.process.pid
    sources: dict[str, Callable[[], Awaitable[Reading]]] = {
        "upstream": lambda: measured(upstream, s.scripted(tokens, 0, s.upstream_run), CHEAP),
        "litellm": s.scripted(tokens, 0, lambda: read_litellm(s.upstream, False)),
        "direct": s.scripted(tokens, 0, lambda: read_litellm(s.upstream, False, "direct")),
        "gateway": lambda: measured(gateway, s.scripted(tokens, 0, s.gateway_run)),
        "bare": lambda: measured(bare, lambda: read_sse(s.http, "GET", f"{s.bare.url}/stream"),
                                 CHEAP),
        "short": lambda: measured(gateway, s.scripted(SHORT_RUN, 0, s.gateway_run), CHEAP),
    }
    labels = {"upstream": "upstream (scripted model) read directly",
              "litellm": "litellm alone (in-process)",
              "direct": "direct adapter alone (in-process)",
              "gateway": "gateway (POST /v1/threads/runs, direct)",
              "bare": "bare sse-starlette, recorded gateway events"}
    results: dict[str, list[Reading]] = {name: [] for name in sources}
    for _ in range(repeats):  # interleaved, so a burst of load elsewhere hits every source
        for name, run in sources.items():
            results[name].append(await run())
    lines = [f"throughput, {tokens} tokens as fast as possible, median of {repeats} runs "
             "(events/s; wall and serving-process CPU in microseconds per event):"]
    cpu = {name: median_of(readings, lambda r: r.cpu_us_per_event)
           for name, readings in results.items()}
    for name, label in labels.items():
        readings = results[name]
        wall = median_of(readings, lambda r: r.us_per_event)
        events = readings[0].events // (CHEAP if name in ("upstream", "bare") else 1)
        spread = sorted(r.cpu_us_per_event for r in readings)
        lines.append(f"  {label:<46} events {events:<6} {1e6 / wall:8.0f}/s  wall {wall:7.1f}"
                     f"  cpu {cpu[name]:7.1f} ({spread[0]:.0f} to {spread[-1]:.0f})")
    per_run = median_of(results["short"], lambda r: r.cpu) / CHEAP * 1000
    events = results["gateway"][0].events
    ours = cpu["gateway"] - cpu["direct"] - cpu["bare"]
    fixed = per_run * 1000 / events
    lines += [f"  gateway's own CPU per event = {cpu['gateway']:.1f} - direct adapter "
              f"{cpu['direct']:.1f}"
              f" - bare SSE {cpu['bare']:.1f} = {ours:.1f} us",
              f"  of which per-run fixed cost (a {SHORT_RUN}-token run: {per_run:.1f} ms of CPU)"
              f" / {events} events = {fixed:.1f} us; per token {ours - fixed:.1f} us"]
    return lines


async def latency(s: Setup, tokens: int, repeats: int) -> list[str]:
    sources: dict[str, Callable[[], Awaitable[Reading]]] = {
        "upstream read directly": lambda: s.upstream_run(True),
        "litellm alone": lambda: read_litellm(s.upstream, True),
        "gateway": lambda: s.gateway_run(True),
    }
    runs: dict[str, list[list[float]]] = {name: [] for name in sources}
    for _ in range(repeats):
        for name, read in sources.items():
            reading = await s.scripted(tokens, PACED_INTERVAL, read)()
            seconds = [ns / 1e9 for ns in reading.latencies_ns]
            assert len(seconds) == tokens, (name, len(seconds))
            runs[name].append(seconds)
    lines = [f"latency, {tokens} tokens {PACED_INTERVAL * 1000:.0f} ms apart, from the token "
             f"leaving the upstream to the reader (ms; of {repeats} runs, the one with the "
             "median p50):"]
    for name, samples in runs.items():
        middle = sorted(samples, key=statistics.median)[len(samples) // 2]
        p99s = sorted(percentile(run, 0.99) * 1000 for run in samples)
        lines.append(f"  {summary(name, middle)}  (p99 of each run: {p99s[0]:.1f} to "
                     f"{p99s[-1]:.1f})")
    return lines


async def fan_out(s: Setup, tokens: int, repeats: int) -> list[str]:
    async def one(viewers: int) -> tuple[float, float]:
        s.upstream.enqueue(*slow_turn(tokens, 0))
        run_ids: asyncio.Future[tuple[str, str]] = asyncio.get_running_loop().create_future()
        before, started = cpu_seconds(s.gateway_pid), time.perf_counter()
        post = asyncio.create_task(read_sse(
            s.http, "POST", f"{s.gateway.url}/v1/threads/runs", json=BODY, headers=HEADERS,
            on_headers=lambda r: run_ids.set_result((r.headers["x-thread-id"],
                                                     r.headers["x-run-id"]))))
        thread_id, run_id = await run_ids
        url = f"{s.gateway.url}/v1/threads/{thread_id}/runs/{run_id}"
        readings = await asyncio.gather(post, *(read_sse(s.http, "GET", url, headers=HEADERS)
                                                for _ in range(viewers - 1)))
        wall, cpu = time.perf_counter() - started, cpu_seconds(s.gateway_pid) - before
        assert len({r.events for r in readings}) == 1, [r.events for r in readings]
        return wall, cpu

    figures: dict[int, list[tuple[float, float]]] = {}
    for _ in range(repeats):
        for viewers in FANOUT:
            figures.setdefault(viewers, []).append(await one(viewers))
    events = tokens + 5
    lines = [f"fan-out, {tokens} tokens, one POST + reconnects, median of {repeats} runs "
             "(wall and gateway CPU for the whole run):"]
    base_wall = statistics.median(f[0] for f in figures[1])
    base_cpu = statistics.median(f[1] for f in figures[1])
    for viewers, runs in figures.items():
        wall = statistics.median(f[0] for f in runs)
        cpu = statistics.median(f[1] for f in runs)
        extra = ""
        if viewers > 1:
            per_cpu = (cpu - base_cpu) / (viewers - 1)
            per_wall = (wall - base_wall) / (viewers - 1)
            extra = (f"  per extra viewer: wall {per_wall * 1000:5.0f} ms, "
                     f"CPU {per_cpu * 1000:5.0f} ms = {per_cpu / events * 1e6:5.1f} us/event")
        lines.append(f"  {viewers} viewer(s): wall {wall * 1000:6.0f} ms  CPU {cpu * 1000:6.0f} ms"
                     f"{extra}")
    return lines


def props_arguments(kb: int) -> list[str]:
    """A component call's arguments: `{"text":"` + a `kb` kB string in 5-character fragments
    (numbered, so no two in a row are alike: litellm rejects a model repeating itself) + `"}`."""
    return ['{"text":"', *(f"{k:05d}" for k in range(kb * 1000 // FRAGMENT)), '"}']


async def our_code_per_delta(deltas: list[Any], dialect: str = "tambo") -> list[int]:
    """Per model delta, nanoseconds of our code between the model adapter and the socket: Turn
    writes frames to a LiveLog, the dialect (`tambo` or `agui`) translates each new entry, and
    each event is stamped and serialised as `protocol.translation.positioned` and
    `api.runs.event_stream` do."""
    from gateway.dialects.agui import translate as agui
    from gateway.dialects.tambo import translate as tambo
    from gateway.engine.loop import Turn
    from gateway.runs.log.live import LiveLog

    module = agui if dialect == "agui" else tambo
    encode = module.encode

    live = LiveLog("bench")

    class Sink:
        async def emit(self, frame: dict[str, Any]) -> None:
            live.append(frame)

    turn = Turn(Sink(), {"Note"}, set(), set())
    translator = agui.AguiDialect() if dialect == "agui" else tambo.TamboDialect()
    seen, samples = 0, []
    for delta in deltas:
        started = time.perf_counter_ns()
        await turn.feed(delta)
        for entry in live.since(seen):
            for event in translator.feed(entry.frame):
                encode(translator.stamp(event, entry.ts))
        seen = live.last
        samples.append(time.perf_counter_ns() - started)
    return samples


def first_and_last(name: str, runs: list[list[int]]) -> str:
    """p50 / p99 of the first and the last 10 % of deltas, in the run with the median last-10 %
    p50 (microseconds)."""
    tenth = len(runs[0]) // 10
    firsts = [[ns / 1000 for ns in run[:tenth]] for run in runs]
    lasts = [[ns / 1000 for ns in run[-tenth:]] for run in runs]
    k = sorted(range(len(runs)), key=lambda k: statistics.median(lasts[k]))[len(runs) // 2]
    return (f"  {name:<44} first 10 % p50 {statistics.median(firsts[k]):5.1f} p99 "
            f"{percentile(firsts[k], 0.99):5.1f}; last 10 % p50 {statistics.median(lasts[k]):5.1f}"
            f" p99 {percentile(lasts[k], 0.99):5.1f}")


async def frame_batches(workdir: Path, repeats: int) -> list[float]:
    """CPU microseconds per frame of `Store.append_frames` (the recorder's batched write of the
    log) on SQLite, in batches of `FLUSH_FRAMES`, one per repeat after 3 to warm up."""
    from gateway.config import Settings
    from gateway.runs.log.recorder import FLUSH_FRAMES
    from gateway.services import open_services

    samples: list[float] = []
    settings = Settings(database_url=f"sqlite+aiosqlite:///{workdir / 'frames.db'}")
    async with open_services(settings) as services:  # the store as the server opens it
        for batch in range(3 + repeats):
            rows = [(k + 1, 1_700_000_000_000 + k, {"i": ITEM_ID, "a": f"t{k} "})
                    for k in range(FLUSH_FRAMES)]
            started = time.process_time()  # the aiosqlite thread's too
            assert await services.store.append_frames(f"run{batch}", rows)
            samples.append((time.process_time() - started) / FLUSH_FRAMES * 1e6)
    return samples[3:]


async def in_process(workdir: Path, repeats: int) -> list[str]:
    from gateway.engine.deltas import TextDelta, ToolCallDelta
    from gateway.runs.log.recorder import FLUSH_FRAMES

    lines = ["our code per model delta, in-process (us; median run):"]
    for kb in PROPS_KB:
        fragments = props_arguments(kb)
        deltas = [ToolCallDelta(0, "call_note", "show_component_Note", fragments[0]),
                  *(ToolCallDelta(0, None, None, f) for f in fragments[1:-1])]
        runs = [await our_code_per_delta(deltas) for _ in range(repeats)]
        lines.append(first_and_last(f"{kb} kB props, {len(deltas)} fragments of 5", runs))
    texts = [TextDelta(f"t{k} ") for k in range(1, TEXT_TOKENS + 1)]
    runs = [await our_code_per_delta(texts) for _ in range(repeats)]
    lines.append(first_and_last(f"text, {TEXT_TOKENS} tokens", runs))
    # AG-UI 1.0 builds each event as an ag_ui.core model and serialises it with pydantic.
    runs = [await our_code_per_delta(texts, "agui") for _ in range(repeats)]
    lines.append(first_and_last(f"text, {TEXT_TOKENS} tokens, AG-UI 1.0 dialect", runs))
    fragments = props_arguments(PROPS_KB[-1])
    deltas = [ToolCallDelta(0, "call_note", "show_component_Note", fragments[0]),
              *(ToolCallDelta(0, None, None, f) for f in fragments[1:-1])]
    runs = [await our_code_per_delta(deltas, "agui") for _ in range(repeats)]
    lines.append(first_and_last(f"{PROPS_KB[-1]} kB props, AG-UI 1.0 dialect", runs))
    batches = await frame_batches(workdir, 20)
    lines.append(f"  log persistence, Store.append_frames in batches of {FLUSH_FRAMES}: CPU "
                 f"{statistics.median(batches):.1f} us/frame ({min(batches):.1f} to "
                 f"{max(batches):.1f})")
    return lines


async def props(s: Setup, repeats: int) -> list[str]:
    lines = ["streamed props through the gateway (median of "
             f"{repeats} runs; litellm's own cost included):"]
    for kb in PROPS_KB:
        body = {**BODY, "availableComponents": [NOTE]}
        fragments = props_arguments(kb)
        readings = []
        for _ in range(repeats):
            s.upstream.enqueue(
                {"tool_call": {"index": 0, "id": "call_note", "name": "show_component_Note",
                               "arguments": fragments[0]}},
                *({"tool_call": {"index": 0, "arguments": f}} for f in fragments[1:]))
            readings.append(await measured(s.gateway_pid, partial(s.gateway_run, body=body)))
        wall = median_of(readings, lambda r: r.seconds) / len(fragments) * 1e6
        cpu = median_of(readings, lambda r: r.cpu) / len(fragments) * 1e6
        lines.append(f"  {kb} kB, {len(fragments)} fragments, {readings[0].events} events: "
                     f"wall {wall:6.1f} us/fragment, gateway CPU {cpu:6.1f} us/fragment")
    return lines


# What a sampled stack is spent on: the first of these whose packages appear on it.
AREAS = (("model adapter (litellm, openai SDK)", ("/litellm/", "/openai/")),
         ("database (SQLAlchemy, aiosqlite)", ("/sqlalchemy/", "/aiosqlite/", "/gateway/store/")),
         ("HTTP and SSE (uvicorn, starlette, sse-starlette)",
          ("/uvicorn/", "/starlette/", "/sse_starlette/", "/h11/", "/httptools/")))


def is_ours(path: str) -> bool:
    return path.startswith(str(ROOT / "gateway"))


async def profile(s: Setup, py_spy: str, tokens: int, out: Path) -> list[str]:
    """py-spy on the gateway during one long run."""
    s.upstream.enqueue(*slow_turn(tokens, 0))
    spy = subprocess.Popen([py_spy, "record", "--pid", str(s.gateway_pid), "--rate", "1000",
                            "--format", "raw", "--full-filenames", "--nonblocking",
                            "--output", str(out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    await asyncio.sleep(1.0)  # py-spy attaches
    await s.gateway_run()
    spy.send_signal(signal.SIGINT)
    spy.wait(30)
    return [f"py-spy on the gateway, one {tokens}-token run:", *profile_summary(out)]


def profile_summary(out: Path) -> list[str]:
    """A py-spy raw profile summed three ways: by area (`AREAS`) of the whole stack; by our
    function when the sampled frame is ours (self time); by the innermost frame of ours on the
    stack (our code including the library code it calls)."""
    entry = (str(ROOT / "gateway" / "cli/main.py"), str(ROOT / "gateway" / "__main__.py"))
    areas, own, inclusive, total = Counter(), Counter(), Counter(), 0
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [m.groups() for m in map(FRAME.match, stack.split(";")) if m]
        samples = int(count)
        total += samples
        paths = ";".join(p for _, p in frames)
        areas[next((name for name, marks in AREAS if any(m in paths for m in marks)),
                   "the rest (event loop, our code, stdlib)")] += samples
        mine = [(f, str(Path(p).relative_to(ROOT))) for f, p in frames
                if is_ours(p) and p not in entry]
        if mine and frames[-1][1] == str(ROOT / mine[-1][1]):
            own["%s (%s)" % mine[-1]] += samples
        if mine:
            inclusive["%s (%s)" % mine[-1]] += samples
    lines = [f"  {total} samples at 1 kHz; by area:"]
    lines += [f"    {v / total:5.1%}  {k}" for k, v in areas.most_common()]
    lines.append("  ours, self time:")
    lines += [f"    {v / total:5.1%}  {k}" for k, v in own.most_common(8)]
    lines.append("  innermost frame of ours on the stack (includes what it calls):")
    lines += [f"    {v / total:5.1%}  {k}" for k, v in inclusive.most_common(10)]
    return lines


async def bench(args: argparse.Namespace, upstream: Server, gateway: GatewayServer,
                workdir: Path) -> None:
    async with httpx.AsyncClient(timeout=120) as http:
        s = Setup(http, upstream, gateway)
        for _ in range(3):  # warm up: first litellm call, pools, the gateway's code paths
            upstream.enqueue(*slow_turn(200, 0))
            await s.gateway_run()
            upstream.enqueue(*slow_turn(200, 0))
            await read_litellm(upstream, False)
        upstream.enqueue(*slow_turn(args.tokens, 0))
        events = workdir / "events.json"
        await capture(http, f"{gateway.url}/v1/threads/runs", events)
        s.bare = Server("bare", "--events", str(events))
        measurements: dict[str, Callable[[], Awaitable[list[str]]]] = {
            "throughput": lambda: throughput(s, args.tokens, args.repeats),
            "latency": lambda: latency(s, args.paced, args.repeats),
            "fan-out": lambda: fan_out(s, args.tokens, args.repeats),
            "in-process": lambda: in_process(workdir, max(3, args.repeats // 2)),
            "props": lambda: props(s, max(3, args.repeats // 2)),
        }
        if args.py_spy:
            measurements["profile"] = lambda: profile(s, args.py_spy, args.tokens * 5,
                                                      workdir / "profile.txt")
        sections = []
        try:
            for name, measure in measurements.items():
                if name in args.only.split(","):
                    sections.append(await measure())
        finally:
            s.bare.stop()
    for lines in sections:
        print("\n".join(lines), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--paced", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--py-spy", help="path to a py-spy binary: profile the gateway too")
    parser.add_argument("--only", default="throughput,latency,fan-out,in-process,props,profile",
                        help="comma-separated measurements to run (default: all)")
    parser.add_argument("--serve", choices=["upstream", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--events", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.events)
        return

    load_litellm()
    workdir = Path(tempfile.mkdtemp(prefix="bench-hot-path-"))
    upstream = Server("upstream")
    gateway = GatewayServer(workdir, scripted_env(upstream))  # type: ignore[arg-type]
    try:
        gateway.start()
        asyncio.run(bench(args, upstream, gateway, workdir))
    finally:
        gateway.stop()
        upstream.stop()


if __name__ == "__main__":
    main()
