"""The start gate: at most its width of starts at once, the others in the order they came, and
the waiting counted for operators; past the process's capacity (runs going, a start's wait,
the loop's CPU a burst would take, the event loop's lateness), a new start is refused at once,
counted by the limit that refused it."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.observability import metrics
from gateway.runs.admission.lateness import LoopLateness
from gateway.runs.admission.start_gate import Overloaded, StartGate


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


def overloaded_refusals(reason: str = "GATEWAY_MAX_START_WAIT_SECONDS") -> tuple[float, float]:
    """Refusals counted by code (OVERLOADED), and by the limit that refused them."""
    return (metrics.REFUSALS.labels("OVERLOADED")._value.get(),
            metrics.OVERLOADED.labels(reason)._value.get())


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
    assert overloaded_refusals() == (refused[0] + 1, refused[1] + 1) and waiting() == 1
    held.set()  # the queued start still gets its turn
    await asyncio.gather(holder, queued)
    assert gate.saturation() is None
    async with gate.turn():
        pass


class Starts:
    """Starts through `gate` that each hold their turn until released, one by one."""

    def __init__(self, gate: StartGate) -> None:
        self.gate = gate
        self.tasks: list[asyncio.Task[None]] = []
        self.releases: list[asyncio.Event] = []

    async def add(self, count: int) -> None:
        for _ in range(count):
            release = asyncio.Event()
            self.releases.append(release)
            self.tasks.append(asyncio.create_task(self._hold(release)))
        await asyncio.sleep(0.01)

    async def _hold(self, release: asyncio.Event) -> None:
        async with self.gate.turn():
            await release.wait()

    async def release(self, number: int) -> None:
        self.releases[number].set()
        await asyncio.sleep(0.01)

    async def finish(self) -> None:
        for release in self.releases:
            release.set()
        await asyncio.gather(*self.tasks)


    async def drain(self, count: int, cpu: list[float], loop_cpu: float) -> None:
        """Ends the next `count` turns one by one, the loop spending `loop_cpu` of CPU before
        each end."""
        for _ in range(count):
            cpu[0] += loop_cpu
            await self.release(next(n for n, r in enumerate(self.releases) if not r.is_set()))


async def test_a_burst_in_one_instant_is_let_in_and_judged_by_its_own_pace() -> None:
    now, cpu = [100.0], [0.0]
    gate = StartGate(2, max_wait=0.75, clock=lambda: now[0], cpu=lambda: cpu[0])
    # A queue earlier, whose starts cost the loop 20 ms each (many streams running then).
    earlier = Starts(gate)
    await earlier.add(12)
    await earlier.drain(10, cpu, loop_cpu=0.02)
    assert gate.pace.seconds() == pytest.approx(0.02)
    assert getattr(gate.saturation(), "setting", None) is None  # 2 under way
    await earlier.finish()
    # Its pace is forgotten with it: 100 starts arriving at once are all let in.
    burst = Starts(gate)
    await burst.add(100)
    assert gate.pace.seconds() == 0.0 and gate.saturation() is None
    assert all(not task.done() for task in burst.tasks)  # none refused
    # Once some of them have started, their pace (10 ms of the loop each) judges newcomers:
    # 91 under way and one more would take 0.92 s.
    await burst.drain(9, cpu, loop_cpu=0.01)
    assert gate.pace.seconds() == pytest.approx(0.01)
    reason = gate.saturation()
    assert reason is not None and reason.setting == "GATEWAY_MAX_START_WAIT_SECONDS"
    assert reason.detail.startswith("a new start would take about 0.92 s")
    with pytest.raises(Overloaded):
        async with gate.turn():
            pass
    await burst.drain(20, cpu, loop_cpu=0.01)  # 71 under way: 0.72 s, let in again
    assert gate.saturation() is None
    await burst.finish()


async def test_only_the_loop_s_cpu_while_starts_queue_counts_toward_their_pace() -> None:
    now, cpu = [100.0], [0.0]
    gate = StartGate(2, max_wait=0.75, clock=lambda: now[0], cpu=lambda: cpu[0])
    for _ in range(12):  # one start at a time, the loop busy with other work meanwhile
        async with gate.turn():
            cpu[0] += 0.5
            now[0] += 0.3  # and each turn long in wall-clock time (waiting for the database)
    assert gate.pace.seconds() == 0.0 and gate.queue_wait() == 0.0
    starts = Starts(gate)
    await starts.add(12)
    assert gate.saturation() is None
    await starts.finish()


async def test_refusals_are_logged_with_their_figures_at_most_once_a_second(
        caplog: pytest.LogCaptureFixture) -> None:
    now, active = [100.0], [5]
    gate = StartGate(1, max_active=5, active=lambda: active[0], clock=lambda: now[0])
    for _ in range(4):
        with pytest.raises(Overloaded):
            async with gate.turn():
                pass
        now[0] += 0.4
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.runs.admission.start_gate"]
    assert len(lines) == 2  # at 0 s and 1.2 s, the second with the count since the first
    assert "5 runs going or starting (GATEWAY_MAX_ACTIVE_RUNS)" in lines[0]
    assert "3 refused, for any limit, since" in lines[1]


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


async def test_the_lateness_watch_sleeps_while_idle_and_sees_load_the_moment_it_arrives() -> None:
    # No timer while nothing runs and nothing asks: an idle process stays idle.
    busy = [False]
    lateness = LoopLateness(busy=lambda: busy[0])
    watch = asyncio.create_task(lateness.watch())
    await asyncio.sleep(0.12)
    assert not lateness.watching
    time.sleep(1.05)  # held while idle: not watched, so not a reason to refuse
    assert lateness.sustained() == 0.0
    # That read (a request at the door) started the timer; runs going keep it running.
    busy[0] = True
    await asyncio.sleep(0.12)
    assert lateness.watching
    for _ in range(16):
        time.sleep(0.06)
        await asyncio.sleep(0)
    assert lateness.sustained() >= 0.04  # a full loop, seen as before
    busy[0] = False  # the runs ended and nobody asks: it stops after its tick
    await asyncio.sleep(0.12)
    assert not lateness.watching and lateness.sustained() == 0.0
    watch.cancel()
    await asyncio.gather(watch, return_exceptions=True)


async def test_a_start_is_refused_while_the_loop_uses_most_of_its_core() -> None:
    share = [0.5]
    gate = StartGate(4, max_share=0.9, share=lambda: share[0])
    async with gate.turn():
        pass
    share[0] = 0.95  # the loop's own work fills its core: another run would make it late
    assert getattr(gate.saturation(), "setting", None) == "GATEWAY_MAX_LOOP_CPU"
    assert "95% of a core" in getattr(gate.saturation(), "detail", "")
    with pytest.raises(Overloaded):
        async with gate.turn():
            pass
    share[0] = 0.5
    async with gate.turn():
        pass


async def test_the_loops_cpu_share_is_its_threads_cpu_over_the_last_second() -> None:
    """Measured at each tick of the lateness watch, from the loop thread's CPU clock: here a
    clock that runs at 95% of the loop's time, then stops (an idle loop)."""
    loop = asyncio.get_running_loop()
    rate = [0.95]
    used = [0.0]
    last = [loop.time()]

    def cpu() -> float:
        now = loop.time()
        used[0] += (now - last[0]) * rate[0]
        last[0] = now
        return used[0]

    lateness = LoopLateness(cpu=cpu)
    assert lateness.cpu_share() == 0.0  # not watched: not measured, never a reason
    watch = asyncio.create_task(lateness.watch())
    await asyncio.sleep(0.2)
    assert lateness.cpu_share() == 0.0  # less than half a window measured
    await asyncio.sleep(0.5)
    assert 0.9 <= lateness.cpu_share() <= 1.0
    rate[0] = 0.0
    await asyncio.sleep(1.1)
    assert lateness.cpu_share() < 0.05
    watch.cancel()
    await asyncio.gather(watch, return_exceptions=True)


