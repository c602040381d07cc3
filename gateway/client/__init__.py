"""A Python client for the gateway's Tambo v1 API (docs/python-client.md).

    from gateway.client import Client

    with Client("http://127.0.0.1:8000", api_key="...", user_key="user-1") as client:
        stream = client.run("Hello")
        for event in stream:
            print(event.id, event.type, event.delta)

`Client` blocks, `AsyncClient` awaits; both stream a run's AG-UI events (`Event`: `type`, `id`,
`data`), reconnect a dropped stream from the last event id (`Last-Event-ID`), follow a run
from any event id (`join`), cancel it, answer its client tools (`submit_tool_results`), and
list threads, messages and runs, and make, list and delete schedules (`create_cron`);
`verify_webhook` checks a completion webhook's signature on the receiving side. Refused requests raise `GatewayError` with the gateway's
stable problem code. Importing this package loads httpx only, not the server.
"""

from .aio import AsyncClient, AsyncRunStream
from .events import Event, GatewayError
from .sync import Client, RunStream
from .webhooks import verify_webhook


def text_of(events: list[Event]) -> str:
    """The assistant text of a run's events (its `TEXT_MESSAGE_CONTENT` deltas, in order)."""
    return "".join(event.delta for event in events if event.type == "TEXT_MESSAGE_CONTENT")


__all__ = ["AsyncClient", "AsyncRunStream", "Client", "Event", "GatewayError", "RunStream",
           "text_of", "verify_webhook"]
