"""threads: the shared agent state (AG-UI `state`), kept with the thread so `connect` returns
it and server tools change it (issue 44)

Revision ID: 0024
Revises: 0021
Create Date: 2026-12-07 16:45:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0024'
down_revision: str | None = '0021'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('threads') as batch:
        batch.add_column(sa.Column('state', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('threads') as batch:
        batch.drop_column('state')
