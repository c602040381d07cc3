"""Development mode from outside: it ends for good with the first key, and while it lasts it
answers this machine only (client, `Host`, browser `Origin`, WebSocket `Origin`).

On SQLite one process; with `GATEWAY_TEST_BACKEND=postgres` three behind a round-robin proxy on
PostgreSQL and Redis, so every process must have left development mode.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.integration.test_limits import keys_command
from tests.support import engines
from tests.support.gateway_server import GatewayCluster, GatewayServer
from tests.support.run_stream import wait_for

FOREIGN = "https://evil.example"
LOOPBACK_ORIGIN = "http://localhost:5173"
CACHE_SECONDS = 1  # GATEWAY_KEY_CACHE_SECONDS: the documented bound on the end of development mode


@pytest.fixture
def fresh_gateway(tmp_path) -> Iterator[GatewayServer | GatewayCluster]:
    """A gateway with no key of any kind: development mode, as `./scripts/serve` starts."""
    env = {"GATEWAY_KEY_CACHE_SECONDS": str(CACHE_SECONDS)}
    server = (GatewayCluster(tmp_path, env, size=3) if engines.ENGINES is not None
              else GatewayServer(tmp_path, env))
    server.start()
    yield server
    server.stop()


def processes(gateway: GatewayServer | GatewayCluster) -> list[GatewayServer]:
    return gateway.servers if isinstance(gateway, GatewayCluster) else [gateway]


def env_of(gateway: GatewayServer | GatewayCluster) -> dict[str, str]:
    return gateway.servers[0].env if isinstance(gateway, GatewayCluster) else gateway.env


def create_key(gateway: GatewayServer | GatewayCluster, *options: str) -> str:
    out = keys_command(env_of(gateway), gateway.workdir, "create", "--project", "shop",
                       *options)
    return out.strip().splitlines()[-1]


def status(url: str, key: str | None) -> int:
    headers = {"x-api-key": key} if key is not None else {}
    return httpx.get(f"{url}/v1/threads", params={"userKey": "u"}, headers=headers,
                     timeout=30).status_code


def test_the_first_keyless_request_after_the_bound_is_refused_by_every_process(
        fresh_gateway: GatewayServer | GatewayCluster) -> None:
    """docs/security.md: the first key ends development mode in every process within
    GATEWAY_KEY_CACHE_SECONDS. Each process answered keyless requests just before (its
    answer is fresh); the key is made by another process (`gateway keys create`); once the
    bound has passed, exactly one keyless request to each process is refused: no retry."""
    urls = [server.url for server in processes(fresh_gateway)]
    for url in urls:
        assert status(url, None) == 200
    create_key(fresh_gateway)
    time.sleep(CACHE_SECONDS)
    assert [status(url, None) for url in urls] == [401] * len(urls)
    assert [status(url, "dev") for url in urls] == [401] * len(urls)


def test_revoking_the_last_managed_key_leaves_every_request_401(
        fresh_gateway: GatewayServer | GatewayCluster) -> None:
    urls = [server.url for server in processes(fresh_gateway)]
    assert all(status(url, key) == 200 for url in urls for key in (None, "anything"))

    key = create_key(fresh_gateway, "--expires", "30d")
    for url in urls:  # within GATEWAY_KEY_CACHE_SECONDS (1 s here), on every process
        wait_for(lambda url=url: status(url, "anything") == 401, timeout=10,
                 what="development mode to end")
        assert status(url, key) == 200

    listing = keys_command(env_of(fresh_gateway), fresh_gateway.workdir, "list")
    key_id = next(line.split("\t")[0] for line in listing.splitlines()
                  if line.split("\t")[2] == key[:8] + "...")
    keys_command(env_of(fresh_gateway), fresh_gateway.workdir, "revoke", "--project", "shop",
                 key_id)
    for url in urls:
        wait_for(lambda url=url: status(url, key) == 401, timeout=10, what="the key to be revoked")
        for presented in (None, "anything", "gwk_made-up", key):
            response = httpx.get(f"{url}/v1/threads", params={"userKey": "u"}, timeout=30,
                                 headers={"x-api-key": presented} if presented else {})
            assert response.status_code == 401, (presented, response.text)
            assert response.json()["code"] == "UNAUTHORIZED"
        started = httpx.post(f"{url}/v1/threads/runs", params={"userKey": "u"}, timeout=30,
                             json={"message": {"role": "user", "content": "hi"}})
        assert started.status_code == 401


@pytest.mark.sqlite_only  # each process's own Host/Origin check; the key test above is on both
def test_development_mode_refuses_a_foreign_host_and_origin(
        fresh_gateway: GatewayServer | GatewayCluster) -> None:
    url = fresh_gateway.url
    threads = f"{url}/v1/threads"
    rebound = httpx.get(threads, params={"userKey": "u"}, headers={"Host": "evil.example:80"})
    assert rebound.status_code == 403 and rebound.json()["code"] == "LOOPBACK_ONLY"

    for method in ("GET", "OPTIONS"):
        foreign = httpx.request(method, threads, params={"userKey": "u"}, headers={
            "Origin": FOREIGN, "Access-Control-Request-Method": "GET"})
        assert foreign.status_code == 403, foreign.text
        assert "access-control-allow-origin" not in foreign.headers
        local = httpx.request(method, threads, params={"userKey": "u"}, headers={
            "Origin": LOOPBACK_ORIGIN, "Access-Control-Request-Method": "GET"})
        assert local.status_code == 200
        assert local.headers["access-control-allow-origin"] in ("*", LOOPBACK_ORIGIN)

    thread = httpx.post(threads, json={"userKey": "u"}).json()["id"]
    socket_url = f"ws{url.removeprefix('http')}/v1/timbal/threads/{thread}/stream?userKey=u"
    with pytest.raises(InvalidStatus) as refused:
        connect(socket_url, origin=FOREIGN, open_timeout=10)  # type: ignore[arg-type]
    assert refused.value.response.status_code == 403
    with connect(socket_url, origin=LOOPBACK_ORIGIN, open_timeout=10) as ws:  # type: ignore[arg-type]
        ws.send('{"c":"sync"}')
        assert '"synced"' in str(ws.recv(timeout=10))
