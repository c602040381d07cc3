"""Fixtures of the browser test: the built example app, served, and one Chromium for the module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import artifacts_dir
from tests.support.gateway_server import GatewayServer

from .harness import Browser, build_app, require_tools, static_server

USER_KEY = "e2e-user"


@pytest.fixture(scope="module")
def shots() -> Path:
    """Where each step's screenshot goes (test-artifacts/ is gitignored, CI keeps it)."""
    path = artifacts_dir() / "e2e"
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("*.png"):
        old.unlink()
    return path


@pytest.fixture(scope="module")
def app_url(gateway: GatewayServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_tools()
    dist = build_app(tmp_path_factory.mktemp("react-dist"), gateway.url, USER_KEY)
    with static_server(dist) as url:
        yield url


@pytest.fixture(scope="module")
def browser(app_url: str, gateway: GatewayServer, shots: Path) -> Iterator[Browser]:
    driver = Browser(app_url, gateway.url, shots / "browser.log")
    yield driver
    driver.close()
