"""run usage estimated calls: how many of a run's calls to a model reported no usage, so the
gateway counted their tokens itself (an estimate)

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07 14:00:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0019'
down_revision: str | None = '0018'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('run_usage') as batch:
        batch.add_column(sa.Column('estimated_calls', sa.Integer(), nullable=False,
                                   server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('run_usage') as batch:
        batch.drop_column('estimated_calls')
