"""A Redis outage does not lift a key's quotas: with the shared counters gone (the real Redis
killed under a running gateway), a key's runs per minute still hold, checked against the
process's own count (`GATEWAY_QUOTA_OUTAGE=local`, the default), and the starts admitted so are
counted in `/metrics`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import scripted_env
from tests.integration.test_limits import within_one_minute
from tests.support.engines import RedisServer
from tests.support.inprocess_app import InProcessGateway
from tests.support.run_stream import message
from tests.support.scripted_model import ScriptedModel

# Starts its own Redis (to kill it) whatever the configuration.
pytestmark = [pytest.mark.sqlite_only,
              pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server is not installed (scripts/test installs it)")]

KEY = "outage-test-key"


def test_a_redis_outage_does_not_lift_a_keys_runs_per_minute(
        scripted_model: ScriptedModel, tmp_path: Path) -> None:
    redis = RedisServer(tmp_path).start()
    gateway = InProcessGateway(tmp_path / "gw", scripted_env(
        scripted_model, GATEWAY_REDIS_URL=redis.url, GATEWAY_API_KEYS=KEY,
        GATEWAY_KEY_RUNS_PER_MINUTE="3")).start()
    body = {"message": message("go"), "thread": {"userKey": "u"}}
    try:
        within_one_minute(20)
        with gateway.client(timeout=30, headers={"x-api-key": KEY}) as http:
            assert http.post("/v1/threads/runs", json=body).status_code == 200
            redis.stop()  # killed: every start from now on finds no shared counters
            statuses = [http.post("/v1/threads/runs", json=body).status_code
                        for _ in range(2)]
            over = http.post("/v1/threads/runs", json=body)
            metrics = http.get("/metrics").text
    finally:
        gateway.stop()
        redis.stop()
    assert statuses == [200, 200]
    assert over.status_code == 429, over.text
    assert over.json()["code"] == "RATE_LIMITED" and over.json()["limitScope"] == "apiKey"
    assert 'gateway_quota_outage_admissions_total{checked="local"} 2.0' in metrics
