"""The start's CPU from outside alone: what `bench/targets.py` measures last, without its
scenarios (about 3 minutes on PostgreSQL + Redis; this, under one).

    .venv/bin/python -m bench.cost_outside --backend postgres   # a throwaway PostgreSQL + Redis
    .venv/bin/python -m bench.cost_outside --backend sqlite --repeats 5

A fresh `gateway serve` with the scenarios' settings (`concurrency.gateway_env`) beside a fresh
bare relay, their samples alternating (`concurrency.cost_beside_bare`): one-token runs 10 ms
apart, then 200-token runs, the process's CPU from /proc. Prints the summary as one JSON line,
with the load average at the start and at the end.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from bench import concurrency
from bench.concurrency import Source
from tests.support import engines


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="postgres", choices=("sqlite", "postgres"))
    parser.add_argument("--runs", type=int, default=100, help="runs per sample")
    parser.add_argument("--repeats", type=int, default=3, help="samples of each, alternating")
    parser.add_argument("--readers", type=int, default=2, help="reader processes")
    parser.add_argument("--gateway-env", action="append", default=[], help="NAME=value")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    started = load()
    upstream = Source("upstream")
    try:
        if args.backend == "postgres":
            engines.ENGINES = engines.Engines().start()
        env = concurrency.gateway_env(upstream.url, "auto", args.gateway_env)
        cost = concurrency.cost_beside_bare(env, upstream, args.readers, args.runs,
                                            args.repeats)
    finally:
        upstream.stop()
        if engines.ENGINES is not None:
            engines.ENGINES.stop()
            engines.ENGINES = None
    cost["ratio"] = round(cost["cpu_ms_per_start"] / cost["bare"]["cpu_ms_per_start"], 2)
    print(json.dumps({"backend": args.backend, "load_start": started, "load_end": load(),
                      **cost}), flush=True)


if __name__ == "__main__":
    main()
