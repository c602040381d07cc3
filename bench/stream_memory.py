"""What each open run stream holds in memory, in-process, by the line that allocated it.

    .venv/bin/python -m bench.stream_memory                  # 300 streams, top 25 lines
    .venv/bin/python -m bench.stream_memory --streams 100 --top 40

The whole app (as `bench/start_cost.py`: SQLite in a temporary directory, the paced upstream of
`bench/paced.py` in its own process) with `tracemalloc` on. `--streams` runs are started one
after another and read to their end by in-process readers (no sockets: the server's own
connection objects are not counted, see `bench/concurrency.py` for RSS from outside); once all
of them stream, the memory traced beyond what the idle process held, divided by the streams, is
the figure, and the lines that allocated it say what a stream holds.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import tempfile
import tracemalloc
from pathlib import Path

from bench.concurrency import Source
from bench.start_cost import batch, one_start
from tests.support.gateway_server import ROOT


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def measure(args: argparse.Namespace, upstream_url: str) -> None:
    from gateway.app import create_app
    from tests.support.inprocess_app import settings_from

    workdir = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    settings = settings_from({
        "GATEWAY_DATABASE_URL": f"sqlite+aiosqlite:///{workdir / 'gateway.db'}",
        "GATEWAY_MODEL": "openai/paced", "GATEWAY_MODEL_API_BASE": f"{upstream_url}/v1",
        "GATEWAY_MODEL_API_KEY": "sk-bench", "GATEWAY_MAX_ACTIVE_RUNS": "0",
        "GATEWAY_MAX_START_WAIT_SECONDS": "0", "GATEWAY_MAX_LOOP_LAG_SECONDS": "0"})
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        await batch(app, 20, False)  # warm-up: lazy imports, caches, the connection pool
        gc.collect()
        tracemalloc.start(args.frames)
        before, rss_before = tracemalloc.take_snapshot(), rss_kib()
        body = f"paced {args.tokens} {args.rate}"
        readers = []
        for _ in range(args.streams):  # one after another, as a ramp does
            readers.append(asyncio.ensure_future(one_start(app, text=body)))
            await asyncio.sleep(0)
        await asyncio.sleep(args.settle)
        gc.collect()
        after, rss_after = tracemalloc.take_snapshot(), rss_kib()
        traced = sum(s.size for s in after.statistics("filename")) - \
            sum(s.size for s in before.statistics("filename"))
        print(f"{args.streams} streams: traced {traced / args.streams / 1024:.1f} KiB per "
              f"stream, RSS {(rss_after - rss_before) / args.streams:.1f} KiB per stream "
              f"(tracemalloc's own bookkeeping included)")
        for stat in after.compare_to(before, args.group)[:args.top]:
            where = " < ".join(
                f"{frame.filename.split('site-packages/')[-1].split(str(ROOT) + '/')[-1]}"
                f":{frame.lineno}" for frame in reversed(stat.traceback))
            print(f"{stat.size_diff / args.streams:9.0f} B/stream {stat.count_diff:7d} blocks  "
                  f"{where}")
        tracemalloc.stop()
        await asyncio.gather(*readers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=300)
    parser.add_argument("--tokens", type=int, default=200, help="tokens per run")
    parser.add_argument("--rate", type=int, default=5, help="tokens a second per run")
    parser.add_argument("--settle", type=float, default=8.0,
                        help="seconds after the last start before the snapshot")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--frames", type=int, default=1, help="traceback depth kept")
    parser.add_argument("--group", default="lineno", choices=["lineno", "filename", "traceback"])
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    upstream = Source("upstream")  # the paced upstream, waited for until it answers
    try:
        import uvloop

        uvloop.run(measure(args, upstream.url))
    finally:
        upstream.stop()


if __name__ == "__main__":
    main()
