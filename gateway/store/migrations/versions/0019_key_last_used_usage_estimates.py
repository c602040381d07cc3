"""api keys: when each was last used (to the minute), for the console's Keys page and `gateway
keys list`; run usage: how many of its calls were cut off before their usage was reported
(their tokens are the gateway's estimate)

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
    with op.batch_alter_table('api_keys') as batch:
        batch.add_column(sa.Column('last_used_ms', sa.BigInteger(), nullable=True))
    with op.batch_alter_table('run_usage') as batch:
        batch.add_column(sa.Column('estimated_calls', sa.Integer(), nullable=False,
                                   server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('run_usage') as batch:
        batch.drop_column('estimated_calls')
    with op.batch_alter_table('api_keys') as batch:
        batch.drop_column('last_used_ms')
