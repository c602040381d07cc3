"""The start gate: at most its width of starts at once, the others in the order they came, and
the waiting counted for operators; past the process's capacity (runs going, a start's wait,
the event loop's lateness), a new start is refused at once."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.observability import metrics
from gateway.runs.lateness import LoopLateness
from gateway.runs.start_gate import Overloaded, StartGate


def waiting() -> float:
    return metrics.STARTS_WAITING._value.get()


async def test_starts_beyond_the_width_wait_and_go_in_arrival_order() -> None:
    gate = StartGate(2)
    inside: list[int] = []
    most, order = 0, []
    release = asyncio.Event()

    async def start(number: int) -> None:
        nonlocal most
        async with gate.turn():
            inside.append(number)
            order.append(number)
            most = max(most, len(inside))
            await release.wait()
            inside.remove(number)

    tasks = [asyncio.create_task(start(n)) for n in range(6)]
    await asyncio.sleep(0.01)
    assert sorted(inside) == [0, 1] and waiting() == 4
    release.set()
    await asyncio.gather(*tasks)
    assert most == 2 and order == [0, 1, 2, 3, 4, 5] and waiting() == 0


async def test_a_waiting_start_whose_client_left_gives_up_its_place() -> None:
    gate = StartGate(1)
    held = asyncio.Event()

    async def hold() -> None:
        async with gate.turn():
            await held.wait()

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    leaver = asyncio.create_task(hold())
    await asyncio.sleep(0.01)
    assert waiting() == 1
    leaver.cancel()
    await asyncio.gather(leaver, return_exceptions=True)
    assert waiting() == 0
    held.set()
    await holder
    async with gate.turn():  # the slot the leaver never took is free again
        pass


def overloaded_refusals() -> float:
    return metrics.REFUSALS.labels("OVERLOADED")._value.get()


async def test_a_start_is_refused_at_once_while_one_under_way_has_taken_too_long() -> None:
    now = [100.0]
    gate = StartGate(1, max_wait=0.5, clock=lambda: now[0])
    held = asyncio.Event()

    async def start() -> None:
        async with gate.turn():
            await held.wait()

    holder = asyncio.create_task(start())
    await asyncio.sleep(0)
    queued = asyncio.create_task(start())
    await asyncio.sleep(0.01)
    assert waiting() == 1 and gate.saturation() is None
    now[0] += 0.5  # the starts under way have taken their most: a newcomer would wait longer
    refused = overloaded_refusals()
    reason = gate.saturation()
    assert reason is not None and reason.setting == "GATEWAY_MAX_START_WAIT_SECONDS"
    with pytest.raises(Overloaded) as caught:
        async with gate.turn():
            pass
    assert caught.value.problem.name == "OVERLOADED" and caught.value.headers["Retry-After"]
    assert overloaded_refusals() == refused + 1 and waiting() == 1
    held.set()  # the queued start still gets its turn
    await asyncio.gather(holder, queued)
    assert gate.saturation() is None
    async with gate.turn():
        pass


async def test_a_start_is_refused_when_the_queue_ahead_would_take_too_long() -> None:
    now = [100.0]
    gate = StartGate(2, max_wait=0.5, clock=lambda: now[0])
    async with gate.turn():
        now[0] += 0.6  # a start holds its turn 0.6 s at the recent pace
    held = asyncio.Event()

    async def start() -> None:
        async with gate.turn():
            await held.wait()

    tasks = [asyncio.create_task(start()) for _ in range(3)]  # two inside, one queued
    await asyncio.sleep(0.01)
    # Nobody has waited yet, but a newcomer would: 2 ahead of it, a turn free every 0.3 s.
    reason = gate.saturation()
    assert reason is not None and reason.setting == "GATEWAY_MAX_START_WAIT_SECONDS"
    assert gate.queue_wait() == pytest.approx(0.6)
    held.set()
    await asyncio.gather(*tasks)
    assert gate.saturation() is None  # room again: nobody refused for a queue that drained


async def test_starts_going_and_waiting_count_against_the_cap_on_active_runs() -> None:
    active = [0]
    gate = StartGate(1, max_active=3, active=lambda: active[0])
    held = asyncio.Event()

    async def start() -> None:
        async with gate.turn():
            await held.wait()

    tasks = [asyncio.create_task(start()) for _ in range(2)]  # one inside, one waiting
    await asyncio.sleep(0.01)
    assert gate.saturation() is None
    active[0] = 1  # a run already going: 1 + 2 starts reach the cap
    assert getattr(gate.saturation(), "setting", None) == "GATEWAY_MAX_ACTIVE_RUNS"
    with pytest.raises(Overloaded):
        async with gate.turn():
            pass
    held.set()
    await asyncio.gather(*tasks)
    assert gate.saturation() is None


async def test_a_start_is_refused_while_the_event_loop_runs_late() -> None:
    lag = [0.0]
    gate = StartGate(4, max_lag=0.25, lag=lambda: lag[0])
    async with gate.turn():
        pass
    lag[0] = 0.3  # the loop's core is full: every token already waits
    assert getattr(gate.saturation(), "setting", None) == "GATEWAY_MAX_LOOP_LAG_SECONDS"
    with pytest.raises(Overloaded):
        async with gate.turn():
            pass
    lag[0] = 0.0
    async with gate.turn():
        pass


async def watched(lateness: LoopLateness, step: float, steps: int) -> float:
    """The sustained lateness after `steps` steps that each hold the loop for `step` seconds
    (a blocking call, a long computation), with a turn of the loop between them."""
    watch = asyncio.create_task(lateness.watch())
    await asyncio.sleep(0.12)
    for _ in range(steps):
        time.sleep(step)
        await asyncio.sleep(0)
    late = lateness.sustained()
    watch.cancel()
    await asyncio.gather(watch, return_exceptions=True)
    return late


async def test_the_lateness_watch_sees_a_loop_that_is_late_at_every_tick() -> None:
    lateness = LoopLateness()
    assert lateness.sustained() == 0.0  # not watched: never a reason to refuse
    assert await watched(lateness, 0.06, 16) >= 0.04  # a full loop: each tick waits for steps


async def test_one_pause_of_the_loop_is_not_a_reason_to_refuse() -> None:
    # A collection or one long step: one late tick, then the loop keeps time again.
    lateness = LoopLateness()
    watch = asyncio.create_task(lateness.watch())
    await asyncio.sleep(0.12)
    time.sleep(0.3)
    await asyncio.sleep(0.12)
    late = lateness.sustained()
    watch.cancel()
    await asyncio.gather(watch, return_exceptions=True)
    assert late < 0.25


async def test_a_loop_held_past_the_window_is_late_by_as_much() -> None:
    lateness = LoopLateness()
    assert await watched(lateness, 1.05, 1) >= 1.0
