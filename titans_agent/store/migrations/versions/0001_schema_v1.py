"""Schema version 1: the first released schema (titans-agent 0.1.0, commit 6adc304).

Tables meta, namespaces, documents, records, occurrences, sessions and turns, written out here (not
taken from the models, which move on) so that this revision always makes exactly the released
schema. Lexical search: SQLite gets the FTS5 table ``records_fts`` and the triggers that keep it;
PostgreSQL gets ``records.tsv`` (a stored generated tsvector) and its GIN index ``ix_records_tsv``.
A database made by version 1 before migrations existed is stamped with this revision, not re-run.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

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
]
_PG_FTS = [
    "ALTER TABLE records ADD COLUMN tsv tsvector GENERATED ALWAYS AS ("
    "setweight(to_tsvector('english', coalesce(text, '')), 'A') || "
    "setweight(to_tsvector('english', coalesce(context, '')), 'B')) STORED",
    "CREATE INDEX ix_records_tsv ON records USING GIN (tsv)",
]


def _fk(column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], [target], ondelete="CASCADE")


def upgrade() -> None:
    meta = op.create_table(
        "meta",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "namespaces",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("embedder", sa.String(512), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("memory_config", sa.JSON(), nullable=False),
        sa.Column("params", sa.LargeBinary(), nullable=False),
        sa.Column("state", sa.LargeBinary(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "documents",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("namespace_id", sa.Integer(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("n_chunks", sa.Integer(), nullable=False),
        sa.Column("chunks_done", sa.Integer(), nullable=False),
        sa.Column("complete", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("namespace_id", "source"),
        _fk("namespace_id", "namespaces.id"),
    )
    op.create_index("ix_documents_namespace_id", "documents", ["namespace_id"])
    op.create_table(
        "records",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("namespace_id", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("context", sa.Text(), nullable=False),
        sa.Column("text_hash", sa.String(64), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=False),
        sa.Column("surprise", sa.Float(), nullable=True),
        sa.Column("decision", sa.String(16), nullable=False),
        sa.Column("hits", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        _fk("namespace_id", "namespaces.id"),
    )
    op.create_index("ix_records_ns_hash", "records", ["namespace_id", "text_hash"])
    op.create_index("ix_records_namespace_id", "records", ["namespace_id"])
    op.create_table(
        "sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("namespace_id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("n_turns", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("namespace_id", "session_id"),
        _fk("namespace_id", "namespaces.id"),
    )
    op.create_index("ix_sessions_namespace_id", "sessions", ["namespace_id"])
    op.create_table(
        "occurrences",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("record_id", sa.Integer(), nullable=False),
        sa.Column("namespace_id", sa.Integer(), nullable=False),
        sa.Column("document_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("chunk_index", sa.Integer(), nullable=True),
        sa.Column("start_line", sa.Integer(), nullable=True),
        sa.Column("end_line", sa.Integer(), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("role", sa.String(64), nullable=True),
        sa.Column("timestamp", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        _fk("record_id", "records.id"),
        _fk("namespace_id", "namespaces.id"),
        _fk("document_id", "documents.id"),
    )
    op.create_index("ix_occurrences_document_id", "occurrences", ["document_id"])
    op.create_index("ix_occ_ns_source", "occurrences", ["namespace_id", "source"])
    op.create_index("ix_occ_ns_session", "occurrences", ["namespace_id", "session_id"])
    op.create_index("ix_occurrences_record_id", "occurrences", ["record_id"])
    op.create_table(
        "turns",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_pk", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(64), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("timestamp", sa.DateTime(), nullable=False),
        sa.Column("occurrence_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("session_pk", "seq"),
        _fk("session_pk", "sessions.id"),
        _fk("occurrence_id", "occurrences.id"),
    )
    op.create_index("ix_turns_occurrence_id", "turns", ["occurrence_id"])
    op.create_index("ix_turns_session_pk", "turns", ["session_pk"])
    dialect = op.get_bind().dialect.name
    for ddl in _SQLITE_FTS if dialect == "sqlite" else _PG_FTS if dialect == "postgresql" else []:
        op.execute(ddl)
    op.bulk_insert(meta, [{"key": "schema_version", "value": "1"}])


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE records_fts")  # its triggers go with the records table
    for table in ("turns", "occurrences", "sessions", "records", "documents", "namespaces", "meta"):
        op.drop_table(table)
