"""Schema version 3: ``occurrences.location`` and ``namespaces.chunking`` (nullable JSON columns).

``occurrences.location`` holds where in its document a chunk is (page, headings, section, citation:
:class:`titans_agent.types.Location` as ``Location.to_dict()``), kept apart from the caller's
metadata; ``namespaces.chunking`` the chunking configuration the namespace's documents were cut
with. Rows written before this revision keep NULL in both: their locations, if any, stay where
older versions put them (merged into ``occurrences.metadata``).

Both are plain ``ADD COLUMN`` of a nullable column without a default, which SQLite and PostgreSQL
do in place (no table rebuild: on SQLite a rebuilt ``occurrences`` would cascade-delete its turns,
and ``records_fts`` keeps pointing at ``records``, which is not touched). A column already there is
kept.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_META = sa.table("meta", sa.column("key", sa.String), sa.column("value", sa.Text))
_COLUMNS = (("occurrences", "location"), ("namespaces", "chunking"))


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table, column in _COLUMNS:
        if column not in {c["name"] for c in inspector.get_columns(table)}:
            op.add_column(table, sa.Column(column, sa.JSON(), nullable=True))
    op.execute(_META.update().where(_META.c.key == "schema_version").values(value="3"))


def downgrade() -> None:
    for table, column in _COLUMNS:
        op.drop_column(table, column)  # in place: SQLite >= 3.35 drops a column without a rebuild
    op.execute(_META.update().where(_META.c.key == "schema_version").values(value="2"))
