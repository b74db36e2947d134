"""Schema version 8: ``namespaces.incarnation``, a random token per namespace row.

A namespace's id does not identify it over time: SQLite gives a new row the highest id plus one, so
a namespace made right after another was dropped gets the dropped one's id, and a name dropped and
made again (or imported) is a new namespace under the old name. A process that looked a namespace
up before such a change and wrote afterwards would write into the other namespace. ``incarnation``
(32 hexadecimal characters, uuid4) is set when a row is inserted and never copied (an import makes
a new one): every write transaction checks, under the namespace's lock, that the row it writes to
is still the one it looked up, and a cached runtime is loaded anew when it is not.

The column is added in place, nullable (SQLite adds a ``NOT NULL`` column in place only with a
constant default, and a rebuild of ``namespaces`` would cascade-delete every row under it); every
existing row gets its own token here, and every row the code inserts has one.

The downgrade drops the column (in place: SQLite >= 3.35).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_META = sa.table("meta", sa.column("key", sa.String), sa.column("value", sa.Text))
_PG_TOKEN = "md5(random()::text || clock_timestamp()::text || id::text)"  # 32 hex digits


def upgrade() -> None:
    bind = op.get_bind()
    if "incarnation" not in {c["name"] for c in sa.inspect(bind).get_columns("namespaces")}:
        op.add_column("namespaces", sa.Column("incarnation", sa.String(32), nullable=True))  # in place
    # one random token per row, made by the database in one statement (10,000 rows: milliseconds)
    token = "lower(hex(randomblob(16)))" if bind.dialect.name == "sqlite" else _PG_TOKEN
    op.execute(f"UPDATE namespaces SET incarnation = {token} WHERE incarnation IS NULL")
    op.execute(_META.update().where(_META.c.key == "schema_version").values(value="8"))


def downgrade() -> None:
    op.drop_column("namespaces", "incarnation")  # in place (SQLite >= 3.35)
    op.execute(_META.update().where(_META.c.key == "schema_version").values(value="7"))
