"""Who is calling, resolved once per request: the typed `Caller` every run start, thread
creation and read is decided for.

The front finds the credentials a request presents (`keyring.find_credentials`: managed keys,
the key a gateway token names, development mode); `resolve_caller` turns them, with the
headers and the settings, into the caller of the client API, and `resolve_admin` into the
caller of the operator API. Neither reads a request object: a background start (a schedule, a
webhook's retry, a Chorus delivery) builds its `Caller` directly.

Who may see which thread is decided here too (`visible`): a project's threads are split by user
scope, and a reserved scope (a signed-in user's, a Chorus connection's channel threads) is never
reachable with the API key alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

from ..config import Settings
from ..protocol.problems import ApiError, Problem
from .identity import IdentityProviders, TokenRejected, is_reserved_scope, looks_like_jwt
from .keyring import ENV_KEY_PREFIX, Credentials, ManagedKey, presented
from .subjects import Limits, Subject, key_subject, user_subject

DEVELOPMENT_PROJECT = "default"


@dataclass(frozen=True)
class Caller:
    """Who is calling: the project, the user scope a signed-in user's bearer token fixes, the
    credential (an API key's id; None in development mode), the managed key with its own
    limits, the one agent the credential may run, whose quotas its starts count against, and
    whether it is the operator (`admin`) or development mode."""

    project: str
    # The user scope the credential fixes: a signed-in user's (`oauth:...`, from the bearer
    # token), a Chorus connection's (`chorus:<id>`); the caller sees that scope's threads only.
    signed_in_scope: str | None = None
    key_id: str | None = None
    managed: ManagedKey | None = None
    # The agent the credential is bound to (`gateway keys create --agent`, a Chorus connection).
    agent: str | None = None
    # The credential's own quota subject (None: nothing is counted, as in development mode).
    quota: Subject | None = None
    user_limits: Limits = Limits()  # each user scope's
    development: bool = False
    admin: bool = False

    def quota_subjects(self, user_key: str | None) -> list[Subject]:
        """Whose quotas a new run counts against: the credential's and the thread's user
        scope's. Development mode has no keys, and no quotas."""
        if self.quota is None:
            return []
        if user_key is None:
            return [self.quota]
        return [self.quota, user_subject(self.project, user_key, self.user_limits)]


def env_key_id(key: str) -> str:
    """A `GATEWAY_API_KEYS` key's id for quotas and tokens: a hash, never the key."""
    return ENV_KEY_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:16]


def _own(value: int | None, default: int) -> int:
    return default if value is None else value


def key_caller(settings: Settings, project: str, key_id: str | None = None,
               managed: ManagedKey | None = None, scope: str | None = None,
               development: bool = False) -> Caller:
    """The caller presenting `key_id` (None: no key, development mode): the key's own limits,
    or the settings' defaults for those it does not set."""
    if key_id is None:
        return Caller(project, scope, development=development)
    own = managed or ManagedKey("", project)
    key_limits = Limits(_own(own.max_concurrent_runs, settings.key_concurrent_runs),
                        _own(own.runs_per_minute, settings.key_runs_per_minute),
                        _own(own.daily_tokens, settings.key_daily_tokens))
    return Caller(project, scope, key_id, managed, (managed.agent or None) if managed else None,
                  key_subject(key_id, key_limits),
                  Limits(settings.user_concurrent_runs, settings.user_runs_per_minute),
                  development=development)


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
    """An admin key opens the operator API only (`resolve_admin`): it runs no agent and reads
    no thread as a client would, so a leaked client key and an operator's key never stand in
    for each other."""
    if managed is not None and managed.admin:
        raise ApiError(Problem.ADMIN_KEY_NOT_ALLOWED, "This is an admin key: it opens the "
                       "operator console and /v1/admin only; use a client key here")


