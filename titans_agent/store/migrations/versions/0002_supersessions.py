"""Schema version 2: the ``supersessions`` table (knowledge updates, titans_agent/updates.py).

Databases made by development builds between version 1 and this revision already have the table
(they created it on open); this revision then only records the version.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_META = sa.table("meta", sa.column("key", sa.String), sa.column("value", sa.Text))


def upgrade() -> None:
    if not sa.inspect(op.get_bind()).has_table("supersessions"):
        op.create_table(
            "supersessions",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("namespace_id", sa.Integer(), nullable=False),
            sa.Column("old_record_id", sa.Integer(), nullable=False),
            sa.Column("new_record_id", sa.Integer(), nullable=False),
            sa.Column("similarity", sa.Float(), nullable=False),
            sa.Column("effective_at", sa.DateTime(), nullable=False),
            sa.Column("created_at", sa.DateTime(), nullable=False),
            sa.PrimaryKeyConstraint("id"),
            sa.ForeignKeyConstraint(["namespace_id"], ["namespaces.id"], ondelete="CASCADE"),
            sa.ForeignKeyConstraint(["old_record_id"], ["records.id"], ondelete="CASCADE"),
            sa.ForeignKeyConstraint(["new_record_id"], ["records.id"], ondelete="CASCADE"),
        )
        op.create_index("ix_supersessions_namespace_id", "supersessions", ["namespace_id"])
        op.create_index("ix_supersessions_old_record_id", "supersessions", ["old_record_id"])
        op.create_index("ix_supersessions_new_record_id", "supersessions", ["new_record_id"])
    op.execute(_META.update().where(_META.c.key == "schema_version").values(value="2"))


def downgrade() -> None:
    op.drop_table("supersessions")
    op.execute(_META.update().where(_META.c.key == "schema_version").values(value="1"))
