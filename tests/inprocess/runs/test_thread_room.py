"""The thread cap's count: a burst of new threads shares one count of the scope's threads
instead of sending one each (on SQLite each is a scan on the process's one connection, where
every run start waits), and still refuses past the cap."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.config import Settings
from gateway.protocol.problems import ApiError
from gateway.runs.admission import threads as thread_rules
from gateway.store.repository import Store
from gateway.store.tables import ThreadRow


async def test_a_burst_of_new_threads_shares_one_count_and_is_held_to_the_cap(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(3):
        await store.add(ThreadRow(id=f"t{n}", project_id="burst", user_key="u",
                                  created_ms=n, updated_ms=n))
    counts: list[str | None] = []
    count = store.count_threads

    async def counted(project_id: str, user_key: str | None, at_most: int) -> Any:
        counts.append(user_key)
        return await count(project_id, user_key, at_most)

    monkeypatch.setattr(store, "count_threads", counted)
    settings = Settings(max_threads_per_user=10, max_threads_per_project=0)
    outcomes = await asyncio.gather(
        *(thread_rules.check_thread_room(settings, store, "burst", "u") for _ in range(10)),
        return_exceptions=True)
    assert counts == ["u"]  # one count for the ten, while it was under way
    refused = [o for o in outcomes if isinstance(o, ApiError)]
    # 3 threads stored: 7 more fit under the cap of 10, the other 3 creations are refused.
    assert len(refused) == 3 and all(o.problem.name == "THREAD_LIMIT_REACHED" for o in refused)
