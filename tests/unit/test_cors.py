"""CORS as a browser app on another origin needs it: preflight with the React SDK's headers, and
CORS headers on every answer, including the 500 problem of an unexpected error (without them
the browser hides the problem and reports only "Connection error."). Development mode answers
loopback origins and `Host` names only (tests/integration/test_development_mode.py has the
rest: a started gateway, WebSockets, keys)."""

from __future__ import annotations

import httpx
from starlette.requests import Request
from starlette.routing import Route

from gateway.app import create_app
from gateway.config import Settings

ORIGIN = "http://localhost:5173"
# What @tambo-ai/react 1.3 sends besides the simple headers (contract 3.2).
SDK_HEADERS = ("content-type,x-api-key,x-stainless-retry-count,x-stainless-timeout,"
               "x-stainless-lang,x-stainless-package-version,x-stainless-os,x-stainless-arch,"
               "x-stainless-runtime,x-stainless-runtime-version,x-tambo-react-version")


async def _boom(_: Request) -> None:
    raise RuntimeError("an unexpected bug")


def _client(base_url: str = "http://gateway", **settings: object) -> httpx.AsyncClient:
    """The app in-process without its lifespan: these answers need no database or model. With
    keys (not development mode) unless the settings say otherwise."""
    app = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:",
                              **{"api_keys": {"k1": "default"}, **settings}))
    app.router.routes.append(Route("/boom", _boom, methods=["POST"]))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url=base_url)


async def test_preflight_allows_the_react_sdk_headers() -> None:
    async with _client() as client:
        response = await client.options("/v1/threads/runs", headers={
            "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": SDK_HEADERS})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"
    assert "POST" in response.headers["access-control-allow-methods"]
    allowed = {h.strip().lower() for h in response.headers["access-control-allow-headers"].split(",")}
    assert set(SDK_HEADERS.split(",")) <= allowed


async def test_unexpected_error_still_carries_cors_headers() -> None:
    async with _client() as client:
        response = await client.post("/boom", headers={"Origin": ORIGIN})
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["access-control-allow-origin"] == "*"
    assert "an unexpected bug" not in response.text


async def test_problem_answers_carry_cors_headers() -> None:
    async with _client() as client:
        response = await client.get("/v1/nowhere", headers={"Origin": ORIGIN})
    assert response.status_code == 404
    assert response.headers["access-control-allow-origin"] == "*"
    assert "X-Run-Id" in response.headers["access-control-expose-headers"]


async def test_development_mode_answers_loopback_origins_and_hosts_only() -> None:
    async with _client("http://127.0.0.1:8000", api_keys={}) as client:
        preflight = await client.options("/v1/threads/runs", headers={
            "Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
        assert preflight.status_code == 200
        for origin in ("https://evil.example", "null", "http://localhost.evil.example"):
            refused = await client.options("/v1/threads/runs", headers={
                "Origin": origin, "Access-Control-Request-Method": "POST"})
            assert refused.status_code == 403, origin
            assert "access-control-allow-origin" not in refused.headers
            assert refused.json()["code"] == "LOOPBACK_ONLY"
            plain = await client.post("/boom", headers={"Origin": origin})
            assert plain.status_code == 403 and "access-control-allow-origin" not in plain.headers
        for host in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example"):
            refused = await client.get("/health", headers={"Host": host})
            assert refused.status_code == 403 and refused.json()["code"] == "LOOPBACK_ONLY"
            assert "Host" in refused.json()["detail"]
        for host in ("localhost", "localhost:8000", "127.0.0.1", "[::1]:8000", "127.0.0.5"):
            answered = await client.post("/boom", headers={"Host": host, "Origin": ORIGIN})
            assert answered.status_code == 500, host  # reached the route


async def test_with_keys_any_origin_and_host_may_call() -> None:
    async with _client() as client:
        response = await client.post("/boom", headers={"Origin": "https://app.example"})
    assert response.status_code == 500
    assert response.headers["access-control-allow-origin"] == "*"
