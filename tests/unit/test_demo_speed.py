"""The demo model's pace and its long answer on request: what a newcomer uses to try cancel and
reconnect on a fast stream (docs/playground.md)."""

from __future__ import annotations

import asyncio
import threading

from gateway.config import Settings
from gateway.engine.models import demo


def test_the_speed_setting_sets_the_pause_between_tokens() -> None:
    try:
        assert Settings().demo_tokens_per_second == 83.0
        demo.set_speed(650)
        assert demo._delay[0] == 1 / 650
        demo.set_speed(0)  # as fast as the gateway takes them
        assert demo._delay[0] == 0.0
    finally:
        demo.set_speed(Settings().demo_tokens_per_second)


def test_count_to_n_makes_a_long_answer_and_is_bounded() -> None:
    _, answer = demo.reply_for([{"role": "user", "content": "please count to 1500"}])
    assert answer.startswith("1 2 3 ") and " 1499 1500. " in answer
    _, capped = demo.reply_for([{"role": "user", "content": "count to 99999"}])
    assert f" {demo.MAX_COUNT}. " in capped and f" {demo.MAX_COUNT + 1}" not in capped


def test_the_demo_model_streams_at_the_set_pace() -> None:
    """At speed 0 a 2,000-token answer streams without a pause of its own: every token is
    one turn of the loop (counted, not timed)."""
    sleeps: list[float] = []
    real_sleep = asyncio.sleep
    here = threading.current_thread()

    async def counted(delay: float) -> None:
        # (asyncio.sleep is patched for every thread: an app another test left running in
        # this process sleeps too, and is not this stream)
        if threading.current_thread() is here:
            sleeps.append(delay)
            delay = 0
        await real_sleep(delay)

    async def stream() -> int:
        chunks = 0
        async for _ in demo.DemoModel().astreaming(
                "gateway/demo", [{"role": "user", "content": "count to 2000"}]):
            chunks += 1
        return chunks

    demo.set_speed(0)
    original, demo.asyncio.sleep = demo.asyncio.sleep, counted  # type: ignore[assignment]
    try:
        chunks = asyncio.run(stream())
    finally:
        demo.asyncio.sleep = original  # type: ignore[assignment]
        demo.set_speed(Settings().demo_tokens_per_second)
    assert chunks > 2000 and set(sleeps) == {0.0}
