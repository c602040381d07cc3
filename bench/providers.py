"""Issue 43's targets in one command: every provider's wire format on the fast path, and
admission by what the process can carry, each target measured and met or missed.

    .venv/bin/python -m bench.providers                  # the targets (about 12 minutes)
    .venv/bin/python -m bench.providers --scale 0.1      # a tenth: does it work?
    .venv/bin/python -m bench.providers --litellm        # also Anthropic and Gemini via litellm

One run, side by side, on the paced upstream of `bench/paced.py` (which speaks OpenAI's chat
completions, Anthropic's Messages and Gemini's streamGenerateContent), each on a fresh
`gateway serve` (SQLite, the server's default admission settings, the loop-lag limit of
docs/operations.md, as `bench/concurrency.py` runs it, whose measurement this reuses):

1. per wire format, through the gateway's direct adapter for it: 300 runs x 20 tok/s arriving
   evenly over 10 s: all admitted, first token p99 <= 250 ms, largest gap p99 <= 250 ms; the
   gateway's CPU per token in that load (its CPU over the tokens it delivered, starts
   included) within 1.3 x the OpenAI-compatible path's; beside it the bare SSE stream of the
   same tokens (`bench/paced.py bare`: the limit of any SSE server here) and, with
   `--cost-runs`, the CPU per token and per start from outside beside the bare relay
   (`concurrency.cost_beside_bare`);
2. default settings, OpenAI-compatible: 500 x 20 tok/s over 10 s: at least 95 % admitted,
   first token p99 <= 250 ms; 1,000 over 10 s: at least 800 admitted with first token p99
   <= 1 s, the rest refused within 100 ms p99; 2,000 streams at 1 tok/s over 10 s: all
   admitted, first token p99 <= 500 ms.

Every run lasts `--seconds` (5). `--scale` multiplies the runs of every scenario, to check
the command end to end on a shared machine; only `--scale 1` measures the targets, and a
scaled run writes `providers-scale-<s>.*`. The machine's load average is in every row: on a
shared machine the wall-clock figures measure the machine as much as the gateway; the CPU per
token beside OpenAI's, and `bench/provider_cost.py`'s calls per token, much less so. Writes
`providers.json` and `providers.md` under `--out` (bench/results). Not part of the pass/fail
suite.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from bench import concurrency
from bench.concurrency import Scenario
from tests.support.gateway_server import ROOT

FORMAT_LOAD = Scenario(300, 20, 10)
DEFAULT_LOADS = [Scenario(500, 20, 10), Scenario(1000, 20, 10), Scenario(2000, 1, 10)]


def scaled(scenario: Scenario, scale: float) -> Scenario:
    return Scenario(max(1, round(scenario.runs * scale)), scenario.rate, scenario.ramp)


def cpu_per_token_us(row: dict[str, Any]) -> float | None:
    """The gateway's CPU over the tokens it delivered in a scenario (starts included)."""
    delivered = row["completed"] * row["tokens"]
    return round(row["cpu_s"] / delivered * 1e6, 1) if delivered else None


def one_wire(wire: str, adapter: str, scenarios: list[Scenario], paths: list[str],
             args: argparse.Namespace) -> dict[str, Any]:
    options = argparse.Namespace(adapter=adapter, wire=wire, gateway_env=args.gateway_env,
                                 seconds=args.seconds, readers=args.readers, pause=args.pause,
                                 cost_runs=args.cost_runs)
    try:
        rows, cost = concurrency.run_all(options, scenarios, paths)
    except Exception as error:  # one configuration failing must not lose the others' figures
        print(f"{wire} ({adapter}): {error}", flush=True)
        return {"wire": wire, "adapter": adapter, "error": str(error)[:2000], "rows": []}
    for row in rows:
        row.update(wire=wire, adapter=adapter)
        if row["path"] == "gateway":
            row["cpu_us_per_token"] = cpu_per_token_us(row)
    return {"wire": wire, "adapter": adapter, "rows": rows, "cost": cost}


def row_of(results: list[dict[str, Any]], wire: str, adapter: str, scenario: Scenario
           ) -> dict[str, Any]:
    for result in results:
        if (result["wire"], result["adapter"]) == (wire, adapter):
            for row in result["rows"]:
                if row["path"] == "gateway" and row["scenario"] == str(scenario):
                    return dict(row)
    return {}


def le(value: float | None, bound: float) -> bool | None:
    return None if value is None else value <= bound


def format_verdicts(results: list[dict[str, Any]], load: Scenario
                    ) -> list[tuple[str, str, bool | None]]:
    base = row_of(results, "openai", "direct", load)
    out: list[tuple[str, str, bool | None]] = []
    for wire in ("anthropic", "gemini"):
        row = row_of(results, wire, "direct", load)
        if not row:
            continue
        ratio = (round(row["cpu_us_per_token"] / base["cpu_us_per_token"], 2)
                 if base.get("cpu_us_per_token") and row.get("cpu_us_per_token") else None)
        out += [(f"{wire}: CPU per token <= 1.3 x OpenAI-compatible ({load})",
                 f"{row.get('cpu_us_per_token')} µs against {base.get('cpu_us_per_token')} "
                 f"µs: {ratio} x", le(ratio, 1.3)),
                (f"{wire}: {load} all admitted, first token p99 <= 250 ms, gap p99 <= 250 ms",
                 f"{row['completed']} of {row['runs']} completed ({row['refused']} refused), "
                 f"first token p99 {row['first_token_p99_ms']} ms, gap p99 "
                 f"{row['gap_p99_ms']} ms",
                 row["completed"] == row["runs"] and bool(le(row["first_token_p99_ms"], 250))
                 and bool(le(row["gap_p99_ms"], 250)))]
    return out


