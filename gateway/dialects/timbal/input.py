"""The Timbal HTTP/1.0 write path's requests (`spec/http.md`), and the `RunSpec` a message makes.

Pure: imports only `protocol`. The spec leaves the create body to the implementation; here it
chooses the agent and carries the user scope as the Tambo API's thread creation does
(`agent`, `userKey`, `metadata`). Other fields (the spec's own example has `capabilities` and
`credentials`) are accepted and take part in telling a repeated create from a conflicting one,
but are neither kept nor logged: only a SHA-256 of the whole request is stored.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...protocol.run_spec import RunSpec, UserInput

# The textual form of a UUID (RFC 9562), as the spec's thread ids are written; any version.
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def thread_id(raw: str) -> str | None:
    """The path's thread id in canonical (lower-case) form; None if it is not a UUID."""
    return raw.lower() if UUID.fullmatch(raw) else None


class ThreadCreate(BaseModel):
    """`POST /v1/timbal/threads/{threadId}`: what the thread runs and whose it is."""

    model_config = ConfigDict(extra="allow")

    agent: str | None = Field(None, min_length=1, max_length=64,
                              description="The operator's agent the thread runs (default: the "
                                          "API key's agent, else the default agent).")
    userKey: str | None = Field(None, description="The user scope the thread belongs to "
                                                  "(or `?userKey=`, or a bearer token).")
    metadata: dict[str, Any] | None = Field(None, description="The thread's metadata, as the "
                                                              "Tambo API shows it.")


class MessageMetadata(BaseModel):
    """The spec's message metadata: `role` (only `user`), the client's `timestamp`, anything
    else the client keeps with the message."""

    model_config = ConfigDict(extra="allow")

    role: Literal["user"] = "user"


class MessageSend(BaseModel):
    """`POST /v1/timbal/threads/{threadId}/messages`."""

    content: str = Field(min_length=1, description="The user's message (text).")
    metadata: MessageMetadata | None = None
    webhook: str | None = Field(None, max_length=2048, description="An http(s) URL the "
                                "gateway POSTs the run's end to (docs/webhooks.md).")


class CancelRequest(BaseModel):
    """`POST /v1/timbal/threads/{threadId}/cancel` (the body is optional)."""

    reason: str | None = Field(None, max_length=200)


def fingerprint(body: bytes, user_key: str | None) -> str:
    """The SHA-256 of a create request, as a repeat of it must match: its JSON (key order and
    spacing aside) and its user scope."""
    canonical = json.dumps([json.loads(body), user_key], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def run_spec(body: MessageSend, message_id: str, previous_run_id: str | None) -> RunSpec:
    """The run a message starts: the user's text, continuing the thread's last run (on the
    thread's agent). It runs to its end whoever watches (`continue`): the client is answered
    202 and follows it on the WebSocket, which may come and go."""
    metadata = body.metadata.model_dump(exclude={"role"}) if body.metadata else None
    user = UserInput(blocks=[{"type": "text", "text": body.content}], metadata=metadata or None,
                     id=message_id)
    return RunSpec(user=user, previous_run_id=previous_run_id, on_disconnect="continue",
                   webhook=body.webhook)


# -- the answers (documented in the OpenAPI document; the routes write these fields) ------------


class ThreadCreated(BaseModel):
    threadId: str
    status: Literal["created", "exists"]
    createdAt: str = Field(description="When the thread was created (ISO-8601, ms, UTC).")
    streamUrl: str = Field(description="The thread's WebSocket (`ws://` or `wss://`).")


class MessageAccepted(BaseModel):
    messageId: str = Field(description="The user message's id: the `i` of its frame.")
    threadId: str
    status: Literal["processing"]
    receivedAt: str


class CancelAnswer(BaseModel):
    threadId: str
    status: Literal["cancelling", "idle"] = Field(
        description="`cancelling`: the active run is being stopped (its log ends with "
                    "`run.cancelled`); `idle`: nothing was running.")
    cancelledAt: str | None = None
    runId: str | None = Field(None, description="The run that was cancelled.")
