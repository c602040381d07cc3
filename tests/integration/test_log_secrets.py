"""No log line of a real server carries a Chorus connection's secret: the secret is the path
(`/v1/chorus/{secret}`), and the access log writes every request's path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_chorus import cli
from tests.support.gateway_server import GatewayServer

# Starts its own process (its log file is what is read), whatever the configuration.
pytestmark = pytest.mark.sqlite_only


def test_the_access_log_never_shows_a_connection_secret(tmp_path: Path) -> None:
    server = GatewayServer(tmp_path / "gw", {"GATEWAY_API_KEYS": "log-test-key",
                                             "GATEWAY_CHORUS_ALLOWED_HOSTS": "127.0.0.1",
                                             "GATEWAY_LOG_FORMAT": "json"},
                           args=("--log-level", "info")).start()
    try:
        out = cli(server, "connect", "--agent", "default", "--url", "http://gateway.test")
        path = out.strip().splitlines()[-1].removeprefix("http://gateway.test")
        secret = path.rsplit("/", 1)[1]
        assert secret.startswith("chs_") and len(secret) > 20
        with server.client(timeout=30) as http:
            # A body the route refuses, a query string, and a method it does not take: each
            # request is one access-log line with the path in it.
            assert http.post(path, json={"channel": {"id": "C1"}}).status_code == 400
            assert http.post(f"{path}?x=1", json={}).status_code == 400
            assert http.get(path).status_code == 405
            assert http.get("/health").status_code == 200  # logged after the others
        server.stop()
        log = server.log()
    finally:
        server.kill()
    assert '"GET /health' in log, log[-2000:]  # the access log was written
    assert secret not in log and secret[4:] not in log
    assert log.count("/v1/chorus/[redacted]") >= 3
