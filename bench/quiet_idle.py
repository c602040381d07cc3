"""What an idle `gateway serve` costs: CPU and context switches a second, nothing asked of it.

A fresh process on SQLite with the server's defaults (`GATEWAY_MAX_LOOP_LAG_SECONDS` and all),
left alone after `/ready` answered; its CPU (every thread, user and system) and its context
switches (voluntary: the threads' own sleeps and wake-ups) are read from /proc before and
after `--seconds`. Every wake-up of an idle process is charged to the next starts by a
measurement over seconds (`concurrency.cpu_cost`), and leaves them cold caches
(docs/decisions/0028-no-idle-timers.md; `GATEWAY_STOCK_RUNTIME=server` in the environment runs
uvicorn's own main loop, docs/decisions/0003-quiet-main-loop.md).

    .venv/bin/python -m bench.quiet_idle --seconds 10 --repeat 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.wakeups_outside import usage as thread_usage
from tests.support.gateway_server import free_port


def usage(pid: int) -> tuple[float, int, int]:
    """(CPU seconds, voluntary switches, involuntary switches), every thread's."""
    used = thread_usage(pid)
    return used["cpu"], int(used["voluntary"]), int(used["involuntary"])


def idle(seconds: float) -> dict[str, float]:
    port, workdir = free_port(), Path(tempfile.mkdtemp(prefix="quiet-idle-"))
    env = {**os.environ, "GATEWAY_DATABASE_URL": f"sqlite+aiosqlite:///{workdir / 'g.db'}"}
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/ready").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        time.sleep(3)  # start-up's own work (the first reaping, the collection) is over
        before = usage(process.pid)
        time.sleep(seconds)
        after = usage(process.pid)
    finally:
        process.terminate()
        process.wait()
    return {"cpu_percent": round(100 * (after[0] - before[0]) / seconds, 3),
            "voluntary_per_s": round((after[1] - before[1]) / seconds, 1),
            "involuntary_per_s": round((after[2] - before[2]) / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    for _ in range(args.repeat):
        print(idle(args.seconds), flush=True)


if __name__ == "__main__":
    main()
