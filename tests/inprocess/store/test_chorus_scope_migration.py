"""Migration 0021 on a database from before it: a Chorus channel's thread (id `chorus_...`,
no user scope) is given to the connection whose runs used it (`chorus:<connection id>`), so
its channel keeps it and no client key reaches it; a `chorus_` thread no connection's run used
(one a client made), and every other thread, are left as they were."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command

from gateway.store.db import alembic_config

THREAD = ("INSERT INTO threads (id, project_id, user_key, created_ms, updated_ms, run_status, "
          "last_run_cancelled) VALUES (:id, 'p', :user_key, 1, 1, 'idle', false)")
USAGE = ("INSERT INTO run_usage (run_id, model, thread_id, project_id, agent, api_key_id, "
         "calls, input_tokens, output_tokens, reasoning_tokens, cached_input_tokens, "
         "created_ms) VALUES (:run, 'm', :thread, 'p', 'a', :key, 1, 1, 1, 0, 0, 1)")


def test_channel_threads_go_to_the_connection_that_used_them(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'old.sqlite'}")
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0019")
    with engine.begin() as connection:
        for thread_id, user_key in (("chorus_channel", None), ("chorus_squatted", None),
                                    ("thr_1", None), ("chorus_owned", "u1")):
            connection.execute(sa.text(THREAD), {"id": thread_id, "user_key": user_key})
        for run, thread, key in (("run_1", "chorus_channel", "chc_1"),
                                 ("run_2", "chorus_squatted", "key_1"),
                                 ("run_3", "thr_1", "chc_1")):
            connection.execute(sa.text(USAGE), {"run": run, "thread": thread, "key": key})
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "head")
    with engine.begin() as connection:
        scopes = dict(connection.execute(sa.text("SELECT id, user_key FROM threads")).all())
    assert scopes == {"chorus_channel": "chorus:chc_1", "chorus_squatted": None,
                      "thr_1": None, "chorus_owned": "u1"}
