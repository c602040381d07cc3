"""Context switches, wake-ups and CPU per one-token run from outside, beside the bare relay.

    .venv/bin/python -m bench.wakeups_outside --samples 3 [--strace] [NAME=value ...]
    .venv/bin/python -m bench.wakeups_outside --samples 3 --runs 20 --spacing 0.3  # one by one

A fresh `gateway serve` on SQLite (the benchmarks' settings less the loop-lag monitor, which is
the benchmark's instrument and wakes the loop 50 times a second, plus any NAME=value given) and
`bench/relay.py` beside it, each warmed with 20 runs, then `--samples` batches of `--runs` (100)
one-token runs arriving `--spacing` (10 ms) apart (`concurrency.measure`) on each, alternating (gateway, relay,
gateway, ...). Per run, from /proc: every thread's voluntary context switches (a thread that
slept and was woken: the wake-ups) and involuntary ones (preempted), and its user + system CPU;
and the same for the relay (the same stack, nothing stored). Medians are printed with the
machine's load average.

With `--strace`, one more gateway batch runs under `strace -f` and its system calls are sorted
by cause, per run: the event loop's blocking waits that ended on a timer (`epoll_wait` returning
0: a timer due, nothing to read) against those that ended on a file descriptor (a socket, or
the loop's wake-up pipe when another thread posted to it: `write`s to an eventfd or pipe), and
the `futex` waits (a thread parked on a lock or condition: SQLite's thread waiting for work,
the GIL's hand-overs). docs/decisions/0028-no-idle-timers.md.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.concurrency import Scenario, Source, beside_relay, gateway_env, load_average, measure

TICKS = os.sysconf("SC_CLK_TCK")
RUNS = 100  # per batch (`--runs`)
SPACING = 0.01  # seconds between two runs' arrivals (`--spacing`)


def usage(pid: int) -> dict[str, float]:
    """The process's CPU seconds and voluntary / involuntary switches, every thread's, and the
    voluntary ones by thread: the loop's (the main thread), the other Python threads' (on
    SQLite, aiosqlite's connection thread) and libuv's workers'."""
    total = {"cpu": 0.0, "voluntary": 0.0, "involuntary": 0.0, "loop": 0.0, "threads": 0.0,
             "libuv": 0.0}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{task}/stat").read_text()
            status = Path(f"/proc/{pid}/task/{task}/status").read_text()
        except OSError:
            continue  # a thread that just ended
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        total["cpu"] += (int(fields[11]) + int(fields[12])) / TICKS
        kind = "loop" if int(task) == pid else "libuv" if name.startswith("libuv") else "threads"
        for line in status.splitlines():
            key, _, value = line.partition(":")
            if key == "voluntary_ctxt_switches":
                total["voluntary"] += int(value)
                total[kind] += int(value)
            elif key == "nonvoluntary_ctxt_switches":
                total["involuntary"] += int(value)
    return total


KEYS = ("voluntary", "involuntary", "loop", "threads", "libuv")


def sample(url: str, pid: int) -> dict[str, float]:
    """One batch of RUNS one-token runs, SPACING apart: per run switches and CPU (ms)."""
    before = usage(pid)
    completed = measure("gateway", url, pid, Scenario(RUNS, 2000, RUNS * SPACING), 1 / 2000,
                        2, None)["completed"]
    after = usage(pid)
    if completed != RUNS:
        raise RuntimeError(f"{RUNS - completed} runs did not complete")
    return {**{key: (after[key] - before[key]) / RUNS for key in KEYS},
            "cpu_ms": 1000 * (after["cpu"] - before["cpu"]) / RUNS, "load": load_average()}


def traced(url: str, pid: int, out: Path) -> dict[str, float]:
    """One batch under `strace -f`: the system calls that block or wake, by cause, per run."""
    tracer = subprocess.Popen(
        ["strace", "-f", "-tt", "-o", str(out), "-p", str(pid),
         "-e", "trace=epoll_wait,epoll_pwait,futex,write,read,sendto,recvfrom,writev,"
               "accept4,close,connect,socket,eventfd2,clone,clone3"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # strace attaches
    start_lines = sum(1 for _ in out.open()) if out.exists() else 0
    measure("gateway", url, pid, Scenario(RUNS, 2000, RUNS * SPACING), 1 / 2000, 2, None)
    time.sleep(0.5)
    tracer.send_signal(signal.SIGINT)
    _, errors = tracer.communicate(timeout=10)
    if not out.exists():
        raise RuntimeError(f"strace: {errors}")
    return causes(out.read_text().splitlines()[start_lines:])


EPOLL = re.compile(r"(?:epoll_p?wait\(|resumed>).*, \d+, (-?\d+)(?:, NULL, \d+)?\)\s+= (\d+)")


def causes(lines: list[str]) -> dict[str, float]:
    """Per run: the loop's waits by how they ended, the futex waits by thread (timed: CPython's
    wait for the GIL, which re-checks every switch interval; untimed: a queue or a lock), and
    the posts to the loop's wake-up fd from another thread."""
    counts: Counter[str] = Counter()
    for line in lines:
        tid, _, rest = line.partition(" ")
        rest = rest.strip().split(" ", 1)[-1]  # the time stamp off
        if rest.startswith(("epoll_wait", "epoll_pwait", "<... epoll")):
            match = EPOLL.search(rest)
            if match:
                timeout, result = match.groups()
                counts["loop: epoll polls (timeout 0)" if timeout == "0" else
                       "loop: epoll sleeps ended by a timer" if result == "0" else
                       "loop: epoll sleeps ended by an fd"] += 1
        elif rest.startswith("futex(") and "FUTEX_WAIT" in rest:
            timed = "timed (the GIL)" if "tv_sec" in rest else "untimed (queue, lock)"
            counts[f"thread {tid}: futex waits, {timed}"] += 1
        elif rest.startswith("write(") and rest.endswith("= 8") and '"\\1\\0\\0' in rest:
            counts[f"thread {tid}: posts to the loop (eventfd)"] += 1
        elif rest.startswith(("accept4(", "connect(")) and "= -1" not in rest:
            counts[rest.split("(", 1)[0]] += 1
    return {name: count / RUNS for name, count in sorted(counts.items())}


def median(samples: list[dict[str, float]], key: str) -> float:
    return round(statistics.median(s[key] for s in samples), 2)


def main() -> None:
    global RUNS, SPACING
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--strace", action="store_true",
                        help="one more gateway batch under strace -f, sorted by cause")
    parser.add_argument("--runs", type=int, default=RUNS, help="one-token runs per batch")
    parser.add_argument("--spacing", type=float, default=SPACING,
                        help="seconds between two runs' arrivals")
    parser.add_argument("env", nargs="*", help="NAME=value settings for the gateway")
    args = parser.parse_args()
    RUNS, SPACING = args.runs, args.spacing
    upstream = Source("upstream")
    try:
        with beside_relay(gateway_env(upstream.url, extra=args.env), upstream,
                          "bench-wakeups-") as targets:
            compare(targets, args.samples, args.strace)
    finally:
        upstream.stop()


def compare(targets: dict[str, tuple[str, int]], samples_each: int, strace: bool) -> None:
    """`samples_each` batches of each, alternating, their medians and ratio; then one more
    gateway batch under strace if asked."""
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
    for _ in range(samples_each):
        for name, (url, pid) in targets.items():
            samples[name].append(sample(url, pid))
            print(name, {k: round(v, 2) for k, v in samples[name][-1].items()}, flush=True)
    for name, rows in samples.items():
        print(f"{name}: median per run:",
              ", ".join(f"{key} {median(rows, key)}" for key in (*KEYS, "cpu_ms")))
    ratio = [g["cpu_ms"] / r["cpu_ms"]
             for g, r in zip(samples["gateway"], samples["bare"], strict=True)]
    print("ratio to the relay:", [round(x, 2) for x in ratio], "median",
          round(statistics.median(ratio), 2), "| load", Path("/proc/loadavg").read_text()
          .split()[:3], flush=True)
    if strace:
        out = Path(tempfile.mkdtemp(prefix="bench-wakeups-strace-")) / "trace"
        for name, value in traced(*targets["gateway"], out).items():
            print(f"  {name}: {value:.2f} a run")
        print("trace:", out)


if __name__ == "__main__":
    main()
