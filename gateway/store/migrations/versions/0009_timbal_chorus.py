"""timbal and chorus: the fingerprint of a Timbal thread's create request (client-chosen ids)

Revision ID: 0009
Revises: 0006
Create Date: 2026-11-26 13:30:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0009'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('threads') as batch:
        batch.add_column(sa.Column('create_fingerprint',
                                   sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('threads') as batch:
        batch.drop_column('create_fingerprint')
