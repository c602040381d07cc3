"""The project's managed keys, for its admin: list them, make one (a client key with its limits
and agent, or another admin key), revoke one. What `gateway keys` does on the command line,
within the admin key's own project only (another project's key is answered as if it did not
exist: 404 `KEY_NOT_FOUND`).

Only a real admin key does this, even in development mode (`access.admin_key`): a request
without a key never makes one. A key made here is shown once, in the answer; only its SHA-256
is stored. A key revoked here is refused at once by this process, and by the others within
`GATEWAY_KEY_CACHE_SECONDS`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...auth.keyring import key_row, new_key
from ...engine.agents.agent import AgentRegistry
from ...protocol.admin import (
    AdminKey,
    AdminKeyCreate,
    AdminKeyCreated,
    AdminKeyDefaults,
    AdminKeyList,
)
from ...protocol.clock import iso_ms, now_ms
from ...protocol.problems import ApiError, Problem, echo
from ...protocol.tambo import wire
from ...store.tables import ApiKeyRow
from ..context import json_body, services
from .access import admin_key


def key_model(row: ApiKeyRow, now: int) -> AdminKey:
    state = ("revoked" if row.revoked_ms is not None else
             "expired" if row.expires_ms is not None and row.expires_ms <= now else "active")
    return AdminKey(
        id=row.id, prefix=row.prefix + "...", kind="admin" if row.admin else "client",
        agent=row.agent, state=state, createdAt=iso_ms(row.created_ms),
        expiresAt=iso_ms(row.expires_ms) if row.expires_ms is not None else None,
        revokedAt=iso_ms(row.revoked_ms) if row.revoked_ms is not None else None,
        lastUsedAt=iso_ms(row.last_used_ms) if row.last_used_ms is not None else None,
        maxConcurrentRuns=row.max_concurrent_runs, runsPerMinute=row.runs_per_minute,
        dailyTokens=row.daily_tokens)


async def list_keys(request: Request) -> Response:
    project = admin_key(request).project
    settings = services(request).settings
    rows = await services(request).store.list_api_keys(project)
    now = now_ms()
    defaults = AdminKeyDefaults(maxConcurrentRuns=settings.key_concurrent_runs,
                                runsPerMinute=settings.key_runs_per_minute,
                                dailyTokens=settings.key_daily_tokens)
    registry: AgentRegistry = request.app.state.agents
    return JSONResponse(wire(AdminKeyList(keys=[key_model(row, now) for row in rows],
                                          defaults=defaults,
                                          agents=[agent.name for agent in registry])))


def _expiry(text: str | None, now: int) -> int | None:
    if text is None or not text.strip():
        return None
    try:
        at = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(Problem.VALIDATION_ERROR, "expiresAt must be an ISO-8601 date or time",
                       errors={"expiresAt": "not an ISO-8601 date or time"}) from None
    ms = int((at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp() * 1000)
    if ms <= now:
        raise ApiError(Problem.VALIDATION_ERROR, "expiresAt is in the past",
                       errors={"expiresAt": "in the past"})
    return ms


def _checked_agent(request: Request, body: AdminKeyCreate) -> str | None:
    if body.agent is None or not body.agent.strip():
        return None
    if body.admin:
        raise ApiError(Problem.VALIDATION_ERROR, "An admin key runs no agent",
                       errors={"agent": "not with admin"})
    registry: AgentRegistry = request.app.state.agents
    if registry.get(body.agent) is None:
        raise ApiError(Problem.AGENT_NOT_FOUND, f"No agent {echo(body.agent)} is configured",
                       agent=echo(body.agent))
    return body.agent


async def create_key(request: Request) -> Response:
    project = admin_key(request).project
    body: AdminKeyCreate = await json_body(request, AdminKeyCreate)
    now = now_ms()
    agent, expires = _checked_agent(request, body), _expiry(body.expiresAt, now)
    key = new_key()
    row = key_row(key, project, expires, body.maxConcurrentRuns, body.runsPerMinute,
                  body.dailyTokens, agent, body.admin)
    svc = services(request)
    await svc.store.add_api_key(row)
    svc.keyring.key_made()
    created = AdminKeyCreated(**key_model(row, now).model_dump(), key=key)
    return JSONResponse(wire(created), status_code=201)


async def revoke_key(request: Request) -> Response:
    project = admin_key(request).project
    key_id = request.path_params["key_id"]
    svc = services(request)
    row = await svc.store.get_api_key(key_id)
    if row is None or row.project_id != project:
        raise ApiError(Problem.KEY_NOT_FOUND, f"Key {echo(key_id)} not found",
                       keyId=echo(key_id))
    await svc.store.revoke_api_key(row.id, project, now_ms())  # a revoked one stays revoked
    svc.keyring.forget(row)
    revoked = await svc.store.get_api_key(key_id)
    assert revoked is not None
    return JSONResponse(wire(key_model(revoked, now_ms())))


routes = [
    Route("/v1/admin/keys", list_keys, methods=["GET"]),
    Route("/v1/admin/keys", create_key, methods=["POST"]),
    Route("/v1/admin/keys/{key_id}/revoke", revoke_key, methods=["POST"]),
]
