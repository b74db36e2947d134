"""Schema version 5: the ``metadata_terms`` table, the index that narrows metadata filters.

One row per path of an occurrence's metadata (:mod:`titans_agent.store.metaterms` says what the
columns hold), with a B-tree on ``(namespace_id, path, term)`` and one on ``(namespace_id, path,
num)``, so a selective ``recall(filter=...)`` reaches its occurrences without reading every
occurrence's JSON. The rows are derived from ``occurrences.metadata``: this revision fills the table
from the occurrences already stored (in batches of 2,000), with the flattening of the code that runs
it, and later writes keep it. The downgrade drops the table; nothing else changes.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from titans_agent.store.metaterms import term_rows

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_META = sa.table("meta", sa.column("key", sa.String), sa.column("value", sa.Text))
_OCC = sa.table(
    "occurrences", sa.column("id", sa.Integer), sa.column("namespace_id", sa.Integer), sa.column("metadata", sa.Text)
)
_BATCH = 2000


def upgrade() -> None:
    bind = op.get_bind()
    if "metadata_terms" not in sa.inspect(bind).get_table_names():
        terms = op.create_table(
            "metadata_terms",
            sa.Column("occurrence_id", sa.Integer(), nullable=False),
            sa.Column("path", sa.Text(), nullable=False),
            sa.Column("namespace_id", sa.Integer(), nullable=False),
            sa.Column("term", sa.Text(), nullable=False),
            sa.Column("num", sa.Float(), nullable=True),
            sa.ForeignKeyConstraint(["occurrence_id"], ["occurrences.id"], ondelete="CASCADE"),
            sa.ForeignKeyConstraint(["namespace_id"], ["namespaces.id"], ondelete="CASCADE"),
            sa.PrimaryKeyConstraint("occurrence_id", "path"),
        )
        op.create_index("ix_meta_terms_term", "metadata_terms", ["namespace_id", "path", "term"])
        op.create_index("ix_meta_terms_num", "metadata_terms", ["namespace_id", "path", "num"])
        last = 0
        while True:
            stmt = sa.select(_OCC.c.id, _OCC.c.namespace_id, _OCC.c.metadata).where(_OCC.c.id > last)
            batch = bind.execute(stmt.order_by(_OCC.c.id).limit(_BATCH)).all()
            if not batch:
                break
            rows = []
            for occ_id, ns_id, raw in batch:
                meta = json.loads(raw) if isinstance(raw, str) else raw
                rows += [
                    {"occurrence_id": occ_id, "path": p, "namespace_id": ns_id, "term": t, "num": n}
                    for p, t, n in term_rows(meta)
                ]
            if rows:
                op.bulk_insert(terms, rows)
            last = batch[-1][0]
    op.execute(_META.update().where(_META.c.key == "schema_version").values(value="5"))


def downgrade() -> None:
    op.drop_table("metadata_terms")
    op.execute(_META.update().where(_META.c.key == "schema_version").values(value="4"))
