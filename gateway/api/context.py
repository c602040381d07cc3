"""What every route needs: the services, the caller's project, and the caller's userKey."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from ..config import Settings
from ..protocol.problems import ApiError
from ..protocol.tambo import checked_user_key
from ..runs.manager import RunManager
from ..store.repository import Store
from ..store.tables import ThreadRow

MAX_BODY_BYTES = 10 * 1024 * 1024
INTEGER = re.compile(r"-?[0-9]+")


@dataclass
class Services:
    settings: Settings
    store: Store
    runs: RunManager
    model: Any


def services(request: Request) -> Services:
    return request.app.state.services


def project_of(request: Request) -> str:
    """The caller's project, from `x-api-key` or a bearer token.

    In development mode (no GATEWAY_API_KEYS) every caller is in project `default`.
    """
    settings = services(request).settings
    if settings.development_mode:
        return "default"
    key = request.headers.get("x-api-key")
    if not key:
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            key = auth[7:].strip()
    if not key:
        raise ApiError(401, "UNAUTHORIZED", "Missing API key: send it in the x-api-key header")
    project = settings.api_keys.get(key)
    if project is None:
        raise ApiError(401, "UNAUTHORIZED", "Invalid API key")
    return project


def query_user_key(request: Request) -> str | None:
    """`?userKey=` (or its alias `?contextKey=`; both are checked when both are sent)."""
    user_key, context_key = (_checked_user_key(request.query_params.get(name))
                             for name in ("userKey", "contextKey"))
    return user_key if user_key is not None else context_key


def _checked_user_key(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return checked_user_key(value)
    except ValueError as exc:
        raise ApiError(400, "VALIDATION_ERROR", str(exc)) from None


def body_user_key(*candidates: str | None) -> str | None:
    for value in candidates:
        if value is not None:
            return _checked_user_key(value)
    return None


async def json_body(request: Request, model: type[BaseModel]) -> Any:
    """Parse and validate a JSON body; any problem is a 400 with a stable code."""
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise ApiError(413, "PAYLOAD_TOO_LARGE", "The request body is larger than 10 MiB")
    if not raw.strip():
        raise ApiError(400, "VALIDATION_ERROR", "The request body must be a JSON object")
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            raise ApiError(400, "INVALID_JSON", "The request body is not valid JSON") from None
        raise


async def thread_for(request: Request, user_key: str | None = None) -> ThreadRow:
    """The thread in the path, if the caller may see it.

    A userKey that does not match the thread's hides it (404, as if absent). No userKey at all
    is accepted, because `@tambo-ai/client` sends none on thread fetch and cancel.
    """
    thread_id = request.path_params["thread_id"]
    project = project_of(request)
    thread = await services(request).store.get_thread(project, thread_id)
    key = user_key if user_key is not None else query_user_key(request)
    if thread is None or (key is not None and thread.user_key not in (None, key)):
        raise ApiError(404, "THREAD_NOT_FOUND", f"Thread {thread_id} not found",
                       threadId=thread_id)
    return thread


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    # Only what the schema calls an integer: int() would also take " 5", "1_0" or "٣".
    if not INTEGER.fullmatch(raw):
        raise ApiError(400, "VALIDATION_ERROR", f"{name} must be an integer")
    value = int(raw)
    if not low <= value <= high:
        raise ApiError(400, "VALIDATION_ERROR", f"{name} must be between {low} and {high}")
    return value
