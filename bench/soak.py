"""The soak at full size: 200 clients for 60 seconds (the CI test, `tests/integration/test_soak.py`,
runs the same code at 40 x 12 s).

    .venv/bin/python -m bench.soak [--clients 200] [--seconds 60] [--backend sqlite|postgres]

Starts the scripted OpenAI-compatible model in this process and a real gateway (`gateway serve`:
one process on SQLite, or two on a throwaway PostgreSQL + Redis behind HAProxy), then
`tests.support.soak_report.run_soak`: a warm-up round, the RSS of each gateway process, the
soak (clients starting runs, reading, dropping the connection, reconnecting with their cursor,
cancelling, abandoning), everything at rest, the RSS again, and every check of the CI test.
Prints the figures and the problems found, and writes them to `bench/results/soak.json`.
Not part of the pass/fail suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import GatewayCluster, GatewayServer
from tests.support.scripted_model import ScriptedModel
from tests.support.soak import PLANS, SoakSize
from tests.support.soak_report import SoakReport, run_soak

PROXY_CHECK = "inter 1s fall 3 rise 2"  # as deploy/haproxy.cfg
RESULTS = Path(__file__).resolve().parent / "results" / "soak.json"


def figures(report: SoakReport, backend: str, load: tuple[str, str]) -> dict[str, Any]:
    result, verdict = report.result, report.verdict
    runs = result.runs
    return {
        "backend": backend,
        "clients": report.size.clients,
        "seconds": report.size.seconds,
        "token_interval_s": report.size.token_interval,
        "load_average": {"before": load[0], "after": load[1]},
        "runs": len(runs),
        "threads": len(result.threads),
        "runs_by_plan": {plan: result.count(plan) for plan in PLANS},
        "statuses": verdict.statuses,
        "run_errors": verdict.errors,
        "events_read": sum(len(r.events) for r in runs),
        "connections": sum(len(r.visits) for r in runs),
        "readers_reconnected": verdict.reconnected_readers,
        "exact_stored_texts": verdict.exact_texts,
        "refused": len(result.refused),
        "rss_kib": {str(pid): {"before": report.rss_before[pid], "peak": report.rss_peak.get(pid),
                               "after": report.rss_after[pid],
                               "growth": round(report.rss_growth()[pid], 4)}
                    for pid in report.rss_before},
        "phases_s": {name: round(seconds, 1) for name, seconds in report.phases.items()},
        "problems": report.problems,
    }


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--token-interval", type=float, default=SoakSize.token_interval)
    parser.add_argument("--grace", type=float, default=3.0,
                        help="GATEWAY_DISCONNECT_GRACE_SECONDS of the gateway under test")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    if args.backend == "postgres":
        engines.ENGINES = engines.Engines().start()
    model = ScriptedModel().start()
    workdir = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    env = scripted_env(model, GATEWAY_DISCONNECT_GRACE_SECONDS=str(args.grace))
    server = (GatewayCluster(workdir, env, check=PROXY_CHECK) if args.backend == "postgres"
              else GatewayServer(workdir, env))
    try:
        server.start()
        size = SoakSize(clients=args.clients, seconds=args.seconds,
                        token_interval=args.token_interval)
        before = load_average()
        report = asyncio.run(run_soak(server, model, size, args.grace, seed=args.seed))
        out = figures(report, args.backend, (before, load_average()))
    finally:
        server.stop()
        model.stop()
        if engines.ENGINES is not None:
            engines.ENGINES.stop()
    out["cpus"] = os.cpu_count()
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "problems"}, indent=2))
    print(f"{len(out['problems'])} problems" + "".join(f"\n  {p}" for p in out["problems"][:50]))


if __name__ == "__main__":
    main()
