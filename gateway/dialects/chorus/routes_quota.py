"""A Chorus connection string's quotas: it is a credential, so its messages are limited as a
managed API key's runs are (`runs/admission/quotas.py`), per connection, across processes when the
counters are Redis's.

A message takes its slot when it is accepted, before it is stored: one over a limit is refused
at once (429 with `Retry-After`) and nothing is stored, so the channel service knows to send it
again. The slot is held while the message waits for its channel's thread and while its run
goes, and its run's tokens count against the connection's daily budget; the run's usage is
attributed to the connection (`run_usage.api_key_id` is its `chc_` id). "Concurrent runs" of a
connection are therefore its messages in flight, which also bounds how many wait in the
database.
"""

from __future__ import annotations

from ...config import Settings
from ...runs.admission.quotas import Limits, Quotas, Subject, Ticket, chorus_subject
from ...store.tables import ChorusConnectionRow, ChorusDeliveryRow


def _own(value: int | None, default: int) -> int:
    return default if value is None else value


def limits(settings: Settings, conn: ChorusConnectionRow) -> Limits:
    """The connection's own limits, or the settings' defaults for those it does not set."""
    return Limits(_own(conn.max_concurrent_runs, settings.chorus_concurrent_runs),
                  _own(conn.runs_per_minute, settings.chorus_runs_per_minute),
                  _own(conn.daily_tokens, settings.chorus_daily_tokens))


def subject(settings: Settings, conn: ChorusConnectionRow) -> Subject:
    return chorus_subject(conn.id, limits(settings, conn))


async def admit(quotas: Quotas, settings: Settings, conn: ChorusConnectionRow) -> Ticket:
    """A slot for a new message of the connection, or the 429 (`QuotaExceeded`)."""
    return await quotas.acquire([subject(settings, conn)])


def run_ticket(quotas: Quotas, row: ChorusDeliveryRow) -> Ticket:
    """The ticket a stored message's run holds: the slot it took when accepted (released when
    the run ends, by whichever process runs it), counting tokens and usage for its connection.
    Limits are only read when a slot is taken, so the subject needs none here."""
    ticket = Ticket(quotas, [chorus_subject(row.connection_id, Limits())])
    if row.ticket is not None:
        ticket.id = row.ticket
    return ticket
