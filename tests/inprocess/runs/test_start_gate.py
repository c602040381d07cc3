"""The start gate: at most its width of starts at once, the others in the order they came, and
the waiting counted for operators."""

from __future__ import annotations

import asyncio

from gateway.observability import metrics
from gateway.runs.start_gate import StartGate


def waiting() -> float:
    return metrics.STARTS_WAITING._value.get()


async def test_starts_beyond_the_width_wait_and_go_in_arrival_order() -> None:
    gate = StartGate(2)
    inside: list[int] = []
    most, order = 0, []
    release = asyncio.Event()

    async def start(number: int) -> None:
        nonlocal most
        async with gate:
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
        async with gate:
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
    async with gate:  # the slot the leaver never took is free again
        pass
