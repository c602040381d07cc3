"""An outage of a part the process depends on is said once when it begins and once when it
ends, however many requests, runs and polls meet it; meanwhile the metric holds since when."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import REGISTRY

from gateway.observability import outages


def since_metric(part: str) -> float | None:
    return REGISTRY.get_sample_value("gateway_dependency_down_since_seconds", {"part": part})


@pytest.mark.sqlite_only
def test_an_outage_is_logged_once_with_since_when(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=outages.__name__)
    outages.up("redis")  # (an earlier test in this process may have left one open)
    caplog.clear()
    first = outages.down("redis", "connection refused")
    for _ in range(50):  # every request and every run that meets it
        assert outages.down("redis", "connection refused") == first
    assert outages.current() == {"redis": first}
    assert since_metric("redis") == first / 1000
    outages.up("redis")
    outages.up("redis")  # already over: nothing more
    assert outages.current() == {} and since_metric("redis") == 0
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("redis unreachable since ") and "connection refused" in lines[0]
    assert lines[1].startswith("redis reachable again, after ")
