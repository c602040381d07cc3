"""Many concurrent paced streams through one gateway process, against the limits it cannot beat.

    .venv/bin/python -m bench.concurrency                  # about seven minutes
    .venv/bin/python -m bench.concurrency --levels 10,50 --rates 20 --seconds 3   # a quick look

Every party is its own process, so readers never share an interpreter with what they measure:

- a paced upstream (`--serve upstream`): an OpenAI-compatible chat-completions stream of
  numbered tokens on an absolute schedule (token k leaves at start + k / rate, so scheduling
  delays do not accumulate), each stamped with the monotonic time it left (`t12@<ns> `; one
  clock for every process on the machine);
- one gateway (`gateway serve`, SQLite, the default model adapter) in front of it, with its
  event-loop lag monitor on (`GATEWAY_LOOP_LAG_LOG_SECONDS=1`);
- a bare sse-starlette app (`--serve bare`): the same paced, stamped tokens as gateway-shaped
  `TEXT_MESSAGE_CONTENT` events with the gateway's framing and nothing else per event: the
  limit of a Python SSE server on this machine;
- `--readers` reader processes, which split the C streams of a level between them.

For each path (the upstream read directly, the gateway, bare SSE), each rate and each level C,
the readers start C streams at once (`POST /v1/threads/runs` for the gateway, each on a new
thread) and report per level: runs completed (every token and the end seen), the latency per
token from leaving its source to reaching the reader (p50, p99), each run's largest gap between
two tokens (p99 over runs), each run's duration against the ideal (tokens / rate), the serving
process's CPU (user + system, all threads, from /proc), its peak RSS during the level, and that
peak above its RSS when idle after the warm-up run divided by C (memory per run; the levels of a
rate run in increasing C on fresh processes, so this is an upper bound only by what the
allocator kept from smaller levels), and for the gateway the event loop's lag (the largest of the
monitor's per-second p99s during the level). Written as JSON, a Markdown table and a PNG chart
(latency p99 against C, one line per path and rate) under `--out`.
Not part of the pass/fail suite.
"""

from __future__ import annotations

import argparse
import asyncio
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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.gateway_server import ROOT, GatewayServer, free_port

LEVELS = (10, 50, 100, 200, 300, 500)
RATES = (20, 50)
STAMP = re.compile(rb"t(\d+)@(\d+) ")
LAG = re.compile(r"loop lag ms: ticks=\d+ p50=[\d.]+ p99=([\d.]+) max=([\d.]+)")
PATHS = ("upstream", "gateway", "bare")
END_MARKERS = (b"[DONE]", b'"RUN_FINISHED"', b"event: end")


def _prompt(tokens: int, rate: int) -> str:
    return f"paced {tokens} {rate}"


# ---- the paced sources -------------------------------------------------------------------

async def _paced(tokens: int, rate: int):  # type: ignore[no-untyped-def]
    """(k, stamp) for k = 1..tokens, token k at start + (k-1)/rate on the monotonic clock."""
    start = time.monotonic()
    for k in range(1, tokens + 1):
        delay = start + (k - 1) / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        yield k, time.monotonic_ns()


def upstream_app() -> Any:
    """A minimal OpenAI-compatible chat-completions server: only the paced stream."""

    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = json.loads(body or b"{}")
        text = ""
        for m in request.get("messages", []):
            if m.get("role") == "user":
                content = m["content"]
                text = content if isinstance(content, str) else " ".join(
                    p.get("text", "") for p in content)
        match = re.search(r"paced (\d+) (\d+)", text)
        tokens, rate = (int(match.group(1)), int(match.group(2))) if match else (3, 100)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        head = (b'data: {"id":"chatcmpl-paced","object":"chat.completion.chunk","created":0,'
                b'"model":"paced","choices":[{"index":0,"delta":')
        tail = b',"finish_reason":null}]}\n\n'
        await send({"type": "http.response.body", "more_body": True,
                    "body": head + b'{"role":"assistant","content":""}' + tail})
        async for k, stamp in _paced(tokens, rate):
            await send({"type": "http.response.body", "more_body": True,
                        "body": head + b'{"content":"t%d@%d "}' % (k, stamp) + tail})
        usage = (b'data: {"id":"chatcmpl-paced","object":"chat.completion.chunk","created":0,'
                 b'"model":"paced","choices":[],"usage":{"prompt_tokens":5,'
                 b'"completion_tokens":%d,"total_tokens":%d}}\n\n' % (tokens, tokens + 5))
        end = (head + b'{}' + b',"finish_reason":"stop"}]}\n\n' + usage + b"data: [DONE]\n\n")
        await send({"type": "http.response.body", "body": end, "more_body": False})

    return app


