"""The pages SQLite writes to its WAL per run start and per run end, and whose they are.

    .venv/bin/python -m bench.walpages                 # 300 one-token runs on a fresh database
    .venv/bin/python -m bench.walpages --starts 1000   # enough to see the autocheckpoints
    .venv/bin/python -m bench.walpages --text "paced 200 1000"   # runs of 200 tokens

The app runs in-process as in `bench.dbthread` (SQLite in a temporary directory, the paced
upstream in its own process, `POST /v1/threads/runs` one at a time, each read to its end).
Every commit on SQLite's thread is seen through the standard library (`bench/sqlite_watch.py`:
sqlite3's own `commit`, and its trace of the statements): before and after it, the WAL index
(`<db>-shm`) gives the WAL's frame count (`mxFrame`) and how many frames a checkpoint has copied
back (`nBackfill`), and the new frames' page numbers are read from their headers in the `-wal`
file. At the end the page numbers are named by SQLite's `dbstat` table (the table or index each
page belongs to). Each commit is told apart by what it wrote (`INSERT runs+INSERT threads+...`:
a start; `UPDATE runs+...`: an end; the log writer's frames).

Printed: frames per commit of each kind, the pages of each kind by table/index (per commit),
how many commits ran an autocheckpoint and what those cost (the commit's wall time and the
thread's CPU, with and without one), so that `wal_autocheckpoint`'s cost per start is pages per
start / 1,000 times a checkpoint's cost. The database is removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sqlite3
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.sqlite_watch import Commit, SqliteWatch, frame_pages
from bench.start_cost import inprocess_app, one_start, with_upstream


def kind_of(statements: list[str]) -> str:
    """What a commit wrote, as `VERB table` of each write, sorted: a start, an end, a log batch."""
    wrote = set()
    for sql in statements:
        words = sql.replace("(", " ").split()
        verb = words[0].upper() if words else ""
        if verb in ("INSERT", "REPLACE", "DELETE") and len(words) > 2:
            wrote.add(f"{verb} {words[2]}")
        elif verb == "UPDATE" and len(words) > 1:
            wrote.add(f"{verb} {words[1]}")
    return "+".join(sorted(wrote)) or "no writes"


class Recorder:
    def __init__(self, path: str) -> None:
        self.path = path
        self.commits: list[dict[str, Any]] = []
        self.page_size = 4096

    def install(self) -> None:
        SqliteWatch(self.committed).install()

    def committed(self, commit: Commit) -> None:
        if Path(commit.path).resolve() != Path(self.path).resolve():
            return
        restarted = commit.wal_after[0] < commit.wal_before[0]
        first = 1 if restarted else commit.wal_before[0] + 1
        self.commits.append({
            "kind": kind_of(commit.statements), "members": max(1, commit.savepoints),
            "frames": commit.frames,
            "pages": frame_pages(self.path, first, commit.wal_after[0], self.page_size),
            "checkpointed": commit.checkpointed,
            "ms": commit.commit_s * 1000, "cpu_ms": commit.commit_cpu * 1000})


def names(path: str) -> dict[int, str]:
    connection = sqlite3.connect(path)
    try:
        return {page: name for name, page in connection.execute("SELECT name, pageno FROM dbstat")}
    finally:
        connection.close()


def report(recorder: Recorder, starts: int) -> None:
    owner = names(recorder.path)
    by_kind: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for commit in recorder.commits:
        by_kind[commit["kind"]].append(commit)
    for kind, commits in sorted(by_kind.items(), key=lambda item: -len(item[1])):
        pages: collections.Counter[str] = collections.Counter()
        for commit in commits:
            pages.update(owner.get(page, f"page {page} (new/free)") for page in commit["pages"])
        frames = [c["frames"] for c in commits]
        print(json.dumps({"kind": kind, "commits": len(commits),
                          "per_start": round(len(commits) / starts, 2),
                          "frames_per_commit": round(statistics.mean(frames), 2),
                          "frames_min_max": [min(frames), max(frames)],
                          "pages_per_commit": {name: round(n / len(commits), 2)
                                               for name, n in pages.most_common()}}))
    total = sum(c["frames"] for c in recorder.commits)
    ckpt = [c["ms"] for c in recorder.commits if c["checkpointed"]]
    plain = [c["ms"] for c in recorder.commits if not c["checkpointed"]]
    ckpt_cpu = [c["cpu_ms"] for c in recorder.commits if c["checkpointed"]]
    plain_cpu = [c["cpu_ms"] for c in recorder.commits if not c["checkpointed"]]
    print(json.dumps({"summary": {
        "starts": starts, "commits": len(recorder.commits),
        "frames_per_start": round(total / starts, 2),
        "checkpoints": len(ckpt),
        "commit_ms_median_plain": round(statistics.median(plain), 3) if plain else None,
        "commit_ms_median_checkpointing": round(statistics.median(ckpt), 2) if ckpt else None,
        "checkpoint_ms_per_start": round(
            (sum(ckpt) - len(ckpt) * statistics.median(plain)) / starts, 3) if ckpt else 0.0,
        "commit_cpu_ms_median_plain": round(statistics.median(plain_cpu), 3) if plain else None,
        "commit_cpu_ms_median_checkpointing": (round(statistics.median(ckpt_cpu), 2)
                                               if ckpt else None),
        "commit_cpu_ms_per_start": round((sum(plain_cpu) + sum(ckpt_cpu)) / starts, 3),
        "checkpoint_cpu_ms_per_start": round(
            (sum(ckpt_cpu) - len(ckpt) * statistics.median(plain_cpu)) / starts, 3)
        if ckpt else 0.0,
    }}), flush=True)


async def measure(args: argparse.Namespace, upstream_url: str) -> None:

    with tempfile.TemporaryDirectory(prefix="walpages-") as workdir:
        await measure_in(args, upstream_url, str(Path(workdir) / "gateway.db"))


async def measure_in(args: argparse.Namespace, upstream_url: str, path: str) -> None:
    recorder = Recorder(path)
    recorder.install()
    app = inprocess_app(f"sqlite+aiosqlite:///{path}", upstream_url, args.env)
    async with app.router.lifespan_context(app):
        for _ in range(args.warmup):
            await one_start(app)
        await asyncio.sleep(0.3)
        recorder.commits.clear()
        for _ in range(args.starts):
            await one_start(app, text=args.text)
        await asyncio.sleep(0.3)  # the last end's commit
        report(recorder, args.starts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--text", default=None,
                        help="the runs' input, e.g. 'paced 200 100000' (200 tokens, 0.1 ms apart)")
    parser.add_argument("--env", action="append", default=[], help="NAME=value setting")
    args = parser.parse_args()
    print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}", flush=True)
    with_upstream(lambda upstream_url: measure(args, upstream_url))


if __name__ == "__main__":
    main()
