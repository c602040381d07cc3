"""A whole soak: warm-up, RSS before, the soak (optionally with a fault), everything at rest,
RSS after, the checks; one `SoakReport` with the figures and the problems found."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tests.support.gateway_server import GatewayCluster, GatewayServer
from tests.support.scripted_model import ScriptedModel
from tests.support.soak import PLANS, SoakResult, SoakSize, soak
from tests.support.soak_checks import (
    Verdict,
    idle_gauges,
    new_run_on_each_thread,
    rss_kib,
    settle,
    verify,
)


def processes(server: GatewayServer | GatewayCluster) -> list[GatewayServer]:
    return server.servers if isinstance(server, GatewayCluster) else [server]


@dataclass
class SoakReport:
    """Everything a soak measured and found; `problems` empty means it passed."""

    size: SoakSize
    result: SoakResult
    verdict: Verdict
    rss_before: dict[int, int]  # KiB per gateway process, after the warm-up and a pause
    rss_peak: dict[int, int]
    rss_after: dict[int, int]  # after the soak, every run ended, and the same pause
    gauges: dict[str, dict[str, float]]
    problems: list[str]
    phases: dict[str, float] = field(default_factory=dict)  # seconds each step took

    def rss_growth(self) -> dict[int, float]:
        """Per process, RSS after over RSS before, minus one."""
        return {pid: self.rss_after[pid] / self.rss_before[pid] - 1 for pid in self.rss_before}


async def sample_rss(pids: list[int], peak: dict[int, int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        for pid in pids:
            peak[pid] = max(peak.get(pid, 0), rss_kib(pid))
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except asyncio.TimeoutError:
            pass


async def run_soak(server: GatewayServer | GatewayCluster, model: ScriptedModel,
                   size: SoakSize, grace: float, seed: int = 1,
                   fault: Callable[[], Awaitable[None]] | None = None,
                   allowed_errors: frozenset[str] = frozenset(),
                   max_rss_growth: float = 0.10, settle_pause: float = 5.5) -> SoakReport:
    """Warm up, measure RSS, soak, let everything come to rest, measure again, verify.

    The warm-up is a shorter soak at the same number of clients, so the "before" RSS already
    holds what the first requests import and build (litellm, the ORM, pools, buffers at that
    concurrency); growth after that is what the soak itself leaves behind. Each RSS reading
    follows `settle_pause` seconds with nothing running (longer than a finished run's log
    lingers in memory, `registry.LINGER_SECONDS`)."""
    phases: dict[str, float] = {}
    clock = time.monotonic()

    def phase(name: str) -> None:
        nonlocal clock
        phases[name], clock = time.monotonic() - clock, time.monotonic()

    pids = [p.process.pid for p in processes(server) if p.process is not None]
    rest_timeout = grace + size.tokens[1] * size.token_interval + 60
    warm = SoakSize(size.clients, max(2.0, size.seconds / 6), size.token_interval,
                    size.tokens, size.max_away)
    # (No abandoned runs: they would keep the warm-up going for the grace.)
    warmup = await soak(server.url, model, warm, grace, seed=seed + 1,
                        plans={p: w for p, w in PLANS.items() if p != "abandon"})
    await settle(server.url, warmup, rest_timeout)
    await asyncio.sleep(settle_pause)
    before = {pid: rss_kib(pid) for pid in pids}
    phase("warm-up")

    peak: dict[int, int] = {}
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_rss(pids, peak, stop))
    result = await soak(server.url, model, size, grace, seed=seed, fault=fault)
    phase("soak")
    problems = await settle(server.url, result, rest_timeout)
    stop.set()
    await sampler
    phase("settle")
    # Checking starts no run, so it may use the pause before the second reading.
    pause_ends = time.monotonic() + settle_pause
    verdict = await verify(server.url, result, grace, allowed_errors)
    problems += verdict.problems
    phase("verify")
    await asyncio.sleep(max(0.0, pause_ends - time.monotonic()))
    after = {pid: rss_kib(pid) for pid in pids}
    gauges = await idle_gauges([p.url for p in processes(server)])
    phase("pause")
    problems += await new_run_on_each_thread(server.url, result)
    phase("new runs")
    problems += [f"refused: {r}" for r in result.refused if not allowed_refusal(r, fault)]
    problems += [f"run {r.run_id} ({r.plan}): {r.cut} stream(s) ended before the run did"
                 for r in result.runs if r.cut and fault is None]
    for url, values in gauges.items():
        if any(values.values()):
            problems.append(f"{url}: still active after the soak: {values}")
    report = SoakReport(size, result, verdict, before, peak, after, gauges, problems, phases)
    for pid, growth in report.rss_growth().items():
        if growth > max_rss_growth:
            problems.append(f"process {pid}: RSS {before[pid]} KiB before, {after[pid]} KiB "
                            f"after ({growth:+.1%})")
    if not result.runs:
        problems.append("no run was started")
    return report


def allowed_refusal(refusal: str, fault: object) -> bool:
    """During an outage a request may be refused with 503 (`DATABASE_UNAVAILABLE`) or its
    connection break off (`ReadError: ...`); without one, nothing may be refused."""
    words = refusal.split()
    return fault is not None and ("503" in words[:2] or words[0].endswith(":"))
