"""timbal and chorus: the fingerprint of a Timbal thread's create request (client-chosen ids);
Chorus connection strings (hashed) and the messages waiting for their channel's thread

Revision ID: 0009
Revises: 0007
Create Date: 2026-11-26 13:30:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0009'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('threads') as batch:
        batch.add_column(sa.Column('create_fingerprint',
                                   sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))
    op.create_table(
        'chorus_connections',
        sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('project_id', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column('agent', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('secret_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('prefix', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('created_ms', sa.BigInteger(), nullable=False),
        sa.Column('revoked_ms', sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('secret_hash'),
    )
    op.create_table(
        'chorus_deliveries',
        sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('thread_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('connection_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('payload', sa.JSON(), nullable=False),
        sa.Column('created_ms', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_chorus_deliveries_thread', 'chorus_deliveries',
                    ['thread_id', 'created_ms'])


def downgrade() -> None:
    op.drop_index('ix_chorus_deliveries_thread', table_name='chorus_deliveries')
    op.drop_table('chorus_deliveries')
    op.drop_table('chorus_connections')
    with op.batch_alter_table('threads') as batch:
        batch.drop_column('create_fingerprint')
