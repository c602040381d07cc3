"""chorus thread scope: a Chorus channel's thread made before channel threads had a scope of
their own (`user_key` NULL, so any client key of the project could read and run on it) is
given to the connection whose messages ran on it (`chorus:<connection id>`, found through the
usage its runs recorded), so that connection keeps its history and no client key sees it

Revision ID: 0021
Revises: 0019
Create Date: 2026-12-07 16:30:00.000000
"""
from collections.abc import Sequence

from alembic import op

revision: str = '0021'
down_revision: str | None = '0019'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("""
        UPDATE threads SET user_key = 'chorus:' || (
            SELECT MIN(run_usage.api_key_id) FROM run_usage
            WHERE run_usage.thread_id = threads.id
              AND substr(run_usage.api_key_id, 1, 4) = 'chc_')
        WHERE substr(threads.id, 1, 7) = 'chorus_' AND threads.user_key IS NULL
          AND EXISTS (SELECT 1 FROM run_usage WHERE run_usage.thread_id = threads.id
                      AND substr(run_usage.api_key_id, 1, 4) = 'chc_')
    """)


def downgrade() -> None:
    op.execute("UPDATE threads SET user_key = NULL "
               "WHERE substr(threads.id, 1, 7) = 'chorus_' "
               "AND substr(threads.user_key, 1, 7) = 'chorus:'")
