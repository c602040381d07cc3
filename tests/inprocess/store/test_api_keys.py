"""Managed API keys in the store: found by hash or id, revoked once, counted for good (a
revoked key still ends development mode); looked up once by a burst of requests, and not at
all past a client's limit of unknown keys."""

from __future__ import annotations

import asyncio

import pytest

from gateway.auth.keyring import KeyLookupsExceeded, KeyRing, hash_key, key_row, usable
from gateway.config import Settings
from gateway.protocol.clock import now_ms
from gateway.store.repository import Store
from gateway.store.tables import ApiKeyRow
from tests.inprocess.conftest import PROJECT


async def test_a_created_key_is_found_by_its_hash_and_never_by_the_key(store: Store) -> None:
    row = key_row("gw_secret-key-one", PROJECT, runs_per_minute=5)
    await store.add_api_key(row)

    found = await store.find_api_key(hash_key("gw_secret-key-one"))
    assert found is not None and found.id == row.id
    assert (found.project_id, found.runs_per_minute) == (PROJECT, 5)
    assert await store.find_api_key("gw_secret-key-one") is None
    assert await store.find_api_key(hash_key("gw_another-key")) is None


async def test_keys_are_listed_per_project(store: Store) -> None:
    first, second = key_row("gw_a-key", PROJECT), key_row("gw_b-key", "project-2")
    await store.add_api_key(first)
    await store.add_api_key(second)

    assert [k.id for k in await store.list_api_keys(PROJECT)] == [first.id]
    assert {k.id for k in await store.list_api_keys()} == {first.id, second.id}


async def test_a_key_is_revoked_once_and_only_by_its_project(store: Store) -> None:
    row = key_row("gw_revoke-me", PROJECT)
    await store.add_api_key(row)
    now = now_ms()

    assert not await store.revoke_api_key(row.id, "project-2", now)
    assert await store.revoke_api_key(row.id, PROJECT, now)
    assert not await store.revoke_api_key(row.id, PROJECT, now + 1)
    found = await store.find_api_key(hash_key("gw_revoke-me"))
    assert found is not None and found.revoked_ms == now  # still found: the caller judges
    assert usable(found, now) is None


async def test_every_key_ever_made_counts_and_only_live_ones_are_usable(store: Store) -> None:
    now = now_ms()
    assert await store.count_api_keys() == 0
    live = key_row("gw_live", PROJECT)
    later = key_row("gw_expires-later", PROJECT, expires_ms=now + 60_000)
    expired = key_row("gw_expired", PROJECT, expires_ms=now - 1)
    revoked = key_row("gw_revoked", PROJECT)
    for row in (live, later, expired, revoked):
        await store.add_api_key(row)
    await store.revoke_api_key(revoked.id, PROJECT, now)

    assert await store.count_api_keys() == 4  # revoked and expired keys still end dev mode
    assert usable(await store.find_api_key(hash_key("gw_expired")), now) is None
    assert usable(await store.find_api_key(hash_key("gw_expires-later")), now) is not None
    assert usable(await store.get_api_key(revoked.id), now) is None
    assert usable(await store.get_api_key(later.id), now + 120_000) is None
    assert await store.get_api_key("key_none") is None


async def test_development_mode_ends_for_good_with_the_first_key(store: Store) -> None:
    """Revoking (or outliving) the last key never brings development mode back."""
    settings = Settings(api_keys={})
    ring = KeyRing(store, cache_seconds=0)
    assert await ring.development(settings)
    row = key_row("gw_only-key", PROJECT, expires_ms=now_ms() + 60_000)
    await store.add_api_key(row)
    # The bound is 0 s here: the very next request sees the key (it waits for the check).
    assert not await ring.development(settings)
    await store.revoke_api_key(row.id, PROJECT, now_ms())
    assert not await KeyRing(store, cache_seconds=0).development(settings)  # a fresh process
    assert not await ring.development(settings)
    assert await ring.development(Settings(api_keys={}, development_mode="on"))
    assert not await KeyRing(store, 0).development(Settings(development_mode="off"))


