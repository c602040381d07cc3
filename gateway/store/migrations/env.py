"""Alembic environment: always run on a connection handed over by `gateway.store.db.migrate`."""

from alembic import context
from sqlmodel import SQLModel

from gateway.store import tables  # noqa: F401  (registers the tables on the metadata)

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with `gateway migrate`, which provides the connection")

context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
