"""managed API keys: the table `gateway keys create|list|revoke` keeps (hashes only)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 14:00:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('api_keys',
    sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('project_id', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
    sa.Column('key_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('prefix', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('created_ms', sa.BigInteger(), nullable=False),
    sa.Column('expires_ms', sa.BigInteger(), nullable=True),
    sa.Column('revoked_ms', sa.BigInteger(), nullable=True),
    sa.Column('max_concurrent_runs', sa.Integer(), nullable=True),
    sa.Column('runs_per_minute', sa.Integer(), nullable=True),
    sa.Column('daily_tokens', sa.BigInteger(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('key_hash')
    )
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_keys_project_id'), ['project_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_keys_project_id'))
    op.drop_table('api_keys')
