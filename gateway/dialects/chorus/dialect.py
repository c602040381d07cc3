"""The Chorus dialect as the registry holds it: one endpoint, an agent's connection string."""

from __future__ import annotations

from typing import Any

from ...protocol.operations import Operation
from ..base import WireDialect
from . import input as chorus_input
from . import routes, routes_sweeper

OPERATIONS: tuple[Operation, ...] = (
    Operation("POST", "/v1/chorus/{secret}", "chorusDeliver",
              "Deliver a channel message to an agent (Chorus 0.1)", "chorus",
              description="The path is an agent's connection string (`gateway chorus connect`):"
                          " the secret is the credential, no API key. Answers 200 at once; the "
                          "agent's output is POSTed to `callback` (lifecycle, message, "
                          "tool_call, tool_result, status, error events). Messages of one "
                          "channel run one at a time, in order, on the channel's thread. See "
                          "docs/chorus.md.",
              body=chorus_input.Delivery, result=chorus_input.Accepted, public=True,
              errors=("CHORUS_CONNECTION_NOT_FOUND", "CHORUS_URL_NOT_ALLOWED", "CHORUS_CHANNEL_UNAVAILABLE",
                      "AGENT_NOT_FOUND", "MESSAGE_TOO_LARGE", "DATABASE_UNAVAILABLE")),
)

EXAMPLES: dict[str, dict[str, Any]] = {
    "chorusDeliver": {
        "request": {
            "channel": {"id": "C04ABCDEF", "name": "general", "service": "Slack",
                        "context": "The Slack workspace of Example Inc."},
            "message": {"id": "msg_1", "sender": "alice", "content": "hello"},
            "callback": "https://slack-adapter.example.com/cb/C04ABCDEF/tok_abc123"},
        "response": {"status": "accepted",
                     "threadId": "chorus_3f1c2b7a9d0e4f5a6b7c8d9e0f1a2b3c4d5e6f7a"}},
}

DIALECT = WireDialect("chorus", routes.routes, OPERATIONS, EXAMPLES,
                      background=routes_sweeper.background)
