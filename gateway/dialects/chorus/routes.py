"""Chorus 0.1: `POST /v1/chorus/{secret}`, an agent's connection string (`spec/chorus.md`).

The secret in the path is the credential (made by `gateway chorus connect`, only its hash is
kept; no API key is asked for): an unknown or revoked one is 404. A body that is not a
delivery is 400, and so is a callback or MCP URL the gateway may not call
(`GATEWAY_CHORUS_ALLOWED_HOSTS`, `runs/automation/outbound.py`): it is never called; a message over the
connection's limits is 429 with `Retry-After` (`routes_quota.py`). Otherwise the message is
stored for its channel's thread (created on the channel's first message) and the answer is
200 at once; the run and its callback follow (`routes_delivery.py`).
"""

from __future__ import annotations

import hashlib

from sqlalchemy.exc import IntegrityError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...api.context import admission, json_body, services
from ...auth.caller import Caller
from ...auth.identity import chorus_scope
from ...protocol.clock import new_id, now_ms
from ...protocol.problems import ApiError, Problem
from ...runs.admission.threads import NewThread
from ...runs.automation import outbound
from ...store.tables import ChorusConnectionRow, ChorusDeliveryRow
from . import input as chorus_input
from . import routes_quota as quota
from .routes_delivery import deliveries

SECRET_PREFIX = "chs_"


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


async def connection(request: Request) -> ChorusConnectionRow:
    secret = request.path_params["secret"]
    found = None
    if secret.startswith(SECRET_PREFIX) and len(secret) <= 128:
        found = await services(request).store.find_chorus_connection(secret_hash(secret))
    if found is None or found.revoked_ms is not None:
        raise ApiError(Problem.CHORUS_CONNECTION_NOT_FOUND,
                       "No such connection string (or it was revoked)")
    return found


async def check_urls(request: Request, delivery: chorus_input.Delivery) -> None:
    allowed = services(request).settings.chorus_allowed_hosts
    urls = {"callback": delivery.callback,
            **{f"mcp.{m.name}": m.url for m in delivery.mcp or []}}
    for field, url in urls.items():
        try:
            await outbound.check(url, allowed)
        except outbound.NotAllowed as exc:
            raise ApiError(Problem.CHORUS_URL_NOT_ALLOWED, f"{field}: {exc}",
                           errors={field: str(exc)}) from None


async def channel_thread(request: Request, who: Caller, conn: ChorusConnectionRow,
                         channel_id: str) -> str:
    """The channel's thread for the connection, created on its first message (through the
    door, under the rules of every new thread), in the connection's own scope
    (`chorus:<connection id>`), which no client key can name: the project's API key never
    reads, renames, deletes or runs on it.

    A thread found under the channel's id is used only if it is the connection's own; one from
    before ids were keyed (`legacy_thread_id`) likewise, if it was given to this connection
    (migration 0021)."""
    store = services(request).store
    scope = chorus_scope(conn.id)
    thread_id = chorus_input.thread_id(conn.secret_hash, conn.agent, channel_id)
    found = await store.get_thread(conn.project_id, thread_id)
    if found is None:
        legacy = chorus_input.legacy_thread_id(conn.project_id, conn.agent, channel_id)
        old = await store.get_thread(conn.project_id, legacy)
        if old is not None and old.user_key == scope:
            return legacy
        try:
            found = await admission(request).create_thread(
                who, NewThread(scope, thread_id=thread_id, minted=True))
        except IntegrityError:
            # The channel's first two messages raced: the other created it.
            found = await store.get_thread(conn.project_id, thread_id)
    if found is None or found.user_key != scope:
        raise ApiError(Problem.CHORUS_CHANNEL_UNAVAILABLE, "This channel's thread cannot be "
                       "used by this connection")
    return thread_id


async def receive(request: Request) -> Response:
    conn = await connection(request)
    delivery: chorus_input.Delivery = await json_body(request, chorus_input.Delivery)
    await check_urls(request, delivery)
    svc = services(request)
    who = quota.caller(svc.settings, conn)
    # The message's agent and size are checked, and its slot taken (429 over a limit), before
    # it is stored; its run starts later, holding that slot (`routes_delivery.py`).
    ticket = await admission(request).reserve(who, chorus_input.run_spec(delivery, "", None))
    try:
        thread_id = await channel_thread(request, who, conn, delivery.channel.id)
        row = ChorusDeliveryRow(id=new_id("chd_"), thread_id=thread_id, connection_id=conn.id,
                                payload=delivery.model_dump(exclude_none=True),
                                created_ms=now_ms(), ticket=ticket.id)
        await svc.store.add(row)
    except BaseException:
        await ticket.release()
        raise
    deliveries(request).wake(conn.project_id, thread_id)
    return JSONResponse({"status": "accepted", "threadId": thread_id})


routes = [Route("/v1/chorus/{secret}", receive, methods=["POST"])]
