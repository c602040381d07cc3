"""Ids are ULIDs, encoded by the gateway itself (`protocol/clock.new_id`): the same 26
characters of Crockford's base32 a ULID library writes, sortable by the millisecond they were
made in, with 80 random bits after it."""

from __future__ import annotations

import time

from gateway.protocol.clock import new_id

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def decoded(text: str) -> int:
    value = 0
    for char in text:
        value = value * 32 + CROCKFORD.index(char)
    return value


def test_an_id_is_a_ulid_of_the_millisecond_it_was_made_in() -> None:
    before = time.time_ns() // 1_000_000
    made = new_id("run_")
    after = time.time_ns() // 1_000_000
    assert made.startswith("run_")
    ulid = made.removeprefix("run_")
    assert len(ulid) == 26 and set(ulid) <= set(CROCKFORD)
    assert ulid[0] in "01234567"  # 128 bits in 130: the first character holds three
    assert before <= decoded(ulid) >> 80 <= after


def test_ids_sort_by_time_and_do_not_repeat() -> None:
    first = new_id()
    time.sleep(0.002)
    second = new_id()
    assert first < second
    assert len({new_id() for _ in range(10_000)}) == 10_000
