"""Names and suggestions read only the conversation's end (`api/metered.recent_history`): the
newest messages until the transcript's characters are there, never the whole thread."""

from __future__ import annotations

from gateway.api.metered import TAIL_PAGE_SIZE, TAIL_PAGES, recent_history
from gateway.engine.assist import TRANSCRIPT_CHARS, transcript
from gateway.protocol.clock import new_id
from gateway.store.repository import Store
from gateway.store.tables import MessageRow
from tests.inprocess.conftest import new_thread


async def test_only_the_tail_is_read(store: Store) -> None:
    thread = await new_thread(store)
    rows = [MessageRow(id=new_id(), thread_id=thread.id, role=role, created_ms=n,
                       parts=[{"id": new_id(), "type": "user" if role == "user" else "agent",
                               "content": f"message {n} " + "x" * 90}])
            for n, role in enumerate(["user", "assistant"] * 500)]
    await store.add(*rows)
    tail = await recent_history(store, thread.id, TRANSCRIPT_CHARS)
    assert len(tail) < 100  # of 1,000
    assert tail[-1]["content"].startswith("message 999 ")
    whole = transcript([{"role": r.role, "content": r.parts[0]["content"]} for r in rows])
    assert transcript(tail) == whole  # the same 4,000 characters the model is shown


async def test_a_thread_without_text_is_read_at_most_a_few_pages(store: Store) -> None:
    thread = await new_thread(store)
    await store.add(*[MessageRow(id=new_id(), thread_id=thread.id, role="assistant",
                                 created_ms=n, parts=[{"id": new_id(), "type": "agent",
                                                       "content": ""}]) for n in range(300)])
    tail = await recent_history(store, thread.id, TRANSCRIPT_CHARS)
    assert len(tail) <= TAIL_PAGES * TAIL_PAGE_SIZE
