"""CORS as a browser app on another origin needs it: preflight with the React SDK's headers, and
CORS headers on every answer, including the 500 problem of an unexpected error (without them
the browser hides the problem and reports only "Connection error.")."""

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


def _client() -> httpx.AsyncClient:
    """The app in-process without its lifespan: these answers need no database or model."""
    app = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:"))
    app.router.routes.append(Route("/boom", _boom, methods=["POST"]))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://gateway")


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
