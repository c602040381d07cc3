"""Component state: `GET|POST /v1/threads/{id}/components/{componentId}/state`.

HTTP only: the revision travels as an ETag (`"<revision>"`), so a client can refuse to overwrite
a newer state with `If-Match`; every rule about the state itself is in `runs.components.state`,
which server tools share.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..protocol.tambo import ComponentStateResponse, ComponentStateUpdate, wire
from ..runs.components.state import ComponentStates
from .context import json_body, services, thread_for

PATH = "/v1/threads/{thread_id}/components/{component_id}/state"


def component_states(request: Request) -> ComponentStates:
    return services(request).runs.components


def etag(revision: int) -> str:
    return f'"{revision}"'


def entity_tags(header: str | None) -> set[int] | None:
    """The revisions an `If-Match` / `If-None-Match` header names; None for absent or `*`.

    A tag that is not one of our revisions matches nothing (so `If-Match` with it fails).
    """
    if header is None or header.strip() == "*":
        return None
    revisions: set[int] = set()
    for tag in header.split(","):
        value = tag.strip().removeprefix("W/").strip('"')
        if value.isdigit():
            revisions.add(int(value))
    return revisions


def state_response(component_id: str, state: dict[str, Any], revision: int) -> JSONResponse:
    body = ComponentStateResponse(componentId=component_id, state=state, revision=revision)
    return JSONResponse(wire(body), headers={"ETag": etag(revision)})


async def get_state(request: Request) -> Response:
    thread = await thread_for(request)
    current = await component_states(request).get(thread.id, request.path_params["component_id"])
    known = entity_tags(request.headers.get("if-none-match"))
    if request.headers.get("if-none-match") and (known is None or current.revision in known):
        return Response(status_code=304, headers={"ETag": etag(current.revision)})
    return state_response(current.component_id, current.state, current.revision)


async def update_state(request: Request) -> Response:
    body: ComponentStateUpdate = await json_body(request, ComponentStateUpdate)
    thread = await thread_for(request, body.userKey, body.contextKey)
    component_id = request.path_params["component_id"]
    state, revision = await component_states(request).update(
        thread.id, component_id, state=body.state, patch=body.patch,
        if_match=entity_tags(request.headers.get("if-match")))
    return state_response(component_id, state, revision)


routes = [
    Route(PATH, get_state, methods=["GET"]),
    Route(PATH, update_state, methods=["POST"]),
]
