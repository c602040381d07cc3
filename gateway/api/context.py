"""What every route needs: the services, the caller (project and user scope), and the thread
the caller may see."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from ..auth.identity import (
    SIGNED_IN_PREFIX,
    TokenRejected,
    is_signed_in_scope,
    looks_like_jwt,
)
from ..auth.keyring import ENV_KEY_PREFIX, Credentials, ManagedKey
from ..config import Settings
from ..protocol.problems import ApiError, InvalidRequest, Problem, echo
from ..protocol.tambo import checked_user_key
from ..runs.admission.quotas import Limits, QuotaExceeded, Subject, key_subject, user_subject
from ..services import Services
from ..store.tables import ThreadRow
from .request_limits import checked_json_body

INTEGER = re.compile(r"-?[0-9]+")


def services(request: Request) -> Services:
    """The services the app's lifespan opened (`gateway.services`); kept in the request's
    scope after the first look (a run start asks a dozen times, and `app.state` is a
    Python-level attribute lookup each time)."""
    scope = request.scope
    found: Services | None = scope.get("gateway.services")
    if found is None:
        found = scope["gateway.services"] = request.app.state.services
    return found


@dataclass(frozen=True)
class Caller:
    """Who is calling: the project, the API key (None in development mode) and, for a
    signed-in user (bearer token), their scope."""

    project: str
    signed_in_scope: str | None = None
    key_id: str | None = None
    managed: ManagedKey | None = None  # the managed key's own limits


def env_key_id(key: str) -> str:
    """A `GATEWAY_API_KEYS` key's id for quotas and tokens: a hash, never the key."""
    return ENV_KEY_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:16]


def _key_project(settings: Settings, creds: Credentials | None,
                 key: str) -> tuple[str, str | None, ManagedKey | None] | None:
    """(project, key id, managed key) of a presented key: `GATEWAY_API_KEYS` first."""
    project = settings.api_keys.get(key)
    if project is not None:
        return project, env_key_id(key), None
    managed = creds.managed.get(key) if creds is not None else None
    if managed is not None:
        _refuse_admin(managed)
        return managed.project, managed.id, managed
    return None


def _refuse_admin(managed: ManagedKey | None) -> None:
    """An admin key opens the operator API only (`api/admin_access.py`): it runs no agent and
    reads no thread as a client would, so a leaked client key and an operator's key never
    stand in for each other."""
    if managed is not None and managed.admin:
        raise ApiError(Problem.ADMIN_KEY_NOT_ALLOWED, "This is an admin key: it opens the "
                       "operator console and /v1/admin only; use a client key here")


def caller(request: Request) -> Caller:
    """The caller of this request (worked out once per request).

    `x-api-key` selects the project. A bearer token is either one of the gateway's access tokens
    (from `POST /oauth/token`), which carries its project and user scope and names the API key
    it was exchanged with (whose limits then apply, and whose revocation ends it), or, without
    `x-api-key`, an API key itself. In development mode every key is in project `default`.
    """
    known = getattr(request.state, "caller", None)
    if known is not None:
        return known
    settings = services(request).settings
    creds: Credentials | None = getattr(request.state, "credentials", None)  # `keyring.find_credentials`
    refuse_unresolved(creds)
    development = creds is not None and creds.development
    key = request.headers.get("x-api-key")
    auth = request.headers.get("authorization", "")
    bearer = auth[7:].strip() if auth.lower().startswith("bearer ") else None
    found = None
    if key:
        found = ("default", None, None) if development else _key_project(settings, creds, key)
        if found is None:
            raise ApiError(Problem.UNAUTHORIZED, "Invalid API key")
    if bearer and looks_like_jwt(bearer):
        who = _token_caller(request, bearer, found[0] if found else None, development)
    elif found is not None:
        who = Caller(found[0], None, found[1], found[2])
    elif development:
        who = Caller("default")
    elif bearer:
        found = _key_project(settings, creds, bearer)
        if found is None:
            raise ApiError(Problem.UNAUTHORIZED, "Invalid API key")
        who = Caller(found[0], None, found[1], found[2])
    else:
        raise ApiError(Problem.UNAUTHORIZED, "Missing API key: send it in the x-api-key header")
    request.state.caller = who
    return who


def refuse_unresolved(creds: Credentials | None) -> None:
    """The keys could not be looked up: the database is away, or this client made up too
    many keys (each unknown one costs a query)."""
    if creds is not None and creds.unavailable:
        raise ApiError(Problem.DATABASE_UNAVAILABLE, "The gateway cannot check the API key "
                       "right now; retry shortly", isRetryable=True)
    if creds is not None and creds.lookups_exceeded is not None:
        retry = creds.lookups_exceeded.retry_after
        raise QuotaExceeded(Problem.TOO_MANY_KEY_LOOKUPS, "Too many unknown API keys from this "
                            f"address; retry after {retry} s", retry, retryAfter=retry)


