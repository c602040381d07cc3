"""Server tools that ask first (loaded with GATEWAY_TOOLS=<this file>). `send_email` records
each time it really runs in a file named after its recipient, so a test can count the runs
whichever process (or in-process app) ran it."""

import hashlib
import tempfile
from pathlib import Path

from gateway import ToolContext, ToolError, server_tool


def sent_log(to: str) -> Path:
    """Where `send_email` records its runs for the recipient `to`."""
    return Path(tempfile.gettempdir()) / f"gateway-sent-{hashlib.sha256(to.encode()).hexdigest()[:16]}"


def times_sent(to: str) -> int:
    path = sent_log(to)
    return len(path.read_text().splitlines()) if path.exists() else 0


def keys_sent(to: str) -> list[str]:
    """The idempotency key of each run of `send_email` for `to`."""
    path = sent_log(to)
    return [line.split("\t")[1] for line in path.read_text().splitlines()] if path.exists() else []


@server_tool(approval=True)
def send_email(ctx: ToolContext, to: str, subject: str) -> dict:
    """Send an email (asks a human first)."""
    with sent_log(to).open("a") as log:
        log.write(f"{subject}\t{ctx.idempotency_key}\n")
    return {"sent": True, "to": to}


@server_tool
def lookup_contact(name: str) -> str:
    """Find a contact's address (runs at once)."""
    return f"{name.lower()}@example.com"


GUESTS = {"type": "object", "properties": {"guests": {"type": "integer"}}, "required": ["guests"]}


@server_tool
async def book_table(ctx: ToolContext, city: str) -> str:
    """Book a table, asking the user how many guests."""
    answer = await ctx.ask(GUESTS, f"How many guests in {city}?")
    if answer is None:
        return "not booked"
    return f"booked for {answer['guests']} in {city}"


@server_tool
def check_host(host: str) -> str:
    """Always fails, with an error the model may see."""
    raise ToolError(f"{host} is unreachable")
