"""Issue 28's targets in one command: each measured, and met or missed, per storage configuration.

    .venv/bin/python -m bench.targets                            # SQLite, then PostgreSQL + Redis
    .venv/bin/python -m bench.targets --backends sqlite          # SQLite only (about 3 minutes)
    .venv/bin/python -m bench.targets --scale 0.1 --backends sqlite   # a tenth: does it work?

Per configuration, on a fresh `gateway serve` (the server's default admission settings, the
loop-lag limit of docs/operations.md, readers and the paced upstream in processes of their own,
exactly as `bench/concurrency.py`, whose measurement this reuses):

1. 300 runs x 20 tok/s arriving evenly over 10 s: first token p99 <= 250 ms, largest token gap
   p99 <= 250 ms, all complete; and the RSS per run at that level (<= 100 KiB), measured
   first, on the fresh process;
2. 100 runs x 50 tok/s started at once: all admitted (a refused run has no first token),
   first token p99 <= 1 s;
3. 1,000 runs arriving over 10 s: every run completes (first token p99 <= 1 s) or is refused
   with 503 within 100 ms (p99), and none fails otherwise;
4. the CPU of a run start with its end (<= 3 ms): from outside, the `gateway serve` process's
   CPU per run (`concurrency.cost_beside_bare`: runs of 1 token against runs of 200, on a fresh
   process with the scenarios' settings less the loop-lag monitor), beside the bare limit
   measured alike from outside, their samples alternating (`bench/relay.py`: the same request,
   upstream read (aiohttp) and events on the same stack, with nothing stored and no
   middleware); and on SQLite
   also in-process (`bench/start_cost.py`: starts one at a time, CPU of every thread, beside
   the bare limit measured in the same process; their ratio is what holds on a busy machine).

`--scale` multiplies the runs of every scenario (0.1: 30, 10 and 100 runs), to check that the
whole command works on a shared machine; only `--scale 1` measures the targets, and a scaled
run writes `targets-scale-<s>.*` so that it is never taken for them.

Each scenario's run lasts `--seconds` (5). The machine's load average is recorded with every row:
on a shared machine the wall-clock figures measure the machine as much as the gateway. Writes
`targets.json` under `--out` (bench/results) and prints its tables. Not part of the pass/fail
suite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import concurrency
from bench.concurrency import Scenario
from tests.support import engines
from tests.support.gateway_server import ROOT

SCENARIOS = [Scenario(300, 20, 10), Scenario(100, 50, 0), Scenario(1000, 20, 10)]


def verdicts(rows: dict[str, dict[str, Any]], cost: dict[str, Any] | None,
             inprocess: dict[str, Any] | None, scenarios: list[Scenario]
             ) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met) for each of the issue's targets."""
    def le(value: float | None, bound: float) -> bool | None:
        return None if value is None else value <= bound

    a, b, c = (rows.get(str(s), {}) for s in scenarios)
    out: list[tuple[str, str, bool | None]] = []
    if a:
        out += [(f"{scenarios[0]}: all complete", f"{a['completed']} of {a['runs']}",
                 a["completed"] == a["runs"]),
                (f"{scenarios[0]}: first token p99 <= 250 ms", f"{a['first_token_p99_ms']} ms",
                 le(a["first_token_p99_ms"], 250)),
                (f"{scenarios[0]}: largest gap p99 <= 250 ms", f"{a['gap_p99_ms']} ms",
                 le(a["gap_p99_ms"], 250)),
                (f"RSS per stream at {scenarios[0].runs} <= 100 KiB", f"{a['rss_per_run_kib']} KiB",
                 le(a["rss_per_run_kib"], 100))]
    if b:  # a burst is served only if it is let in: a refused run has no first token
        out.append((f"{scenarios[1]}: all admitted, first token p99 <= 1 s",
                    f"{b['completed']} of {b['runs']} completed ({b['refused']} refused), "
                    f"first token p99 {b['first_token_p99_ms']} ms",
                    b["completed"] == b["runs"] and le(b["first_token_p99_ms"], 1000)))
    if c:
        admitted_ok = c["completed"] == 0 or le(c["first_token_p99_ms"], 1000)
        refusals_ok = c["refused"] == 0 or le(c["refused_ms_p99"], 100)
        out.append((f"{scenarios[2]}: complete (first token p99 <= 1 s) or 503 within 100 ms, "
                    "nothing else",
                    f"{c['completed']} completed (first token p99 {c['first_token_p99_ms']} ms), "
                    f"{c['refused']} refused (p99 {c['refused_ms_p99']} ms), "
                    f"{c['failed']} failed",
                    c["failed"] == 0 and bool(admitted_ok) and bool(refusals_ok)))
    if cost:
        bare = cost.get("bare")
        beside = (f" (bare limit from outside {bare['cpu_ms_per_start']} ms, ratio "
                  f"{round(cost['cpu_ms_per_start'] / bare['cpu_ms_per_start'], 2)})"
                  if bare and bare["cpu_ms_per_start"] > 0 else "")
        out.append(("start CPU <= 3 ms (from outside, with its end)",
                    f"{cost['cpu_ms_per_start']} ms{beside}", le(cost["cpu_ms_per_start"], 3)))
    if inprocess is not None:
        out.append(("start CPU <= 3 ms (in-process, one at a time)",
                    f"{inprocess['gateway_cpu_ms']} ms (bare limit {inprocess['bare_cpu_ms']} "
                    f"ms, ratio {inprocess['ratio']}; {inprocess.get('gateway_calls')} Python "
                    f"calls per start)", le(inprocess["gateway_cpu_ms"], 3)))
    return out


