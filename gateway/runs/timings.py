"""Every wait, poll and deadline of a run's life, in one object.

They were module constants scattered over `runs/` and `api/`; gathered here, a test can shrink
them all in one place (`dataclasses.replace(Timings(), lease_seconds=0.2)`) and the server
builds them from its settings (`from_settings`). The defaults are the server's own: the ones
with a `GATEWAY_` setting take it, the others are fixed by design and explained below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import Settings


@dataclass(frozen=True)
class Timings:
    # -- set by the operator (`GATEWAY_*`, see docs/settings.md) ----------------------------
    lease_seconds: float = 30.0
    """A run's lease: renewed every third of it, reaped a quarter of it after it expired."""
    disconnect_grace_seconds: float = 30.0
    """How long a run nobody watches goes on before it is cancelled (`disconnect`)."""
    heartbeat_seconds: float = 15.0
    """SSE comment heartbeat while a stream is idle."""
    drain_seconds: float = 20.0
    """On SIGTERM, how long running runs may go on finishing (`shutdown`)."""
    timbal_thread_wait_seconds: float = 30.0
    """A Timbal client may connect before its thread exists: how long it is waited for."""

    # -- fixed: how often each background loop looks --------------------------------------
    supervisor_tick_seconds: float = 0.25
    """The floor of the supervisor's renewal and reaping intervals (it sleeps until one is
    due)."""
    cancel_poll_seconds: float = 0.25
    """Without Redis, how often a process reads the cancel flags of the runs it owns."""
    feed_min_poll_seconds: float = 0.05
    """A follower in another process polls the log this soon after new frames..."""
    feed_poll_seconds: float = 0.25
    """...backing off to this while nothing arrives."""
    watch_touch_ms: int = 1000
    """How often such a follower marks the run as watched."""
    watch_fresh_ms: int = 3000
    """A remote follower that marked the run this recently still counts as a subscriber."""
    watch_recheck_seconds: float = 1.0
    """After the grace window, how often a run with a remote follower is looked at again."""
    redis_block_ms: int = 1000
    """A blocked Redis stream read wakes this often to see whether the run ended elsewhere."""

    # -- fixed: retries and bounded waits ---------------------------------------------------
    commit_retry_seconds: float = 0.5
    """Between attempts at committing a run's end while the database is unreachable."""
    idempotency_wait_seconds: float = 10.0
    """How long a retry waits for the request holding its `Idempotency-Key` to start its run
    before it is answered 409 `IDEMPOTENCY_KEY_IN_USE`..."""
    idempotency_poll_seconds: float = 0.05
    """...looking this often."""
    remote_cancel_wait_seconds: float = 5.0
    """How long a DELETE waits for a run in another process to end before answering 202..."""
    remote_cancel_poll_seconds: float = 0.02
    """...looking this often."""
    publish_wait_seconds: float = 1.0
    """At shutdown, how long the tails of the runs' endings may take to reach other
    processes."""
    shutdown_flush_seconds: float = 0.5
    """After the last run ended on SIGTERM: time for its subscribers' responses to send the
    terminal events."""
    slow_reader_seconds: float = 30.0
    """A stream reader (SSE, NDJSON, WebSocket) that reads nothing for this long is
    disconnected (its run goes on)."""
    timbal_poll_seconds: float = 0.25
    """How often a Timbal socket looks for a new run on its thread."""

    @classmethod
    def from_settings(cls, settings: Settings) -> Timings:
        return cls(lease_seconds=settings.lease_seconds,
                   disconnect_grace_seconds=settings.disconnect_grace_seconds,
                   heartbeat_seconds=settings.heartbeat_seconds,
                   slow_reader_seconds=settings.slow_reader_seconds,
                   drain_seconds=settings.drain_seconds,
                   timbal_thread_wait_seconds=settings.timbal_thread_wait_seconds)

    @property
    def lease_ms(self) -> int:
        return int(self.lease_seconds * 1000)
