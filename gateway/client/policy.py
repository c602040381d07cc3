"""When a dropped stream is reopened, and how long to wait before each try."""

from __future__ import annotations

import httpx

from .events import GatewayError

# A connection that failed or was cut: worth reopening. (A refused request is a GatewayError
# and is not retried: it would be refused again.)
RECONNECTABLE = (httpx.TransportError,)
FIRST_DELAY_SECONDS = 0.25
MAX_DELAY_SECONDS = 5.0


class Reconnects:
    """At most `limit` reconnections in a row without an event in between, with a doubling
    wait; an event received resets both."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.tries = 0
        self.last_error: Exception | None = None

    def progress(self) -> None:
        self.tries = 0

    def note(self, error: Exception) -> None:
        self.last_error = error

    def next_delay(self) -> float:
        self.tries += 1
        if self.tries > self.limit:
            reason = f": {self.last_error!r}" if self.last_error else ""
            raise GatewayError(0, "STREAM_LOST", f"the run's stream dropped {self.limit} times "
                                                 f"in a row without an event{reason}")
        return float(min(MAX_DELAY_SECONDS, FIRST_DELAY_SECONDS * 2 ** (self.tries - 1)))
