"""The soak, CI-sized: many clients at once starting runs, reading, dropping the connection,
reconnecting with their cursor and cancelling, against a real gateway; then every run is
terminal, every reader saw each event exactly once, every finished run's stored text is what
the upstream sent, no thread is locked, and the gateway's RSS is back within 10 % (see
`tests/support/soak.py`). `bench/soak.py` runs the same code at full size (200 clients, 60 s).

Size: `SOAK_CLIENTS` (default 24) and `SOAK_SECONDS` (default 6). On SQLite one process; on
PostgreSQL + Redis two behind HAProxy, as the session's gateway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import GatewayCluster, GatewayServer
from tests.support.scripted_model import ScriptedModel
from tests.support.soak import SoakSize
from tests.support.soak_report import SoakReport, processes, run_soak

# HAProxy's health check as in deploy/haproxy.cfg (1 s, three misses), not the suite's
# 300 ms / one miss: on a loaded machine both processes can miss one check under the soak, and
# the proxy then answers 503 itself.
PROXY_CHECK = "inter 1s fall 3 rise 2"
GRACE = 3.0  # a reconnecting reader is away 1 s at most; an abandoned run is cancelled after this


@pytest.fixture(scope="module")
def soak_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[GatewayServer | GatewayCluster]:
    """A gateway of its own: a fresh process whose RSS the soak alone moves."""
    env = scripted_env(scripted_model, GATEWAY_DISCONNECT_GRACE_SECONDS=str(GRACE))
    workdir = tmp_path_factory.mktemp("soak")
    server = (GatewayCluster(workdir, env, check=PROXY_CHECK) if engines.ENGINES is not None
              else GatewayServer(workdir, env))
    server.start()
    yield server
    server.stop()


def describe(report: SoakReport) -> str:
    result, verdict = report.result, report.verdict
    return (f"{len(result.runs)} runs on {len(result.threads)} threads by "
            f"{report.size.clients} clients in {result.seconds:.0f} s; statuses "
            f"{verdict.statuses}, errors {verdict.errors}, {verdict.reconnected_readers} readers "
            f"reconnected, {verdict.exact_texts} exact texts; RSS KiB before {report.rss_before}"
            f" peak {report.rss_peak} after {report.rss_after}; phases (s) "
            f"{ {k: round(v, 1) for k, v in report.phases.items()} }")


def test_soak(soak_gateway: GatewayServer | GatewayCluster, scripted_model: ScriptedModel):
    report = asyncio.run(run_soak(soak_gateway, scripted_model, SoakSize.from_env(), GRACE))
    print(describe(report))
    assert report.problems == [], "\n".join([describe(report), *report.problems[:30]])
    # The soak did what it is for: every plan ran, readers came back, runs were cancelled by
    # their clients and by the disconnect grace, and most finished.
    result, verdict = report.result, report.verdict
    assert all(result.count(plan) > 0 for plan in ("whole", "reconnect", "cancel", "abandon"))
    assert verdict.reconnected_readers > 0
    assert verdict.statuses.get("completed", 0) > verdict.statuses.get("cancelled", 0) > 0


@pytest.mark.skipif(engines.backend() != "postgres",
                    reason="needs the PostgreSQL + Redis configuration (SQLite is a file in "
                    "the gateway's process: it cannot become unreachable)")
def test_soak_through_a_database_outage(soak_gateway: GatewayServer | GatewayCluster,
                                        scripted_model: ScriptedModel):
    """PostgreSQL stopped for 3 s in the middle of a (smaller) soak: the runs it hits go on or
    end with one retryable `RUN_ERROR`, every reader still sees each event once, and the
    gateway recovers by itself: `/ready` is 200 again on every process and a new run on every
    thread of the soak works (checked by `run_soak`). Starts refused with 503 meanwhile are
    expected. `tests/integration/test_scale_out.py` has the same outage under one followed
    run, with its replay checked event by event."""
    assert engines.ENGINES is not None
    postgres = engines.ENGINES.postgres

    async def outage() -> None:
        await asyncio.to_thread(postgres.pause)
        await asyncio.sleep(3)
        await asyncio.to_thread(postgres.resume)

    size = SoakSize.from_env(clients=12, seconds=6.0)
    report = asyncio.run(run_soak(soak_gateway, scripted_model, size, GRACE, fault=outage,
                                  allowed_errors=frozenset({"DATABASE_UNAVAILABLE",
                                                            "RUN_LOST"})))
    print(describe(report))
    assert report.problems == [], "\n".join([describe(report), *report.problems[:30]])
    for server in processes(soak_gateway):
        assert httpx.get(f"{server.url}/ready", timeout=10).status_code == 200
