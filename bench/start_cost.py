"""The CPU and the wall time of a run start, in-process, robust to a busy machine.

    .venv/bin/python -m bench.start_cost              # 3 x 100 starts against the bare limit
    .venv/bin/python -m bench.start_cost --at-once    # then 100 starts in the same instant
    .venv/bin/python -m bench.start_cost --profile 30 # plus cProfile's top 30 (one at a time)
    .venv/bin/python -m bench.start_cost --per-token 500  # plus the loop's CPU per streamed token
    .venv/bin/python -m bench.start_cost --backend postgres --trips 50  # PostgreSQL + Redis, and
                                                      # round trips and Redis commands per start

`--backend postgres` runs the app on a throwaway PostgreSQL and Redis (`tests/support/engines`);
`--trips N` then counts, over N starts one at a time (and per token with `--per-token`), the
round trips to PostgreSQL on the wire (`bench/pg_trips.py`, a proxy in its own process, used
only by that count), the commands Redis executed (its `INFO commandstats`), and the pipelines
redis-py sent (each a send and a wait with its fixed cost; counted around `Pipeline.execute`
in this process, with the commands of each).

The whole app (`create_app`, its lifespan, SQLite in a temporary directory, the default model
adapter) runs on a uvloop in this process; the model is the paced upstream of `bench/paced.py`
in its own process, asked for one token. Each start is a `POST /v1/threads/runs` handed straight
to the ASGI app (no socket, no HTTP client: the caller costs a dict), read to its end.

Per start, with its end (a one-token run is almost nothing but its start and its end):

- **CPU**: `time.process_time()` over the batch (every thread of the process: the event loop and
  aiosqlite's), divided by the starts. CPU used, not time waited for a core, so other load on the
  machine changes it far less than any wall-clock figure.
- **CPU by thread**: the same per Python thread (the loop's `MainThread`, aiosqlite's
  connection thread, the executors' workers), from each thread's own clock.
- **wall**: from handing the request to the app to its first SSE frame (`RUN_STARTED`), to the
  first model token, and to the end of the stream; p50 / p99.

"one at a time" is the cost of a start on an idle process; "at once" hands all of them to the app
in the same instant (the start gate and the log writer's group commits at work).

CPU time still stretches on a busy machine (shared cores and caches), so each figure is given
beside a limit measured in the same process, alternating with it (`--rounds`): **bare**, the
least any server does for the same request: a Starlette route that parses the body, streams
the same upstream through the same aiohttp session settings as the gateway's direct adapter
(`gateway/engine/models/upstream_pool.py`), and sends the same five events through
sse-starlette as the gateway frames them, with nothing stored, no middleware, no auth. The
ratio gateway / bare is what to compare across machines and loads. Beside it, **Python calls
per start** (cProfile over `--calls` starts one at a time, the loop thread), a count that does
not depend on the load at all.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import cProfile
import io
import json
import os
import pstats
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from bench.concurrency import Source

T = TypeVar("T")


def body_of(text: str) -> bytes:
    return json.dumps({"message": {"role": "user", "content": [{"type": "text", "text": text}]},
                       "thread": {"userKey": "bench"}}).encode()


BODY = body_of("paced 1 1000")  # a one-token run: almost nothing but its start and its end


def inprocess_app(database_url: str, upstream_url: str, extra: list[str] | None = None) -> Any:
    """The app as the in-process benchmarks run it: the paced upstream, no admission limits
    (starts one at a time measure the start, not the gate), `extra` (NAME=value) last."""
    from gateway.app import create_app
    from tests.support.inprocess_app import settings_from

    return create_app(settings_from({
        "GATEWAY_DATABASE_URL": database_url,
        "GATEWAY_MODEL": "openai/paced", "GATEWAY_MODEL_API_BASE": f"{upstream_url}/v1",
        "GATEWAY_MODEL_API_KEY": "sk-bench", "GATEWAY_MAX_ACTIVE_RUNS": "0",
        "GATEWAY_MAX_START_WAIT_SECONDS": "0", "GATEWAY_MAX_LOOP_LAG_SECONDS": "0",
        **dict(e.split("=", 1) for e in extra or [])}))


def with_upstream(measure: Callable[[str], Awaitable[T]],
                  loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None) -> T:
    """`measure(upstream_url)` on a uvloop (or `loop_factory`'s loop), the paced upstream in
    its own process meanwhile."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    upstream = Source("upstream")
    try:
        import uvloop

        with asyncio.Runner(loop_factory=loop_factory or uvloop.new_event_loop) as runner:
            return runner.run(measure(upstream.url))  # type: ignore[arg-type]
    finally:
        upstream.stop()


async def one_start(app: Any, path: str = "/v1/threads/runs",
                    text: str | None = None) -> tuple[float, float, float]:
    """(first frame, first token, end) in ms after handing the request to the app."""
    body = BODY if text is None else body_of(text)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 50000),
             "server": ("127.0.0.1", 8000),
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"accept", b"text/event-stream"),
                         (b"content-length", str(len(body)).encode())]}
    sent = [False]
    done = asyncio.Event()
    started = time.perf_counter()
    marks: dict[str, float] = {}

    async def receive() -> dict[str, Any]:
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start" and message["status"] != 200:
            raise RuntimeError(f"status {message['status']}")
        if message["type"] != "http.response.body":
            return
        sent_bytes = message.get("body", b"")
        now = time.perf_counter()
        if b"RUN_STARTED" in sent_bytes:
            marks.setdefault("frame", now)
        if b"TEXT_MESSAGE_CONTENT" in sent_bytes:
            marks.setdefault("token", now)
        if b"RUN_FINISHED" in sent_bytes or b"RUN_ERROR" in sent_bytes:
            if b"RUN_ERROR" in sent_bytes:
                raise RuntimeError(sent_bytes.decode(errors="replace")[:300])
            marks["end"] = now
            done.set()

    runner = asyncio.ensure_future(app(scope, receive, send))
    await done.wait()
    await runner
    return tuple((marks[k] - started) * 1000 for k in ("frame", "token", "end"))  # type: ignore


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each Python thread of the process so far, by name (numbers dropped, so
    that the workers of one pool add up)."""
    seconds: dict[str, float] = {}
    for thread in threading.enumerate():
        try:
            used = time.clock_gettime(time.pthread_getcpuclockid(thread.ident or 0))
        except (OSError, ProcessLookupError):
            continue  # ended meanwhile
        name = "".join(c for c in thread.name if not c.isdigit()).strip(" _-")
        seconds[name] = seconds.get(name, 0.0) + used
    return seconds


def by_thread(after: dict[str, float], before: dict[str, float], n: int) -> dict[str, float]:
    """CPU ms per start on each thread that did any (a thread that ended meanwhile is missed:
    the process's figure has it)."""
    used = {name: (cpu - before.get(name, 0.0)) * 1000 / n for name, cpu in after.items()}
    return {name: round(ms, 3) for name, ms in sorted(used.items()) if ms >= 0.0005}


async def batch(app: Any, n: int, at_once: bool) -> dict[str, Any]:
    threads = thread_cpu()
    cpu, loop_cpu, wall = time.process_time(), time.thread_time(), time.perf_counter()
    if at_once:
        marks = await asyncio.gather(*(one_start(app) for _ in range(n)))
    else:
        marks = [await one_start(app) for _ in range(n)]
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    loop_cpu = time.thread_time() - loop_cpu
    frames, tokens, ends = zip(*marks, strict=True)
    return {"starts": n, "at_once": at_once, "cpu_ms_per_start": round(cpu * 1000 / n, 2),
            "loop_cpu_ms_per_start": round(loop_cpu * 1000 / n, 2),
            "cpu_ms_by_thread": by_thread(thread_cpu(), threads, n),
            "wall_s": round(wall, 2),
            "first_frame_ms": [round(pct(list(frames), q), 1) for q in (0.5, 0.99)],
            "first_token_ms": [round(pct(list(tokens), q), 1) for q in (0.5, 0.99)],
            "end_ms": [round(pct(list(ends), q), 1) for q in (0.5, 0.99)]}


def bare_app(upstream_url: str) -> Any:
    """The limit: the same request, upstream call and events with nothing else (see the
    module's docstring). The upstream is read as the gateway's direct adapter reads it: through
    aiohttp with the same session settings (`UpstreamPool`), its bytes split into lines with
    nothing more than the split itself."""
    import orjson
    from sse_starlette import EventSourceResponse
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.routing import Route

    from gateway.engine.models.direct import CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS
    from gateway.engine.models.upstream_pool import UpstreamPool
    from gateway.runs.timings import Timings

    pool = UpstreamPool(f"{upstream_url}/v1", {"Accept": "text/event-stream",
                                               "Authorization": "Bearer sk-bench"},
                        READ_TIMEOUT_SECONDS, CONNECT_TIMEOUT_SECONDS)
    timings = Timings()

    def event(kind: str, **fields: Any) -> dict[str, str]:
        return {"data": orjson.dumps({"type": kind, **fields}).decode()}

    async def start(request: Request) -> EventSourceResponse:
        text = orjson.loads(await request.body())["message"]["content"][0]["text"]
        body = {"model": "paced", "messages": [{"role": "user", "content": text}],
                "stream": True, "stream_options": {"include_usage": True}}

        async def events() -> Any:
            yield event("RUN_STARTED", threadId="thr", runId="run")
            yield event("TEXT_MESSAGE_START", messageId="msg", role="assistant")
            async with pool.post("/chat/completions", orjson.dumps(body)) as response:
                buffer = b""
                async for piece in response.content.iter_any():
                    lines = (buffer + piece).split(b"\n")
                    buffer = lines.pop()
                    for line in lines:
                        if not line.startswith(b"data: ") or line == b"data: [DONE]":
                            continue
                        for choice in orjson.loads(line[6:]).get("choices", []):
                            if choice["delta"].get("content"):
                                yield event("TEXT_MESSAGE_CONTENT", messageId="msg",
                                            delta=choice["delta"]["content"])
            yield event("TEXT_MESSAGE_END", messageId="msg")
            yield event("RUN_FINISHED", threadId="thr", runId="run")

        return EventSourceResponse(events(), ping=timings.heartbeat_seconds, sep="\n",
                                   send_timeout=timings.slow_reader_seconds,
                                   headers={"Cache-Control": "no-cache",
                                            "X-Accel-Buffering": "no"})

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await pool.aclose()

    return Starlette(routes=[Route("/v1/threads/runs", start, methods=["POST"])],
                     lifespan=lifespan)


async def calls_per_start(app: Any, n: int) -> int:
    """Python function calls on the loop thread per start, one at a time (cProfile's count)."""
    profiler = cProfile.Profile(time.thread_time)
    profiler.enable()
    for _ in range(n):
        await one_start(app)
    profiler.disable()
    return round(pstats.Stats(profiler).total_calls / n)  # type: ignore[attr-defined]


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


async def against_bare(gateway: Any, bare: Any, args: argparse.Namespace) -> dict[str, Any]:
    """CPU per start one at a time, gateway and bare alternating for `--rounds`; the medians,
    their ratio, and the calls per start of each."""
    cpu: dict[str, list[float]] = {"gateway": [], "bare": []}
    for _ in range(args.rounds):
        for name, app in (("gateway", gateway), ("bare", bare)):
            row = await batch(app, args.starts, False)
            cpu[name].append(row["cpu_ms_per_start"])
            print(json.dumps({"app": name, **row}), flush=True)
    result = {"gateway_cpu_ms": median(cpu["gateway"]), "bare_cpu_ms": median(cpu["bare"])}
    result["ratio"] = round(result["gateway_cpu_ms"] / result["bare_cpu_ms"], 2)
    if args.calls:
        result["gateway_calls"] = await calls_per_start(gateway, args.calls)
        result["bare_calls"] = await calls_per_start(bare, args.calls)
    print(json.dumps({"summary": result, "rounds": cpu}), flush=True)
    return result


async def loop_cpu_per_run(app: Any, text: str, runs: int) -> float:
    started = time.thread_time()
    for _ in range(runs):
        await one_start(app, text=text)
    return (time.thread_time() - started) / runs


async def per_token(gateway: Any, bare: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The loop's CPU per streamed token, gateway and bare alternating: a run of `--per-token`
    tokens (as fast as the upstream sends them) less a one-token run, over the tokens between.
    What the response path costs per event (the `send` of each frame through the middleware
    included), which a one-token start hides."""
    tokens, cpu_us = args.per_token, {"gateway": [], "bare": []}  # type: ignore[var-annotated]
    for _ in range(args.rounds):
        for name, app in (("gateway", gateway), ("bare", bare)):
            one = await loop_cpu_per_run(app, "paced 1 100000", 32)
            many = await loop_cpu_per_run(app, f"paced {tokens} 100000", 8)
            cpu_us[name].append(round((many - one) / (tokens - 1) * 1e6, 2))
    result = {"gateway_us_per_token": median(cpu_us["gateway"]),
              "bare_us_per_token": median(cpu_us["bare"])}
    result["ratio"] = round(result["gateway_us_per_token"] / result["bare_us_per_token"], 2)
    print(json.dumps({"per_token": result, "rounds": cpu_us}), flush=True)
    return result


PIPELINES: list[str] = []  # each redis-py pipeline sent: its commands' names


def count_pipelines() -> None:
    """Count redis-py's pipelines (each a send and a wait with its fixed cost: the connection,
    its lock, packing, reading the replies) and their commands, in this process only."""
    from redis.asyncio.client import Pipeline

    execute = Pipeline.execute

    async def counted(self: Pipeline, raise_on_error: bool = True) -> Any:
        PIPELINES.append(" ".join(str(args[0]) for args, _ in self.command_stack))
        return await execute(self, raise_on_error)

    Pipeline.execute = counted  # type: ignore[method-assign]


def redis_commands(url: str) -> dict[str, int]:
    """Commands Redis has executed, by name (the scripts' own calls apart)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}


def commands_between(after: dict[str, int], before: dict[str, int], per: int,
                     ) -> dict[str, float]:
    used = {name: calls - before.get(name, 0) for name, calls in after.items()
            if name not in ("info",)}
    return {name: round(calls / per, 2) for name, calls in sorted(used.items()) if calls}


async def trips_per_start(app: Any, args: argparse.Namespace, engines: Any,
                          counter: Any) -> dict[str, Any]:
    """Round trips to PostgreSQL and Redis commands per start (one at a time, with its end),
    and per streamed token with `--per-token` (runs of that many tokens less one-token runs)."""
    from bench.pg_trips import difference

    async def counted(text: str, runs: int) -> tuple[dict[str, float], dict[str, float]]:
        trips, commands = counter.counts(), redis_commands(engines.redis.url)
        sends = len(PIPELINES)
        for _ in range(runs):
            await one_start(app, text=text)
        await asyncio.sleep(0.5)  # the last end's writes
        redis = commands_between(redis_commands(engines.redis.url), commands, runs)
        redis["pipelines"] = round((len(PIPELINES) - sends) / runs, 2)
        redis["commands per pipeline"] = round(
            sum(len(p.split()) for p in PIPELINES[sends:]) / max(1, len(PIPELINES) - sends), 2)
        shapes = collections.Counter(PIPELINES[sends:])
        print(json.dumps({"pipelines": shapes.most_common(8),
                          "the first": PIPELINES[sends:sends + 8]}), flush=True)
        return difference(counter.counts(), trips, runs), redis

    pg, redis = await counted("paced 1 1000", args.trips)
    result: dict[str, Any] = {"postgres_per_start": pg, "redis_per_start": redis}
    if args.per_token:
        tokens = args.per_token
        pg_many, redis_many = await counted(f"paced {tokens} 100000", 4)
        result["postgres_per_token"] = {k: round((v - pg.get(k, 0)) / (tokens - 1), 3)
                                        for k, v in pg_many.items()}
        result["redis_per_token"] = {k: round((v - redis.get(k, 0)) / (tokens - 1), 3)
                                     for k, v in redis_many.items()}
    print(json.dumps({"trips": result}), flush=True)
    return result


def database_env(args: argparse.Namespace, engines: Any, counter: Any) -> dict[str, str]:
    if engines is None:
        workdir = Path(tempfile.mkdtemp(prefix="bench-start-"))
        return {"GATEWAY_DATABASE_URL": f"sqlite+aiosqlite:///{workdir / 'gateway.db'}"}
    url = engines.postgres.create_database("bench_start_cost")
    if counter is not None:
        url = url.replace(f":{engines.postgres.port}/", f":{counter.port}/")
    return {"GATEWAY_DATABASE_URL": url, "GATEWAY_REDIS_URL": engines.redis.url}


async def measure(args: argparse.Namespace, upstream_url: str, engines: Any = None,
                  counter: Any = None) -> list[dict[str, Any]]:
    from gateway.app import create_app
    from tests.support.inprocess_app import settings_from

    settings = settings_from({
        **database_env(args, engines, counter),
        "GATEWAY_MODEL": "openai/paced", "GATEWAY_MODEL_API_BASE": f"{upstream_url}/v1",
        "GATEWAY_MODEL_API_KEY": "sk-bench", "GATEWAY_MAX_ACTIVE_RUNS": "0",
        "GATEWAY_MAX_START_WAIT_SECONDS": "0", "GATEWAY_MAX_LOOP_LAG_SECONDS": "0",
        **dict(e.split("=", 1) for e in args.env)})
    app, bare = create_app(settings), bare_app(upstream_url)
    results: list[dict[str, Any]] = []
    async with app.router.lifespan_context(app), bare.router.lifespan_context(bare):
        for warm in (app, bare):  # lazy imports, the first model call, caches
            await batch(warm, 20, False)
            await batch(warm, 20, True)
        if counter is not None:
            results.append(await trips_per_start(app, args, engines, counter))
        results.append(await against_bare(app, bare, args))
        if args.per_token:
            results.append(await per_token(app, bare, args))
        if args.at_once:
            row = await batch(app, args.starts, True)
            results.append(row)
            print(json.dumps({"app": "gateway", **row}), flush=True)
        if args.py_spy:
            await sampled(app, args)
        if args.profile:
            profiled(await profile(app, args.starts), args)
    return results


async def sampled(app: Any, args: argparse.Namespace) -> None:
    """py-spy over a batch of starts one at a time and one at once."""
    for at_once in (False, True):
        spy = subprocess.Popen(
            [args.py_spy, "record", "--pid", str(os.getpid()), "--format", "raw",
             "--rate", "250", "--nonblocking", "--threads", "-o",
             f"{args.py_spy_out}-{'at-once' if at_once else 'one-by-one'}.txt"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        await asyncio.sleep(1.0)  # attached
        await batch(app, args.starts, at_once)
        spy.send_signal(signal.SIGINT)
        spy.wait(30)


async def profile(app: Any, n: int) -> cProfile.Profile:
    profiler = cProfile.Profile(time.thread_time)  # the loop's CPU, not waits
    profiler.enable()
    for _ in range(n):
        await one_start(app)
    profiler.disable()
    return profiler


def profiled(profiler: cProfile.Profile, args: argparse.Namespace) -> None:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(args.profile)
    stats.sort_stats("cumulative").print_stats(args.profile)
    print(out.getvalue())
    if args.profile_out:
        stats.dump_stats(args.profile_out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=100, help="starts per batch")
    parser.add_argument("--rounds", type=int, default=3,
                        help="batches of gateway and bare, alternating")
    parser.add_argument("--calls", type=int, default=30,
                        help="starts to count Python calls over (0: none)")
    parser.add_argument("--per-token", type=int, default=0, metavar="TOKENS",
                        help="also the loop's CPU per token, over runs of this many tokens")
    parser.add_argument("--at-once", action="store_true",
                        help="then a batch all at once (wall times under a burst)")
    parser.add_argument("--profile", type=int, default=0,
                        help="print cProfile's top N over a batch one at a time")
    parser.add_argument("--profile-out", help="write the cProfile stats to this file")
    parser.add_argument("--py-spy", help="py-spy binary: sample each batch into "
                                         "--py-spy-out-<batch>.txt (raw format)")
    parser.add_argument("--py-spy-out", default="/tmp/start-cost-pyspy")
    parser.add_argument("--env", action="append", default=[], help="NAME=value setting")
    parser.add_argument("--backend", default="sqlite", choices=("sqlite", "postgres"),
                        help="postgres: a throwaway PostgreSQL and Redis")
    parser.add_argument("--trips", type=int, default=0, metavar="STARTS",
                        help="count round trips to PostgreSQL and Redis commands over this "
                             "many starts (postgres only; through a counting proxy)")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    upstream = Source("upstream")  # the paced upstream, waited for until it answers
    engines = counter = None
    try:
        import uvloop

        if args.backend == "postgres":
            from tests.support.engines import Engines

            engines = Engines().start()
            if args.trips:
                from bench.pg_trips import TripCounter

                count_pipelines()

                counter = TripCounter("127.0.0.1", engines.postgres.port,
                                      os.environ.get("BENCH_PG_TRACE"))
        load = Path("/proc/loadavg").read_text().split()[:3]
        print(f"load average at the start: {' '.join(load)}", flush=True)
        uvloop.run(measure(args, upstream.url, engines, counter))
        load = Path("/proc/loadavg").read_text().split()[:3]
        print(f"load average at the end: {' '.join(load)}", flush=True)
    finally:
        upstream.stop()
        if counter is not None:
            counter.stop()
        if engines is not None:
            engines.stop()


if __name__ == "__main__":
    main()