def default_verdicts(results: list[dict[str, Any]], loads: list[Scenario]
                     ) -> list[tuple[str, str, bool | None]]:
    a, b, c = (row_of(results, "openai", "direct", s) for s in loads)
    out: list[tuple[str, str, bool | None]] = []
    if a:
        out.append((f"defaults, {loads[0]}: >= 95 % admitted, first token p99 <= 250 ms",
                    f"{a['completed']} of {a['runs']} completed ({a['refused']} refused), "
                    f"first token p99 {a['first_token_p99_ms']} ms",
                    a["completed"] >= 0.95 * a["runs"] and bool(le(a["first_token_p99_ms"],
                                                                   250))))
    if b:
        out.append((f"defaults, {loads[1]}: >= {round(0.8 * b['runs'])} admitted, first "
                    "token p99 <= 1 s, the rest refused within 100 ms p99",
                    f"{b['completed']} completed (first token p99 {b['first_token_p99_ms']} "
                    f"ms), {b['refused']} refused (p99 {b['refused_ms_p99']} ms), "
                    f"{b['failed']} failed",
                    b["completed"] >= 0.8 * b["runs"] and b["failed"] == 0
                    and bool(le(b["first_token_p99_ms"], 1000))
                    and (b["refused"] == 0 or bool(le(b["refused_ms_p99"], 100)))))
    if c:
        out.append((f"defaults, {loads[2]}: all admitted, first token p99 <= 500 ms",
                    f"{c['completed']} of {c['runs']} completed ({c['refused']} refused), "
                    f"first token p99 {c['first_token_p99_ms']} ms",
                    c["completed"] == c["runs"] and bool(le(c["first_token_p99_ms"], 500))))
    return out


def markdown(results: list[dict[str, Any]], verdicts: list[tuple[str, str, bool | None]],
             machine: str) -> str:
    parts = [f"Machine: {machine}\n", "| target | measured | |", "|---|---|---|"]
    for target, measured, met in verdicts:
        parts.append(f"| {target} | {measured} | "
                     f"{'met' if met else 'not measured' if met is None else '**missed**'} |")
    for result in results:
        parts.append(f"\n### {result['wire']} ({result['adapter']})\n")
        if result.get("error"):
            parts.append(f"Not measured: {result['error'].splitlines()[0]}\n")
            continue
        parts.append(concurrency.markdown(result["rows"]))
        per_token = [f"{r['scenario']}: {r['cpu_us_per_token']} µs" for r in result["rows"]
                     if r.get("cpu_us_per_token") is not None]
        parts.append("Gateway CPU per delivered token (starts included): "
                     + "; ".join(per_token) + "\n")
        if result.get("cost"):
            cost = result["cost"]
            parts.append(f"From outside beside the bare relay: {cost['cpu_us_per_token']} µs per "
                         f"token, {cost['cpu_ms_per_start']} ms per start (bare: "
                         f"{cost['bare']['cpu_us_per_token']} µs, "
                         f"{cost['bare']['cpu_ms_per_start']} ms).\n")
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="ideal duration of a run")
    parser.add_argument("--readers", type=int, default=2, help="reader processes")
    parser.add_argument("--pause", type=float, default=2.0, help="seconds between scenarios")
    parser.add_argument("--cost-runs", type=int, default=0,
                        help="runs per batch of the from-outside CPU cost per wire (0: skip)")
    parser.add_argument("--litellm", action="store_true",
                        help="also Anthropic and Gemini through litellm, for comparison")
    parser.add_argument("--gateway-env", action="append", default=[],
                        help="NAME=value for every gateway (e.g. GATEWAY_MAX_ACTIVE_RUNS=180)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every scenario's runs (0.1: a check that it works)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    load, defaults = scaled(FORMAT_LOAD, args.scale), [scaled(s, args.scale)
                                                       for s in DEFAULT_LOADS]
    plan = [("openai", "direct", [load, *defaults], ["gateway", "bare"]),
            ("anthropic", "direct", [load], ["gateway"]), ("gemini", "direct", [load], ["gateway"])]
    if args.litellm:
        plan += [("anthropic", "litellm", [load], ["gateway"]),
                 ("gemini", "litellm", [load], ["gateway"])]
    started, before = time.monotonic(), concurrency.machine_line()
    results = [one_wire(wire, adapter, scenarios, paths, args)
               for wire, adapter, scenarios, paths in plan]
    verdicts = format_verdicts(results, load) + default_verdicts(results, defaults)
    machine = (f"{concurrency.machine_line()} (at the start: {before.rsplit(', ', 1)[1]}); "
               f"{time.monotonic() - started:.0f} s; "
               f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    name = "providers" if args.scale == 1 else f"providers-scale-{args.scale:g}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(
        {"machine": machine, "scale": args.scale, "gateway_env": args.gateway_env,
         "verdicts": verdicts, "results": results}, indent=1))
    table = markdown(results, verdicts, machine)
    (args.out / f"{name}.md").write_text(table)
    print("\n" + table)


if __name__ == "__main__":
    main()
