"""Many paced streams through one gateway process: time to first token, pace, refusals.

    .venv/bin/python -m bench.concurrency                  # the standard set, about 6 minutes
    .venv/bin/python -m bench.concurrency --scenarios 100x50@0,300x20@10 --paths gateway

A scenario `CxR@S` is C runs of R tokens a second each (`--seconds` long, 5 s by default),
arriving evenly over S seconds (`@0`: all in the same instant). Every party is its own process,
so a reader never shares an interpreter with what it measures:

- the paced upstream and the bare SSE stream of `bench/paced.py` (plain asyncio on raw
  sockets): tokens on an absolute schedule, each stamped with the monotonic time it left (one
  clock for every process on the machine);
- one gateway (`gateway serve`, SQLite, the default model adapter and admission settings, any
  `--gateway-env`) in front of that upstream, its event-loop lag monitor on;
- `--readers` reader processes, each a plain asyncio loop on raw sockets (an HTTP/1.1 request,
  then a regular expression over the bytes for the stamps), which split a scenario's runs.

Per path (the upstream read directly and the bare SSE stream are the limits; the gateway is what
is measured) and scenario: the runs **completed** (every token and the end seen), **refused**
(503, with the time to that answer: a refusal must come at once), **failed** (anything else:
another status, a cut or unfinished stream), the **time to first token** from sending the
request (p50, p99 over the admitted runs), the latency per token from leaving the upstream to
the reader (p50, p99), each run's largest gap between two tokens (p99), each run's duration
against the ideal, the serving process's CPU (% of one core over the scenario's wall time), its
peak RSS above idle per run, the event loop's lag (the largest per-second p99 of its monitor),
the largest accept queue of the listening socket (connections the kernel holds for the process),
how late the readers themselves began their requests (p99: a starved reader's lateness is not
the gateway's), and the machine's load average when the scenario ended (other jobs stretch every
wall-clock figure: read them beside it), with the CPU every process on the machine used, by role
(`bench/machine_watch.py`). Then the gateway's CPU per run start and per token beside the bare
limit's (`cost_beside_bare`: each on a fresh process, their samples alternating).
Written as JSON under `--out` (bench/results), the tables printed. Not part of the pass/fail
suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.machine_watch import MachineWatch
from gateway.config import Settings
from tests.support.gateway_server import ROOT, GatewayServer, free_port

SCENARIOS = "10x20@0,100x20@5,100x50@0,200x50@5,300x20@0,300x20@10,500x20@10,1000x20@10"
STAMP = re.compile(rb"t(\d+)@(\d+) ")
LAG = re.compile(r"loop lag ms: ticks=\d+ p50=[\d.]+ p99=([\d.]+) max=([\d.]+)")
PATHS = ("upstream", "gateway", "bare")
END_MARKERS = (b"[DONE]", b'"RUN_FINISHED"', b'"RUN_ERROR"')


@dataclass(frozen=True)
class Scenario:
    runs: int
    rate: int
    ramp: float  # seconds over which the runs arrive evenly; 0: all at once

    @classmethod
    def parse(cls, text: str) -> Scenario:
        counts, _, ramp = text.partition("@")
        runs, _, rate = counts.partition("x")
        return cls(int(runs), int(rate), float(ramp or 0))

    def __str__(self) -> str:
        return f"{self.runs}x{self.rate}@{self.ramp:g}"


class Source:
    """`bench/paced.py` (or `module`, given `args` then the port) in its own process."""

    def __init__(self, kind: str, module: str = "bench.paced", args: tuple[str, ...] = ()
                 ) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, *(args or (kind,)), str(self.port)], cwd=ROOT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/health", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"{kind} server did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


# ---- readers (their own processes, raw sockets) ----------------------------------------------

@dataclass
class StreamResult:
    status: int  # 0: no answer
    answered_ms: float  # request sent -> status line
    late_ms: float = 0.0  # the reader's own lateness: its schedule -> the request begun
    connected_ms: float = 0.0  # request begun -> TCP connection established
    sent_at: float = 0.0  # time.monotonic() when the request was begun (one clock per machine)
    port: int = 0  # the reader's local port: the gateway's probe knows the connection by it
    tokens: int = 0
    completed: bool = False
    first_ms: float | None = None  # request sent -> first token
    duration: float = 0.0  # request sent -> last token, s
    max_gap_ms: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    error: str | None = None
    reason: str | None = None  # a 503's `reason`: the admission limit that refused it


REASON = re.compile(rb'"reason":\s*"([A-Z_]+)"')


def request_bytes(path: str, port: int, tokens: int, rate: int) -> bytes:
    prompt = f"paced {tokens} {rate}"
    if path == "bare":
        return (f"GET /stream?tokens={tokens}&rate={rate} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
                "connection: close\r\n\r\n").encode()
    if path == "upstream":
        target, body = "/v1/chat/completions", {
            "model": "paced", "stream": True, "messages": [{"role": "user", "content": prompt}]}
    else:
        target, body = "/v1/threads/runs", {
            "message": {"role": "user", "content": [{"type": "text", "text": prompt}]},
            "thread": {"userKey": "bench"}}
    data = json.dumps(body).encode()
    return (f"POST {target} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n"
            f"content-type: application/json\r\naccept: text/event-stream\r\n"
            f"x-api-key: bench\r\ncontent-length: {len(data)}\r\n\r\n").encode() + data


async def read_one(path: str, port: int, tokens: int, rate: int, due: float = 0.0
                   ) -> StreamResult:
    sent = time.monotonic()
    late = max(0.0, (sent - due) * 1000) if due else 0.0
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        return StreamResult(0, (time.monotonic() - sent) * 1000, late, sent_at=sent,
                            error=f"connect: {exc}"[:200])
    result = StreamResult(0, 0.0, late, (time.monotonic() - sent) * 1000, sent,
                          writer.get_extra_info("sockname")[1])
    try:
        writer.write(request_bytes(path, port, tokens, rate))
        head = await reader.readuntil(b"\r\n\r\n")
        result.answered_ms = (time.monotonic() - sent) * 1000
        result.status = int(head.split(b" ", 2)[1])
        if result.status != 200:
            body = await reader.read(1000)
            result.error = f"status {result.status}: {body[:200]!r}"
            if reason := REASON.search(body):
                result.reason = reason.group(1).decode()
            return result
        await _read_stream(reader, sent, result)
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"[:200]
    finally:
        writer.close()
    result.completed = result.error is None and result.completed and result.tokens == tokens
    return result


async def _read_stream(reader: asyncio.StreamReader, sent: float, result: StreamResult) -> None:
    carry, last = b"", 0.0
    while piece := await reader.read(65536):
        now_ns = time.monotonic_ns()
        data = carry + piece
        # The stream's end (a Tambo `RUN_FINISHED` carries the whole answer again, stamps
        # included): only the stamps before it are tokens.
        ended = min((at for marker in END_MARKERS if (at := data.find(marker)) >= 0),
                    default=-1)
        end = 0
        for match in STAMP.finditer(data, 0, len(data) if ended < 0 else ended):
            result.tokens += 1
            result.latencies_ms.append((now_ns - int(match.group(2))) / 1e6)
            end = match.end()
        now = now_ns / 1e9
        if end:
            if result.first_ms is None:
                result.first_ms = (now - sent) * 1000
            if last:
                result.max_gap_ms = max(result.max_gap_ms, (now - last) * 1000)
            last = now
        if ended >= 0:
            result.completed = b'"RUN_ERROR"' not in data
            break
        carry = data[end:][-200:]
    result.duration = (last or time.monotonic()) - sent


async def read_many(path: str, port: int, offsets: list[float], tokens: int, rate: int,
                    start_at: float) -> list[StreamResult]:
    async def one(offset: float) -> StreamResult:
        delay = start_at + offset - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        return await read_one(path, port, tokens, rate, start_at + offset)

    return await asyncio.gather(*(one(offset) for offset in offsets))


def reader(path: str, port: int, offsets: list[float], tokens: int, rate: int, start_at: float,
           out: Any) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    results = asyncio.run(read_many(path, port, offsets, tokens, rate, start_at))
    out.send([asdict(r) for r in results])
    out.close()


# ---- one scenario ------------------------------------------------------------------------------

def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(len(values) * q))], 1)


def run_readers(path: str, port: int, scenario: Scenario, tokens: int, readers: int
                ) -> tuple[list[dict[str, Any]], float]:
    """Every run of the scenario, split round robin between the reader processes."""
    context = multiprocessing.get_context("spawn")
    offsets = [scenario.ramp * i / scenario.runs for i in range(scenario.runs)]
    start_at = time.monotonic() + 1.5 + scenario.runs / 400  # every reader ready and waiting
    pipes, processes = [], []
    for k in range(min(readers, scenario.runs)):
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(target=reader, args=(
            path, port, offsets[k::readers], tokens, scenario.rate, start_at, sender))
        process.start()
        pipes.append(receiver)
        processes.append(process)
    while time.monotonic() < start_at - 0.2:
        time.sleep(0.05)
    results: list[dict[str, Any]] = []
    for receiver in pipes:
        results.extend(receiver.recv())
    for process in processes:
        process.join()
    return results, start_at


def measure(path: str, url: str, pid: int, scenario: Scenario, seconds: float, readers: int,
            lag_log: Path | None, baseline_kib: int | None = None,
            watch: dict[str, int] | None = None, keep: list[dict[str, Any]] | None = None
            ) -> dict[str, Any]:
    """One scenario on one path; `watch`: the machine's CPU by process, and the accept queues
    of these ports besides the path's own, beside it (`bench/machine_watch.py`); `keep`: a list
    that receives every run's result."""
    tokens = max(1, int(seconds * scenario.rate))
    port = int(url.rsplit(":", 1)[1])
    lag_offset = lag_log.stat().st_size if lag_log else 0
    rss_before, cpu_before, wall_before = rss_kib(pid), cpu_seconds(pid), time.monotonic()
    peak = [rss_before]
    stop = threading.Event()

    def sample_rss() -> None:
        while not stop.wait(0.25):
            peak[0] = max(peak[0], rss_kib(pid))

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    watcher = MachineWatch(pid, {path: port, **watch}).start() if watch is not None else None
    results, start_at = run_readers(path, port, scenario, tokens, readers)
    machine = watcher.stop() if watcher else {}
    stop.set()
    sampler.join()
    cpu = cpu_seconds(pid) - cpu_before
    wall = time.monotonic() - max(start_at, wall_before)
    if keep is not None:
        keep.extend(results)
    return {**summary(path, scenario, tokens, results, cpu, wall, peak[0],
                      baseline_kib or rss_before, lag_since(lag_log, lag_offset)), **machine}


