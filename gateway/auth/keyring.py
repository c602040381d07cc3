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
import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.types import Scope

from ..config import Settings
from ..protocol.clock import new_id, now_ms
from ..store.base import UNAVAILABLE
from ..store.repository import Store
from ..store.tables import ApiKeyRow
from .identity import IdentityProviders, TokenRejected, looks_like_jwt

KEY_PREFIX = "gwk_"
# Bound on cached lookups, so a flood of made-up keys cannot grow the cache without end.
CACHE_ENTRIES = 10_000
WINDOW_SECONDS = 60.0
# Ids of `GATEWAY_API_KEYS` keys (`context.env_key_id`): never in the database.
ENV_KEY_PREFIX = "env-"
# How often a process writes down that a key was used (`api_keys.last_used_ms`): "last used"
# is to the minute, and a key in steady use costs one write a minute per process.
LAST_USED_EVERY_SECONDS = 60.0

log = logging.getLogger(__name__)

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
    admin: bool = False  # an operator's key: `/v1/admin/...` only (`gateway keys create --admin`)


def usable(row: ApiKeyRow | None, now: int) -> ManagedKey | None:
    if row is None or row.revoked_ms is not None:
        return None
    if row.expires_ms is not None and row.expires_ms <= now:
        return None
    return ManagedKey(row.id, row.project_id, row.max_concurrent_runs, row.runs_per_minute,
                      row.daily_tokens, row.agent, row.admin)


def key_row(key: str, project: str, expires_ms: int | None = None,
            max_concurrent_runs: int | None = None, runs_per_minute: int | None = None,
            daily_tokens: int | None = None, agent: str | None = None,
            admin: bool = False) -> ApiKeyRow:
    return ApiKeyRow(id=new_id("key_"), project_id=project, key_hash=hash_key(key),
                     prefix=key[:len(KEY_PREFIX) + 4], created_ms=now_ms(), expires_ms=expires_ms,
                     max_concurrent_runs=max_concurrent_runs, runs_per_minute=runs_per_minute,
                     daily_tokens=daily_tokens, agent=agent, admin=admin)


class KeyLookupsExceeded(Exception):
    """A client address caused too many lookups of unknown keys; retry after `retry_after`."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(retry_after)
        self.retry_after = retry_after


class FailedLookups:
    """Lookups of unknown keys per client address, per minute (a fixed window each).

    Each made-up `gwk_` key costs a database query; past the limit, an address gets no more
    until its minute is over. Keys a process already knows are answered from the cache and
    never count. Bounded like the key cache: a flood of addresses clears it."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._windows: dict[str, tuple[float, int]] = {}

    def check(self, address: str) -> None:
        started, failures = self._windows.get(address, (0.0, 0))
        left = WINDOW_SECONDS - (time.monotonic() - started)
        if self.per_minute and left > 0 and failures >= self.per_minute:
            raise KeyLookupsExceeded(max(1, math.ceil(left)))

    def record(self, address: str) -> None:
        now = time.monotonic()
        started, failures = self._windows.get(address, (now, 0))
        if now - started >= WINDOW_SECONDS:
            started, failures = now, 0
        if len(self._windows) >= CACHE_ENTRIES:
            self._windows.clear()
        self._windows[address] = (started, failures + 1)


