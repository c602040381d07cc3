"""crons (schedules that start runs) and webhook deliveries (a run's completion POST)

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07 16:30:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0025'
down_revision: str | None = '0024'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'crons',
        sa.Column('id', sa.String(length=64), primary_key=True),
        sa.Column('project_id', sa.String(length=128), nullable=False),
        sa.Column('user_key', sa.String(length=255), nullable=False),
        sa.Column('key_id', sa.String(length=64), nullable=True),
        sa.Column('signed_in_scope', sa.String(length=255), nullable=True),
        sa.Column('agent', sa.String(length=64), nullable=True),
        sa.Column('thread_id', sa.String(length=64), nullable=True),
        sa.Column('schedule', sa.JSON(), nullable=False),
        sa.Column('message', sa.String(), nullable=False),
        sa.Column('metadata', sa.JSON(), nullable=True),
        sa.Column('webhook', sa.String(length=2048), nullable=True),
        sa.Column('multitask_strategy', sa.String(length=16), nullable=False,
                  server_default='enqueue'),
        sa.Column('created_ms', sa.BigInteger(), nullable=False),
        sa.Column('next_due_ms', sa.BigInteger(), nullable=True),
        sa.Column('last_due_ms', sa.BigInteger(), nullable=True),
        sa.Column('last_run_id', sa.String(length=64), nullable=True),
        sa.Column('last_error', sa.String(length=255), nullable=True),
        sa.Column('runs_started', sa.Integer(), nullable=False, server_default='0'),
    )
    op.create_index('ix_crons_project_user', 'crons', ['project_id', 'user_key', 'created_ms'])
    op.create_index('ix_crons_next_due', 'crons', ['next_due_ms'])
    op.create_table(
        'webhook_deliveries',
        sa.Column('run_id', sa.String(length=64), primary_key=True),
        sa.Column('thread_id', sa.String(length=64), nullable=False),
        sa.Column('project_id', sa.String(length=128), nullable=False),
        sa.Column('url', sa.String(length=2048), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('attempts', sa.Integer(), nullable=False, server_default='0'),
        sa.Column('created_ms', sa.BigInteger(), nullable=False),
        sa.Column('next_attempt_ms', sa.BigInteger(), nullable=False),
        sa.Column('first_attempt_ms', sa.BigInteger(), nullable=True),
        sa.Column('claimed_by', sa.String(length=128), nullable=True),
        sa.Column('claim_until_ms', sa.BigInteger(), nullable=True),
        sa.Column('last_status', sa.Integer(), nullable=True),
        sa.Column('last_error', sa.String(length=255), nullable=True),
        sa.Column('done_ms', sa.BigInteger(), nullable=True),
    )
    op.create_index('ix_webhook_deliveries_state_next', 'webhook_deliveries',
                    ['state', 'next_attempt_ms'])
    op.create_index('ix_webhook_deliveries_project_created', 'webhook_deliveries',
                    ['project_id', 'created_ms'])


def downgrade() -> None:
    op.drop_table('webhook_deliveries')
    op.drop_table('crons')
