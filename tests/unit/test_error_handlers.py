"""Only the request's own validation is the client's fault: a pydantic error raised anywhere
else (a response model the server filled wrongly) is answered as a server error, not 400."""

from __future__ import annotations

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from gateway.api.errors import HANDLERS
from gateway.protocol.problems import InvalidRequest


class Shape(BaseModel):
    count: int


def _error() -> ValidationError:
    try:
        Shape.model_validate({"count": "many"})
    except ValidationError as error:
        return error
    raise AssertionError("unreachable")


async def bad_request_body(_: Request) -> Response:
    raise InvalidRequest(_error())


async def bad_response_body(_: Request) -> Response:
    raise _error()


def client() -> TestClient:
    app = Starlette(routes=[Route("/request", bad_request_body),
                            Route("/response", bad_response_body)],
                    exception_handlers=HANDLERS)  # type: ignore[arg-type]
    return TestClient(app, raise_server_exceptions=False)


def test_an_invalid_request_body_is_a_400_naming_the_field() -> None:
    response = client().get("/request")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "VALIDATION_ERROR" and "count" in body["errors"]


def test_a_response_that_fails_its_model_is_a_500_without_details() -> None:
    response = client().get("/response")
    assert response.status_code == 500
    body = response.json()
    assert body["code"] == "INTERNAL_ERROR" and "count" not in response.text
