"""Scaled out on PostgreSQL + Redis: cross-process follow lag, cross-process cancel, and how many
concurrent runs one worker and two workers carry.

    .venv/bin/python -m bench.scale_out [--runs 30] [--skip-capacity | --only-capacity]

Starts a throwaway PostgreSQL and Redis (as `tests/` does with `GATEWAY_TEST_BACKEND=postgres`)
and real gateway processes:

- lag: a run on process A (tokens 10 ms apart, from the scripted model in this process) is read
  at once by its own client on A and by a subscriber on process B (through the run's Redis
  stream); for each live event, the time B received it minus the time A's client did;
- cancel: `DELETE` for a run of A, sent to process B (the cancel travels by Redis pub/sub) and,
  interleaved with it as the control, to A itself (no signal at all): to the upstream model
  seeing its stream closed, to the subscriber's `RUN_ERROR`, to the DELETE's answer. What the
  two share (the request, the database reads, the run's end) shows what the signal adds. Then
  the same across two processes on PostgreSQL without Redis (`LISTEN`/`NOTIFY`);
- capacity: `gateway serve --workers 1` and `--workers 2` in front of the paced upstream of
  `bench/concurrency.py` (its own process; each token stamped with the monotonic time it left).
  C runs at once (started over one second, `--rate` tokens a second for `--seconds`), read by
  `--readers` client processes that use nothing but asyncio sockets and a regular expression
  for the stamps; C grows by half while every run finishes and the added latency (token
  arrival at the client minus its departure from the upstream) stays within `--bound-ms` at
  p99. Prints the largest C that held, and per level the CPU (% of one core, over the level's
  wall time, from /proc) of the gateway processes, PostgreSQL, Redis, the upstream, the
  clients, and whatever else the machine ran meanwhile (other jobs). With `--worker-cpu P`, each
  gateway process runs in a CPU cgroup of its own capped at P % of one core (needs root and the
  cgroup `cpu` controller): two workers then have twice one worker's CPU, as on a machine with a
  core per worker, while PostgreSQL, Redis and the load generator use what is left.

Prints median / p90 / p99 / max in milliseconds. Not part of the pass/fail suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.concurrency import STAMP, Source, cpu_seconds
from bench.lifecycle import BODY, cancel, summary
from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import GatewayServer
from tests.support.run_stream import ids, open_stream, slow_turn, started_ids
from tests.support.scripted_model import ScriptedModel


def follow_lag(model: ScriptedModel, on_a: httpx.Client, on_b: httpx.Client) -> list[float]:
    """Per live event: arrival at B's subscriber minus arrival at A's own client."""
    at_a, at_b, _ = arrivals(model, on_a, on_b, 150)
    live = [i for i in sorted(at_a) if i > 10 and i in at_b]  # past B's catch-up
    return [at_b[i] - at_a[i] for i in live]


def end_lag(model: ScriptedModel, on_a: httpx.Client, on_b: httpx.Client
            ) -> tuple[float, float]:
    """A run of 20 tokens 10 ms apart: B's lag behind A for its last text event and for its
    `RUN_FINISHED` (the run's last entries leave for Redis with its end, `backends/redis.py`
    `_with_the_end`)."""
    at_a, at_b, kinds = arrivals(model, on_a, on_b, 20)
    last = max(i for i, kind in kinds.items() if kind == "TEXT_MESSAGE_CONTENT")
    end = max(i for i, kind in kinds.items() if kind == "RUN_FINISHED")
    return at_b[last] - at_a[last], at_b[end] - at_a[end]


def arrivals(model: ScriptedModel, on_a: httpx.Client, on_b: httpx.Client, tokens: int
             ) -> tuple[dict[int, float], dict[int, float], dict[int, str]]:
    """A run of `tokens` tokens 10 ms apart on A, read by its client there and, from its first
    event on, by a subscriber on B: when each event (by id) reached A's client and B's, and
    each one's type."""
    model.enqueue(slow_turn(tokens, 0.01))
    at_a: dict[int, float] = {}
    at_b: dict[int, float] = {}
    kinds: dict[int, str] = {}
    ready = threading.Event()

    def read_b(run: tuple[str, str]) -> None:
        with open_stream(on_b, "GET", ids(run)) as (_, events):
            ready.set()
            for event in events:
                at_b[event.id] = time.perf_counter()

    with open_stream(on_a, "POST", "/v1/threads/runs", json=BODY) as (_, events):
        reader = None
        for event in events:
            at_a[event.id] = time.perf_counter()
            kinds[event.id] = event.type
            if reader is None:
                reader = threading.Thread(target=read_b, args=(started_ids([event]),))
                reader.start()
                ready.wait(10)
    assert reader is not None
    reader.join(30)
    return at_a, at_b, kinds