def lag_since(lag_log: Path | None, offset: int) -> list[float]:
    if not lag_log:
        return []
    with open(lag_log, errors="replace") as log:
        log.seek(offset)
        return [float(m.group(1)) for line in log if (m := LAG.search(line))]


def summary(path: str, scenario: Scenario, tokens: int, results: list[dict[str, Any]],
            cpu: float, wall: float, peak_kib: int, baseline_kib: int, lags: list[float]
            ) -> dict[str, Any]:
    admitted = [r for r in results if r["status"] == 200]
    completed = [r for r in results if r["completed"]]
    refused = [r for r in results if r["status"] == 503]
    latencies = [x for r in admitted for x in r["latencies_ms"]]
    ideal = tokens / scenario.rate
    errors = sorted({r["error"] for r in results if r["error"] and r["status"] != 503})
    return {
        "path": path, "scenario": str(scenario), "runs": scenario.runs, "rate": scenario.rate,
        "ramp_s": scenario.ramp, "tokens": tokens,
        "completed": len(completed), "refused": len(refused),
        "failed": len(results) - len(completed) - len(refused),
        "refused_ms_p99": pct([r["answered_ms"] for r in refused], 0.99),
        # Which limit refused them (the setting each 503 names), how many each.
        "refused_by": {reason: sum((r.get("reason") or "?") == reason for r in refused)
                       for reason in sorted({r.get("reason") or "?" for r in refused})},
        "first_token_p50_ms": pct([r["first_ms"] for r in admitted if r["first_ms"]], 0.5),
        "first_token_p99_ms": pct([r["first_ms"] if r["first_ms"] else 1e9 for r in admitted],
                                  0.99),
        "latency_p50_ms": pct(latencies, 0.5), "latency_p99_ms": pct(latencies, 0.99),
        "gap_p99_ms": pct([r["max_gap_ms"] for r in completed], 0.99),
        "duration_p99": pct([r["duration"] / ideal for r in completed], 0.99),
        "cpu_percent": round(100 * cpu / wall, 1), "cpu_s": round(cpu, 3),
        "rss_per_run_kib": round(max(0, peak_kib - baseline_kib) / max(1, len(admitted)), 1),
        "loop_lag_p99_ms": round(max(lags), 1) if lags else None,
        # The readers' own share of the wait: how late each began its request against its
        # schedule (a starved reader), and its TCP connect.
        "reader_late_p99_ms": pct([r.get("late_ms", 0.0) for r in results], 0.99),
        "connect_p99_ms": pct([r.get("connected_ms", 0.0) for r in results], 0.99),
        "load": load_average(), "errors": errors[:3],
    }


