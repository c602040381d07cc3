"""Who may use the operator API (`/v1/admin/...`): an admin key, and nothing else.

An admin key is a managed key made with `gateway keys create --admin`; it sees every thread, run
and usage row of its own project, across user scopes. Every other credential is refused with a
stable code: no key or an unknown one 401 `UNAUTHORIZED`; a client key (managed, or from
`GATEWAY_API_KEYS`) or a signed-in user's bearer token 403 `ADMIN_KEY_REQUIRED`. The reverse
holds too (`context.caller`): an admin key cannot run agents or read threads as a client.

Development mode (no key ever made, loopback only: `auth/development.py`) has no keys to tell
apart, so its operator API answers without one, for project `default`, as its client API does.
"""

from __future__ import annotations

from starlette.requests import Request

from ..auth.identity import looks_like_jwt
from ..auth.keyring import Credentials, presented
from ..protocol.problems import ApiError, Problem
from .context import refuse_unresolved, services

DEVELOPMENT_PROJECT = "default"


def admin_project(request: Request) -> str:
    """The project whose threads, runs and usage this request may see, or a refusal."""
    known = getattr(request.state, "admin_project", None)
    if known is not None:
        return str(known)
    creds: Credentials | None = getattr(request.state, "credentials", None)  # `keyring.find_credentials`
    refuse_unresolved(creds)
    if creds is not None and creds.development:
        project = DEVELOPMENT_PROJECT
    else:
        project = _admin_key_project(request, creds)
    request.state.admin_project = project
    return project


def _admin_key_project(request: Request, creds: Credentials | None) -> str:
    given, bearer = presented(request.scope["headers"])
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
        return managed.project
    if managed is not None or key in services(request).settings.api_keys:
        raise ApiError(Problem.ADMIN_KEY_REQUIRED, "This key is not an admin key; the "
                       "operator API answers keys made with `gateway keys create --admin`")
    raise ApiError(Problem.UNAUTHORIZED, "Invalid API key")
