"""Managed API keys: made by `gateway keys create`, found by their hash on every request.

Only a key's SHA-256 is stored. A slow password hash (bcrypt, argon2) exists to make guessing a
low-entropy password expensive; these keys are 256 random bits, which no guessing reaches, so a
plain SHA-256 is as safe and lets each request find its key with one indexed lookup.

Lookups are cached per process for `GATEWAY_KEY_CACHE_SECONDS` (a few seconds), so a burst of
requests costs one query: a revoked key therefore stops working everywhere within that time.
Keys from `GATEWAY_API_KEYS` are checked first and never touch the database.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.types import ASGIApp, Receive, Scope, Send

from ..protocol.clock import new_id, now_ms
from ..store.base import UNAVAILABLE
from ..store.repository import Store
from ..store.tables import ApiKeyRow

KEY_PREFIX = "gwk_"
# Bound on cached lookups, so a flood of made-up keys cannot grow the cache without end.
CACHE_ENTRIES = 10_000

T = TypeVar("T")


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    """A fresh key: 32 random bytes, URL-safe, with a prefix that says what it is."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class ManagedKey:
    """A usable managed key as a request sees it (never the key itself)."""

    id: str
    project: str
    max_concurrent_runs: int | None = None
    runs_per_minute: int | None = None
    daily_tokens: int | None = None
    agent: str | None = None  # the agent its Tambo runs use (`gateway keys create --agent`)


def usable(row: ApiKeyRow | None, now: int) -> ManagedKey | None:
    if row is None or row.revoked_ms is not None:
        return None
    if row.expires_ms is not None and row.expires_ms <= now:
        return None
    return ManagedKey(row.id, row.project_id, row.max_concurrent_runs, row.runs_per_minute,
                      row.daily_tokens, row.agent)


def key_row(key: str, project: str, expires_ms: int | None = None,
            max_concurrent_runs: int | None = None, runs_per_minute: int | None = None,
            daily_tokens: int | None = None, agent: str | None = None) -> ApiKeyRow:
    return ApiKeyRow(id=new_id("key_"), project_id=project, key_hash=hash_key(key),
                     prefix=key[:len(KEY_PREFIX) + 4], created_ms=now_ms(), expires_ms=expires_ms,
                     max_concurrent_runs=max_concurrent_runs, runs_per_minute=runs_per_minute,
                     daily_tokens=daily_tokens, agent=agent)


class KeyRing:
    """Looks managed keys up by hash, with a short per-process cache.

    A lookup already under way is shared: when a burst of requests finds the cache empty or
    stale at once (a few hundred runs started together), they wait for one query instead of
    each sending its own to the database every run start also needs."""

    def __init__(self, store: Store, cache_seconds: float) -> None:
        self.store, self.cache_seconds = store, cache_seconds
        self._keys: dict[str, tuple[float, ApiKeyRow | None]] = {}
        self._any: tuple[float, bool] | None = None
        self._looking: dict[str, asyncio.Future[Any]] = {}

    async def resolve(self, key: str) -> ManagedKey | None:
        digest = hash_key(key)
        cached = self._keys.get(digest)
        if cached is None or time.monotonic() - cached[0] > self.cache_seconds:
            cached = await self._shared(digest, lambda: self._look_up(digest))
        return usable(cached[1], now_ms())

    async def any_usable(self) -> bool:
        """Whether any managed key can be used (then development mode is off)."""
        if self._any is None or time.monotonic() - self._any[0] > self.cache_seconds:
            self._any = await self._shared("", self._count)
        return self._any[1]

    async def _look_up(self, digest: str) -> tuple[float, ApiKeyRow | None]:
        row = await self.store.find_api_key(digest)
        if len(self._keys) >= CACHE_ENTRIES:
            self._keys.clear()
        self._keys[digest] = found = (time.monotonic(), row)
        return found

    async def _count(self) -> tuple[float, bool]:
        return time.monotonic(), await self.store.count_usable_api_keys(now_ms()) > 0

    async def _shared(self, name: str, query: Callable[[], Awaitable[T]]) -> T:
        """The result of the query `name` under way, or of a new one; a caller that goes away
        does not cancel it for the others."""
        pending = self._looking.get(name)
        if pending is None:
            pending = self._looking[name] = asyncio.ensure_future(query())
            pending.add_done_callback(lambda _: self._looking.pop(name, None))
        result: T = await asyncio.shield(pending)
        return result


@dataclass(frozen=True)
class Credentials:
    """What the key middleware found for a request (see `context.caller`)."""

    managed: dict[str, ManagedKey]  # the presented keys that are usable managed keys
    managed_keys_exist: bool
    unavailable: bool = False  # the database could not be asked


class KeyRingMiddleware:
    """Resolves a presented key against the managed keys before the route runs: `caller()`
    is synchronous and called everywhere, so the one asynchronous lookup happens here."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            services = getattr(scope["app"].state, "services", None)
            if services is not None:
                scope.setdefault("state", {})["credentials"] = await _credentials(
                    services.keyring, services.settings.api_keys, scope["headers"])
        await self.app(scope, receive, send)


async def _credentials(keyring: KeyRing, env_keys: dict[str, str],
                       headers: list[tuple[bytes, bytes]]) -> Credentials:
    given = [value.decode("latin-1") for name, value in headers if name == b"x-api-key"]
    for name, value in headers:
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            given.append(value[7:].decode("latin-1").strip())
    candidates = [k for k in given if k.startswith(KEY_PREFIX) and k not in env_keys]
    try:
        managed = {}
        for key in candidates:
            if (found := await keyring.resolve(key)) is not None:
                managed[key] = found
        exist = bool(env_keys) or bool(managed) or await keyring.any_usable()
    except UNAVAILABLE:
        return Credentials({}, True, unavailable=True)
    return Credentials(managed, exist)