async def test_a_loop_that_computes_uses_more_of_its_core_than_one_that_waits() -> None:
    """The real clock: a loop that spins between its turns against one that sleeps."""
    async def share_while(spin: bool) -> float:
        lateness = LoopLateness()
        watch = asyncio.create_task(lateness.watch())
        end = time.monotonic() + 0.8
        while time.monotonic() < end:
            if spin:
                stop = time.perf_counter() + 0.02
                while time.perf_counter() < stop:
                    pass
            await asyncio.sleep(0 if spin else 0.02)
        found = lateness.cpu_share()
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
        return found

    assert await share_while(spin=False) < 0.1
    assert await share_while(spin=True) > 0.2


async def test_slow_work_of_a_start_leaves_its_turn_to_the_others_and_takes_a_new_one() -> None:
    """A start that reads its message's MCP resources (seconds, maybe) does it outside its turn:
    meanwhile another start goes in; after it, the start waits for a turn again, in order."""
    gate = StartGate(1)
    reading, read = asyncio.Event(), asyncio.Event()
    order: list[str] = []

    async def embedding() -> None:
        async with gate.turn():
            order.append("checks")
            async with gate.outside():
                reading.set()
                await read.wait()
            order.append("start")

    async def other() -> None:
        async with gate.turn():
            order.append("other")
            read.set()
            await asyncio.sleep(0.01)  # still inside when the reader comes back
            order.append("other done")

    first = asyncio.create_task(embedding())
    await reading.wait()
    await asyncio.wait_for(other(), 1)  # not held up by the start reading outside
    await first
    assert order == ["checks", "other", "other done", "start"]
    assert gate._inside == 0 and not gate._arrivals and not gate._slots.locked()


async def test_outside_a_turn_the_slow_work_just_runs() -> None:
    gate = StartGate(1)
    async with gate.outside():  # a start from a background task holds no turn
        pass
    async with gate.turn(), gate.outside():
        assert not gate._slots.locked()  # its slot is free meanwhile
    assert gate._inside == 0 and not gate._arrivals
