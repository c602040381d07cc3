"""A dialect is its folder plus one registry line: a dialect added to the registry is mounted by
`create_app`, documented by the OpenAPI builder (its operations, its event union, its SSE
messages) and published under `schemas/`, with nothing else changed."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from gateway.app import create_app
from gateway.config import Settings
from gateway.dialects import registry
from gateway.dialects.base import EventSchema, WireDialect
from gateway.openapi.document import build
from gateway.openapi.schema_gen import route_mismatches
from gateway.protocol.operations import KEYS, Operation
from gateway.protocol.schema_files import Schemas, Union, schema_files


class EchoEvent(BaseModel):
    """The one event of the echo dialect."""

    type: Literal["ECHO"]
    text: str


async def echo(request: Request) -> Response:
    return PlainTextResponse("data: {}\n\n", media_type="text/event-stream")


PATH = "/v1/echo/threads/{thread_id}"
ECHO = WireDialect(
    "echo", [Route(PATH, echo, methods=["GET"])],
    (Operation("GET", PATH, "echoThread", "A thread's echo", "echo", params=KEYS,
               stream="EchoEvent"),),
    {"echoThread": {"stream": "id: 1\ndata: {\"type\":\"ECHO\",\"text\":\"hi\"}\n\n"}},
    EventSchema("EchoEvent", EchoEvent),
    Schemas(unions=(Union("echo.event", EchoEvent, "echo/event.json", "An echo event."),)))


@pytest.fixture
def with_echo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "DIALECTS", (*registry.DIALECTS, ECHO))


def test_the_registry_holds_the_four_dialects_in_order() -> None:
    assert [d.name for d in registry.DIALECTS] == ["tambo", "agui", "timbal", "chorus"]


@pytest.mark.usefixtures("with_echo")
def test_a_registered_dialect_is_mounted_documented_and_published() -> None:
    routes = create_app(Settings()).routes
    assert any(getattr(r, "path", None) == PATH for r in routes)
    assert route_mismatches(routes) == []
    document = build()
    operation = document["paths"]["/v1/echo/threads/{threadId}"]["get"]
    stream = operation["responses"]["200"]["content"]["text/event-stream"]
    assert stream["schema"] == {"$ref": "#/components/schemas/EchoSseMessage"}
    assert stream["example"].startswith("id: 1\n")
    schemas = document["components"]["schemas"]
    assert schemas["EchoSseMessage"]["properties"]["data"]["contentSchema"] == {
        "$ref": "#/components/schemas/EchoEvent"}
    assert "EchoEvent" in schemas and "TamboSseMessage" in schemas
    assert {"name": "echo"} in document["tags"]
    files = schema_files(d.schemas for d in registry.DIALECTS)
    assert "echo/event.json" in files and "tambo/event.json" in files
