"""Alembic environment of titans-agent: migrations run only through :class:`titans_agent.store.Store`.

The store passes the connection it holds (inside its schema lock and transaction) as
``config.attributes["connection"]``; the migrations run on it and the store commits. There is no
offline (``--sql``) mode and no ``alembic.ini``.
"""

from __future__ import annotations

from alembic import context

from titans_agent.errors import StoreError

connection = context.config.attributes.get("connection")
if connection is None or context.is_offline_mode():
    raise StoreError("titans-agent migrations run only on open, through titans_agent.store.Store")

context.configure(connection=connection, target_metadata=None)
with context.begin_transaction():
    context.run_migrations()
