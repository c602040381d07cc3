"""`gateway usage [--since 30d] [--until ...] [--by day|agent|key|user|model|project]
[--project NAME] [--format table|csv]`: what runs consumed, from the database (`run_usage`).

The console's Usage page and this command read one query (`AdminQueries.admin_usage`) over the
same window (`since` included, `until` left out; by default the 30 days before now) and write
the same cells (`protocol.admin.usage_cells`): for one project and window, `--format csv` is the
console's CSV export, byte for byte. Costs are what each run was priced at when it ended
(litellm's map, or `GATEWAY_MODEL_PRICES`); `unpriced` counts the run-and-model rows nobody
could price, which `cost_usd` leaves out; `estimated` the calls cut off before the provider
reported their usage, whose tokens are the gateway's estimate.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from ..config import Settings
from .commands import Commands

_AGO = re.compile(r"^([0-9]{1,6})([mhd])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
GROUPINGS = ("day", "agent", "key", "user", "model", "project")
MAX_GROUPS = 1000


def add_parser(commands: Commands) -> None:
    usage = commands.add_parser("usage", help="tokens and cost of recent runs, from the "
                                              "database (the console's Usage)")
    usage.add_argument("--since", type=since, default="30d", metavar="WHEN",
                       help="from: a duration back (90m, 24h, 7d) or an ISO date/time (UTC "
                            "unless it says; default: 30d)")
    usage.add_argument("--until", type=since, default=None, metavar="WHEN",
                       help="to (left out): a duration back or an ISO date/time (default: now)")
    usage.add_argument("--by", choices=GROUPINGS, default="day",
                       help="group rows by (default: day, UTC)")
    usage.add_argument("--project", help="only this project's runs (default: every project)")
    usage.add_argument("--format", choices=("table", "csv"), default="table",
                       help="an aligned table with a total (default), or CSV")
    usage.add_argument("--database-url", help="overrides GATEWAY_DATABASE_URL")


def since(value: str, now: datetime | None = None) -> int:
    """Epoch ms of `value`: a duration before now (`90m`, `24h`, `7d`) or an ISO instant."""
    match = _AGO.match(value)
    if match is not None:
        at = (now or datetime.now(UTC)) - timedelta(**{_UNITS[match[2]]: int(match[1])})
        return int(at.timestamp() * 1000)
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError("a duration (90m, 24h, 7d) or an ISO date/time") \
            from None
    return int((at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp() * 1000)


def table(rows: list[dict[str, Any]], by: str) -> list[str]:
    """The report as aligned text lines, with a total line when there is more than one group
    (the console's footer)."""
    from ..protocol.admin import usage_cells

    cells = usage_cells(by, rows)
    if len(rows) > 1:
        total = {key: sum(row.get(key, 0) for row in rows) for key in (
            "calls", "inputTokens", "outputTokens", "reasoningTokens", "cachedInputTokens",
            "unpriced", "estimatedCalls")}
        costs = [row["costUsd"] for row in rows if row.get("costUsd") is not None]
        cells += usage_cells(by, [{**total, "name": "total", "runs": "",
                                   "costUsd": sum(costs) if costs else None}])[1:]
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                      for i, (cell, w) in enumerate(zip(line, widths, strict=True))).rstrip()
            for line in cells]


def run(settings: Settings, args: argparse.Namespace) -> int:
    from ..api.admin.usage import group_name
    from ..protocol.admin import usage_csv
    from ..protocol.clock import now_ms
    from ..store.db import create_engine
    from ..store.queries.admin import Window
    from ..store.repository import Store

    until = now_ms() + 1 if args.until is None else args.until
    if args.since >= until:
        print("gateway: usage: --since must be before --until")
        return 2
    window = Window(args.project, args.since, until)

    async def report() -> list[dict[str, Any]]:
        engine = create_engine(settings.database_url)
        try:
            return await Store(engine).admin_usage(window, args.by, MAX_GROUPS)
        finally:
            await engine.dispose()

    rows = [{**row, "name": group_name(args.by, row["name"])} for row in asyncio.run(report())]
    if args.format == "csv":
        print(usage_csv(args.by, rows), end="")
        return 0
    print("\n".join(table(rows, args.by)))
    if not rows:
        print("(no runs in that window)")
    return 0