def cost_sample(url: str, pid: int, readers: int, runs: int, tokens: int = 200,
                rate: int = 2000) -> tuple[float, float]:
    """One sample of the CPU per run start and per token, in seconds: `runs` runs of one token
    started over a second, then `runs` runs of `tokens` tokens (the upstream sends them as fast
    as `rate`); the difference is the tokens' cost, the rest of the first the starts' (each with
    its end). CPU used, not time waited for a core, so other load on the machine changes it far
    less than the wall-clock figures."""
    small = measure("gateway", url, pid, Scenario(runs, rate, 1.0), 1 / rate, readers, None)
    large = measure("gateway", url, pid, Scenario(runs, rate, 1.0), tokens / rate, readers, None)
    if small["failed"] or large["failed"] or not small["completed"]:
        raise RuntimeError(f"cost runs failed: {small} {large}")
    # Per run admitted (a refusal on a busy machine costs far less than a start).
    token = (large["cpu_s"] / large["completed"] - small["cpu_s"] / small["completed"]) / (
        tokens - 1)
    return small["cpu_s"] / small["completed"] - token, token


def cost_summary(samples: list[tuple[float, float]], runs: int, tokens: int = 200
                 ) -> dict[str, Any]:
    per_start, per_token = [s for s, _ in samples], [t for _, t in samples]
    return {"runs": runs, "tokens": tokens,
            "cpu_ms_per_start": round(statistics.median(per_start) * 1e3, 2),
            "cpu_us_per_token": round(statistics.median(per_token) * 1e6, 1),
            "samples_ms_per_start": [round(x * 1e3, 2) for x in per_start],
            "samples_us_per_token": [round(x * 1e6, 1) for x in per_token]}


