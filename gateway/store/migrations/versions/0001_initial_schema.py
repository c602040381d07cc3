"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-22 20:47:31.087878
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision: str = '0001'
down_revision: Union[str, None] = None
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # Alembic's generated commands, one table per function (same order, same DDL).
    _components()
    _messages()
    _runs()
    _threads()


def _components() -> None:
    op.create_table('components',
    sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('thread_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('message_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('props', sa.JSON(), nullable=False),
    sa.Column('state', sa.JSON(), nullable=True),
    sa.Column('state_schema', sa.JSON(), nullable=True),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('updated_ms', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('components', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_components_thread_id'), ['thread_id'], unique=False)


def _messages() -> None:
    op.create_table('messages',
    sa.Column('seq', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('thread_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('run_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
    sa.Column('role', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('parts', sa.JSON(), nullable=False),
    sa.Column('metadata', sa.JSON(), nullable=True),
    sa.Column('created_ms', sa.BigInteger(), nullable=False),
    sa.Column('is_cancelled', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('seq'),
    sa.UniqueConstraint('id')
    )
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.create_index('ix_messages_thread_seq', ['thread_id', 'seq'], unique=False)


def _runs() -> None:
    op.create_table('run_frames',
    sa.Column('run_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('ts_ms', sa.BigInteger(), nullable=False),
    sa.Column('frame', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('run_id', 'seq')
    )
    op.create_table('runs',
    sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('thread_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('project_id', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('previous_run_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
    sa.Column('created_ms', sa.BigInteger(), nullable=False),
    sa.Column('started_ms', sa.BigInteger(), nullable=True),
    sa.Column('finished_ms', sa.BigInteger(), nullable=True),
    sa.Column('error', sa.JSON(), nullable=True),
    sa.Column('pending_tool_calls', sa.JSON(), nullable=True),
    sa.Column('request', sa.JSON(), nullable=True),
    sa.Column('idempotency_key', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
    sa.Column('on_disconnect', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('lease_owner', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
    sa.Column('lease_expires_ms', sa.BigInteger(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('thread_id', 'idempotency_key', name='uq_runs_thread_idempotency')
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index('ix_runs_status_lease', ['status', 'lease_expires_ms'], unique=False)
        batch_op.create_index('ix_runs_thread_created', ['thread_id', 'created_ms'], unique=False)


def _threads() -> None:
    op.create_table('threads',
    sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('project_id', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
    sa.Column('user_key', sqlmodel.sql.sqltypes.AutoString(length=512), nullable=True),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
    sa.Column('metadata', sa.JSON(), nullable=True),
    sa.Column('created_ms', sa.BigInteger(), nullable=False),
    sa.Column('updated_ms', sa.BigInteger(), nullable=False),
    sa.Column('run_status', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('current_run_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
    sa.Column('last_completed_run_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
    sa.Column('last_run_cancelled', sa.Boolean(), nullable=False),
    sa.Column('last_run_error', sa.JSON(), nullable=True),
    sa.Column('pending_tool_calls', sa.JSON(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('threads', schema=None) as batch_op:
        batch_op.create_index('ix_threads_project_user_created', ['project_id', 'user_key', 'created_ms'], unique=False)


def downgrade() -> None:
    # ### commands auto generated by Alembic - please adjust! ###
    with op.batch_alter_table('threads', schema=None) as batch_op:
        batch_op.drop_index('ix_threads_project_user_created')

    op.drop_table('threads')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('ix_runs_thread_created')
        batch_op.drop_index('ix_runs_status_lease')

    op.drop_table('runs')
    op.drop_table('run_frames')
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_index('ix_messages_thread_seq')

    op.drop_table('messages')
    with op.batch_alter_table('components', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_components_thread_id'))

    op.drop_table('components')
    # ### end Alembic commands ###
