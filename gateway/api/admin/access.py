"""Who may use the operator API (`/v1/admin/...`): an admin key, and nothing else.

An admin key is a managed key made with `gateway keys create --admin` (or by another admin key
of its project, on the console's Keys page); it sees every thread, run, key and usage row of
its own project, across user scopes, and nothing of any other project. Every other credential
is refused with a stable code: no key or an unknown one 401 `UNAUTHORIZED`; a client key
(managed, or from `GATEWAY_API_KEYS`) or a signed-in user's bearer token 403
`ADMIN_KEY_REQUIRED`. The reverse holds too (`auth.caller.resolve_caller`): an admin key cannot run agents
or read threads as a client.

Development mode (no key ever made, loopback only: `auth/development.py`) has no keys to tell
apart, so its operator API answers without one, for project `default`, as its client API does;
except for what only a key can do: managing keys (`admin_key`), which needs a real admin key.
"""

from __future__ import annotations

from starlette.requests import Request

from ...auth import caller as callers
from ...auth.keyring import Credentials, ManagedKey, presented
from ...protocol.problems import ApiError, Problem
from ..context import admin_caller, services


def admin_project(request: Request) -> str:
    """The project whose threads, runs and usage this request may see, or a refusal
    (`auth.caller.resolve_admin`)."""
    return admin_caller(request).project


def admin_key(request: Request) -> ManagedKey:
    """The admin key of this request, even in development mode: what only a key may do (make
    and revoke keys) is never done by a request without one."""
    creds: Credentials | None = getattr(request.state, "credentials", None)
    callers.refuse_unresolved(creds)
    given, _ = presented(request.scope["headers"])
    if creds is not None and creds.development and not any(
            creds.managed.get(key) for key in given):
        raise ApiError(Problem.ADMIN_KEY_REQUIRED, "Development mode has no keys yet: make "
                       "the first ones with `./scripts/gateway keys create` (a client key) and "
                       "`./scripts/gateway keys create --admin`, then sign in with the admin "
                       "key")
    return callers.admin_key(services(request).settings, creds, request.scope["headers"])


def admin_key_id(request: Request) -> str | None:
    """The id of the admin key of this request (None: development mode, no key)."""
    creds: Credentials | None = getattr(request.state, "credentials", None)
    given, _ = presented(request.scope["headers"])
    for key in given:
        found = creds.managed.get(key) if creds is not None else None
        if found is not None and found.admin:
            return found.id
    return None
