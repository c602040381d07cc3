"""agents: the agent a managed API key runs (`gateway keys create --agent`) and the agent a
thread runs (chosen by its first run, kept for every later one)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26 11:40:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('threads') as batch:
        batch.add_column(sa.Column('agent', sqlmodel.sql.sqltypes.AutoString(length=64),
                                   nullable=True))
    with op.batch_alter_table('api_keys') as batch:
        batch.add_column(sa.Column('agent', sqlmodel.sql.sqltypes.AutoString(length=64),
                                   nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('api_keys') as batch:
        batch.drop_column('agent')
    with op.batch_alter_table('threads') as batch:
        batch.drop_column('agent')
