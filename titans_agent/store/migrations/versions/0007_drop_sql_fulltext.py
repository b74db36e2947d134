"""Schema version 7: recall ranks with its in-memory BM25; the SQL full-text indexes are dropped.

Recall's lexical signal is an in-memory BM25 index of each namespace
(:mod:`titans_agent.bm25`), built from the records' ``text`` and ``context`` columns, so the
indexes that revision 0001 made for it are no longer read:

- SQLite: the FTS5 table ``records_fts`` (its shadow tables go with it) and the triggers
  ``records_ai``, ``records_ad`` and ``records_au`` that kept it;
- PostgreSQL: the GIN index ``ix_records_tsv`` and the generated column ``records.tsv``.

The in-memory index catches up with other processes' commits through ``records.changed_revision``
(new, nullable, with the index ``ix_records_ns_changed`` on ``(namespace_id, changed_revision)``):
the namespace revision of the write that last set a record's text or context (its insert, or a
merge that appended to its context). Rows written before this revision keep NULL: an index is
built from every row, and only later changes are read by revision.

Every write stops maintaining the full-text indexes (an FTS5 insert per record; on PostgreSQL a tsvector computed and
a GIN entry per record), and the database holds no copy of the records' words beside the records.
On SQLite the file keeps its size until ``VACUUM`` (the freed pages are reused by later writes).

The downgrade drops ``changed_revision`` and its index, and makes the full-text indexes again,
filled from the records (FTS5's ``rebuild``; the generated column computes itself).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_META = sa.table("meta", sa.column("key", sa.String), sa.column("value", sa.Text))

_SQLITE_TRIGGERS = ("records_ai", "records_ad", "records_au")
_SQLITE_FTS = [
    "CREATE VIRTUAL TABLE records_fts USING fts5(text, context, content='records', "
    "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER records_ai AFTER INSERT ON records BEGIN "
    "INSERT INTO records_fts(rowid, text, context) VALUES (new.id, new.text, new.context); END",
    "CREATE TRIGGER records_ad AFTER DELETE ON records BEGIN "
    "INSERT INTO records_fts(records_fts, rowid, text, context) VALUES ('delete', old.id, old.text, old.context); END",
    "CREATE TRIGGER records_au AFTER UPDATE OF text, context ON records BEGIN "
    "INSERT INTO records_fts(records_fts, rowid, text, context) VALUES ('delete', old.id, old.text, old.context); "
    "INSERT INTO records_fts(rowid, text, context) VALUES (new.id, new.text, new.context); END",
    "INSERT INTO records_fts(records_fts) VALUES ('rebuild')",
]
_PG_FTS = [
    "ALTER TABLE records ADD COLUMN tsv tsvector GENERATED ALWAYS AS ("
    "setweight(to_tsvector('english', coalesce(text, '')), 'A') || "
    "setweight(to_tsvector('english', coalesce(context, '')), 'B')) STORED",
    "CREATE INDEX ix_records_tsv ON records USING GIN (tsv)",
]


def upgrade() -> None:
    bind = op.get_bind()
    if "changed_revision" not in {c["name"] for c in sa.inspect(bind).get_columns("records")}:
        op.add_column("records", sa.Column("changed_revision", sa.Integer(), nullable=True))  # in place
        op.create_index("ix_records_ns_changed", "records", ["namespace_id", "changed_revision"])
    if bind.dialect.name == "sqlite":
        for trigger in _SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS records_fts")
    else:
        op.execute("DROP INDEX IF EXISTS ix_records_tsv")
        op.execute("ALTER TABLE records DROP COLUMN IF EXISTS tsv")
    op.execute(_META.update().where(_META.c.key == "schema_version").values(value="7"))


def downgrade() -> None:
    op.drop_index("ix_records_ns_changed", table_name="records")
    op.drop_column("records", "changed_revision")  # in place (SQLite >= 3.35)
    for stmt in _SQLITE_FTS if op.get_bind().dialect.name == "sqlite" else _PG_FTS:
        op.execute(stmt)
    op.execute(_META.update().where(_META.c.key == "schema_version").values(value="6"))
