"""SQLite's own CPU per run start and end, without the gateway around it, under schema and
setting variants.

    .venv/bin/python -m bench.sqlite_replay                       # 1,000 runs, 5 rounds
    .venv/bin/python -m bench.sqlite_replay --variants base,pages-2k --rounds 7

First the app runs in-process as in `bench.walpages` (`POST /v1/threads/runs`, one-token runs
one at a time) and every statement of every commit that wrote on SQLite's thread is recorded as
SQLite ran it (`bench/sqlite_watch.py`: sqlite3's trace, its parameters written into its text;
transaction control left out), grouped by the commit it went into. Then, in this thread, each variant gets a fresh database
with the migrated schema (copied from the app's, `sqlite_master`), the gateway's pragmas
(WAL, `synchronous=NORMAL`) and the variant's change, and the recorded transactions are
replayed on one sqlite3 connection: the same statements, parameters and commits, with nothing
else on the thread (no event loop, no GIL handovers, no Python beyond the sqlite3 calls).
Printed per variant: the thread's CPU per run (start and end) and the commits' share, median
and range over the rounds, which alternate the variants.

Variants: `base` (the schema as migrated); `no-ix-threads-updated` (the cost of one index
written at every start and end); `partial-uniques` (the three UNIQUE constraints over columns
that are usually NULL, `threads (project_id, client_id)`, `runs (thread_id, idempotency_key)`,
`runs (project_id, client_id)`, as unique indexes `WHERE ... IS NOT NULL`, so a row without
them writes no entry); `logs-without-rowid` (`run_frames` and `run_usage` as WITHOUT ROWID
tables: one b-tree each instead of the table and its key's index); `checkpoint-off` and
`checkpoint-4000` (`wal_autocheckpoint` 0 and 4,000 pages instead of 1,000); `mmap`
(`mmap_size` 256 MiB); `exclusive` (`locking_mode=EXCLUSIVE`: no shared-memory locks per
transaction; not usable by the gateway, whose CLI commands share the file); `cache-16m`
(`cache_size` 16 MiB); `pages-2k` and `pages-8k` (`page_size`, for a new database);
`beside-python` (the base schema, while another thread runs Python all along, as the event
loop does on a busy gateway: sqlite3 releases the GIL around each statement and commit, and
takes it back from that thread).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.start_cost import inprocess_app, one_start, with_upstream

Statement = tuple[str, Any, bool]  # SQL, parameters (a list of them for executemany), many
RUNS = [0]  # the runs recorded: what the figures are per
PRAGMAS = {"checkpoint-off": "PRAGMA wal_autocheckpoint=0",
           "checkpoint-4000": "PRAGMA wal_autocheckpoint=4000",
           "mmap": "PRAGMA mmap_size=268435456", "exclusive": "PRAGMA locking_mode=EXCLUSIVE",
           "cache-16m": "PRAGMA cache_size=-16384", "pages-2k": "PRAGMA page_size=2048",
           "pages-8k": "PRAGMA page_size=8192"}
PARTIAL = ["CREATE UNIQUE INDEX uq_threads_project_client_id ON threads (project_id, client_id)"
           " WHERE client_id IS NOT NULL",
           "CREATE UNIQUE INDEX uq_runs_thread_idempotency ON runs (thread_id, idempotency_key)"
           " WHERE idempotency_key IS NOT NULL",
           "CREATE UNIQUE INDEX uq_runs_project_client_id ON runs (project_id, client_id)"
           " WHERE client_id IS NOT NULL"]
VARIANTS = ["base", "no-ix-threads-updated", "partial-uniques", "logs-without-rowid",
            "beside-python", *PRAGMAS]


def install_recorder(commits: list[list[Statement]]) -> None:
    """Record each commit that wrote, its statements as SQLite ran them (the replay runs them
    as they are: each is parsed again, where the app's prepared statements are not)."""
    from bench.sqlite_watch import Commit, SqliteWatch

    def committed(commit: Commit) -> None:
        if commit.writes:
            commits.append([(sql, (), False) for sql in commit.statements])

    SqliteWatch(committed).install()


async def record(runs: int, upstream_url: str, workdir: Path) -> tuple[Path, list[Any]]:
    commits: list[list[Statement]] = []
    install_recorder(commits)
    path = workdir / "recorded.db"
    app = inprocess_app(f"sqlite+aiosqlite:///{path}", upstream_url)
    async with app.router.lifespan_context(app):
        for _ in range(5):
            await one_start(app)
        await asyncio.sleep(0.3)
        commits.clear()
        for _ in range(runs):
            await one_start(app)
        await asyncio.sleep(0.3)  # the last end's commit
    RUNS[0] = runs
    return path, [commit for commit in commits if commit]


def schema(source: Path, variant: str) -> list[str]:
    """The migrated schema's statements, changed as `variant` says."""
    connection = sqlite3.connect(source)
    try:
        found = connection.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                                   "AND name NOT LIKE 'sqlite_%' ORDER BY rowid").fetchall()
    finally:
        connection.close()
    statements = []
    for name, sql in found:
        if variant == "no-ix-threads-updated" and name == "ix_threads_updated":
            continue
        if variant == "partial-uniques" and name in ("threads", "runs"):
            sql = re.sub(r",\s*CONSTRAINT uq_\w+ UNIQUE \([^)]*\)", "", sql)
        if variant == "logs-without-rowid" and name in ("run_frames", "run_usage"):
            sql += " WITHOUT ROWID"
        statements.append(sql)
    return statements + (PARTIAL if variant == "partial-uniques" else [])


