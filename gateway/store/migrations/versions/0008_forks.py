"""forks: where a forked thread came from (`POST /v1/threads/{id}/fork`): the thread and the
message its history was copied up to

Revision ID: 0008
Revises: 0012
Create Date: 2026-11-26 13:50:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0008'
down_revision: str | None = '0012'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('threads') as batch:
        batch.add_column(sa.Column('forked_from_thread_id',
                                   sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))
        batch.add_column(sa.Column('forked_from_message_id',
                                   sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('threads') as batch:
        batch.drop_column('forked_from_message_id')
        batch.drop_column('forked_from_thread_id')
