"""Where a run start waits: the phases of every start under a load, from request to first token.

    .venv/bin/python -m bench.start_phases --scenarios 100x50@0,300x20@10,1000x20@10
    .venv/bin/python -m bench.start_phases --scenarios 300x20@10+100x50@0   # one process, in turn

Per scenario, a fresh `gateway serve` measured as `bench/concurrency.py` measures it (paced
upstream and readers in their own processes), with `bench/phases/sitecustomize.py` loaded into
it: for each run start, milliseconds from the server handing the request to the app to each
phase (the start gate asked, its turn, the admission transaction committed, the model request
sent, its first chunk, the response's first bytes and its first token frame).
Prints p50 / p90 / p99 / max per phase over the admitted starts (the warm-up's excluded), and
the gaps between consecutive phases, which say where the time goes; and the start gate's
expected wait for each start's turn against the wait it had. `A+B` runs A then B on the same
process (as `bench/targets.py` does) and reports B: what A leaves behind (the gate's recent
turns, the database's state) acts on B. Not part of the suite.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from bench import concurrency
from bench.concurrency import Scenario

PHASES = ("gate", "turn", "committed", "upstream_sent", "upstream_headers",
          "first_chunk", "first_frame", "first_token_frame")
WARM_UP = 20  # the runs `concurrency.run_all` starts before measuring


def pct(values: list[float], q: float) -> float | None:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else None


def summary(records: list[dict[str, float]]) -> list[tuple[str, Any, Any, Any, Any, int]]:
    """(phase, p50, p90, p99, max, n) from arrival, then (a -> b) between consecutive phases."""
    rows = []
    for phase in PHASES:
        values = [r[phase] for r in records if phase in r]
        rows.append((phase, pct(values, 0.5), pct(values, 0.9), pct(values, 0.99),
                     max(values, default=None), len(values)))
    for a, b in zip(("arrival", *PHASES), PHASES, strict=False):
        values = [r[b] - r.get(a, 0.0) for r in records if b in r and (a == "arrival" or a in r)]
        rows.append((f"{a} -> {b}", pct(values, 0.5), pct(values, 0.9), pct(values, 0.99),
                     max(values, default=None), len(values)))
    return rows


def measure(scenario: Scenario, args: argparse.Namespace, before: list[Scenario]
            ) -> list[dict[str, float]]:
    log = Path(tempfile.mkdtemp(prefix="start-phases-")) / "phases.jsonl"
    print(f"stamps in {log}")
    os.environ["GATEWAY_TEST_FORK"] = "0"  # a plain exec, so that PYTHONPATH is read
    env = [f"PYTHONPATH={Path(__file__).parent / 'phases'}", f"GATEWAY_START_PHASES_LOG={log}",
           *args.gateway_env]
    run = argparse.Namespace(adapter="auto", gateway_env=env, seconds=args.seconds,
                             readers=args.readers, pause=2.0, cost_runs=0)
    results: list[dict[str, Any]] = []
    rows, _ = concurrency.run_all(run, [*before, scenario], ["gateway"], keep=results)
    print(json.dumps(rows[-1]))
    results = results[-scenario.runs:]
    # The last scenario's requests: the last to arrive (the lines are written as each ends).
    records = sorted((json.loads(line) for line in log.read_text().splitlines()),
                     key=lambda r: r["at"])[WARM_UP:][-scenario.runs:]
    expected(records)
    holds(log)
    outside(results, records)
    refused = [r["first_frame"] for r in records
               if "first_token_frame" not in r and "gate" not in r and "first_frame" in r]
    if refused:  # refused at the door: from the outermost middleware to the 503's body
        print(f"\n{len(refused)} refused at the door, ms from arrival to the answer: p50 "
              f"{pct(refused, 0.5)}, p99 {pct(refused, 0.99)}, max {max(refused)}")
    waited = [-r["connected"] for r in records if "connected" in r]
    if waited:  # uvicorn took the connection -> the app called: reading, parsing, the loop
        print(f"{len(waited)} requests, ms from the connection taken to the app's call: p50 "
              f"{pct(waited, 0.5)}, p99 {pct(waited, 0.99)}, max {max(waited)}")
    return [r for r in records if "first_token_frame" in r]


SEGMENTS = (  # (label, from, to): absolute times in ms on the machine's one monotonic clock
    ("reader's own lateness: its schedule -> request begun", "due", "begun"),
    ("request begun -> TCP connected (reader)", "begun", "connected_reader"),
    ("request begun -> accepted by the gateway", "begun", "accepted"),
    ("accepted -> the app called (uvicorn read and parsed it)", "accepted", "arrival"),
    ("the app called -> the answer's first bytes", "arrival", "first_frame"),
    ("first bytes sent -> the reader has the status line", "first_frame", "status"),
    ("request begun -> the reader has the status line", "begun", "status"),
)


def expected(records: list[dict[str, Any]]) -> None:
    """The start gate's estimate on each admitted start's arrival (`queue_wait`: since the
    burst round, how long it would take to be started, turn included) against its wait for the
    turn and its time until the run was admitted: what refuses a newcomer when it is too high."""
    def row(label: str, values: list[float]) -> str:
        return "| " + " | ".join([label, *(f"{pct(values, q):.1f}" for q in (0.5, 0.9, 0.99))]) + " |"

    had = [r for r in records if "expected_turn" in r and "turn" in r and "committed" in r]
    if had:
        print(f"\n{len(had)} admitted starts, ms from the gate | p50 | p90 | p99 |\n|---|---:|---:|---:|")
        print(row("the gate's estimate on arrival", [r["expected_turn"] - r["gate"] for r in had]))
        print(row("waited for the turn", [r["turn"] - r["gate"] for r in had]))
        print(row("admission committed", [r["committed"] - r["gate"] for r in had]))


def outside(results: list[dict[str, Any]], records: list[dict[str, Any]]) -> None:
    """Each request's path from the reader's schedule to its status line, the reader's stamps
    joined to the gateway's by the reader's port: where the time before and after the app goes."""
    by_port: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        by_port.setdefault(r.get("port", 0), []).append(r)
    joined: dict[str, list[dict[str, float]]] = {"refused": [], "admitted": []}
    for result in results:
        # A port can serve two requests of a scenario: the first arrival after the reader began.
        record = min((r for r in by_port.get(result.get("port", 0), [])
                      if r["at"] >= result.get("sent_at", 0.0)), key=lambda r: r["at"],
                     default=None)
        if record is None or not result.get("sent_at"):
            continue
        begun, at = result["sent_at"] * 1000, record["at"] * 1000
        times = {"due": begun - result["late_ms"], "begun": begun,
                 "connected_reader": begun + result["connected_ms"], "arrival": at,
                 "status": begun + result["answered_ms"]}
        if "connected" in record:
            times["accepted"] = at + record["connected"]
        if "first_frame" in record:
            times["first_frame"] = at + record["first_frame"]
        joined["refused" if result["status"] == 503 else "admitted"].append(times)
    for kind, rows in joined.items():
        if not rows:
            continue
        print(f"\n{len(rows)} {kind}, joined by port: ms, p50 / p90 / p99 / max"
              f"\n| segment | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|")
        for label, a, b in SEGMENTS:
            values = [t[b] - t[a] for t in rows if a in t and b in t]
            if values:
                print(f"| {label} | {pct(values, 0.5):.1f} | {pct(values, 0.9):.1f} | "
                      f"{pct(values, 0.99):.1f} | {max(values):.1f} |")


def holds(log: Path) -> None:
    """The database connection's holds by holder over the scenario (after the warm-up's)."""
    path = Path(f"{log}.holds")
    if not path.exists():
        return
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    groups = [r["group"] for r in rows if "group" in r]
    on_thread = [r for r in rows if "trip_at" in r]
    collections = [r for r in rows if "gc" in r]
    rows = [r for r in rows if "by" in r and "ms" in r]
    if groups:
        print(f"\n{len(groups)} group commits carried {sum(groups)} transactions: p50 "
              f"{pct(groups, 0.5)}, p90 {pct(groups, 0.9)}, max {max(groups)} a trip")
    start = 0.0
    if len(rows) > 1:
        start = sorted(r["at"] for r in rows)[len(rows) // 10]  # roughly past the warm-up
        rows = [r for r in rows if r["at"] >= start]
    print("\n| connection held by | holds | p50 ms | p99 ms | max ms | total s | round trips "
          "p50 / max (PostgreSQL) |\n|---|---:|---:|---:|---:|---:|---:|")
    for by in sorted({r["by"] for r in rows}):
        ms = [r["ms"] for r in rows if r["by"] == by]
        trips = [r.get("trips", 0) for r in rows if r["by"] == by]
        print(f"| {by} | {len(ms)} | {pct(ms, 0.5)} | {pct(ms, 0.99)} | {max(ms)} | "
              f"{sum(ms) / 1000:.2f} | {pct(trips, 0.5)} / {max(trips)} |")
    if rows:
        parts(rows, [t for t in on_thread if t["trip_at"] >= start], collections)


def _spread(values: list[float]) -> str:
    if not values:
        return "none"
    return (f"{len(values)}: p50 {pct(values, 0.5):.1f}, p99 {pct(values, 0.99):.1f}, "
            f"max {max(values):.1f} ms, total {sum(values) / 1000:.2f} s")


def parts(holds: list[dict[str, Any]], trips: list[dict[str, Any]],
          collections: list[dict[str, Any]]) -> None:
    """What the connection's holds are made of: the trips on the database's thread (its
    statements and its commit, and the commits that checkpointed the WAL), the garbage
    collector's pauses of the loop, and the rest (waiting for the loop)."""
    checkpoints = [t for t in trips if t["backfilled"]]
    plain = [t for t in trips if not t["backfilled"]]
    print(f"\ntrips on the database's thread {_spread([t['trip_ms'] for t in trips])}"
          f"\n  of which the thread's CPU {_spread([t.get('cpu_ms', 0.0) for t in trips])}"
          f"\n  statements {_spread([t['trip_ms'] - t['commit_ms'] for t in trips])}"
          f"\n  commits without a checkpoint {_spread([t['commit_ms'] for t in plain])}"
          f"\n  commits with a checkpoint {_spread([t['commit_ms'] for t in checkpoints])}"
          f", pages copied {[t['backfilled'] for t in checkpoints][:12]}"
          f"\n  WAL frames a commit wrote: p50 {pct([t['frames'] for t in trips], 0.5)}, "
          f"max {max((t['frames'] for t in trips), default=0)}")
    first = min((h["at"] for h in holds), default=0.0)
    collections = [c for c in collections if c["gc_at"] >= first]
    for generation in (0, 1, 2):
        print(f"  collections of generation {generation} on the loop: "
              f"{_spread([c['gc_ms'] for c in collections if c['gc'] == generation])}")
    around = ([], [])  # per hold with a trip: ms before its first trip, after its last
    for hold in holds:
        end = hold["at"] + hold["ms"] / 1000
        inside = [t for t in trips if hold["at"] <= t["trip_at"] <= end]
        if inside:
            around[0].append((inside[0]["trip_at"] - hold["at"]) * 1000)
            last = inside[-1]
            around[1].append((end - last["trip_at"]) * 1000 - last["trip_ms"])
    print(f"  holds with a trip: from the checkout to the trip on the thread "
          f"{_spread(around[0])}\n  from the trip's end to the checkin (the loop takes the "
          f"outcome back) {_spread(around[1])}")
    long = sorted((h for h in holds if h["ms"] >= 30), key=lambda h: -h["ms"])
    print(f"\n{len(long)} holds of 30 ms or more (the longest 12): ms held = on the thread "
          f"(commit, checkpoint?) + collections + the rest (the loop)")
    for hold in long[:12]:
        end = hold["at"] + hold["ms"] / 1000
        inside = [t for t in trips if hold["at"] <= t["trip_at"] <= end]
        thread = sum(t["trip_ms"] for t in inside)
        commit = sum(t["commit_ms"] for t in inside)
        collected = sum(c["gc_ms"] for c in collections if hold["at"] <= c["gc_at"] <= end)
        print(f"  {hold['by']}: {hold['ms']:.1f} = {thread:.1f} (commit {commit:.1f}, "
              f"{'checkpoint' if any(t['backfilled'] for t in inside) else 'no checkpoint'}) "
              f"+ {collected:.1f} + {hold['ms'] - thread - collected:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="100x50@0,300x20@10,1000x20@10")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--gateway-env", action="append", default=[])
    parser.add_argument("--backend", default="sqlite", help="sqlite, or postgres (with Redis)")
    args = parser.parse_args()
    from tests.support import engines

    if args.backend == "postgres":
        engines.ENGINES = engines.Engines().start()
    try:
        for text in args.scenarios.split(","):
            report(text, args)
    finally:
        if engines.ENGINES is not None:
            engines.ENGINES.stop()


def report(text: str, args: argparse.Namespace) -> None:
    *before, last = (Scenario.parse(part) for part in text.split("+"))
    records = measure(last, args, before)
    print(f"\n{text}: {len(records)} admitted starts; ms from arrival, then between phases"
          f"\n| phase | p50 | p90 | p99 | max | n |\n|---|---:|---:|---:|---:|---:|")
    for row in summary(records):
        print("| " + " | ".join("–" if v is None else f"{v:.1f}" if isinstance(v, float)
                                else str(v) for v in row) + " |")

if __name__ == "__main__":
    main()
