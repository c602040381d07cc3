"""The lease is a fencing token: once another process has taken a run over (its lease expired
and a reaper failed it), every write its old owner still attempts is refused by the database.

Against the real database of the selected configuration (an SQLite file, or PostgreSQL with
`GATEWAY_TEST_BACKEND=postgres`), through the gateway's own store; the process-level view of
the same guarantee is in test_lifecycle_processes (a stalled owner).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.config import normalise_database_url
from gateway.protocol import timbal
from gateway.protocol.clock import now_ms
from gateway.store.db import create_engine, migrate
from gateway.store.repository import Store
from gateway.store.tables import ComponentRow, MessageRow, RunRow, ThreadRow
from tests.support import engines

OWNER = "host:1:token-a"


def database_url(tmp_path: Path) -> str:
    if engines.ENGINES is not None:
        return normalise_database_url(engines.ENGINES.env_for(tmp_path)["GATEWAY_DATABASE_URL"])
    return f"sqlite+aiosqlite:///{tmp_path / 'fencing.db'}"


async def stale_owner_writes(url: str) -> tuple[list[bool], list[bool]]:
    engine = create_engine(url)
    await migrate(engine)
    store = Store(engine)
    now = now_ms()
    thread = ThreadRow(id="thr_fence", project_id="p", created_ms=now, updated_ms=now)
    run = RunRow(id="run_fence", thread_id=thread.id, project_id="p", created_ms=now,
                 status="running", lease_owner=OWNER, lease_expires_ms=now + 60_000)
    await store.add(thread)
    assert await store.start_run(run, [], now, None) == "started"
    fence = (run.id, OWNER)

    def message(n: int) -> MessageRow:
        return MessageRow(id=f"msg_fence_{n}", thread_id=thread.id, run_id=run.id,
                          role="assistant", parts=[], created_ms=now)

    def component(n: int) -> ComponentRow:
        return ComponentRow(id=f"cmp_fence_{n}", thread_id=thread.id, message_id="msg_fence_1",
                            name="C", props={}, revision=0, updated_ms=now)

    async def writes(n: int) -> list[bool]:
        return [
            await store.append_frames(run.id, [(n, now, {"c": timbal.RUN_STARTED})],
                                      OWNER),
            await store.add(message(n), fence=fence),
            await store.save_message_parts(f"msg_fence_{n}", [{"type": "text"}], fence=fence),
            await store.put_component(component(n), fence=fence),
        ]

    try:
        held = await writes(1)
        # The lease runs out while the owner stalls; a reaper in another process takes over.
        await store.renew_leases([run.id], OWNER, now - 1)
        [expired] = await store.expired_runs(now_ms())
        assert await store.end_orphaned_run(expired, now_ms(), "failed", {"code": "RUN_LOST"},
                                            {"c": timbal.ERROR, "code": "RUN_LOST"})
        stale = await writes(2)
        stale.append(await store.finish_run(run.id, thread.id, "completed", now_ms(),
                                            owner=OWNER))
        frames = [row.frame for row in await store.read_frames(run.id)]
        assert frames[-1].get("code") == "RUN_LOST" and len(frames) == 2
        assert (await store.get_run(run.id)).status == "failed"
        assert [m.id for m in await store.history(thread.id)] == ["msg_fence_1"]
        return held, stale
    finally:
        await engine.dispose()


def test_a_stale_lease_token_is_refused_for_every_write(tmp_path: Path) -> None:
    held, stale = asyncio.run(stale_owner_writes(database_url(tmp_path)))
    assert held == [True, True, True, True], "the holder of the lease writes"
    assert stale == [False, False, False, False, False], "the old owner writes nothing more"
