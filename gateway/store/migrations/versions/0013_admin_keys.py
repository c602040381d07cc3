"""admin keys and the operator console: an admin flag on managed keys; indexes for listing a
project's threads by update time and its runs by creation time, across users

Revision ID: 0013
Revises: 0014
Create Date: 2026-11-26 16:45:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0013'
down_revision: str | None = '0014'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('api_keys') as batch:
        batch.add_column(sa.Column('admin', sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
    op.create_index('ix_threads_project_updated', 'threads', ['project_id', 'updated_ms'])
    op.create_index('ix_runs_project_created', 'runs', ['project_id', 'created_ms'])


def downgrade() -> None:
    op.drop_index('ix_runs_project_created', table_name='runs')
    op.drop_index('ix_threads_project_updated', table_name='threads')
    with op.batch_alter_table('api_keys') as batch:
        batch.drop_column('admin')
