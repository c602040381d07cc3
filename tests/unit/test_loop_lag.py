"""The lag monitor's collection count: what the benchmark reads to tell a garbage collection
from other stalls of the event loop."""

from __future__ import annotations

import gc

from gateway.server.loop_lag import CollectionTimer


def test_collections_are_counted_and_timed_then_reset_when_taken() -> None:
    timer = CollectionTimer()
    gc.callbacks.append(timer)
    try:
        garbage = [[] for _ in range(50_000)]
        for item in garbage:
            item.append(item)  # cycles: only a collection frees them
        del garbage, item
        gc.collect()
        gc.collect()
    finally:
        gc.callbacks.remove(timer)
    count, longest = timer.take()
    assert count >= 2 and longest > 0
    assert timer.take() == (0, 0.0)
