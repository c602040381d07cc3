"""What the store's tests share."""

from __future__ import annotations

from typing import Any

import aiosqlite
import pytest

from gateway.store.engines import sqlite as group_commit
from gateway.store.engines import sqlite_driver


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every call handed to an aiosqlite thread ("_Trip": a group commit's,
    `store/engines/sqlite.py`)."""
    calls: list[str] = []
    original = aiosqlite.Connection._execute

    async def counted(self: aiosqlite.Connection, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(getattr(fn, "__name__", type(fn).__name__))
        return await original(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
    hand_over = sqlite_driver.hand_over

    def handed(connection: Any, work: Any) -> None:
        calls.append(type(work).__name__)
        hand_over(connection, work)

    monkeypatch.setattr(group_commit, "hand_over", handed)
    return calls
