"""thread context and retention: what a thread's last run sent the model (its counted input
tokens, whether older turns were left out, the summary that stands in for them), and an index
on `threads.updated_ms` for pruning threads by age

Revision ID: 0012
Revises: 0006
Create Date: 2026-11-26 13:40:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0012'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('threads') as batch:
        batch.add_column(sa.Column('context_tokens', sa.Integer(), nullable=True))
        batch.add_column(sa.Column('context_trimmed', sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
        batch.add_column(sa.Column('context_summary', sa.JSON(), nullable=True))
        batch.create_index('ix_threads_updated', ['updated_ms'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('threads') as batch:
        batch.drop_index('ix_threads_updated')
        batch.drop_column('context_summary')
        batch.drop_column('context_trimmed')
        batch.drop_column('context_tokens')
