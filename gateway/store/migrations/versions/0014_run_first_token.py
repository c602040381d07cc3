"""first token on runs: when a run's model streamed its first token (the playground's run list
and `GET /v1/threads/{id}/runs` show the time to it)

Revision ID: 0014
Revises: 0009
Create Date: 2026-11-26 16:45:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0014'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('first_token_ms', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('first_token_ms')
