"""The gateway's CPU per token when tokens arrive one at a time (20 tok/s per run), from outside.

    .venv/bin/python -m bench.paced_token                    # 150 runs x 100 tokens at 20 tok/s
    .venv/bin/python -m bench.paced_token --runs 150 --rate 20 --tokens 100 --repeats 3
    .venv/bin/python -m bench.paced_token --profile /tmp/paced.txt   # py-spy on PATH

`bench.start_cost --per-token` and `concurrency.cpu_cost` measure tokens that the upstream sends
as fast as it can: several arrive per wake-up of the gateway, and their cost per token hides the
wake-up's. At 20 tok/s per run every token is alone: one upstream read, one wake-up of the run's
task, one log append and reader wake-up, one SSE send. This is `concurrency.cpu_cost` at that
pace: `--runs` runs of one token started over a second, then `--runs` runs of `--tokens` tokens
at `--rate` tok/s; the difference in the process's CPU (from /proc) per token is the paced
token's cost, the rest the start's. The same is measured beside it for the bare relay
(`bench/relay.py`: the same upstream call and SSE through sse-starlette, nothing stored), the
least any server on the same stack pays. Both serve the same paced upstream (`bench/paced.py`),
the readers are their own processes. `--profile FILE`: py-spy's raw samples of the gateway
during one more batch of paced runs, for `py-spy`'s flame graph or a grep.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.concurrency import Scenario, Source, cpu_cost, load_average, measure
from tests.support.gateway_server import GatewayServer


def paced_cost(url: str, pid: int, args: argparse.Namespace) -> dict[str, Any]:
    # Warm-up: lazy imports, the first model call, the pool's first connections.
    measure("gateway", url, pid, Scenario(20, 50, 1), 1, args.readers, None)
    time.sleep(0.5)
    return cpu_cost(url, pid, args.readers, args.runs, tokens=args.tokens, rate=args.rate,
                    repeats=args.repeats)


def profile(url: str, pid: int, args: argparse.Namespace) -> None:
    """py-spy's raw samples of the gateway over one batch of paced runs."""
    spy = shutil.which("py-spy")
    if spy is None:
        raise SystemExit("--profile needs py-spy on PATH")
    seconds = args.tokens / args.rate + 2
    recorder = subprocess.Popen([spy, "record", "-r", "200", "-p", str(pid), "-d",
                                 str(int(seconds)), "--format", "raw", "-o", args.profile],
                                stdout=subprocess.DEVNULL)
    time.sleep(1.0)
    measure("gateway", url, pid, Scenario(args.runs, args.rate, 1.0), args.tokens / args.rate,
            args.readers, None)
    recorder.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=150)
    parser.add_argument("--rate", type=int, default=20, help="tokens a second per run")
    parser.add_argument("--tokens", type=int, default=100, help="tokens per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--readers", type=int, default=2, help="reader processes")
    parser.add_argument("--no-bare", action="store_true", help="skip the bare relay")
    parser.add_argument("--profile", help="py-spy raw samples of the gateway to this file")
    parser.add_argument("--gateway-env", action="append", default=[],
                        help="NAME=value for the gateway")
    args = parser.parse_args()
    upstream = Source("upstream")
    gateway = GatewayServer(Path(tempfile.mkdtemp(prefix="bench-paced-token-")), {
        "GATEWAY_MODEL": "openai/paced", "GATEWAY_MODEL_API_BASE": f"{upstream.url}/v1",
        "GATEWAY_MODEL_API_KEY": "sk-bench", "GATEWAY_MAX_ACTIVE_RUNS": "0",
        **dict(e.split("=", 1) for e in args.gateway_env)})
    result: dict[str, Any] = {"load_before": load_average()}
    try:
        gateway.start()
        pid = gateway.process.pid
        result["gateway"] = paced_cost(gateway.url, pid, args)
        if args.profile:
            profile(gateway.url, pid, args)
        if not args.no_bare:
            relay = Source("relay", "bench.relay", (upstream.url,))
            try:
                result["bare"] = paced_cost(relay.url, relay.pid, args)
            finally:
                relay.stop()
    finally:
        gateway.stop()
        upstream.stop()
    result["load_after"] = load_average()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
