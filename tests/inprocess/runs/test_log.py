"""`LiveLog`: positions, waking readers, and closing."""

from __future__ import annotations

import asyncio

import pytest

from gateway.runs.log.live import LiveLog


async def test_positions_follow_appends_and_readers_wake_once_per_change() -> None:
    log = LiveLog("run_1")
    waiting = [asyncio.create_task(log.wait_beyond(0)) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(task.done() for task in waiting)
    assert log.append({"c": "run.started"}).seq == 1
    await asyncio.wait_for(asyncio.gather(*waiting), 1)
    ahead = [log.next_entry({"c": "a"}), log.next_entry({"c": "b"}, 1)]
    log.extend(ahead)
    assert [e.seq for e in log.entries] == [1, 2, 3]
    with pytest.raises(ValueError, match="out of order"):
        log.extend([ahead[0]])


async def test_closing_releases_every_reader() -> None:
    log = LiveLog("run_1")
    reader = asyncio.create_task(log.wait_beyond(5))
    await asyncio.sleep(0)
    log.close()
    await asyncio.wait_for(reader, 1)
    assert log.closed


def test_forgetting_keeps_positions_and_what_a_holder_has_not_consumed() -> None:
    log = LiveLog("run_1")
    for k in range(10):
        log.append({"c": k})
    log.hold("publisher", 4)
    log.forget(7)
    assert (log.first, log.last) == (4, 10)  # the holder is at 4: 5 and later stay
    assert [e.seq for e in log.since(0)] == [5, 6, 7, 8, 9, 10]
    assert [e.seq for e in log.since(8)] == [9, 10]
    log.release("publisher")
    log.forget(7)
    assert [e.seq for e in log.since(0)] == [8, 9, 10]
    log.forget(3)  # never backwards
    assert log.first == 7
    assert log.append({"c": "next"}).seq == 11


def test_what_is_on_disk_leaves_memory_when_its_last_holder_lets_go() -> None:
    """A run's end forgets its flushed log while the Redis publisher still holds part of it;
    once the publisher lets go, memory drops it without another flush (a replay of the ended
    run then reads the database, not a tail kept whole while the log lingers)."""
    log = LiveLog("run_1")
    for k in range(10):
        log.append({"c": k})
    log.hold("redis", 2)
    log.hold("reader", 6)
    log.forget(10)  # the end: all on disk
    assert log.first == 2
    log.release("redis")
    assert log.first == 6  # the reader still has 7 and later to read
    log.release("reader")
    assert (log.first, log.since(0)) == (10, [])