# ---- capacity: one worker against two --------------------------------------------------------

def tree_cpu(roots: list[int]) -> dict[int, float]:
    """CPU seconds (user + system) of the processes `roots` and all their descendants, by pid."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(_stat(int(entry.name))[1])
            except (OSError, IndexError):
                continue
    members, grew = set(roots), True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in members} - members
        members |= more
        grew = bool(more)
    return {pid: cpu_seconds_or_zero(pid) for pid in members}


def cpu_between(before: dict[int, float], after: dict[int, float]) -> float:
    """The CPU the processes used between two `tree_cpu` readings. A process that exited in
    between (a PostgreSQL backend whose connection closed) took its figure with it: it counts
    as nothing, so the sum can only be short, never negative."""
    return sum(max(0.0, used - before.get(pid, 0.0)) for pid, used in after.items())


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds_or_zero(pid: int) -> float:
    try:
        return cpu_seconds(pid)
    except (OSError, IndexError):
        return 0.0  # exited meanwhile


CPUACCT_USAGE = Path("/sys/fs/cgroup/cpuacct/cpuacct.usage")


def machine_busy() -> float:
    """CPU seconds the whole machine has used since boot, every core, every job.

    From the root cgroup's exact CPU time (ns) where it is readable; else from /proc/stat, whose
    per-tick sampling overstates a capped process: its quota refills on a timer, so the ticks
    tend to catch it running (with `--worker-cpu 60`, "other jobs" read 30 % of a core)."""
    try:
        return int(CPUACCT_USAGE.read_text()) / 1e9
    except (OSError, ValueError):
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


async def read_raw(host: str, port: int, prompt: str, delay: float) -> tuple[list[float], bool]:
    """One run through the gateway, read off the socket with nothing but asyncio: per stamped
    token, arrival minus the time it left the upstream (ms); and whether the run finished."""
    await asyncio.sleep(delay)
    body = json.dumps({"message": {"role": "user", "content": [{"type": "text", "text": prompt}]},
                       "thread": {"userKey": "bench"}}).encode()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"POST /v1/threads/runs HTTP/1.1\r\nHost: bench\r\nx-api-key: bench\r\n"
                 b"accept: text/event-stream\r\ncontent-type: application/json\r\n"
                 b"connection: close\r\ncontent-length: %d\r\n\r\n%b" % (len(body), body))
    latencies: list[float] = []
    carry, ended = b"", False
    try:
        while not ended:
            piece = await reader.read(65536)
            if not piece:
                break
            now = time.monotonic_ns()
            data = carry + piece
            end = 0
            finished = data.find(b'"RUN_FINISHED"')  # (it carries the answer again: not tokens)
            for match in STAMP.finditer(data, 0, len(data) if finished < 0 else finished):
                latencies.append((now - int(match.group(2))) / 1e6)
                end = match.end()
            ended = finished >= 0
            carry = data[end:][-200:]
    finally:
        writer.close()
    return latencies, ended


def reader_process(url: str, count: int, tokens: int, rate: int, start_at: float,
                   spread: float, out: Any) -> None:
    """A reader process: `count` runs, their starts spread evenly over `spread` seconds from
    `start_at`; sends back the latencies, how many finished, and its own CPU time."""
    import resource

    import uvloop

    host, port = url.removeprefix("http://").split(":")

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    async def read_all() -> tuple[list[Any], float]:
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        started = cpu()  # the reading only, not this process's start-up
        results = await asyncio.gather(*(
            read_raw(host, int(port), f"paced {tokens} {rate}", spread * i / count)
            for i in range(count)), return_exceptions=True)
        return results, cpu() - started

    results, used = uvloop.run(read_all())
    done = [r for r in results if isinstance(r, tuple)]
    out.send({"latencies": [x for r in done for x in r[0]],
              "finished": sum(r[1] and len(r[0]) == tokens for r in done),
              "errors": sorted({f"{type(r).__name__}: {r}"[:120] for r in results
                                if isinstance(r, BaseException)}),
              "cpu": used})
    out.close()


CGROUP_CPU = Path("/sys/fs/cgroup/cpu")  # cgroup v1's controller (v2: /sys/fs/cgroup)
CGROUP_PERIOD_US = 10_000  # short, so a capped worker waits at most a few ms for its share


class CpuBudget:
    """Each confined process in a cgroup of its own, capped at `percent` of one core.

    Why: on a 2-core machine the load generator, PostgreSQL and Redis share the cores with the
    gateways, so "two workers against one" measures the machine, not the gateway. With the
    same cap for every worker, one worker has P % of a core and two have 2P %, and what is
    left is for everyone else: the ratio shows how the gateway scales."""

    def __init__(self, percent: float) -> None:
        self.quota_us = round(CGROUP_PERIOD_US * percent / 100)
        self.v2 = (Path("/sys/fs/cgroup") / "cgroup.controllers").exists()
        self.root = Path("/sys/fs/cgroup") if self.v2 else CGROUP_CPU
        self.groups: list[Path] = []

    def confine(self, pids: list[int]) -> None:
        for pid in pids:
            group = self.root / f"gateway-bench-{pid}"
            try:
                group.mkdir(exist_ok=True)
                self.groups.append(group)
                if self.v2:
                    (group / "cpu.max").write_text(f"{self.quota_us} {CGROUP_PERIOD_US}")
                else:
                    (group / "cpu.cfs_period_us").write_text(str(CGROUP_PERIOD_US))
                    (group / "cpu.cfs_quota_us").write_text(str(self.quota_us))
                (group / "cgroup.procs").write_text(str(pid))
            except OSError as error:
                raise SystemExit(f"--worker-cpu: cannot cap process {pid} in {group} ({error}); "
                                 "it needs root and a writable cgroup cpu controller") from None

    def throttled_ms(self) -> float:
        """How long the confined processes were held back by their cap, in all."""
        total = 0.0
        for group in self.groups:
            for line in (group / "cpu.stat").read_text().splitlines():
                key, value = line.split()
                if key == "throttled_usec":
                    total += int(value) / 1000
                elif key == "throttled_time":  # v1, in ns
                    total += int(value) / 1e6
        return total

    def release(self) -> None:
        for group in self.groups:
            for pid in (group / "cgroup.procs").read_text().split():
                try:
                    (self.root / "cgroup.procs").write_text(pid)
                except OSError:
                    pass  # exited meanwhile
            group.rmdir()
        self.groups.clear()


@dataclass
class Parties:
    """The processes whose CPU a level reports, each a list of process-tree roots."""

    gateway: list[int]
    upstream: list[int]
    postgres: list[int]
    redis: list[int]


def level(url: str, parties: Parties, runs: int, rate: int, seconds: float,
          readers: int) -> dict[str, Any]:
    """`runs` runs at once (started over the first second), `seconds` of tokens at `rate` each:
    the per-token added latency and everyone's CPU, in % of one core over the level's wall."""
    tokens = max(1, int(seconds * rate))
    context = multiprocessing.get_context("spawn")
    shares = [s for s in (runs // readers + (i < runs % readers) for i in range(readers)) if s]
    start_at = time.monotonic() + 2.0
    pipes, processes = [], []
    for share in shares:
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(target=reader_process,
                                  args=(url, share, tokens, rate, start_at, 1.0, sender))
        process.start()
        pipes.append(receiver)
        processes.append(process)
    while time.monotonic() < start_at:
        time.sleep(0.01)
    groups = {name: getattr(parties, name) for name in ("gateway", "upstream", "postgres",
                                                        "redis")}
    before = {name: tree_cpu(roots) for name, roots in groups.items()}
    busy_before = machine_busy()
    results = [receiver.recv() for receiver in pipes]
    wall = time.monotonic() - start_at
    busy_after = machine_busy()
    cpu = {name: cpu_between(before[name], tree_cpu(roots))
           for name, roots in groups.items()}
    for process in processes:
        process.join()
    cpu["clients"] = sum(r["cpu"] for r in results)
    latencies = sorted(x for r in results for x in r["latencies"])
    machine = 100 * (busy_after - busy_before) / wall
    row = {"runs": runs, "finished": sum(r["finished"] for r in results),
           "latency_p50_ms": round(percentile(latencies, 0.5), 1),
           "latency_p99_ms": round(percentile(latencies, 0.99), 1),
           **{f"cpu_{name}": round(100 * seconds_ / wall) for name, seconds_ in cpu.items()},
           "cpu_machine": round(machine),
           "errors": sorted({e for r in results for e in r["errors"]})[:3]}
    row["cpu_others"] = max(0, row["cpu_machine"] - sum(
        row[f"cpu_{name}"] for name in ("gateway", "upstream", "postgres", "redis", "clients")))
    return row


def percentile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


def max_concurrency(workdir: Path, upstream: Source, workers: int, options: argparse.Namespace,
                    start: int) -> tuple[int, list[dict[str, Any]]]:
    """The largest C (from `start`, growing by `--growth` each level) whose runs all finish with
    the added latency p99 within the bound, on `gateway serve --workers N`. A level is measured
    `--repeats` times and judged by the median p99: one level's p99 moves by tens of ms from
    one trial to the next, so a single trial stops the search early or late by chance."""
    assert engines.ENGINES is not None
    server = GatewayServer(workdir / f"w{workers}", {
        "GATEWAY_MODEL": "openai/paced", "GATEWAY_MODEL_API_BASE": f"{upstream.url}/v1",
        "GATEWAY_MODEL_API_KEY": "sk-bench"}, args=("--workers", str(workers)))
    server.start()
    assert server.process is not None
    postmaster = int((engines.ENGINES.postgres.dir / "data" / "postmaster.pid")
                     .read_text().split()[0])
    redis = engines.ENGINES.redis.process
    parties = Parties([server.process.pid], [upstream.pid], [postmaster],
                      [redis.pid] if redis is not None else [])
    held, rows, runs = 0, [], start
    budget = CpuBudget(options.worker_cpu) if options.worker_cpu else None
    try:
        level(server.url, parties, 2 * workers, options.rate, 1.0, 1)  # warm every worker up
        if budget is not None:
            # the workers (with --workers 1, the one process); not an idle supervisor
            busy = [pid for pid in tree_cpu(parties.gateway)
                    if workers == 1 or pid not in parties.gateway]
            budget.confine(busy)
        while runs <= options.max_concurrent:
            trials = []
            for _ in range(options.repeats):
                throttled = budget.throttled_ms() if budget is not None else 0.0
                row = {"workers": workers, **level(server.url, parties, runs, options.rate,
                                                   options.seconds, options.readers)}
                if budget is not None:
                    row["throttled_ms"] = round(budget.throttled_ms() - throttled)
                trials.append(row)
                print(json.dumps(row), flush=True)
            rows += trials
            p99 = statistics.median(row["latency_p99_ms"] for row in trials)
            if any(row["finished"] < runs for row in trials) or p99 > options.bound_ms:
                break
            held, runs = runs, max(runs + 1, round(runs * options.growth))
    finally:
        if budget is not None:
            budget.release()
        server.stop()
    return held, rows


CAPACITY_COLUMNS = [("workers", "workers"), ("runs", "C"), ("finished", "finished"),
                    ("latency_p50_ms", "added p50 ms"), ("latency_p99_ms", "added p99 ms"),
                    ("cpu_gateway", "gateway %"), ("cpu_postgres", "PostgreSQL %"),
                    ("cpu_redis", "Redis %"), ("cpu_upstream", "upstream %"),
                    ("cpu_clients", "clients %"), ("cpu_others", "other jobs %"),
                    ("cpu_machine", "machine %")]


def capacity_table(rows: list[dict[str, Any]]) -> list[str]:
    columns = CAPACITY_COLUMNS
    if any("throttled_ms" in row for row in rows):
        columns = [*columns, ("throttled_ms", "held back by the cap ms")]
    lines = ["| " + " | ".join(title for _, title in columns) + " |",
             "|" + "---:|" * len(columns)]
    lines += ["| " + " | ".join(str(row.get(key, "")) for key, _ in columns) + " |"
              for row in rows]
    return lines


def cancels(model: ScriptedModel, owner: httpx.Client, canceller: httpx.Client, label: str,
            runs: int) -> list[str]:
    samples = [cancel(model, owner, canceller) for _ in range(runs)]
    return [summary(f"cancel, {label}: upstream closed", [s[2] for s in samples]),
            summary(f"cancel, {label}: RUN_ERROR at subscriber", [s[1] for s in samples]),
            summary(f"cancel, {label}: DELETE answered", [s[0] for s in samples])]


def notify_cancels(model: ScriptedModel, workdir: Path, env: dict[str, str], runs: int
                   ) -> list[str]:
    """The cancel on another process without Redis: PostgreSQL's LISTEN/NOTIFY carries it."""
    env = {**env, "GATEWAY_REDIS_URL": ""}
    a, b = GatewayServer(workdir, env), GatewayServer(workdir, env)
    try:
        a.start()
        b.start()
        with httpx.Client(base_url=a.url, timeout=30) as on_a, \
                httpx.Client(base_url=b.url, timeout=30) as on_b:
            for _ in range(3):
                cancel(model, on_a, on_b)
            lines = cancels(model, on_a, on_b, "other process, no Redis (NOTIFY)", runs)
        return [*lines, f"  load average: {os.getloadavg()}"]
    finally:
        a.stop()
        b.stop()


