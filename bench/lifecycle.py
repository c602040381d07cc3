"""Run lifecycle latencies on loopback: reconnect to first replayed event, and cancel to landing.

    .venv/bin/python -m bench.lifecycle [--runs 40]

Starts the scripted OpenAI-compatible model in this process and two real gateway processes on
one SQLite database (as `tests/` does), then measures, over `--runs` runs each:

- reconnect: `GET /v1/threads/{id}/runs/{runId}` with `Last-Event-ID` to the first replayed
  event arriving, for a running run (served from memory by its process), a running run through
  the other process (read from the database), and a finished run (from the database);
- cancel: `DELETE` sent to (a) its response, (b) the subscriber reading `RUN_ERROR CANCELLED`,
  (c) the upstream model seeing its stream closed; in-process, and through the other process
  (the owner notices the database flag on its next poll).

Prints median / p90 / p99 / max in milliseconds. Not part of the pass/fail suite.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from tests.conftest import scripted_env
from tests.support.gateway_server import GatewayServer
from tests.support.run_stream import (
    disconnects_after,
    ids,
    message,
    open_stream,
    read_and_leave,
    read_until,
    slow_turn,
    started_ids,
    texts,
    wait_for,
)
from tests.support.scripted_model import ScriptedModel

BODY = {"message": message("bench"), "thread": {"userKey": "bench"}}


def summary(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)

    def pct(p: float) -> float:
        return ms[min(len(ms) - 1, round(p * (len(ms) - 1)))]

    return (f"{name:<48} n={len(ms):<3} median {statistics.median(ms):7.1f}  p90 {pct(0.9):7.1f}"
            f"  p99 {pct(0.99):7.1f}  max {ms[-1]:7.1f}")


def time_to_first_event(client: httpx.Client, url: str, after: int) -> float:
    started = time.perf_counter()
    with open_stream(client, "GET", url, headers={"last-event-id": str(after)}) as (_, events):
        next(events)
        return time.perf_counter() - started


def reconnect_running(model: ScriptedModel, owner: httpx.Client, reader: httpx.Client,
                      at_live_edge: bool = False) -> float:
    """Read 20 tokens of a running run, disconnect, reconnect: from the middle of what was
    seen (the first event is replayed), or from the last event seen (it is the next live one,
    which the model sends 10 ms apart)."""
    model.enqueue(slow_turn(300, 0.01))
    seen = read_and_leave(owner, "/v1/threads/runs", BODY, 20)
    run = started_ids(seen)
    took = time_to_first_event(reader, ids(run), seen[-1].id if at_live_edge else len(seen) // 2)
    owner.delete(ids(run))
    return took


def cancel(model: ScriptedModel, owner: httpx.Client, canceller: httpx.Client
           ) -> tuple[float, float, float]:
    model.enqueue(slow_turn(2000, 0.01))
    with open_stream(owner, "POST", "/v1/threads/runs", json=BODY) as (_, events):
        seen = read_until(events, lambda s: texts(s) >= 5)
        run = started_ids(seen)
        result: dict[str, float] = {}

        def delete() -> None:
            response = canceller.delete(ids(run))
            result["response"] = time.monotonic()
            assert response.json()["status"] == "cancelled", response.text

        sent = time.monotonic()
        deleter = threading.Thread(target=delete)
        deleter.start()
        for event in events:
            if event.type == "RUN_ERROR":
                result["event"] = time.monotonic()
                break
        deleter.join()
    closed = wait_for(lambda: disconnects_after(model, sent), 10)[0]
    return result["response"] - sent, result["event"] - sent, closed - sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    runs = parser.parse_args().runs

    model = ScriptedModel()
    model.start()
    workdir = Path(tempfile.mkdtemp(prefix="bench-lifecycle-"))
    env = scripted_env(model)
    a, b = GatewayServer(workdir, env), GatewayServer(workdir, env)
    a.start()
    b.start()
    try:
        with httpx.Client(base_url=a.url, timeout=30) as on_a, \
                httpx.Client(base_url=b.url, timeout=30) as on_b:
            for _ in range(3):  # warm up both processes (first litellm call, pools)
                reconnect_running(model, on_a, on_b)
                cancel(model, on_a, on_a)
            finished = []
            for _ in range(runs):
                model.enqueue(slow_turn(100, 0.0))
                with open_stream(on_a, "POST", "/v1/threads/runs", json=BODY) as (_, events):
                    seen = list(events)
                finished.append((started_ids(seen), seen[-1].id))
            time.sleep(6)  # past the in-memory linger: replays come from the database

            lines = [
                summary("reconnect, running run, same process",
                        [reconnect_running(model, on_a, on_a) for _ in range(runs)]),
                summary("reconnect, running run, other process (DB)",
                        [reconnect_running(model, on_a, on_b) for _ in range(runs)]),
                summary("reconnect at live edge, same process",
                        [reconnect_running(model, on_a, on_a, True) for _ in range(runs)]),
                summary("reconnect at live edge, other process (DB)",
                        [reconnect_running(model, on_a, on_b, True) for _ in range(runs)]),
                summary("reconnect, finished run (DB)",
                        [time_to_first_event(on_a, ids(run), last // 2)
                         for run, last in finished]),
            ]
            for label, canceller in (("same process", on_a), ("other process", on_b)):
                samples = [cancel(model, on_a, canceller) for _ in range(runs)]
                lines += [
                    summary(f"cancel ({label}): DELETE answered", [s[0] for s in samples]),
                    summary(f"cancel ({label}): RUN_ERROR at subscriber",
                            [s[1] for s in samples]),
                    summary(f"cancel ({label}): upstream stream closed", [s[2] for s in samples]),
                ]
        print("\n".join(lines))
    finally:
        a.stop()
        b.stop()
        model.stop()


if __name__ == "__main__":
    main()