class KeyLookupsRefused(ApiError):
    """A 429 for an address that made up too many keys; `headers` go on the response."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(Problem.TOO_MANY_KEY_LOOKUPS, "Too many unknown API keys from this "
                         f"address; retry after {retry_after} s", retryAfter=retry_after)
        self.headers = {"Retry-After": str(retry_after)}


def refuse_unresolved(creds: Credentials | None) -> None:
    """The keys could not be looked up: the database is away, or this client made up too
    many keys (each unknown one costs a query)."""
    if creds is not None and creds.unavailable:
        raise ApiError(Problem.DATABASE_UNAVAILABLE, "The gateway cannot check the API key "
                       "right now; retry shortly", isRetryable=True)
    if creds is not None and creds.lookups_exceeded is not None:
        raise KeyLookupsRefused(creds.lookups_exceeded.retry_after)


def resolve_caller(settings: Settings, creds: Credentials | None, identity: IdentityProviders,
                   api_key: str | None, authorization: str | None) -> Caller:
    """The caller of the client API.

    `x-api-key` (`api_key`) selects the project. A bearer token is either one of the gateway's
    access tokens (from `POST /oauth/token`), which carries its project and user scope and
    names the API key it was exchanged with (whose limits then apply, and whose revocation
    ends it), or, without `x-api-key`, an API key itself. In development mode every key is in
    project `default`."""
    refuse_unresolved(creds)
    development = creds is not None and creds.development
    auth = authorization or ""
    bearer = auth[7:].strip() if auth.lower().startswith("bearer ") else None
    found = None
    if api_key:
        found = (DEVELOPMENT_PROJECT, None, None) if development else _key_project(
            settings, creds, api_key)
        if found is None:
            raise ApiError(Problem.UNAUTHORIZED, "Invalid API key")
    if bearer and looks_like_jwt(bearer):
        return _token_caller(settings, creds, identity, bearer, found[0] if found else None,
                             development)
    if found is None and development:
        return Caller(DEVELOPMENT_PROJECT, development=True)
    if found is None and bearer:
        found = _key_project(settings, creds, bearer)
        if found is None:
            raise ApiError(Problem.UNAUTHORIZED, "Invalid API key")
    if found is None:
        raise ApiError(Problem.UNAUTHORIZED, "Missing API key: send it in the x-api-key header")
    return key_caller(settings, found[0], found[1], found[2], development=development)


def _token_caller(settings: Settings, creds: Credentials | None, identity: IdentityProviders,
                  bearer: str, key_project: str | None, development: bool) -> Caller:
    """The signed-in user a gateway access token names, with the API key it was exchanged
    with: that key must still be usable (revoking it ends its tokens within the key cache
    time) and its own limits apply. Development mode names no key."""
    try:
        project, scope, token_key = identity.verify_access_token(bearer)
    except TokenRejected as exc:
        raise ApiError(Problem.TOKEN_EXPIRED if exc.expired else Problem.INVALID_TOKEN,
                       f"Invalid bearer token: {exc.reason}") from None
    if key_project is not None and key_project != project:
        raise ApiError(Problem.INVALID_TOKEN,
                       "Invalid bearer token: it was issued for another project")
    managed = creds.token_key if creds is not None else None
    _refuse_admin(managed)
    if development:
        return key_caller(settings, project, token_key, managed, scope, development=True)
    if token_key is not None and token_key.startswith(ENV_KEY_PREFIX):
        if any(env_key_id(k) == token_key for k in settings.api_keys):
            return key_caller(settings, project, token_key, None, scope)
    elif managed is not None and managed.id == token_key:
        return key_caller(settings, project, token_key, managed, scope)
    raise ApiError(Problem.INVALID_TOKEN, "Invalid bearer token: the API key it was issued "
                   "with is revoked, expired or no longer configured")


def resolve_admin(settings: Settings, creds: Credentials | None,
                  headers: list[tuple[bytes, bytes]]) -> Caller:
    """The caller of the operator API (`/v1/admin/...`): an admin key, and nothing else.

    An admin key (`gateway keys create --admin`) sees every thread, run and usage row of its
    own project, across user scopes; what it starts (an answer to a waiting thread) counts
    against its own quotas, as a client key's runs do. No key or an unknown one is 401
    `UNAUTHORIZED`; a client key (managed, or from `GATEWAY_API_KEYS`) or a signed-in user's
    bearer token 403 `ADMIN_KEY_REQUIRED`. Development mode (no key ever made, loopback only)
    has no keys to tell apart: its operator API answers without one, for project `default`."""
    refuse_unresolved(creds)
    if creds is not None and creds.development:
        return Caller(DEVELOPMENT_PROJECT, development=True, admin=True)
    managed = admin_key(settings, creds, headers)
    # The operator answers any agent's thread: no agent binding, whatever the key was made with.
    return dataclasses.replace(key_caller(settings, managed.project, managed.id, managed),
                               agent=None, admin=True)


def admin_key(settings: Settings, creds: Credentials | None,
              headers: list[tuple[bytes, bytes]]) -> ManagedKey:
    """The admin key a request presents, or the refusal (`resolve_admin` says which)."""
    given, bearer = presented(headers)
    if bearer is not None and looks_like_jwt(bearer):
        raise ApiError(Problem.ADMIN_KEY_REQUIRED, "A user's bearer token does not open the "
                       "operator API: send an admin key in x-api-key")
    keys = [*given, *([bearer] if bearer is not None else [])]
    if not keys:
        raise ApiError(Problem.UNAUTHORIZED, "Missing API key: send an admin key "
                       "(`gateway keys create --admin`) in the x-api-key header")
    key = keys[0]
    managed = creds.managed.get(key) if creds is not None else None
    if managed is not None and managed.admin:
        return managed
    if managed is not None or key in settings.api_keys:
        raise ApiError(Problem.ADMIN_KEY_REQUIRED, "This key is not an admin key; the "
                       "operator API answers keys made with `gateway keys create --admin`")
    raise ApiError(Problem.UNAUTHORIZED, "Invalid API key")


def scope_required() -> ApiError:
    return ApiError(Problem.USER_SCOPE_REQUIRED,
                    "This call needs a user scope: provide a userKey (query or body) or "
                    "a bearer token from POST /oauth/token")


def visible(caller: Caller, owner: str | None, scope: str | None, *,
            scope_optional: bool = False) -> bool:
    """Whether `caller`, in user scope `scope`, may see a thread of its project whose user
    scope is `owner`.

    A signed-in user sees only threads of their own scope, and a thread in a reserved scope (a
    signed-in user's, a Chorus connection's) needs the credential that fixes it (the user's
    token, the connection string), never just the API key: the key is public in a browser app,
    the token is not.
    A caller naming a scope sees that scope's threads and those started with none (as AG-UI
    clients may start them: such a thread is the project's). A call without any scope on a
    user's thread is refused (400 `USER_SCOPE_REQUIRED`), as on the real server, except where
    the Tambo clients send none (`scope_optional`: thread fetch and rename, its message list,
    cancel and a run's status or stream, thread names, the older suggestion paths; and the
    read-only Timbal thread views)."""
    if caller.signed_in_scope is not None:
        return owner == scope
    if is_reserved_scope(owner):
        return False
    if scope is not None:
        return owner in (None, scope)
    if owner is not None and not scope_optional:
        raise scope_required()
    return True