def bare_app() -> Any:
    """The limit: the same paced tokens as gateway-shaped events through sse-starlette, framed
    as `gateway.api.runs.event_stream` frames them."""
    from sse_starlette import EventSourceResponse
    from starlette.applications import Starlette
    from starlette.routing import Route

    from gateway.runs.timings import Timings

    async def stream(request: Any) -> EventSourceResponse:
        tokens = int(request.query_params["tokens"])
        rate = int(request.query_params["rate"])

        async def events():  # type: ignore[no-untyped-def]
            yield {"data": '{"type":"RUN_STARTED","threadId":"thr","runId":"run"}', "id": "1"}
            async for k, stamp in _paced(tokens, rate):
                yield {"id": str(k + 1), "data": json.dumps(
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "01JD000000000000000000000",
                     "delta": f"t{k}@{stamp} ", "timestamp": stamp // 1_000_000},
                    separators=(",", ":"))}
            yield {"data": '{"type":"RUN_FINISHED","threadId":"thr","runId":"run"}',
                   "id": str(tokens + 2)}

        return EventSourceResponse(events(), ping=15, sep="\n", send_timeout=Timings().slow_reader_seconds,
                                   headers={"Cache-Control": "no-cache",
                                            "X-Accel-Buffering": "no"})

    return Starlette(routes=[Route("/stream", stream)])


def serve(kind: str, port: int) -> None:
    import uvicorn

    app = upstream_app() if kind == "upstream" else bare_app()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                lifespan="off", backlog=4096)


class Source:
    """One of the source subprocesses above."""

    def __init__(self, kind: str) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.concurrency", "--serve", kind, "--port",
             str(self.port)], cwd=ROOT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/", timeout=1)
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


# ---- readers (their own processes) ---------------------------------------------------------

@dataclass
class StreamResult:
    tokens: int
    completed: bool
    duration: float  # request sent -> last token, s
    first_ms: float  # request sent -> first token
    max_gap_ms: float
    latencies_ms: list[float]
    error: str | None = None


async def _read_one(client: httpx.AsyncClient, path: str, url: str, tokens: int,
                    rate: int) -> StreamResult:
    prompt = _prompt(tokens, rate)
    if path == "upstream":
        request = client.build_request("POST", f"{url}/v1/chat/completions", json={
            "model": "paced", "stream": True, "messages": [{"role": "user", "content": prompt}]})
    elif path == "gateway":
        request = client.build_request(
            "POST", f"{url}/v1/threads/runs",
            headers={"accept": "text/event-stream", "x-api-key": "bench"},
            json={"message": {"role": "user", "content": [{"type": "text", "text": prompt}]},
                  "thread": {"userKey": "bench"}})
    else:
        request = client.build_request("GET", f"{url}/stream?tokens={tokens}&rate={rate}")
    latencies: list[float] = []
    seen, last_arrival, max_gap, ended, first = 0, 0.0, 0.0, False, 0.0
    sent = time.monotonic()
    carry = b""
    try:
        response = await client.send(request, stream=True)
        try:
            async for piece in response.aiter_raw():
                now_ns = time.monotonic_ns()
                data = carry + piece
                end = 0
                for match in STAMP.finditer(data):
                    seen += 1
                    latencies.append((now_ns - int(match.group(2))) / 1e6)
                    end = match.end()
                now = now_ns / 1e9
                if end:
                    first = first or now
                    if last_arrival:
                        max_gap = max(max_gap, now - last_arrival)
                    last_arrival = now
                carry = data[end:][-200:]
                if any(marker in data for marker in END_MARKERS):
                    ended = True
        finally:
            await response.aclose()
    except Exception as exc:  # a refused or cut stream is a result, not a crash of the bench
        return StreamResult(seen, False, time.monotonic() - sent,
                            ((first or time.monotonic()) - sent) * 1000, max_gap * 1000,
                            latencies, f"{type(exc).__name__}: {exc}"[:200])
    return StreamResult(seen, ended and seen == tokens, (last_arrival or time.monotonic()) - sent,
                        ((first or time.monotonic()) - sent) * 1000, max_gap * 1000, latencies)


