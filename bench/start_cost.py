"""The CPU and the wall time of a run start, in-process, robust to a busy machine.

    .venv/bin/python -m bench.start_cost                     # 300 starts, one at a time and at once
    .venv/bin/python -m bench.start_cost --profile 30        # plus cProfile's top 30 (at once)

The whole app (`create_app`, its lifespan, SQLite in a temporary directory, the default model
adapter) runs on a uvloop in this process; the model is the paced upstream of `bench/paced.py`
in its own process, asked for one token. Each start is a `POST /v1/threads/runs` handed straight
to the ASGI app (no socket, no HTTP client: the caller costs a dict), read to its end.

Per start, with its end (a one-token run is almost nothing but its start and its end):

- **CPU**: `time.process_time()` over the batch (every thread of the process: the event loop and
  aiosqlite's), divided by the starts. CPU used, not time waited for a core, so other load on the
  machine changes it far less than any wall-clock figure.
- **wall**: from handing the request to the app to its first SSE frame (`RUN_STARTED`), to the
  first model token, and to the end of the stream; p50 / p99.

"one at a time" is the cost of a start on an idle process; "at once" hands all of them to the app
in the same instant (the start gate and the log writer's group commits at work).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.gateway_server import ROOT, free_port

BODY = json.dumps({"message": {"role": "user", "content": [{"type": "text",
                                                           "text": "paced 1 1000"}]},
                   "thread": {"userKey": "bench"}}).encode()


async def one_start(app: Any, path: str = "/v1/threads/runs") -> tuple[float, float, float]:
    """(first frame, first token, end) in ms after handing the request to the app."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 50000),
             "server": ("127.0.0.1", 8000),
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"accept", b"text/event-stream"),
                         (b"content-length", str(len(BODY)).encode())]}
    sent = [False]
    done = asyncio.Event()
    started = time.perf_counter()
    marks: dict[str, float] = {}

    async def receive() -> dict[str, Any]:
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": BODY, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start" and message["status"] != 200:
            raise RuntimeError(f"status {message['status']}")
        if message["type"] != "http.response.body":
            return
        body = message.get("body", b"")
        now = time.perf_counter()
        if b"RUN_STARTED" in body:
            marks.setdefault("frame", now)
        if b"TEXT_MESSAGE_CONTENT" in body:
            marks.setdefault("token", now)
        if b"RUN_FINISHED" in body or b"RUN_ERROR" in body:
            if b"RUN_ERROR" in body:
                raise RuntimeError(body.decode(errors="replace")[:300])
            marks["end"] = now
            done.set()

    runner = asyncio.ensure_future(app(scope, receive, send))
    await done.wait()
    await runner
    return tuple((marks[k] - started) * 1000 for k in ("frame", "token", "end"))  # type: ignore


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


async def batch(app: Any, n: int, at_once: bool) -> dict[str, Any]:
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
            "wall_s": round(wall, 2),
            "first_frame_ms": [round(pct(list(frames), q), 1) for q in (0.5, 0.99)],
            "first_token_ms": [round(pct(list(tokens), q), 1) for q in (0.5, 0.99)],
            "end_ms": [round(pct(list(ends), q), 1) for q in (0.5, 0.99)]}


async def measure(args: argparse.Namespace, upstream_url: str) -> list[dict[str, Any]]:
    from gateway.app import create_app
    from tests.support.inprocess_app import settings_from

    workdir = Path(tempfile.mkdtemp(prefix="bench-start-"))
    settings = settings_from({
        "GATEWAY_DATABASE_URL": f"sqlite+aiosqlite:///{workdir / 'gateway.db'}",
        "GATEWAY_MODEL": "openai/paced", "GATEWAY_MODEL_API_BASE": f"{upstream_url}/v1",
        "GATEWAY_MODEL_API_KEY": "sk-bench", "GATEWAY_MAX_ACTIVE_RUNS": "0",
        "GATEWAY_MAX_START_WAIT_SECONDS": "0", "GATEWAY_MAX_LOOP_LAG_SECONDS": "0", **dict(e.split("=", 1) for e in args.env)})
    app = create_app(settings)
    results = []
    async with app.router.lifespan_context(app):
        app.state.services = app.state.services  # opened by the lifespan
        await batch(app, 20, False)  # warm-up: lazy imports, the first model call, caches
        await batch(app, 20, True)
        for at_once in (False, True):
            spy = None
            if args.py_spy:
                spy = subprocess.Popen(
                    [args.py_spy, "record", "--pid", str(os.getpid()), "--format", "raw",
                     "--rate", "250", "--nonblocking", "--threads", "-o",
                     f"{args.py_spy_out}-{'at-once' if at_once else 'one-by-one'}.txt"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                await asyncio.sleep(1.0)  # attached
            row = await batch(app, args.starts, at_once)
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(30)
            results.append(row)
            print(json.dumps(row), flush=True)
        if args.profile:
            profiler = cProfile.Profile(time.thread_time)  # the loop's CPU, not waits
            profiler.enable()
            await batch(app, args.starts, True)
            profiler.disable()
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out)
            stats.sort_stats("tottime").print_stats(args.profile)
            stats.sort_stats("cumulative").print_stats(args.profile)
            print(out.getvalue())
            if args.profile_out:
                stats.dump_stats(args.profile_out)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=300)
    parser.add_argument("--profile", type=int, default=0, help="print cProfile's top N")
    parser.add_argument("--profile-out", help="write the cProfile stats to this file")
    parser.add_argument("--py-spy", help="py-spy binary: sample each batch into "
                                         "--py-spy-out-<batch>.txt (raw format)")
    parser.add_argument("--py-spy-out", default="/tmp/start-cost-pyspy")
    parser.add_argument("--env", action="append", default=[], help="NAME=value setting")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    port = free_port()
    upstream = subprocess.Popen([sys.executable, "-m", "bench.paced", "upstream", str(port)],
                                cwd=ROOT)
    try:
        time.sleep(1.0)
        import uvloop

        load = Path("/proc/loadavg").read_text().split()[:3]
        print(f"load average at the start: {' '.join(load)}", flush=True)
        uvloop.run(measure(args, f"http://127.0.0.1:{port}"))
        load = Path("/proc/loadavg").read_text().split()[:3]
        print(f"load average at the end: {' '.join(load)}", flush=True)
    finally:
        upstream.terminate()
        upstream.wait()


if __name__ == "__main__":
    main()