def start_cost_inprocess(starts: int) -> dict[str, Any] | None:
    """`bench/start_cost.py`'s summary: CPU per start one at a time (SQLite, in-process), the
    bare limit's, their ratio and the calls per start."""
    done = subprocess.run([sys.executable, "-m", "bench.start_cost", "--starts", str(starts)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    for line in done.stdout.splitlines():
        if line.startswith('{"summary"'):
            return dict(json.loads(line)["summary"])
    print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
    return None


def scaled(scale: float) -> list[Scenario]:
    return [Scenario(max(1, round(s.runs * scale)), s.rate, s.ramp) for s in SCENARIOS]


def one_backend(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    if backend == "postgres":
        engines.ENGINES = engines.Engines().start()
    try:
        options = argparse.Namespace(adapter="auto", gateway_env=args.gateway_env,
                                     seconds=args.seconds, readers=args.readers,
                                     pause=args.pause, cost_runs=args.cost_runs)
        rows, cost = concurrency.run_all(options, scaled(args.scale), args.paths.split(","))
    except Exception as error:  # one configuration failing must not lose the other's figures
        print(f"{backend}: {error}", file=sys.stderr)
        return {"backend": backend, "error": str(error)[:2000], "rows": [], "cost": None,
                "start_cost_inprocess": None, "verdicts": []}
    finally:
        if engines.ENGINES is not None:
            engines.ENGINES.stop()
            engines.ENGINES = None
    inprocess = start_cost_inprocess(args.starts) if backend == "sqlite" and args.starts else None
    gateway_rows = {row["scenario"]: row for row in rows if row["path"] == "gateway"}
    return {"backend": backend, "rows": rows, "cost": cost, "start_cost_inprocess": inprocess,
            "verdicts": verdicts(gateway_rows, cost, inprocess, scaled(args.scale))}


def markdown(results: list[dict[str, Any]], machine: str) -> str:
    parts = [f"Machine: {machine}\n"]
    for result in results:
        parts.append(f"\n### {result['backend']}\n")
        if result.get("error"):
            parts.append(f"Not measured: {result['error'].splitlines()[0]}\n")
            continue
        parts.append("| target | measured | |\n|---|---|---|")
        for target, measured, met in result["verdicts"]:
            parts.append(f"| {target} | {measured} | "
                         f"{'met' if met else 'not measured' if met is None else '**missed**'} |")
        parts.append("\n" + concurrency.markdown(result["rows"]))
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--paths", default="gateway",
                        help="also `upstream` and `bare`: the limits, measured alike")
    parser.add_argument("--seconds", type=float, default=5.0, help="ideal duration of a run")
    parser.add_argument("--readers", type=int, default=2, help="reader processes")
    parser.add_argument("--pause", type=float, default=2.0, help="seconds between scenarios")
    parser.add_argument("--cost-runs", type=int, default=100,
                        help="runs per batch of the from-outside CPU cost (0: skip it)")
    parser.add_argument("--starts", type=int, default=100,
                        help="starts of the in-process CPU cost on SQLite (0: skip it)")
    parser.add_argument("--gateway-env", action="append", default=[],
                        help="NAME=value for the gateway (e.g. GATEWAY_MAX_ACTIVE_RUNS=120)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every scenario's runs (0.1: a quick check that it works)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args.out.mkdir(parents=True, exist_ok=True)
    started, before = time.monotonic(), concurrency.machine_line()
    if args.scale != 1:
        print(f"scale {args.scale:g}: {', '.join(map(str, scaled(args.scale)))} (a check that "
              "the command works, not the targets)", flush=True)
    results = [one_backend(backend, args) for backend in args.backends.split(",")]
    machine = (f"{concurrency.machine_line()} (at the start: {before.rsplit(', ', 1)[1]}); "
               f"{time.monotonic() - started:.0f} s; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    name = "targets" if args.scale == 1 else f"targets-scale-{args.scale:g}"
    (args.out / f"{name}.json").write_text(json.dumps(
        {"machine": machine, "scale": args.scale, "gateway_env": args.gateway_env,
         "results": results}, indent=1))
    print("\n" + markdown(results, machine))


if __name__ == "__main__":
    main()