async def _read_many(path: str, url: str, count: int, tokens: int, rate: int,
                     start_at: float) -> list[StreamResult]:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(60.0)) as client:
        delay = start_at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        return await asyncio.gather(*(_read_one(client, path, url, tokens, rate)
                                      for _ in range(count)))


def _reader(path: str, url: str, count: int, tokens: int, rate: int, start_at: float,
            out: Any) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    results = asyncio.run(_read_many(path, url, count, tokens, rate, start_at))
    out.send([asdict(r) for r in results])
    out.close()


# ---- one level -----------------------------------------------------------------------------

def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


def measure(path: str, url: str, pid: int, runs: int, rate: int, seconds: float, readers: int,
            lag_log: Path | None, baseline_kib: int | None = None) -> dict[str, Any]:
    tokens = max(1, int(seconds * rate))
    context = multiprocessing.get_context("spawn")
    shares = [runs // readers + (1 if i < runs % readers else 0) for i in range(readers)]
    shares = [s for s in shares if s]
    start_at = time.monotonic() + 1.5 + runs / 400  # every reader ready and waiting
    pipes, processes = [], []
    for share in shares:
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(target=_reader,
                                  args=(path, url, share, tokens, rate, start_at, sender))
        process.start()
        pipes.append(receiver)
        processes.append(process)
    lag_offset = lag_log.stat().st_size if lag_log else 0
    while time.monotonic() < start_at - 0.2:
        time.sleep(0.05)
    rss_before, cpu_before = rss_kib(pid), cpu_seconds(pid)
    peak = [rss_before]
    stop = threading.Event()

    def sample_rss() -> None:
        while not stop.wait(0.25):
            peak[0] = max(peak[0], rss_kib(pid))

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    results: list[dict[str, Any]] = []
    for receiver in pipes:
        results.extend(receiver.recv())
    for process in processes:
        process.join()
    stop.set()
    sampler.join()
    cpu = cpu_seconds(pid) - cpu_before
    wall = time.monotonic() - start_at
    lags: list[float] = []
    if lag_log:
        with open(lag_log, errors="replace") as log:
            log.seek(lag_offset)
            for line in log:
                match = LAG.search(line)
                if match:
                    lags.append(float(match.group(1)))
    latencies = [x for r in results for x in r["latencies_ms"]]
    ideal = tokens / rate
    durations = [r["duration"] / ideal for r in results if r["completed"]]
    errors = sorted({r["error"] for r in results if r["error"]})
    return {
        "path": path, "runs": runs, "rate": rate, "tokens": tokens,
        "completed": sum(r["completed"] for r in results),
        "latency_p50_ms": round(_pct(latencies, 0.5), 1),
        "latency_p99_ms": round(_pct(latencies, 0.99), 1),
        "first_token_p99_ms": round(_pct([r["first_ms"] for r in results], 0.99), 1),
        "gap_p99_ms": round(_pct([r["max_gap_ms"] for r in results], 0.99), 1),
        "duration_p50": round(_pct(durations, 0.5), 3),
        "duration_p99": round(_pct(durations, 0.99), 3),
        "cpu_percent": round(100 * cpu / wall, 1),
        "cpu_s": round(cpu, 3),
        "rss_mib": round(peak[0] / 1024, 1),
        "rss_per_run_kib": round(max(0, peak[0] - (baseline_kib or rss_before)) / runs, 1),
        "loop_lag_p99_ms": round(max(lags), 1) if lags else None,
        "errors": errors[:3],
    }


def cpu_cost(url: str, pid: int, readers: int, runs: int, tokens: int = 200,
             rate: int = 2000, repeats: int = 3) -> dict[str, Any]:
    """The gateway's CPU per run start and per token: `runs` runs of one token started at once,
    then `runs` runs of `tokens` tokens (the upstream sends them as fast as `rate`); the
    difference is the tokens' cost, the rest of the first the starts' (each with its end).
    CPU used, not time waited for a core, so other load on the machine changes it far less
    than the wall-clock figures. Median of `repeats`."""
    per_start, per_token = [], []
    for _ in range(repeats):
        small = measure("gateway", url, pid, runs, rate, 1 / rate, readers, None)
        large = measure("gateway", url, pid, runs, rate, tokens / rate, readers, None)
        token = (large["cpu_s"] - small["cpu_s"]) / (runs * (tokens - 1))
        per_token.append(token)
        per_start.append(small["cpu_s"] / runs - token)
        if small["completed"] < runs or large["completed"] < runs:
            raise RuntimeError(f"cost runs did not complete: {small['errors']} {large['errors']}")
    return {"runs": runs, "tokens": tokens,
            "cpu_ms_per_start": round(statistics.median(per_start) * 1e3, 2),
            "cpu_us_per_token": round(statistics.median(per_token) * 1e6, 1),
            "samples_ms_per_start": [round(x * 1e3, 2) for x in per_start],
            "samples_us_per_token": [round(x * 1e6, 1) for x in per_token]}


# ---- output ---------------------------------------------------------------------------------

COLUMNS = [("path", "path"), ("rate", "tok/s"), ("runs", "C"), ("completed", "completed"),
           ("latency_p50_ms", "latency p50 ms"), ("latency_p99_ms", "p99 ms"),
           ("first_token_p99_ms", "first token p99 ms"), ("gap_p99_ms", "largest gap p99 ms"), ("duration_p50", "duration/ideal p50"),
           ("duration_p99", "p99"), ("cpu_percent", "CPU %"), ("rss_mib", "RSS MiB"),
           ("rss_per_run_kib", "KiB/run"), ("loop_lag_p99_ms", "loop lag p99 ms")]


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(title for _, title in COLUMNS) + " |",
             "|" + "|".join("---" if key == "path" else "---:" for key, _ in COLUMNS) + "|"]
    for row in rows:
        cells = []
        for key, _ in COLUMNS:
            value = row.get(key)
            cells.append("–" if value is None else f"{value:,}" if isinstance(value, int)
                         and key != "rate" else str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def chart(rows: list[dict[str, Any]], path: Path, machine: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    colours = {"upstream": "tab:blue", "gateway": "tab:red", "bare": "tab:green"}
    for name in PATHS:
        for rate, style in zip(sorted({r["rate"] for r in rows}), ("-", "--", ":"),
                               strict=False):
            points = [(r["runs"], r["latency_p99_ms"]) for r in rows
                      if r["path"] == name and r["rate"] == rate]
            if points:
                axes.plot(*zip(*points, strict=True), style, marker="o", color=colours[name],
                          label=f"{name}, {rate} tok/s")
    levels = sorted({r["runs"] for r in rows})
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xticks(levels, [str(level) for level in levels])
    axes.minorticks_off()
    axes.set_xlabel("concurrent runs (C)")
    axes.set_ylabel("latency per token, p99 (ms, log scale)")
    axes.set_title("Token latency p99 against concurrency (from leaving the source to the reader)",
                   fontsize=10)
    figure.text(0.01, 0.01, machine, fontsize=7)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout(rect=(0, 0.03, 1, 1))
    figure.savefig(path, dpi=110)


def machine_line() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?")
    load = Path("/proc/loadavg").read_text().split()[:3]
    return (f"{os.cpu_count()} x {cpu}, Python {sys.version.split()[0]}, "
            f"load average {' '.join(load)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)))
    parser.add_argument("--rates", default=",".join(map(str, RATES)))
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--seconds", type=float, default=5.0, help="ideal duration of a run")
    parser.add_argument("--readers", type=int, default=2, help="reader processes")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--adapter", default="auto", help="GATEWAY_MODEL_ADAPTER")
    parser.add_argument("--cost-runs", type=int, default=100,
                        help="runs per batch of the CPU cost measurement (0: skip it)")
    parser.add_argument("--py-spy", help="py-spy binary: profile the gateway at each level "
                                         "into --out/pyspy-<rate>-<C>.txt (raw format)")
    parser.add_argument("--serve", choices=["upstream", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    levels = [int(x) for x in args.levels.split(",")]
    rates = [int(x) for x in args.rates.split(",")]
    paths = args.paths.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    machine_before = machine_line()
    rows: list[dict[str, Any]] = []
    cost: dict[str, Any] | None = None
    for rate in rates:  # fresh processes per rate: each level's memory is measured from idle
        upstream, bare = Source("upstream"), Source("bare")
        gateway = GatewayServer(Path(tempfile.mkdtemp(prefix="bench-concurrency-")), {
            "GATEWAY_MODEL": "openai/paced", "GATEWAY_MODEL_API_BASE": f"{upstream.url}/v1",
            "GATEWAY_MODEL_API_KEY": "sk-bench", "GATEWAY_MODEL_ADAPTER": args.adapter,
            "GATEWAY_LOOP_LAG_LOG_SECONDS": "1"})
        try:
            gateway.start()
            targets = {"upstream": (upstream.url, upstream.pid, None),
                       "gateway": (gateway.url, gateway.process.pid, gateway.log_path),
                       "bare": (bare.url, bare.pid, None)}
            # Warm-up: the gateway's first run pays for lazy imports and the first model call.
            measure("gateway", gateway.url, gateway.process.pid, 2, 50, 1, 1, None)
            time.sleep(1.0)
            baselines = {name: rss_kib(pid) for name, (_, pid, _) in targets.items()}
            for runs in levels:
                for path in paths:
                    url, pid, lag_log = targets[path]
                    spy = None
                    if args.py_spy and path == "gateway":
                        spy = subprocess.Popen(
                            [args.py_spy, "record", "--pid", str(pid), "--format", "raw",
                             "--rate", "200", "--nonblocking", "--threads", "-o",
                             str(args.out / f"pyspy-{rate}-{runs}.txt")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    row = measure(path, url, pid, runs, rate, args.seconds, args.readers,
                                  lag_log, baselines[path])
                    if spy is not None:
                        spy.send_signal(signal.SIGINT)
                        spy.wait(30)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    time.sleep(1.0)
            if cost is None and args.cost_runs and "gateway" in paths:  # after the levels:
                # its runs must not count in the idle RSS the levels are measured from
                cost = cpu_cost(gateway.url, gateway.process.pid, args.readers, args.cost_runs)
                print(json.dumps({"cost": cost}), flush=True)
        finally:
            gateway.stop()
            upstream.stop()
            bare.stop()
    machine = f"{machine_line()} (at the start: {machine_before.rsplit(', ', 1)[1]})"
    rows.sort(key=lambda r: (r["rate"], r["runs"], PATHS.index(r["path"])))
    (args.out / "concurrency.json").write_text(json.dumps(
        {"machine": machine, "cost": cost, "rows": rows}, indent=1))
    table = markdown(rows)
    if cost is not None:
        table += (f"\nGateway CPU per run start (with its end): {cost['cpu_ms_per_start']} ms; "
                  f"per token: {cost['cpu_us_per_token']} µs ({cost['runs']} runs of 1 and of "
                  f"{cost['tokens']} tokens, median of {len(cost['samples_ms_per_start'])}).\n")
    (args.out / "concurrency.md").write_text(f"Machine: {machine}\n\n{table}")
    chart(rows, args.out / "concurrency.png", machine)
    print(f"\nMachine: {machine}\n\n{table}")
    if statistics.mean(r["completed"] / r["runs"] for r in rows) < 1:
        print("some runs did not complete: see `errors` in concurrency.json")


if __name__ == "__main__":
    main()
