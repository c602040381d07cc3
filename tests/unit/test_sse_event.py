"""A run's SSE events are encoded by the gateway (`server.sse.sse_event`, several per chunk):
the bytes must be those sse-starlette writes for the same event, or a client would read
another stream."""

from __future__ import annotations

import pytest
from sse_starlette.event import ensure_bytes

from gateway.server.sse import Chunks, sse_event


@pytest.mark.parametrize("data", [
    '{"type":"RUN_STARTED","threadId":"thr_1","runId":"run_1","timestamp":1}',
    '{"delta":"caf\u00e9 \\n \u2603"}', "", "two\nlines", "crlf\r\nand\rcr", "\n", "end\n"])
@pytest.mark.parametrize("position", [None, 1, 12345])
def test_an_event_is_encoded_as_sse_starlette_encodes_it(data: str, position: int | None
                                                          ) -> None:
    message = {"data": data} if position is None else {"data": data, "id": str(position)}
    assert sse_event(data, position).encode() == ensure_bytes(message, "\n")


@pytest.mark.parametrize("stock", [False, True])
def test_a_wake_ups_events_read_the_same_either_way(stock: bool) -> None:
    """The gateway's chunk and sse-starlette's own encoding of each event (the stock path under
    `GATEWAY_STOCK_RUNTIME=sse`) are the same bytes on the wire."""
    events = [('{"a":1}', 7), ("two\nlines", None), ("", 9)]
    sent = b"".join(ensure_bytes(message, "\n") for message in Chunks(stock).sent(events))
    assert sent == b"id: 7\ndata: {\"a\":1}\n\ndata: two\ndata: lines\n\nid: 9\ndata: \n\n"
    assert list(Chunks(stock).sent([])) == []