def cpu_cost(url: str, pid: int, readers: int, runs: int, tokens: int = 200,
             rate: int = 2000, repeats: int = 3) -> dict[str, Any]:
    """The CPU per run start and per token of the server at `url` (`cost_sample`), median of
    `repeats`."""
    return cost_summary([cost_sample(url, pid, readers, runs, tokens, rate)
                         for _ in range(repeats)], runs, tokens)


@contextlib.contextmanager
def beside_relay(env: dict[str, str], upstream: Source,
                 prefix: str = "bench-cost-") -> Iterator[dict[str, tuple[str, int]]]:
    """A fresh `gateway serve` with `env` less the loop-lag monitor (the benchmark's
    instrument, off by default: 50 wake-ups a second that are not the server's work) and a
    fresh bare relay (`bench/relay.py`) on `upstream`, each warmed by a first batch (lazy
    imports, the first model call); yields their (url, pid) as "gateway" and "bare", and
    stops both."""
    settings = {k: v for k, v in env.items() if k != "GATEWAY_LOOP_LAG_LOG_SECONDS"}
    gateway = GatewayServer(Path(tempfile.mkdtemp(prefix=prefix)), settings)
    relay = Source("relay", "bench.relay", (upstream.url,))
    try:
        gateway.start()
        assert gateway.process is not None
        targets = {"gateway": (gateway.url, gateway.process.pid), "bare": (relay.url, relay.pid)}
        for url, pid in targets.values():
            measure("gateway", url, pid, Scenario(20, 50, 1), 1, 1, None)
        yield targets
    finally:
        gateway.stop()
        relay.stop()


def cost_beside_bare(env: dict[str, str], upstream: Source, readers: int, runs: int,
                     repeats: int = 3) -> dict[str, Any]:
    """The gateway's CPU per start and per token beside the bare limit's (`bench/relay.py`:
    the same request, upstream read and events on the same stack, nothing stored), each on a
    fresh process and their samples alternating (`beside_relay`), so that both see the
    machine's same minutes: on a shared host the same work's CPU moves by half within
    minutes, and their ratio is what holds."""
    samples: dict[str, list[tuple[float, float]]] = {"gateway": [], "bare": []}
    with beside_relay(env, upstream) as targets:
        for _ in range(repeats):
            for name, (url, pid) in targets.items():
                samples[name].append(cost_sample(url, pid, readers, runs))
    return {**cost_summary(samples["gateway"], runs), "bare": cost_summary(samples["bare"], runs)}


