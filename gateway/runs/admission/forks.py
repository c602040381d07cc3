"""Forks: a new thread made from a thread's history (`POST /v1/threads/{id}/fork`).

The new thread has the original's user scope, agent and metadata, and a copy of its messages up
to and including `messageId`; its components (those of the copied messages) are copied with
the state they had as of that message: their current state if it has not changed since a later
message arrived, else the state kept when it first changed after one (`store.queries.components`). It
records where it came from (`forkedFrom`), and it starts idle with no runs: its first run needs no `previousRunId`.
The original is never touched: the log stays append-only, and a fork of a thread with a run
going on copies only what is already written.

Regenerating an answer is a fork at the message before it plus a run; editing a message is a
fork at the message before it plus a run with the new text (docs/threads.md). The AG-UI
endpoint does both itself when a client re-sends a history that diverges from the thread's
(`branches`): the fork then takes the client's name for the thread. A fork point
whose history ends on tool calls without results (a paused run's calls) is refused: the model
would receive a call with no answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...protocol.clock import new_id, now_ms
from ...protocol.problems import ApiError, Problem, echo
from ...store.repository import Store
from ...store.tables import ComponentRow, ComponentStateHistoryRow, MessageRow, ThreadRow


@dataclass(frozen=True)
class Fork:
    """The rows a fork writes: its thread, its messages (in order) and its components."""

    thread: ThreadRow
    messages: list[MessageRow]
    components: list[ComponentRow]

    @property
    def copied_bytes(self) -> int:
        """What the fork copies, as JSON: its messages' parts and its components' props and
        state (a fork is metered by it, `quotas.FORK_START_BYTES`)."""
        values: list[object] = [m.parts for m in self.messages]
        values += [(c.props, c.state) for c in self.components]
        return sum(len(json.dumps(v, separators=(",", ":"), default=str)) for v in values)


def history_until(rows: Sequence[MessageRow], message_id: str | None) -> list[MessageRow]:
    """The messages up to and including `message_id` (None: none of them); 404 if it is not
    in the thread."""
    if message_id is None:
        return []
    for index, row in enumerate(rows):
        if row.id == message_id:
            return list(rows[:index + 1])
    thread_id = rows[0].thread_id if rows else None
    raise ApiError(Problem.MESSAGE_NOT_FOUND, f"Message {echo(message_id)} not found",
                   threadId=thread_id, messageId=echo(message_id))


def unanswered_calls(rows: Sequence[MessageRow]) -> list[str]:
    """Tool calls in `rows` without a result in `rows` (components answer themselves)."""
    calls = [p["toolCallId"] for row in rows for p in row.parts if p.get("type") == "tool_call"]
    answered = {p.get("toolCallId") for row in rows for p in row.parts
                if p.get("type") == "tool_result"}
    return [call for call in calls if call not in answered]


def states_as_of(components: dict[str, ComponentRow], kept: dict[str, ComponentStateHistoryRow],
                 message_seq: int) -> dict[str, tuple[dict[str, Any] | None, int]]:
    """Each component's (state, revision) at message `message_seq`: the current one if it was
    written before any later message, else the kept one (`kept`, see
    `ComponentQueries.component_states_as_of`)."""
    result: dict[str, tuple[dict[str, Any] | None, int]] = {}
    for cid, row in components.items():
        earlier = kept.get(cid)
        if (row.message_seq or 0) > message_seq and earlier is not None:
            result[cid] = (earlier.state, earlier.revision)
        else:
            result[cid] = (row.state, row.revision)
    return result


def forked(original: ThreadRow, rows: Sequence[MessageRow],
           components: dict[str, ComponentRow], message_id: str | None,
           states: dict[str, tuple[dict[str, Any] | None, int]]) -> Fork:
    """The fork of `original` at `message_id`: new ids for the thread, its messages and its
    components (with their `states`), and the references between them
    (`messageId`, `componentId`) rewritten."""
    now = now_ms()
    thread = ThreadRow(id=new_id("thr_"), project_id=original.project_id,
                       user_key=original.user_key, meta=original.meta, agent=original.agent,
                       created_ms=now, updated_ms=now, forked_from_thread_id=original.id,
                       forked_from_message_id=message_id)
    message_ids = {row.id: new_id() for row in rows}
    component_ids = {cid: new_id("comp_") for cid, c in components.items()
                     if c.message_id in message_ids}
    messages = [MessageRow(id=message_ids[row.id], thread_id=thread.id, role=row.role,
                           parts=[_renamed(p, message_ids, component_ids) for p in row.parts],
                           meta=row.meta, created_ms=row.created_ms,
                           is_cancelled=row.is_cancelled) for row in rows]
    copies = [ComponentRow(id=new, thread_id=thread.id,
                           message_id=message_ids[components[old].message_id],
                           name=components[old].name, props=components[old].props,
                           state=states[old][0], state_schema=components[old].state_schema,
                           revision=states[old][1], updated_ms=now)
              for old, new in component_ids.items()]
    return Fork(thread, messages, copies)


def _renamed(part: dict[str, Any], message_ids: dict[str, str],
             component_ids: dict[str, str]) -> dict[str, Any]:
    copy = dict(part)
    if copy.get("messageId") in message_ids:
        copy["messageId"] = message_ids[copy["messageId"]]
    if copy.get("componentId") in component_ids:
        copy["componentId"] = component_ids[copy["componentId"]]
    return copy


async def fork_of(store: Store, original: ThreadRow, message_id: str | None) -> Fork:
    """The fork of `original` at `message_id` (None: before its first message), read from the
    store (not written yet): 404 for a message not in the thread, 400 `INVALID_FORK_POINT` for
    one that leaves tool calls without results."""
    rows, components = await store.thread_context(original.id)
    kept = history_until(rows, message_id)
    unanswered = unanswered_calls(kept)
    if unanswered:
        raise ApiError(Problem.INVALID_FORK_POINT,
                       f"Message {message_id} leaves tool calls without results: "
                       f"{', '.join(unanswered)}; fork at the message with their results or "
                       "before the calls", threadId=original.id, messageId=message_id,
                       unansweredToolCallIds=unanswered)
    fork_seq = (kept[-1].seq or 0) if kept else 0
    copied_ids = {row.id for row in kept}
    ours = {cid: c for cid, c in components.items() if c.message_id in copied_ids}
    earlier = await store.component_states_as_of(
        [cid for cid, c in ours.items() if (c.message_seq or 0) > fork_seq], fork_seq)
    return forked(original, kept, ours, message_id, states_as_of(ours, earlier, fork_seq))
