"""chorus limits and claims: a connection string's own quotas (None: the settings'), and a
waiting message's claim (which process is starting it, until when) so that another process
starts it if the one that stored it died

Revision ID: 0017
Revises: 0009
Create Date: 2026-11-26 17:00:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0017'
down_revision: str | None = '0013'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('chorus_connections') as batch:
        batch.add_column(sa.Column('max_concurrent_runs', sa.Integer(), nullable=True))
        batch.add_column(sa.Column('runs_per_minute', sa.Integer(), nullable=True))
        batch.add_column(sa.Column('daily_tokens', sa.Integer(), nullable=True))
    with op.batch_alter_table('chorus_deliveries') as batch:
        batch.add_column(sa.Column('ticket', sqlmodel.sql.sqltypes.AutoString(length=64),
                                   nullable=True))
        batch.add_column(sa.Column('claimed_by', sqlmodel.sql.sqltypes.AutoString(length=128),
                                   nullable=True))
        batch.add_column(sa.Column('claim_until_ms', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('chorus_deliveries') as batch:
        batch.drop_column('claim_until_ms')
        batch.drop_column('claimed_by')
        batch.drop_column('ticket')
    with op.batch_alter_table('chorus_connections') as batch:
        batch.drop_column('daily_tokens')
        batch.drop_column('runs_per_minute')
        batch.drop_column('max_concurrent_runs')