# ---- output ---------------------------------------------------------------------------------

COLUMNS = [("path", "path"), ("scenario", "runs x tok/s @ ramp s"), ("completed", "completed"),
           ("refused", "refused 503"), ("refused_ms_p99", "503 in ms p99"),
           ("refused_by", "refused by"), ("failed", "failed"), ("first_token_p50_ms", "first token p50 ms"),
           ("first_token_p99_ms", "p99 ms"), ("gap_p99_ms", "largest gap p99 ms"),
           ("latency_p50_ms", "latency p50 ms"), ("latency_p99_ms", "p99 ms"),
           ("duration_p99", "duration/ideal p99"), ("cpu_percent", "CPU %"),
           ("rss_per_run_kib", "KiB/run"), ("loop_lag_p99_ms", "loop lag p99 ms"),
           ("accept_queue", "accept queue max"), ("reader_late_p99_ms", "readers late p99 ms"),
           ("load", "load avg")]
ROLES = ("gateway", "postgres", "redis", "upstream", "readers", "benchmark", "other")


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(title for _, title in COLUMNS) + " |",
             "|" + "|".join("---" if k in ("path", "scenario") else "---:" for k, _ in COLUMNS)
             + "|"]
    for row in rows:
        cells = []
        for key, _ in COLUMNS:
            value = (row.get("accept_queue_max") or {}).get(row["path"]) if key == (
                "accept_queue") else row.get(key)
            if isinstance(value, dict):  # refused_by: the limits' names, shortened
                value = ", ".join(f"{k.removeprefix('GATEWAY_')} {n}"
                                  for k, n in value.items()) or None
            cells.append("–" if value is None else f"{value:,}" if isinstance(value, int)
                         else str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n" + cpu_by_role(rows)


def cpu_by_role(rows: list[dict[str, Any]]) -> str:
    """Who had the machine's cores during each scenario (% of one core; `other`: other jobs)."""
    watched = [row for row in rows if row.get("cpu_percent_by_role")]
    if not watched:
        return ""
    lines = ["", "| CPU % of one core, by process | " + " | ".join(ROLES) + " |",
             "|---|" + "---:|" * len(ROLES)]
    for row in watched:
        shares = row["cpu_percent_by_role"]
        lines.append(f"| {row['path']} {row['scenario']} | "
                     + " | ".join(str(shares.get(role, "–")) for role in ROLES) + " |")
    return "\n".join(lines) + "\n"


def machine_line() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?")
    load = Path("/proc/loadavg").read_text().split()[:3]
    return (f"{os.cpu_count()} x {cpu}, Python {sys.version.split()[0]}, "
            f"load average {' '.join(load)}")


WIRES = ("openai", "anthropic", "gemini")


def model_env(upstream_url: str, wire: str = "openai") -> dict[str, str]:
    """The paced upstream as the model, in `wire`'s format (`bench/paced.py` speaks the three:
    OpenAI's chat completions, Anthropic's Messages, Gemini's streamGenerateContent)."""
    model, base = {"openai": ("openai/paced", f"{upstream_url}/v1"),
                   "anthropic": ("anthropic/paced", upstream_url),
                   "gemini": ("gemini/paced", f"{upstream_url}/v1beta")}[wire]
    return {"GATEWAY_MODEL": model, "GATEWAY_MODEL_API_BASE": base,
            "GATEWAY_MODEL_API_KEY": "sk-bench"}


def gateway_env(upstream_url: str, adapter: str = "auto", extra: list[str] | None = None,
                wire: str = "openai") -> dict[str, str]:
    """The benchmarks' gateway settings: the paced upstream in `wire`'s format behind
    `adapter`, the loop-lag monitor on, and `extra` (NAME=value) last."""
    return {
        **model_env(upstream_url, wire), "GATEWAY_MODEL_ADAPTER": adapter,
        "GATEWAY_LOOP_LAG_LOG_SECONDS": "1",
        # The server's own defaults (the test harness turns them off), and the loop lateness
        # limit recommended behind a balancer (docs/operations.md, Scaling): a refusal waits
        # for the loop as long as it is late, and the issue wants refusals within 100 ms.
        "GATEWAY_MAX_START_WAIT_SECONDS": str(
            Settings.model_fields["max_start_wait_seconds"].default),
        "GATEWAY_MAX_LOOP_CPU": str(Settings.model_fields["max_loop_cpu"].default),
        "GATEWAY_MAX_LOOP_LAG_SECONDS": "0.1",
        **dict(e.split("=", 1) for e in extra or [])}


def run_all(args: argparse.Namespace, scenarios: list[Scenario], paths: list[str],
            keep: list[dict[str, Any]] | None = None
            ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    upstream, bare = Source("upstream"), Source("bare")
    env = gateway_env(upstream.url, args.adapter, args.gateway_env,
                      getattr(args, "wire", "openai"))
    gateway = GatewayServer(Path(tempfile.mkdtemp(prefix="bench-concurrency-")), env)
    rows: list[dict[str, Any]] = []
    cost = None
    try:
        gateway.start()
        targets = {"upstream": (upstream.url, upstream.pid, None),
                   "gateway": (gateway.url, gateway.process.pid, gateway.log_path),
                   "bare": (bare.url, bare.pid, None)}
        # Warm-up: the gateway's first runs pay for lazy imports and the first model call.
        measure("gateway", gateway.url, gateway.process.pid, Scenario(20, 50, 1), 1, 1, None)
        time.sleep(1.0)
        baselines = {name: rss_kib(pid) for name, (_, pid, _) in targets.items()}
        for scenario in scenarios:
            for path in paths:
                url, pid, lag_log = targets[path]
                row = measure(path, url, pid, scenario, args.seconds, args.readers, lag_log,
                              baselines[path], watch={"upstream": upstream.port}, keep=keep)
                rows.append(row)
                print(json.dumps(row), flush=True)
                time.sleep(args.pause)
        if args.cost_runs and "gateway" in paths:
            gateway.stop()  # done with; the cost is measured on a fresh one beside the bare limit
            cost = cost_beside_bare(env, upstream, args.readers, args.cost_runs)
            print(json.dumps({"cost": cost}), flush=True)
    finally:
        gateway.stop()
        upstream.stop()
        bare.stop()
    return rows, cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=SCENARIOS,
                        help="CxR@S,...: C runs of R tok/s arriving over S s (0: at once)")
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--seconds", type=float, default=5.0, help="ideal duration of a run")
    parser.add_argument("--readers", type=int, default=2, help="reader processes")
    parser.add_argument("--pause", type=float, default=2.0, help="seconds between scenarios")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--adapter", default="auto", help="GATEWAY_MODEL_ADAPTER")
    parser.add_argument("--gateway-env", action="append", default=[],
                        help="NAME=value for the gateway (e.g. GATEWAY_MAX_ACTIVE_RUNS=0)")
    parser.add_argument("--cost-runs", type=int, default=100,
                        help="runs per batch of the CPU cost measurement (0: skip it)")
    args = parser.parse_args()
    scenarios = [Scenario.parse(s) for s in args.scenarios.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    machine_before = machine_line()
    rows, cost = run_all(args, scenarios, args.paths.split(","))
    machine = f"{machine_line()} (at the start: {machine_before.rsplit(', ', 1)[1]})"
    (args.out / "concurrency.json").write_text(json.dumps(
        {"machine": machine, "gateway_env": args.gateway_env, "cost": cost, "rows": rows},
        indent=1))
    table = markdown(rows)
    if cost is not None:
        table += (f"\nGateway CPU per run start (with its end): {cost['cpu_ms_per_start']} ms; "
                  f"per token: {cost['cpu_us_per_token']} µs ({cost['runs']} runs of 1 and of "
                  f"{cost['tokens']} tokens, median of {len(cost['samples_ms_per_start'])}).\n")
        if cost.get("bare"):
            table += (f"The bare limit measured alike (`bench/relay.py`): "
                      f"{cost['bare']['cpu_ms_per_start']} ms per start, "
                      f"{cost['bare']['cpu_us_per_token']} µs per token.\n")
    print(f"\nMachine: {machine}\n\n{table}")


if __name__ == "__main__":
    main()