def percent(text: str) -> float:
    value = float(text)
    if not 1 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text} is not a share of one core from 1 to 100")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--bound-ms", type=float, default=50.0,
                        help="capacity: largest added latency p99 a level may have")
    parser.add_argument("--rate", type=int, default=50, help="capacity: tokens per second")
    parser.add_argument("--seconds", type=float, default=4.0, help="capacity: a run's length")
    parser.add_argument("--readers", type=int, default=2, help="capacity: client processes")
    parser.add_argument("--start-concurrent", type=int, default=10)
    parser.add_argument("--growth", type=float, default=1.5,
                        help="capacity: each level's C over the last one's")
    parser.add_argument("--max-concurrent", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=1,
                        help="capacity: trials per level, judged by their median p99")
    parser.add_argument("--worker-cpu", type=percent, default=None, metavar="PERCENT",
                        help="capacity: cap each gateway process at PERCENT of one core "
                             "(a cgroup each; needs root)")
    parser.add_argument("--skip-capacity", action="store_true")
    parser.add_argument("--only-capacity", action="store_true")
    options = parser.parse_args()

    engines.ENGINES = engines.Engines().start()
    model = ScriptedModel()
    model.start()
    workdir = Path(tempfile.mkdtemp(prefix="bench-scale-out-"))
    env = scripted_env(model)
    a, b = GatewayServer(workdir, env), GatewayServer(workdir, env)
    lines = [f"{os.cpu_count()} cores; load average before: {os.getloadavg()}"]
    try:
        if not options.only_capacity:
            a.start()
            b.start()
            with httpx.Client(base_url=a.url, timeout=30) as on_a, \
                    httpx.Client(base_url=b.url, timeout=30) as on_b:
                for _ in range(3):  # warm up both processes
                    follow_lag(model, on_a, on_b)
                    cancel(model, on_a, on_b)
                    cancel(model, on_a, on_a)
                lag = [s for _ in range(options.runs) for s in follow_lag(model, on_a, on_b)]
                lines.append(summary("follow lag, other process (Redis stream), per event", lag))
                lines.append(f"  load average: {os.getloadavg()}")
                ends = [end_lag(model, on_a, on_b) for _ in range(options.runs)]
                lines.append(summary("the same, a run's last text event", [t for t, _ in ends]))
                lines.append(summary("the same, its RUN_FINISHED", [e for _, e in ends]))
                lines.append(f"  load average: {os.getloadavg()}")
                # Interleaved in pairs, so that load from other jobs hits both alike.
                for _ in range(2):
                    lines += cancels(model, on_a, on_b, "other process", options.runs // 2)
                    lines += cancels(model, on_a, on_a, "same process", options.runs // 2)
                    lines.append(f"  load average: {os.getloadavg()}")
            a.stop()
            b.stop()
            lines += notify_cancels(model, workdir / "without-redis", env, options.runs)
        if not options.skip_capacity:
            upstream = Source("upstream")
            rows: list[dict[str, Any]] = []
            try:
                held = options.start_concurrent
                for workers in (1, 2):  # two workers carry at least what one does
                    held, found = max_concurrency(workdir, upstream, workers, options,
                                                  max(held, options.start_concurrent))
                    rows += found
                    lines.append(f"workers={workers}: {held} runs at once ({options.rate} tokens/s "
                                 f"each) with an added latency p99 within {options.bound_ms:.0f} ms"
                                 f"; load average {os.getloadavg()}"
                                 + (f"; each gateway process capped at {options.worker_cpu:g} % "
                                    "of a core" if options.worker_cpu else ""))
            finally:
                upstream.stop()
            lines += capacity_table(rows)
        lines.append(f"load average after: {os.getloadavg()}")
        print("\n".join(lines))
    finally:
        a.stop()
        b.stop()
        model.stop()
        engines.ENGINES.stop()


if __name__ == "__main__":
    main()
