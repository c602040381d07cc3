"""Scaled out on PostgreSQL + Redis: cross-process follow lag, cross-process cancel, and how many
concurrent runs one worker and two workers carry.

    .venv/bin/python -m bench.scale_out [--runs 30] [--skip-capacity]

Starts a throwaway PostgreSQL and Redis (as `tests/` does with `GATEWAY_TEST_BACKEND=postgres`),
the scripted OpenAI-compatible model in this process, and real gateway processes:

- lag: a run on process A (tokens 10 ms apart) is read at once by its own client on A and by a
  subscriber on process B (through the run's Redis stream); for each live event, the time B
  received it minus the time A's client did;
- cancel: `DELETE` sent to process B for a run of process A, to the upstream model seeing its
  stream closed (the cancel travels by Redis pub/sub);
- capacity: `gateway serve --workers 1` and `--workers 2`; C runs at once (each 100 tokens,
  20 ms apart), growing C by half while the p99 gap between consecutive events at the clients stays
  under the bound (`--bound-ms`, default 100); prints the largest C that held.

Prints median / p90 / p99 / max in milliseconds. Not part of the pass/fail suite.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from bench.lifecycle import cancel, summary
from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import GatewayServer
from tests.support.run_stream import ids, message, open_stream, slow_turn, started_ids
from tests.support.scripted_model import ScriptedModel

BODY = {"message": message("bench"), "thread": {"userKey": "bench"}}


def follow_lag(model: ScriptedModel, on_a: httpx.Client, on_b: httpx.Client) -> list[float]:
    """Per live event: arrival at B's subscriber minus arrival at A's own client."""
    model.enqueue(slow_turn(150, 0.01))
    at_a: dict[int, float] = {}
    at_b: dict[int, float] = {}
    ready = threading.Event()

    def read_b(run: tuple[str, str]) -> None:
        with open_stream(on_b, "GET", ids(run)) as (_, events):
            ready.set()
            for event in events:
                at_b[event.id] = time.perf_counter()

    with open_stream(on_a, "POST", "/v1/threads/runs", json=BODY) as (_, events):
        reader = None
        for event in events:
            at_a[event.id] = time.perf_counter()
            if reader is None:
                reader = threading.Thread(target=read_b, args=(started_ids([event]),))
                reader.start()
                ready.wait(10)
    assert reader is not None
    reader.join(30)
    live = [i for i in sorted(at_a) if i > 10 and i in at_b]  # past B's catch-up
    return [at_b[i] - at_a[i] for i in live]


def capacity(model: ScriptedModel, url: str, concurrent: int) -> float:
    """p99 gap (s) between consecutive events at the clients of `concurrent` runs at once."""
    for _ in range(concurrent):
        model.enqueue({"steps": slow_turn(100, 0.02), "stream": True})

    def one(_: int) -> list[float]:
        gaps, last = [], None
        with httpx.Client(base_url=url, timeout=60) as client:
            with open_stream(client, "POST", "/v1/threads/runs", json=BODY) as (_, events):
                for event in events:
                    now = time.perf_counter()
                    if last is not None and event.type == "TEXT_MESSAGE_CONTENT":
                        gaps.append(now - last)
                    last = now
        return gaps

    with ThreadPoolExecutor(concurrent) as pool:
        gaps = sorted(g for run in pool.map(one, range(concurrent)) for g in run)
    return gaps[min(len(gaps) - 1, round(0.99 * (len(gaps) - 1)))]


def max_concurrency(model: ScriptedModel, workdir: Path, workers: int, bound: float,
                    limit: int) -> tuple[int, list[str]]:
    server = GatewayServer(workdir / f"w{workers}", scripted_env(model),
                           args=("--workers", str(workers)))
    server.start()
    held, notes, concurrent = 0, [], 4
    try:
        capacity(model, server.url, 2)  # warm up
        while concurrent <= limit:
            p99 = capacity(model, server.url, concurrent)
            notes.append(f"  workers={workers} runs at once={concurrent:<4} p99 gap "
                         f"{p99 * 1000:7.1f} ms")
            if p99 > bound:
                break
            held, concurrent = concurrent, concurrent + max(4, concurrent // 2)
    finally:
        server.stop()
    return held, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--bound-ms", type=float, default=100.0)
    parser.add_argument("--max-concurrent", type=int, default=256)
    parser.add_argument("--skip-capacity", action="store_true")
    options = parser.parse_args()

    engines.ENGINES = engines.Engines().start()
    model = ScriptedModel()
    model.start()
    workdir = Path(tempfile.mkdtemp(prefix="bench-scale-out-"))
    env = scripted_env(model)
    a, b = GatewayServer(workdir, env), GatewayServer(workdir, env)
    lines = [f"load average before: {os.getloadavg()}"]
    try:
        a.start()
        b.start()
        with httpx.Client(base_url=a.url, timeout=30) as on_a, \
                httpx.Client(base_url=b.url, timeout=30) as on_b:
            for _ in range(3):  # warm up both processes
                follow_lag(model, on_a, on_b)
                cancel(model, on_a, on_b)
            lag = [s for _ in range(options.runs) for s in follow_lag(model, on_a, on_b)]
            lines.append(summary("follow lag, other process (Redis stream), per event", lag))
            samples = [cancel(model, on_a, on_b) for _ in range(options.runs)]
            lines += [
                summary("cancel on other process: DELETE answered", [s[0] for s in samples]),
                summary("cancel on other process: RUN_ERROR at subscriber",
                        [s[1] for s in samples]),
                summary("cancel on other process: upstream closed", [s[2] for s in samples]),
            ]
        a.stop()
        b.stop()
        if not options.skip_capacity:
            for workers in (1, 2):
                held, notes = max_concurrency(model, workdir, workers, options.bound_ms / 1000,
                                              options.max_concurrent)
                lines += notes
                lines.append(f"workers={workers}: {held} runs at once within a p99 gap of "
                             f"{options.bound_ms:.0f} ms")
        lines.append(f"load average after: {os.getloadavg()}")
        print("\n".join(lines))
    finally:
        a.stop()
        b.stop()
        model.stop()
        engines.ENGINES.stop()


if __name__ == "__main__":
    main()
