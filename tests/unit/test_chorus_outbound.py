"""Chorus's outbound checks (`gateway/runs/automation/outbound.py`, shared with webhooks): a URL is called only if its
host is listed and every address it resolves to is public or listed."""

from __future__ import annotations

import asyncio

from gateway.runs.automation import outbound


def refused(url: str, allowed: list[str]) -> bool:
    try:
        asyncio.run(outbound.check(url, allowed))
    except outbound.NotAllowed:
        return True
    return False


def test_a_listed_name_that_resolves_to_a_private_address_is_refused() -> None:
    assert refused("http://localhost:9/cb", ["localhost"])
    assert not refused("http://localhost:9/cb", ["localhost", "127.0.0.0/8"])
    assert not refused("http://127.0.0.1:9/cb", ["127.0.0.1"])


def test_names_schemes_and_credentials() -> None:
    assert refused("http://127.0.0.1:9/cb", [])
    assert refused("ftp://127.0.0.1/cb", ["127.0.0.1"])
    assert refused("http://user:pw@127.0.0.1/cb", ["127.0.0.1"])
    assert refused("http://169.254.169.254/latest", ["*.example.org"])
    assert outbound.name_allowed("api.example.org", ["*.example.org"])
    assert not outbound.name_allowed("example.org.evil.com", ["*.example.org"])
    assert not outbound.name_allowed("evilexample.org", ["*.example.org"])