async def test_the_first_request_after_the_bound_sees_the_key_and_steady_traffic_never_waits(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer serves for `cache_seconds` from its query's start: past half of it, a check
    runs behind the requests, which go on with the answer so far; past all of it, the first
    request waits for a fresh one, so a key made before then is never missed."""
    clock = [1000.0]
    monkeypatch.setattr("gateway.auth.keyring.time.monotonic", lambda: clock[0])
    settings = Settings(api_keys={})
    ring = KeyRing(store, cache_seconds=2)
    counted: list[int] = []
    count = store.count_api_keys

    async def counted_count() -> int:
        counted.append(1)
        return await count()

    store.count_api_keys = counted_count  # type: ignore[method-assign]
    assert await ring.development(settings) and len(counted) == 1
    clock[0] += 0.9  # fresh: no query
    assert await ring.development(settings) and len(counted) == 1
    await store.add_api_key(key_row("gw_first-key", PROJECT))
    clock[0] += 0.2  # past half the bound: a check starts, this request does not wait for it
    assert await ring.development(settings)
    await ring.settled()
    assert len(counted) == 2 and not await ring.development(settings)

    idle = KeyRing(store, cache_seconds=2)  # another process, idle since its last check
    store.count_api_keys = count  # type: ignore[method-assign]
    assert not await idle.development(settings)
    idle._ever_made = False  # as it stood before the key: its last answer, 2.5 s old
    idle._checked = clock[0] - 2.5
    assert not await idle.development(settings)  # the first request waits, and sees the key


async def test_a_revoked_key_is_not_resolved_by_id_once_the_cache_expires(store: Store) -> None:
    row = key_row("gw_token-key", PROJECT, runs_per_minute=3)
    await store.add_api_key(row)
    ring = KeyRing(store, cache_seconds=0)
    found = await ring.resolve_id(row.id)
    assert found is not None and found.runs_per_minute == 3
    await store.revoke_api_key(row.id, PROJECT, now_ms())
    assert await ring.resolve_id(row.id) is None


async def test_unknown_keys_from_one_address_are_limited(store: Store) -> None:
    await store.add_api_key(key_row("gw_real-key", PROJECT))
    ring = KeyRing(store, cache_seconds=60, failed_lookups_per_minute=3)
    finds: list[str] = []
    find = store.find_api_key

    async def counted_find(digest: str) -> ApiKeyRow | None:
        finds.append(digest)
        return await find(digest)

    store.find_api_key = counted_find  # type: ignore[method-assign]
    assert await ring.resolve("gw_real-key", "10.0.0.1") is not None
    for n in range(3):
        assert await ring.resolve(f"gw_made-up-{n}", "10.0.0.1") is None
    with pytest.raises(KeyLookupsExceeded) as exceeded:
        await ring.resolve("gw_made-up-3", "10.0.0.1")
    assert 1 <= exceeded.value.retry_after <= 60
    assert len(finds) == 4  # the refused lookup never reached the database
    assert await ring.resolve("gw_real-key", "10.0.0.1") is not None  # known keys still pass
    ring.cache_seconds = 0  # and are looked up again (a revocation must be seen), unlimited
    assert await ring.resolve("gw_real-key", "10.0.0.1") is not None
    assert len(finds) == 5
    assert await ring.resolve("gw_made-up-4", "10.0.0.2") is None  # other addresses too


async def test_a_burst_of_lookups_shares_one_query(store: Store) -> None:
    """Hundreds of run starts at once find the key cache cold together: they wait for one
    query each, not one each."""
    await store.add_api_key(key_row("gw_shared-key", PROJECT))
    ring = KeyRing(store, cache_seconds=60)
    queries: list[str] = []
    find, count = store.find_api_key, store.count_api_keys

    async def counted_find(digest: str) -> ApiKeyRow | None:
        queries.append("find")
        return await find(digest)

    async def counted_count() -> int:
        queries.append("count")
        return await count()

    store.find_api_key = counted_find  # type: ignore[method-assign]
    store.count_api_keys = counted_count  # type: ignore[method-assign]
    found = await asyncio.gather(*(ring.resolve("gw_shared-key") for _ in range(50)),
                                 *(ring.resolve("gw_unknown-key") for _ in range(50)))
    made = await asyncio.gather(*(ring.keys_ever_made() for _ in range(50)))

    assert sorted(queries) == ["count", "find", "find"]
    assert all(k is not None and k.project == PROJECT for k in found[:50])
    assert all(k is None for k in found[50:])
    assert all(made)
