"""The interpreter's settings for a process that serves many streams at once.

Every stream of the process shares one event loop, so whatever stops the interpreter (a garbage
collection, a thread waiting for the GIL) stops every token of every run:

- the objects alive after start-up (litellm's import leaves hundreds of thousands) are frozen
  out of the collector, so a full collection walks only what requests allocate;
- the young generation is collected far less often than by default: what a token allocates is
  freed by reference counting, without a cycle, so the collections mostly found nothing;
- the GIL's switch interval is shorter, so the database's thread (every SQLite statement is a
  hop there and back) gets the GIL back soon while the loop is busy.

`GATEWAY_STOCK_RUNTIME=gc` leaves all three at the interpreter's defaults. Why each, and when
to drop it: docs/decisions/0010-gc-tuning.md, 0011-switch-interval.md.
"""

from __future__ import annotations

import gc
import sys

SWITCH_INTERVAL_SECONDS = 0.0005
# Garbage collection thresholds of a serving process (young, middle, old generations).
GC_THRESHOLDS = (20_000, 50, 100)


def tune_for_serving() -> None:
    """Freeze what start-up left, collect less often, switch threads sooner. Process-wide:
    called once the app's services are open (its lifespan), never per request."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
