"""A Chorus message delivery (`spec/chorus.md` §2), and the run it starts.

Pure: imports only `protocol`. One thread per channel and connection: its id is derived from
the channel's id with the connection's secret (its hash, which only the gateway keeps), so
history carries over from message to message with nothing to look up, and nobody without the
connection string can compute it. The channel's description (name, service, context) and the message's
sender reach the model as the message's context; the sender is kept in its metadata too.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...protocol.run_spec import RunSpec, UserInput

TEXT = 256  # the most characters of an id, name or sender
URL = 2048


class Channel(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=TEXT)
    name: str | None = Field(None, max_length=TEXT)
    service: str | None = Field(None, max_length=TEXT)
    context: str | None = Field(None, max_length=8000)


class Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=TEXT)
    sender: str = Field(min_length=1, max_length=TEXT)
    content: str = Field(min_length=1)


class McpServer(BaseModel):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    url: str = Field(min_length=1, max_length=URL)
    headers: dict[str, str] | None = Field(None, max_length=32)


class Delivery(BaseModel):
    """`POST {connection string}`: where, what, and where the output goes."""

    model_config = ConfigDict(extra="ignore")

    channel: Channel
    message: Message
    callback: str = Field(min_length=1, max_length=URL)
    mcp: list[McpServer] | None = Field(None, max_length=8)


THREAD_PREFIX = "chorus_"


def thread_id(secret_hash: str, agent: str, channel_id: str) -> str:
    """The channel's thread for the connection whose secret hashes to `secret_hash` (the same
    id for every message of the channel): a keyed hash, so the channel's public parts (its
    id, the project, the agent) do not give it away."""
    digest = hmac.new(secret_hash.encode(), f"{agent}\0{channel_id}".encode(),
                      hashlib.sha256).hexdigest()
    return f"{THREAD_PREFIX}{digest[:40]}"


def legacy_thread_id(project: str, agent: str, channel_id: str) -> str:
    """The id a channel's thread had before it was keyed (from public parts only): such a
    thread goes on serving its channel only if it is the connection's own (its scope)."""
    digest = hashlib.sha256(f"{project}\0{agent}\0{channel_id}".encode()).hexdigest()
    return f"{THREAD_PREFIX}{digest[:40]}"


def run_id(delivery_id: str) -> str:
    """The run a delivery starts: one id per delivery, so it can never start twice."""
    return f"run_{delivery_id}"


def _context(delivery: Delivery) -> dict[str, Any]:
    channel = delivery.channel.model_dump(exclude_none=True)
    return {"channel": channel, "sender": delivery.message.sender,
            "note": "This message comes from a shared chat channel; your answer is posted "
                    "there."}


def run_spec(delivery: Delivery, message_id: str, previous_run_id: str | None) -> RunSpec:
    """The run of one message: its text, with the channel and sender as context, on the
    channel thread's agent; it runs to its end (nobody watches a stream: the output goes to
    the callback)."""
    user = UserInput(blocks=[{"type": "text", "text": delivery.message.content}],
                     context=_context(delivery),
                     metadata={"sender": delivery.message.sender,
                               "chorusMessageId": delivery.message.id},
                     id=message_id)
    return RunSpec(user=user, previous_run_id=previous_run_id, on_disconnect="continue")


class Accepted(BaseModel):
    """The answer to a delivery: it is stored, its run follows."""

    status: str = Field(description="`accepted`.")
    threadId: str = Field(description="The channel's thread (the same for every message of "
                                      "the channel).")
