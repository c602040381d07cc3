"""The front (`gateway/server/front.py`), the one layer before the routes: every answer it or the
error handlers make (a 404, a 413 before the body is read, development mode's 403, the 500 of
an unexpected error) carries the request id and `nosniff`, CORS headers where CORS applies (not
on the guard's refusal, which comes before CORS), is counted once in the HTTP metrics, and an
unexpected error still reaches the server to be logged; a handler that fails itself still gets
the 500. test_cors.py has the CORS answers. Every test runs on the front and on the same checks
as starlette's middleware (`GATEWAY_STOCK_RUNTIME=front`, `server/stock_front.py`)."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import REGISTRY
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import Route

from gateway.app import create_app
from gateway.config import Settings

ORIGIN = "http://localhost:5173"
STOCK: tuple[str, ...] = ()


@pytest.fixture(autouse=True, params=[(), ("front",)], ids=["front", "stock-front"])
def _front(request: pytest.FixtureRequest) -> None:
    global STOCK
    STOCK = request.param


async def _boom(_: Request) -> None:
    raise RuntimeError("an unexpected bug")


def _client(raise_app_exceptions: bool = False, **settings: object) -> httpx.AsyncClient:
    app = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:", max_body_bytes=100,
                              **{"api_keys": {"k1": "default"}, "stock_runtime": STOCK,
                                 **settings}))
    app.router.routes.append(Route("/boom", _boom, methods=["POST"]))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=raise_app_exceptions)
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000")


def _counted(method: str, route: str, status: str) -> float:
    return REGISTRY.get_sample_value("gateway_http_requests_total", {
        "method": method, "route": route, "status": status}) or 0.0


@pytest.mark.parametrize(("method", "path", "body", "route", "status"), [
    ("POST", "/boom", b"{}", "/boom", 500),
    ("GET", "/v1/nowhere", None, "unmatched", 404),
    ("POST", "/v1/threads/runs", b"x" * 101, "unmatched", 413),
])
async def test_answers_before_and_around_the_routes_carry_the_front_headers_and_are_counted(
        method: str, path: str, body: bytes | None, route: str, status: int) -> None:
    before = _counted(method, route, str(status))
    async with _client() as client:
        response = await client.request(method, path, content=body,
                                        headers={"Origin": ORIGIN, "X-Request-Id": "req-front-1"})
    assert response.status_code == status
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["x-request-id"] == "req-front-1"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["access-control-allow-origin"] == "*"
    assert "X-Run-Id" in response.headers["access-control-expose-headers"]
    assert _counted(method, route, str(status)) == before + 1


async def test_a_preflight_carries_its_own_cors_headers_only() -> None:
    async with _client() as client:
        response = await client.options("/v1/threads/runs", headers={
            "Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.headers["access-control-max-age"] == "600"
    assert "access-control-expose-headers" not in response.headers  # a simple answer's header
    assert response.headers["x-request-id"]


async def test_development_refusal_comes_before_cors_and_is_counted() -> None:
    before = _counted("POST", "unmatched", "403")
    async with _client(api_keys={}) as client:
        response = await client.post("/boom", headers={"Origin": "https://evil.example"})
    assert response.status_code == 403 and response.json()["code"] == "LOOPBACK_ONLY"
    assert "access-control-allow-origin" not in response.headers
    assert response.headers["x-request-id"] and response.headers["x-content-type-options"]
    assert _counted("POST", "unmatched", "403") == before + 1


async def test_an_unexpected_error_is_answered_then_raised_for_the_server_to_log() -> None:
    async with _client(raise_app_exceptions=True) as client:
        with pytest.raises(RuntimeError, match="an unexpected bug"):
            await client.post("/boom")


async def test_a_handler_that_fails_still_gets_the_500_problem() -> None:
    async def failing(request: Request, exc: Exception) -> None:
        raise ValueError("the handler's own bug")

    async with _client() as client:
        app = client._transport.app  # type: ignore[attr-defined]
        app.exception_handlers[HTTPException] = failing  # before the first request builds it
        response = await client.get("/v1/nowhere", headers={"Origin": ORIGIN})  # the router's 404
    assert response.status_code == 500
    assert response.json()["code"] == "INTERNAL_ERROR"
    assert response.headers["access-control-allow-origin"] == "*"
    assert "bug" not in response.text