class KeyRing:
    """Looks managed keys up by hash (presented keys) or id (the key a gateway token was
    exchanged with), with a short per-process cache.

    A lookup already under way is shared: when a burst of requests finds the cache empty or
    stale at once (a few hundred runs started together), they wait for one query instead of
    each sending its own to the database every run start also needs."""

    def __init__(self, store: Store, cache_seconds: float,
                 failed_lookups_per_minute: int = 0) -> None:
        self.store, self.cache_seconds = store, cache_seconds
        self._keys: dict[str, tuple[float, ApiKeyRow | None]] = {}
        self._ever_made = False
        self._checked: float | None = None
        self._looking: dict[str, asyncio.Future[Any]] = {}
        self.failed = FailedLookups(failed_lookups_per_minute)
        # Keys once found usable: looking them up again (to see a revocation) is never limited,
        # so a flood of made-up keys from a shared address (a proxy) does not lock them out.
        self._known: set[str] = set()
        self._used_at: dict[str, float] = {}  # key id -> when this process last wrote it down
        self._writes: set[asyncio.Task[None]] = set()

    async def resolve(self, key: str, client: str | None = None) -> ManagedKey | None:
        """The usable managed key `key` is, or None. Looking up a key never found usable for
        `client` (an address) past its limit of failed lookups raises `KeyLookupsExceeded`
        instead of asking."""
        digest = hash_key(key)
        cached = self._fresh(digest)
        if cached is not None:
            return usable(cached[1], now_ms())
        if client is not None and digest not in self._known:
            self.failed.check(client)
        cached = await self._shared(digest, lambda: self._look_up(
            digest, lambda: self.store.find_api_key(digest)))
        found = usable(cached[1], now_ms())
        if found is not None:
            if len(self._known) >= CACHE_ENTRIES:
                self._known.clear()
            self._known.add(digest)
            self.used(found.id)
        elif client is not None:
            self.failed.record(client)
        return found

    async def resolve_id(self, key_id: str) -> ManagedKey | None:
        """The managed key with this id if it is still usable (not revoked, not expired)."""
        name = "id:" + key_id
        cached = self._fresh(name)
        if cached is None:
            cached = await self._shared(name, lambda: self._look_up(
                name, lambda: self.store.get_api_key(key_id)))
        found = usable(cached[1], now_ms())
        if found is not None:
            self.used(found.id)
        return found

    def used(self, key_id: str) -> None:
        """A request came with this key: written down (`last_used_ms`) at most every
        `LAST_USED_EVERY_SECONDS` per process, behind the request, which never waits for it
        (a failed write is retried a minute later, by the next use)."""
        now = time.monotonic()
        if now - self._used_at.get(key_id, -LAST_USED_EVERY_SECONDS) < LAST_USED_EVERY_SECONDS:
            return
        if len(self._used_at) >= CACHE_ENTRIES:
            self._used_at.clear()
        self._used_at[key_id] = now
        write = asyncio.ensure_future(self._write_used(key_id, now_ms()))
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)

    async def _write_used(self, key_id: str, at: int) -> None:
        try:
            await self.store.touch_api_key(key_id, at)
        except Exception as error:  # noqa: BLE001  (a bookkeeping write never fails a request)
            log.debug("could not note the use of key %s: %s", key_id, error)

    def forget(self, row: ApiKeyRow) -> None:
        """This process made a change to the key (revoked it): the next request looks it up
        again instead of trusting the cache."""
        self._keys.pop(row.key_hash, None)
        self._keys.pop("id:" + row.id, None)

    async def keys_ever_made(self) -> bool:
        """Whether any managed key was ever made (revoked and expired ones count). Once true
        it stays true: no key is ever deleted, and authentication never switches itself off.

        The bound is exact: an answer serves for `cache_seconds` from the moment its query
        started, so every request that comes `cache_seconds` after a key was made (in any
        process: `gateway keys create` is another one) sees it. Under steady traffic nobody
        waits: from half that age a new check runs in the background while requests go on
        with the answer so far (the check queues, on SQLite, behind the run starts and log
        commits: docs/decisions/0031). Only a request that finds the answer older than the
        bound (an idle process, or a check slower than half the bound) waits for a fresh one."""
        arrived = time.monotonic()
        while not self._ever_made:
            age = None if self._checked is None else arrived - self._checked
            if age is not None and age <= self.cache_seconds / 2:
                break
            check = self._check_ever_made()
            if age is not None and age <= self.cache_seconds:
                break
            await asyncio.shield(check)  # a check that started too long ago: once more
        return self._ever_made

    def key_made(self) -> None:
        """A key was just made by this process (the operator API): development mode ends
        here at once, and in the other processes within `cache_seconds`."""
        self._ever_made = True

    async def settled(self) -> None:
        """Returns once the lookups and writes under way have (what a test waits for)."""
        await asyncio.gather(*self._looking.values(), *self._writes, return_exceptions=True)

    def _check_ever_made(self) -> asyncio.Future[None]:
        """The check under way, or a new one; its answer is dated from when its query
        started (what it saw is at least that fresh)."""
        pending = self._looking.get("")
        if pending is None:
            async def check() -> None:
                started = time.monotonic()
                made = await self._count()
                self._ever_made = self._ever_made or made
                self._checked = max(started, self._checked or started)

            pending = self._looking[""] = asyncio.ensure_future(check())
            pending.add_done_callback(self._checked_ever_made)
        return pending

    def _checked_ever_made(self, done: asyncio.Future[None]) -> None:
        self._looking.pop("", None)
        if not done.cancelled():
            done.exception()  # a failed check is retried by the next request, not logged

    async def development(self, settings: Settings) -> bool:
        """Whether development mode is on now: asked for (`on`), or `auto` with no key at all."""
        if not settings.development_possible:
            return False
        return settings.development_mode == "on" or not await self.keys_ever_made()

    def _fresh(self, name: str) -> tuple[float, ApiKeyRow | None] | None:
        cached = self._keys.get(name)
        if cached is None or time.monotonic() - cached[0] > self.cache_seconds:
            return None
        return cached

    async def _look_up(self, name: str, query: Callable[[], Awaitable[ApiKeyRow | None]]
                       ) -> tuple[float, ApiKeyRow | None]:
        row = await query()
        if len(self._keys) >= CACHE_ENTRIES:
            self._keys.clear()
        self._keys[name] = found = (time.monotonic(), row)
        return found

    async def _count(self) -> bool:
        return await self.store.count_api_keys() > 0

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
    """What the key lookup before the route found for a request (see `caller.resolve_caller`)."""

    managed: dict[str, ManagedKey]  # the presented keys that are usable managed keys
    development: bool  # development mode is on for this request
    token_key: ManagedKey | None = None  # the usable managed key a gateway token names
    unavailable: bool = False  # the database could not be asked
    lookups_exceeded: KeyLookupsExceeded | None = None  # too many unknown keys from here


