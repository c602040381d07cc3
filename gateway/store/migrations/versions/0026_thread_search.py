"""threads: indexes for thread search (`GET /v1/threads` with filters): a user scope's threads by
agent, by last update and by name; on PostgreSQL, the metadata as JSONB for containment
filters (`metadata.<key>=value`) and the name for prefix matches

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-07 16:30:00.000000
"""
from collections.abc import Sequence

from alembic import op

revision: str = '0026'
down_revision: str | None = '0025'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index('ix_threads_project_user_agent', 'threads',
                    ['project_id', 'user_key', 'agent', 'created_ms'])
    op.create_index('ix_threads_project_user_updated', 'threads',
                    ['project_id', 'user_key', 'updated_ms'])
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('CREATE INDEX ix_threads_metadata ON threads '
                   'USING gin ((CAST(metadata AS JSONB)) jsonb_path_ops)')
        op.execute('CREATE INDEX ix_threads_project_user_name ON threads '
                   '(project_id, user_key, name varchar_pattern_ops)')
    else:
        op.create_index('ix_threads_project_user_name', 'threads',
                        ['project_id', 'user_key', 'name'])


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('DROP INDEX ix_threads_metadata')
    op.drop_index('ix_threads_project_user_name', 'threads')
    op.drop_index('ix_threads_project_user_updated', 'threads')
    op.drop_index('ix_threads_project_user_agent', 'threads')