def replay(source: Path, commits: list[list[Statement]], variant: str, workdir: Path,
           count_frames: bool = False) -> tuple[float, float]:
    """(CPU ms, of which commits) per run: the commits replayed on a fresh database; with
    `count_frames`, (WAL frames per run, 0): without checkpoints, the WAL's frame count at
    the end is every page written."""
    with tempfile.TemporaryDirectory(dir=workdir) as directory:
        path = Path(directory) / "replay.db"
        connection = sqlite3.connect(path)
        try:
            if variant in PRAGMAS:
                connection.execute(PRAGMAS[variant]).fetchall()
            if count_frames:
                connection.execute("PRAGMA wal_autocheckpoint=0").fetchall()
            connection.execute("PRAGMA journal_mode=WAL").fetchall()
            connection.execute("PRAGMA synchronous=NORMAL")
            for sql in schema(source, variant):
                connection.execute(sql)
            connection.commit()
            stop = threading.Event()
            if variant == "beside-python":
                threading.Thread(target=_python_until, args=(stop,), daemon=True).start()
            began, committing = time.thread_time(), 0.0
            for statements in commits:
                cursor = connection.cursor()
                for sql, parameters, many in statements:
                    if many:
                        cursor.executemany(sql, parameters)
                    else:
                        cursor.execute(sql, parameters)
                cursor.close()
                before = time.thread_time()
                connection.commit()
                committing += time.thread_time() - before
            used = time.thread_time() - began
            stop.set()
            if count_frames:
                with open(f"{path}-shm", "rb") as shm:  # the WAL index's mxFrame
                    frames = int.from_bytes(shm.read(20)[16:20], "little")
                    return frames / (RUNS[0] or len(commits) / 2), 0
        finally:
            connection.close()
    runs = RUNS[0] or len(commits) / 2  # each run: a start's commit and an end's, mostly
    return used * 1000 / runs, committing * 1000 / runs


def _python_until(stop: threading.Event) -> None:
    """Python bytecode all along (it holds the GIL but for the interpreter's switches)."""
    counted = 0
    while not stop.is_set():
        for _ in range(1000):
            counted += 1


def by_statement(source: Path, commits: list[list[Statement]], workdir: Path) -> None:
    """The base schema's CPU per run by statement (its first words) and for the commits."""
    spent: dict[str, float] = {}
    with tempfile.TemporaryDirectory(dir=workdir) as directory:
        connection = sqlite3.connect(Path(directory) / "replay.db")
        try:
            connection.execute("PRAGMA journal_mode=WAL").fetchall()
            connection.execute("PRAGMA synchronous=NORMAL")
            for sql in schema(source, "base"):
                connection.execute(sql)
            connection.commit()
            for statements in commits:
                cursor = connection.cursor()
                for sql, parameters, many in statements:
                    name = " ".join(sql.split()[:3]) + (" (many)" if many else "")
                    before = time.thread_time()
                    if many:
                        cursor.executemany(sql, parameters)
                    else:
                        cursor.execute(sql, parameters)
                    spent[name] = spent.get(name, 0.0) + time.thread_time() - before
                cursor.close()
                before = time.thread_time()
                connection.commit()
                spent["COMMIT"] = spent.get("COMMIT", 0.0) + time.thread_time() - before
        finally:
            connection.close()
    runs = RUNS[0] or len(commits) / 2
    for name, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        print(f"  {name:40s} {seconds * 1e6 / runs:7.1f} us per run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--variants", default="base,no-ix-threads-updated,partial-uniques,"
                        "logs-without-rowid,checkpoint-off",
                        help=f"comma-separated, of: {', '.join(VARIANTS)}")
    args = parser.parse_args()
    variants = args.variants.split(",")
    if unknown := set(variants) - set(VARIANTS):
        parser.error(f"unknown variants: {', '.join(sorted(unknown))}")
    workdir = Path(tempfile.mkdtemp(prefix="sqlite-replay-"))
    source, commits = with_upstream(lambda upstream_url: record(args.runs, upstream_url, workdir))
    try:
        report(args, variants, source, commits, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def report(args: argparse.Namespace, variants: list[str], source: Path,
           commits: list[list[Statement]], workdir: Path) -> None:
    print(f"recorded {len(commits)} commits, {sum(map(len, commits))} statements; "
          f"load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}", flush=True)
    results: dict[str, list[tuple[float, float]]] = {variant: [] for variant in variants}
    for _ in range(args.rounds):
        for variant in variants:
            results[variant].append(replay(source, commits, variant, workdir))
    by_statement(source, commits, workdir)
    print(f"load average at the end {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    frames = {variant: replay(source, commits, variant, workdir, count_frames=True)[0]
              for variant in variants if variant not in ("exclusive", "checkpoint-off")}
    base = [sample[0] for sample in results.get(variants[0], [])]
    for variant, samples in results.items():
        cpu = [sample[0] for sample in samples]
        commit = statistics.median(sample[1] for sample in samples)
        # Against the first variant in the same round (they ran one after the other).
        ratios = sorted(c / b for c, b in zip(cpu, base, strict=True))
        counted = f"{frames[variant]:.2f}" if variant in frames else "as base"
        print(f"{variant:24s} WAL frames per run {counted}; "
              f"CPU ms per run: median {statistics.median(cpu):.3f} "
              f"(range {min(cpu):.3f} to {max(cpu):.3f}), of which commits {commit:.3f}; "
              f"/ {variants[0]} in the same round: median {statistics.median(ratios):.3f} "
              f"(range {ratios[0]:.3f} to {ratios[-1]:.3f})", flush=True)


if __name__ == "__main__":
    main()