async def find_credentials(scope: Scope) -> None:
    """Resolves a presented key (or the key a gateway token names) against the managed keys
    before the route runs, into the request's `credentials` state: `caller()` is synchronous
    and called everywhere, so the asynchronous lookups happen here (the front calls it)."""
    services = getattr(scope["app"].state, "services", None)
    if services is not None:
        client = scope.get("client")
        scope.setdefault("state", {})["credentials"] = await _credentials(
            services, scope["headers"], client[0] if client else None)


def presented(headers: list[tuple[bytes, bytes]]) -> tuple[list[str], str | None]:
    """The keys a request presents (`x-api-key` values) and its bearer token, if any."""
    given = [value.decode("latin-1") for name, value in headers if name == b"x-api-key"]
    bearer = None
    for name, value in headers:
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            bearer = value[7:].decode("latin-1").strip()
    return given, bearer


async def _credentials(services: Any, headers: list[tuple[bytes, bytes]],
                       client: str | None) -> Credentials:
    keyring: KeyRing = services.keyring
    settings: Settings = services.settings
    given, bearer = presented(headers)
    token_key_id = None
    if bearer is not None and looks_like_jwt(bearer):
        token_key_id = _token_key_id(services.identity, bearer)
    elif bearer is not None:
        given.append(bearer)  # a bearer that is not a gateway token may be an API key
    candidates = [k for k in given if k.startswith(KEY_PREFIX) and k not in settings.api_keys]
    try:
        development = await keyring.development(settings)
        managed = {}
        for key in candidates:
            if (found := await keyring.resolve(key, client)) is not None:
                managed[key] = found
        token_key = (await keyring.resolve_id(token_key_id)
                     if token_key_id and not token_key_id.startswith(ENV_KEY_PREFIX) else None)
    except UNAVAILABLE:
        return Credentials({}, False, unavailable=True)
    except KeyLookupsExceeded as exceeded:
        return Credentials({}, False, lookups_exceeded=exceeded)
    return Credentials(managed, development, token_key)


def _token_key_id(identity: IdentityProviders, bearer: str) -> str | None:
    """The key id a valid gateway token names; None for a token that names none, or that is
    not valid (`caller` refuses it, with the reason)."""
    try:
        return identity.verify_access_token(bearer)[2]
    except TokenRejected:
        return None
