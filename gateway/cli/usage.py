"""`gateway usage --since 7d --by agent|key|user|model|project`: what runs consumed, from the
database (`run_usage`), as a table.

Costs are litellm's prices at the time of each run; `unpriced` counts the runs-and-models whose
model litellm could not price, whose cost the `cost_usd` column therefore leaves out.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from ..config import Settings
from .commands import Commands

_SINCE = re.compile(r"^([0-9]{1,6})([mhd])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
COLUMNS = ("runs", "calls", "inputTokens", "outputTokens", "reasoningTokens",
           "cachedInputTokens")
HEADER = ("runs", "calls", "input", "output", "reasoning", "cached", "cost_usd", "unpriced")


def add_parser(commands: Commands) -> None:
    usage = commands.add_parser("usage", help="tokens and cost of recent runs, from the "
                                              "database")
    usage.add_argument("--since", type=since, default="7d", metavar="DURATION",
                       help="how far back: 90m, 24h, 7d (default: 7d)")
    usage.add_argument("--by", choices=("agent", "key", "user", "model", "project"),
                       default="agent", help="group rows by (default: agent)")
    usage.add_argument("--database-url", help="overrides GATEWAY_DATABASE_URL")


def since(value: str, now: datetime | None = None) -> int:
    """Epoch ms of `value` (`90m`, `24h`, `7d`) before now."""
    match = _SINCE.match(value)
    if match is None:
        raise argparse.ArgumentTypeError("a duration: minutes, hours or days (90m, 24h, 7d)")
    at = (now or datetime.now(UTC)) - timedelta(**{_UNITS[match[2]]: int(match[1])})
    return int(at.timestamp() * 1000)


def table(rows: list[dict[str, Any]], by: str) -> list[str]:
    """The report as aligned text lines; a group without a value (no key in development
    mode, a thread without a user) shows as `-`."""
    cells = [[by, *HEADER]]
    for row in rows:
        cost = "-" if row["costUsd"] is None else f"{row['costUsd']:.6f}"
        cells.append([str(row["name"] or "-"), *(str(row[c]) for c in COLUMNS), cost,
                      str(row["unpriced"])])
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                      for i, (cell, w) in enumerate(zip(line, widths, strict=True))).rstrip()
            for line in cells]


def run(settings: Settings, args: argparse.Namespace) -> int:
    from ..store.db import create_engine
    from ..store.repository import Store

    async def report() -> list[dict[str, Any]]:
        engine = create_engine(settings.database_url)
        try:
            return await Store(engine).usage_report(args.since, args.by)
        finally:
            await engine.dispose()

    rows = asyncio.run(report())
    print("\n".join(table(rows, args.by)))
    if not rows:
        print("(no runs since then)")
    return 0
