"""Schema version 4: ``occurrences.write_revision`` (integer) and ``occurrences.embedding`` (blob).

What a rebuild of a namespace's memory (``forget(..., unlearn=True)``, ``rebuild_memory``:
titans_agent/erase.py) replays. ``write_revision`` is the namespace revision committed by the write
that made the occurrence: the units of one write updated the memory together (one chunked scan), and
a faithful replay writes them together again. ``embedding`` is the float32 embedding the unit was
written with when it differs from its record's (a repeat or merged near duplicate whose text or
speaker prefix embedded otherwise); NULL means the record's embedding.

Rows written before this revision keep NULL in both: a rebuild groups them by their write time
(``created_at``, one per write) and replays them with their record's embedding.

Both are plain ``ADD COLUMN`` of a nullable column without a default, done in place by SQLite and
PostgreSQL (no rebuild of ``occurrences``, which on SQLite would cascade-delete its turns). A
column already there is kept.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_META = sa.table("meta", sa.column("key", sa.String), sa.column("value", sa.Text))
_COLUMNS = (("write_revision", sa.Integer()), ("embedding", sa.LargeBinary()))


def upgrade() -> None:
    have = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("occurrences")}
    for column, type_ in _COLUMNS:
        if column not in have:
            op.add_column("occurrences", sa.Column(column, type_, nullable=True))
    op.execute(_META.update().where(_META.c.key == "schema_version").values(value="4"))


def downgrade() -> None:
    for column, _ in _COLUMNS:
        op.drop_column("occurrences", column)  # in place: SQLite >= 3.35 drops a column without a rebuild
    op.execute(_META.update().where(_META.c.key == "schema_version").values(value="3"))
