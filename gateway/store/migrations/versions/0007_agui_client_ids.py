"""agui client ids: the `threadId` and `runId` an AG-UI client chose, as names within the
project (unique per project) instead of the gateway's own ids, so that two projects choosing
the same ids never meet. Rows without one (every existing row) answer to their own id.

Revision ID: 0007
Revises: 0008
Create Date: 2026-11-26 13:40:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0007'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ('threads', 'runs'):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column('client_id', sqlmodel.sql.sqltypes.AutoString(length=64),
                                       nullable=True))
            batch.create_unique_constraint(f'uq_{table}_project_client_id',
                                           ['project_id', 'client_id'])


def downgrade() -> None:
    for table in ('runs', 'threads'):
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(f'uq_{table}_project_client_id', type_='unique')
            batch.drop_column('client_id')
