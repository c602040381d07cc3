"""chorus started deliveries: a message's row is kept from its run's start to its end (with
the run's id, and its callback only), so that the callback hears how a run lost with its
process ended (`error`, then `lifecycle idle`) from whichever process notices

Revision ID: 0018
Revises: 0015
Create Date: 2026-11-26 20:30:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0018'
down_revision: str | None = '0015'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('chorus_deliveries') as batch:
        batch.add_column(sa.Column('run_id', sqlmodel.sql.sqltypes.AutoString(length=64),
                                   nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('chorus_deliveries') as batch:
        batch.drop_column('run_id')
