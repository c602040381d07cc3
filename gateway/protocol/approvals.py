"""What every dialect says of a server tool call waiting for approval (pure constants).

The pause itself is the engine's (`engine/tools/approvals.py`); the dialects show it: the Tambo
dialect in `tambo.run.awaiting_input` (a pending call with an `approval` member), AG-UI 1.0 as
an interrupt whose `reason` and `responseSchema` are these.
"""

from __future__ import annotations

from typing import Any

# Why the run stopped, as AG-UI's `Interrupt.reason` says it.
REASON = "tool_approval"
# The answer an approval expects: what `Interrupt.responseSchema` announces.
RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"},
                   "reason": {"type": "string", "maxLength": 2000},
                   # Approve the call with these arguments instead of the model's (checked
                   # against the tool's schema; the stored call shows them).
                   "editedArgs": {"type": "object"},
                   # And let this tool run without asking for the rest of the thread.
                   "alwaysAllow": {"type": "boolean"}},
    "required": ["approved"],
}
