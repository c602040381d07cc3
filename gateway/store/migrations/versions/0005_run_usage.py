"""run usage: tokens and cost per run and model, written with the run's end

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26 10:30:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('run_usage',
    sa.Column('run_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('model', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
    sa.Column('thread_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('project_id', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
    sa.Column('agent', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('api_key_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
    sa.Column('user_key', sqlmodel.sql.sqltypes.AutoString(length=512), nullable=True),
    sa.Column('calls', sa.Integer(), nullable=False),
    sa.Column('input_tokens', sa.BigInteger(), nullable=False),
    sa.Column('output_tokens', sa.BigInteger(), nullable=False),
    sa.Column('reasoning_tokens', sa.BigInteger(), nullable=False),
    sa.Column('cached_input_tokens', sa.BigInteger(), nullable=False),
    sa.Column('cost_usd', sa.Float(), nullable=True),
    sa.Column('created_ms', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('run_id', 'model')
    )
    with op.batch_alter_table('run_usage', schema=None) as batch_op:
        batch_op.create_index('ix_run_usage_created', ['created_ms'], unique=False)
        batch_op.create_index('ix_run_usage_thread', ['thread_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('run_usage', schema=None) as batch_op:
        batch_op.drop_index('ix_run_usage_thread')
        batch_op.drop_index('ix_run_usage_created')
    op.drop_table('run_usage')
