"""Chorus's outbound checks (`gateway/runs/automation/outbound.py`, shared with webhooks): a URL is called only if its
host is listed and every address it resolves to is public or listed."""

from __future__ import annotations

import asyncio

import pytest

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


def test_ipv6_forms_of_an_ipv4_address_count_as_that_address(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A listed name resolving to NAT64 (`64:ff9b::/96`, `64:ff9b:1::/48`), 6to4 (`2002::/16`),
    Teredo, IPv4-mapped or -compatible forms of a private address is refused as that address
    is; the same forms of a public one pass, and so do private ones inside a listed network."""
    answers: list[str] = []

    async def resolve(host: str, port: int) -> list[outbound.IpAddress]:
        return [outbound.ipaddress.ip_address(a) for a in answers]

    monkeypatch.setattr(outbound, "resolve", resolve)
    private = ["64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1", "64:ff9b:1::a00:1", "2002:a9fe:a9fe::1",
               "2002:7f00:1::", "::ffff:10.0.0.1", "::127.0.0.1",
               "2001:0:4136:e378:8000:63bf:80ff:fffe"]  # Teredo: client 127.0.0.1
    for address in private:
        answers[:] = [address]
        assert refused("https://hooks.example.org/cb", ["hooks.example.org"]), address
    for address in ("64:ff9b::808:808", "2002:808:808::1"):
        answers[:] = [address]
        assert not refused("https://hooks.example.org/cb", ["hooks.example.org"]), address
    answers[:] = ["64:ff9b::a00:1"]
    assert not refused("https://hooks.example.org/cb", ["hooks.example.org", "10.0.0.0/8"])
