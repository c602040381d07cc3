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

from ...auth.caller import Caller
from ...auth.identity import chorus_scope
from ...auth.subjects import Limits, Subject, chorus_subject
from ...config import Settings
from ...runs.admission.quotas import Quotas, Ticket
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


def caller(settings: Settings, conn: ChorusConnectionRow) -> Caller:
    """The connection string as a caller: its project, bound to its agent, counted as itself
    (its id is where its runs' usage is attributed)."""
    return Caller(conn.project_id, chorus_scope(conn.id), key_id=conn.id, agent=conn.agent,
                  quota=subject(settings, conn))


def delivery_caller(project: str, row: ChorusDeliveryRow, agent: str | None) -> Caller:
    """The connection that sent a stored message, as the caller of its run: the run holds the
    slot the message took when it was accepted (`run_ticket`), so no limits are read."""
    return Caller(project, chorus_scope(row.connection_id), key_id=row.connection_id,
                  agent=agent, quota=chorus_subject(row.connection_id, Limits()))


def run_ticket(quotas: Quotas, row: ChorusDeliveryRow) -> Ticket:
    """The ticket a stored message's run holds: the slot it took when accepted (released when
    the run ends, by whichever process runs it), counting tokens and usage for its connection.
    Limits are only read when a slot is taken, so the subject needs none here."""
    ticket = Ticket(quotas, [chorus_subject(row.connection_id, Limits())])
    if row.ticket is not None:
        ticket.id = row.ticket
    return ticket
