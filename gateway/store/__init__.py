"""Persistence: sqlmodel tables, queries, and the alembic migrations that create them."""
