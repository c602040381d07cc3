"""What every route needs of its request: the services, the caller (`auth.caller`: resolved
once), its user scope, its JSON body, and the thread it may see."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.requests import HTTPConnection, Request

from ..auth.caller import Caller, resolve_admin, resolve_caller, scope_required, visible
from ..auth.identity import RESERVED_SCOPE_PREFIXES, is_reserved_scope
from ..protocol.problems import ApiError, InvalidRequest, Problem, echo
from ..protocol.tambo import checked_user_key
from ..runs.admission.submit import Admission
from ..services import Services
from ..store.tables import ThreadRow
from .json_body import checked_json_body

INTEGER = re.compile(r"-?[0-9]+")


def services(request: HTTPConnection) -> Services:
    """The services the app's lifespan opened (`gateway.services`); kept in the request's
    scope after the first look (a run start asks a dozen times, and `app.state` is a
    Python-level attribute lookup each time)."""
    scope = request.scope
    found: Services | None = scope.get("gateway.services")
    if found is None:
        found = scope["gateway.services"] = request.app.state.services
    return found


def caller(request: HTTPConnection) -> Caller:
    """The caller of this request (`auth.caller.resolve_caller`), worked out once per request
    from the credentials the front found (`keyring.find_credentials`) and the headers."""
    known: Caller | None = getattr(request.state, "caller", None)
    if known is not None:
        return known
    svc = services(request)
    headers = request.headers
    who = resolve_caller(svc.settings, getattr(request.state, "credentials", None),
                         svc.identity, headers.get("x-api-key"), headers.get("authorization"))
    request.state.caller = who
    return who


def admin_caller(request: Request) -> Caller:
    """The caller of the operator API (`auth.caller.resolve_admin`: an admin key only),
    worked out once per request."""
    known: Caller | None = getattr(request.state, "admin_caller", None)
    if known is not None:
        return known
    who = resolve_admin(services(request).settings,
                        getattr(request.state, "credentials", None), request.scope["headers"])
    request.state.admin_caller = who
    return who


def project_of(request: HTTPConnection) -> str:
    return caller(request).project


def admission(request: HTTPConnection) -> Admission:
    """The door every run start and thread creation goes through (`runs/admission/submit.py`)."""
    return services(request).admission


def user_scope(request: HTTPConnection, *body_candidates: str | None) -> str | None:
    """The caller's user scope: a signed-in user's (bearer token), else the userKey given in
    the query string or, failing that, the first of `body_candidates` that is set.

    A signed-in user cannot name another scope: a userKey that differs is refused (400).
    """
    given = query_user_key(request)
    if given is None:
        given = body_user_key(*body_candidates)
    signed_in = caller(request).signed_in_scope
    if signed_in is not None:
        if given is not None and given != signed_in:
            raise ApiError(Problem.VALIDATION_ERROR,
                           "Provide either a userKey or a bearer token, not both")
        return signed_in
    return given


def required_user_scope(request: Request, *body_candidates: str | None) -> str:
    """As `user_scope`, for the calls the real server refuses without one (listing and
    creating threads): without a scope they would see or create threads of no one."""
    scope = user_scope(request, *body_candidates)
    if scope is None:
        raise scope_required()
    return scope


def names_scope(request: Request) -> bool:
    """Whether the caller named a user scope (query userKey or bearer token): a caller that did
    not holds only a thread id, and is shown nothing that leads to the thread's owner."""
    return user_scope(request) is not None


def query_user_key(request: HTTPConnection) -> str | None:
    """`?userKey=` (or its alias `?contextKey=`; both are checked when both are sent)."""
    user_key, context_key = (_checked_user_key(request.query_params.get(name), name)
                             for name in ("userKey", "contextKey"))
    return user_key if user_key is not None else context_key


def _checked_user_key(value: str | None, name: str = "userKey") -> str | None:
    if value is None:
        return None
    if "\x00" in value:  # PostgreSQL cannot store it: refused on every database alike
        raise ApiError(Problem.NUL_CHARACTER, f"{name} holds a NUL character")
    try:
        value = checked_user_key(value, name)
    except ValueError as exc:
        raise ApiError(Problem.VALIDATION_ERROR, str(exc)) from None
    if is_reserved_scope(value):
        raise ApiError(Problem.VALIDATION_ERROR,
                       f"{name} may not start with {' or '.join(map(repr, RESERVED_SCOPE_PREFIXES))}"
                       ": those scopes belong to users signed in with a bearer token and to "
                       "Chorus connections")
    return value


def body_user_key(*candidates: str | None) -> str | None:
    for value in candidates:
        if value is not None:
            return _checked_user_key(value)
    return None


async def json_body(request: Request, model: type[BaseModel]) -> Any:
    """Parse and validate a JSON body; any problem is a 400 with a stable code."""
    raw = await request.body()
    limit = services(request).settings.max_body_bytes  # enforced as it arrives: body_limit
    if len(raw) > limit:
        raise ApiError(Problem.PAYLOAD_TOO_LARGE, f"The request body is larger than {limit} bytes")
    if not raw.strip():
        raise ApiError(Problem.VALIDATION_ERROR, "The request body must be a JSON object")
    await checked_json_body(raw, services(request).settings.max_json_depth)
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            raise ApiError(Problem.INVALID_JSON, "The request body is not valid JSON") from None
        raise InvalidRequest(exc) from None


async def thread_for(request: Request, *body_candidates: str | None,
                     scope_optional: bool = False) -> ThreadRow:
    """The thread in the path, if the caller may see it (`may_see`); else 404, as if absent."""
    thread_id = request.path_params["thread_id"]
    scope = user_scope(request, *body_candidates)
    thread = await services(request).store.get_thread(project_of(request), thread_id)
    if thread is None or not may_see(request, thread, scope, scope_optional=scope_optional):
        raise ApiError(Problem.THREAD_NOT_FOUND, f"Thread {echo(thread_id)} not found",
                       threadId=echo(thread_id))
    return thread


def may_see(request: HTTPConnection, thread: ThreadRow, scope: str | None, *,
            scope_optional: bool = False) -> bool:
    """Whether the caller, in user scope `scope` (`user_scope`), may see a thread of its
    project (`auth.caller.visible`)."""
    return visible(caller(request), thread.user_key, scope, scope_optional=scope_optional)


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    # Only what the schema calls an integer: int() would also take " 5", "1_0" or "٣".
    if not INTEGER.fullmatch(raw):
        raise ApiError(Problem.VALIDATION_ERROR, f"{name} must be an integer")
    value = int(raw)
    if not low <= value <= high:
        raise ApiError(Problem.VALIDATION_ERROR, f"{name} must be between {low} and {high}")
    return value