def _token_caller(request: Request, bearer: str, key_project: str | None,
                  development: bool) -> Caller:
    """The signed-in user a gateway access token names, with the API key it was exchanged
    with: that key must still be usable (revoking it ends its tokens within the key cache
    time) and its own limits apply. Development mode names no key."""
    svc = services(request)
    try:
        project, scope, token_key = svc.identity.verify_access_token(bearer)
    except TokenRejected as exc:
        raise ApiError(Problem.TOKEN_EXPIRED if exc.expired else Problem.INVALID_TOKEN,
                       f"Invalid bearer token: {exc.reason}") from None
    if key_project is not None and key_project != project:
        raise ApiError(Problem.INVALID_TOKEN,
                       "Invalid bearer token: it was issued for another project")
    creds: Credentials | None = getattr(request.state, "credentials", None)
    managed = creds.token_key if creds is not None else None
    _refuse_admin(managed)
    if development:
        return Caller(project, scope, token_key, managed)
    if token_key is not None and token_key.startswith(ENV_KEY_PREFIX):
        if any(env_key_id(k) == token_key for k in svc.settings.api_keys):
            return Caller(project, scope, token_key)
    elif managed is not None and managed.id == token_key:
        return Caller(project, scope, token_key, managed)
    raise ApiError(Problem.INVALID_TOKEN, "Invalid bearer token: the API key it was issued "
                   "with is revoked, expired or no longer configured")


def project_of(request: Request) -> str:
    return caller(request).project


def quota_subjects(request: Request, user_key: str | None) -> list[Subject]:
    """Whose quotas a new run counts against: the API key and the thread's user scope.
    Development mode has no keys, and no quotas."""
    who = caller(request)
    if who.key_id is None:
        return []
    settings = services(request).settings
    own = who.managed or ManagedKey("", who.project)  # no limits of its own: the defaults
    key_limits = Limits(_own(own.max_concurrent_runs, settings.key_concurrent_runs),
                        _own(own.runs_per_minute, settings.key_runs_per_minute),
                        _own(own.daily_tokens, settings.key_daily_tokens))
    subjects = [key_subject(who.key_id, key_limits)]
    if user_key is not None:
        subjects.append(user_subject(who.project, user_key, Limits(
            settings.user_concurrent_runs, settings.user_runs_per_minute)))
    return subjects


def _own(value: int | None, default: int) -> int:
    return default if value is None else value


def user_scope(request: Request, *body_candidates: str | None) -> str | None:
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
        raise ApiError(Problem.USER_SCOPE_REQUIRED,
                       "This call needs a user scope: provide a userKey (query or body) or "
                       "a bearer token from POST /oauth/token")
    return scope


def names_scope(request: Request) -> bool:
    """Whether the caller named a user scope (query userKey or bearer token): a caller that did
    not holds only a thread id, and is shown nothing that leads to the thread's owner."""
    return user_scope(request) is not None


def query_user_key(request: Request) -> str | None:
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
    if is_signed_in_scope(value):
        raise ApiError(Problem.VALIDATION_ERROR,
                       f"{name} may not start with {SIGNED_IN_PREFIX!r}: that scope belongs to "
                       "users signed in with a bearer token")
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


def may_see(request: Request, thread: ThreadRow, scope: str | None, *,
            scope_optional: bool = False) -> bool:
    """Whether the caller, in user scope `scope` (`user_scope`), may see a thread of its project.

    A signed-in user sees only threads of their own scope, and a signed-in user's thread needs
    their token, never just the API key: the key is public in a browser app, the token is not.
    A caller naming a scope sees that scope's threads and those started with none (as AG-UI
    clients may start them: such a thread is the project's). A call without any scope on a
    user's thread is refused (400 `USER_SCOPE_REQUIRED`), as on the real server, except where
    the Tambo clients send none (`scope_optional`: thread fetch and rename, its message list,
    cancel and a run's status or stream, thread names, the older suggestion paths; and the
    read-only Timbal thread views).
    """
    if caller(request).signed_in_scope is not None:
        return thread.user_key == scope
    if is_signed_in_scope(thread.user_key):
        return False
    if scope is not None:
        return thread.user_key in (None, scope)
    if thread.user_key is not None and not scope_optional:
        required_user_scope(request)  # raises: a user's thread needs that user's scope
    return True


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
