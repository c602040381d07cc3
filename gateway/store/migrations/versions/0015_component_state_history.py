"""component state history: a component's state as of each message of its thread, so a fork
copies the state as it was at the fork point (`components.message_seq` marks which message a
state was written after)

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26 16:50:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0015'
down_revision: str | None = '0017'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('components') as batch:
        batch.add_column(sa.Column('message_seq', sa.BigInteger(), nullable=True))
    op.create_table(
        'component_state_history',
        sa.Column('component_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('revision', sa.Integer(), nullable=False),
        sa.Column('thread_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('state', sa.JSON(), nullable=True),
        sa.Column('message_seq', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint('component_id', 'revision'),
    )
    op.create_index('ix_component_state_history_thread', 'component_state_history',
                    ['thread_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_component_state_history_thread', table_name='component_state_history')
    op.drop_table('component_state_history')
    with op.batch_alter_table('components') as batch:
        batch.drop_column('message_seq')
