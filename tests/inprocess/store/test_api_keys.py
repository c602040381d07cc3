"""Managed API keys in the store: found by hash, revoked once, counted while usable; looked
up once by a burst of requests."""

from __future__ import annotations

import asyncio

from gateway.api.keyring import KeyRing, hash_key, key_row, usable
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


async def test_only_keys_neither_revoked_nor_expired_count_as_usable(store: Store) -> None:
    now = now_ms()
    assert await store.count_usable_api_keys(now) == 0
    live = key_row("gw_live", PROJECT)
    later = key_row("gw_expires-later", PROJECT, expires_ms=now + 60_000)
    expired = key_row("gw_expired", PROJECT, expires_ms=now - 1)
    revoked = key_row("gw_revoked", PROJECT)
    for row in (live, later, expired, revoked):
        await store.add_api_key(row)
    await store.revoke_api_key(revoked.id, PROJECT, now)

    assert await store.count_usable_api_keys(now) == 2
    assert await store.count_usable_api_keys(now + 120_000) == 1
    assert usable(await store.find_api_key(hash_key("gw_expired")), now) is None
    assert usable(await store.find_api_key(hash_key("gw_expires-later")), now) is not None


async def test_a_burst_of_lookups_shares_one_query(store: Store) -> None:
    """Hundreds of run starts at once find the key cache cold together: they wait for one
    query each, not one each."""
    await store.add_api_key(key_row("gw_shared-key", PROJECT))
    ring = KeyRing(store, cache_seconds=60)
    queries: list[str] = []
    find, count = store.find_api_key, store.count_usable_api_keys

    async def counted_find(digest: str) -> ApiKeyRow | None:
        queries.append("find")
        return await find(digest)

    async def counted_count(now: int) -> int:
        queries.append("count")
        return await count(now)

    store.find_api_key = counted_find  # type: ignore[method-assign]
    store.count_usable_api_keys = counted_count  # type: ignore[method-assign]
    found = await asyncio.gather(*(ring.resolve("gw_shared-key") for _ in range(50)),
                                 *(ring.resolve("gw_unknown-key") for _ in range(50)))
    usable_ones = await asyncio.gather(*(ring.any_usable() for _ in range(50)))

    assert sorted(queries) == ["count", "find", "find"]
    assert all(k is not None and k.project == PROJECT for k in found[:50])
    assert all(k is None for k in found[50:])
    assert all(usable_ones)
