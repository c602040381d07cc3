"""CPU per one-token run from outside, by thread: a fresh `gateway serve` and the bare relay.

    .venv/bin/python -m bench.dbthread_outside 3 [NAME=value ...]

A gateway on SQLite (settings as `bench.targets` runs it, plus any NAME=value given; the
loop-lag monitor off, as `concurrency.beside_relay` runs it) and `bench/relay.py` beside it,
each warmed with 20 runs, then measured twice, alternating: N
batches of 100 one-token runs arriving over a second (`concurrency.measure`), and the user and
system CPU of each of the process's threads from /proc over them, per run. On SQLite the
gateway's second `python` thread is aiosqlite's connection thread
(docs/decisions/0016-sqlite-statement-in-one-call.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bench.concurrency import Scenario, Source, beside_relay, gateway_env, measure

TICKS = os.sysconf("SC_CLK_TCK")


def threads(pid: int) -> dict[tuple[str, str], tuple[float, float]]:
    """(user, system) CPU seconds of each thread of `pid`, by (tid, name)."""
    used = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        used[(tid, name)] = (int(fields[11]) / TICKS, int(fields[12]) / TICKS)
    return used


def run(url: str, pid: int, label: str, batches: int) -> None:
    before, completed = threads(pid), 0
    for _ in range(batches):
        completed += measure("gateway", url, pid, Scenario(100, 2000, 1.0), 1 / 2000, 2,
                             None)["completed"]
    user = system = 0.0
    rows = []
    for key, (after_user, after_system) in threads(pid).items():
        was_user, was_system = before.get(key, (0.0, 0.0))
        user, system = user + after_user - was_user, system + after_system - was_system
        if after_user - was_user + after_system - was_system > 0.01:
            rows.append(f"{key[1]}: u {1000 * (after_user - was_user) / completed:.2f} "
                        f"s {1000 * (after_system - was_system) / completed:.2f}")
    print(label, "per run ms: user", round(1000 * user / completed, 2), "sys",
          round(1000 * system / completed, 2), "|", "; ".join(rows), flush=True)


def main() -> None:
    batches = int(sys.argv[1])
    upstream = Source("upstream")
    try:
        with beside_relay(gateway_env(upstream.url, extra=sys.argv[2:]), upstream) as targets:
            for _ in range(2):
                for name, (url, pid) in targets.items():
                    run(url, pid, name, batches)
    finally:
        upstream.stop()


if __name__ == "__main__":
    main()
