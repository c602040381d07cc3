"""Which part the process depends on is out, and since when: said once, not per request.

A part (the database, Redis) that stops answering is noticed wherever the process meets it
first: `/ready`'s probe, the log writer's commit, a follower's read, the signal channel (which
holds a connection to Redis, or to PostgreSQL without Redis, and loses it at once).
Each of them reports it here; the first report of an outage logs one line and sets the part's
gauge, the rest only read the time it began (`/ready` says it), and the first success after it
logs one line and clears the gauge. Before, every `/ready` during an outage logged a warning of
its own (a balancer polls it several times a second), and nothing said since when.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from prometheus_client import Gauge

DOWN_SINCE = Gauge("gateway_dependency_down_since_seconds",
                   "Since when this process finds the part (database, redis) unreachable, as a "
                   "Unix time; 0 while it answers.", ["part"], multiprocess_mode="liveall")

log = logging.getLogger(__name__)

_since: dict[str, int] = {}  # part -> when it was found out (Unix ms)


def down(part: str, detail: str) -> int:
    """`part` does not answer (`detail`: what failed); returns since when (Unix ms)."""
    since = _since.get(part)
    if since is None:
        since = _since[part] = int(time.time() * 1000)
        DOWN_SINCE.labels(part).set(since / 1000)
        log.warning("%s unreachable since %s: %s", part, _iso(since), detail)
    return since


def up(part: str) -> None:
    """`part` answered: the outage (if any) is over."""
    if part in _since:
        since = _since.pop(part)
        DOWN_SINCE.labels(part).set(0)
        log.warning("%s reachable again, after %.1f s out (since %s)", part,
                    time.time() - since / 1000, _iso(since))


def current() -> dict[str, int]:
    """The parts out now, each with since when (Unix ms)."""
    return dict(_since)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
