"""Schema version 6: outer parameters stored once per database; the state as a checkpoint plus the log.

Before this revision every ``namespaces`` row held its own copy of the memory's outer parameters
(``params``, 4.1 MB with the default configuration) and its test-time state (``state``, 4.7 MB),
and every write rewrote the state: a namespace cost about 9 MB however little it held, and a write
serialised and wrote 4.7 MB.

- ``memory_parameters``: one row per distinct parameter set (keyed by the sha256 of its tensors),
  referenced by ``namespaces.parameters_id``. The migration moves every namespace's ``params``
  there; namespaces made with the same configuration share one row.
- ``memory_checkpoints``: one row per namespace: the state, the revision that wrote it, and
  ``position``, the last occurrence id it has applied. The migration moves every namespace's
  ``state`` there, at the namespace's revision, with ``position`` its highest occurrence id (every
  unit stored so far is in that state).
- ``namespaces.params`` and ``namespaces.state`` are dropped (in place: SQLite >= 3.35 drops a
  column without rebuilding the table, which would cascade-delete its children).

Namespaces are moved one at a time, so the migration holds one namespace's blobs in memory. On
SQLite the file keeps its size until ``VACUUM`` (the freed pages are reused by later writes).

The downgrade is refused: the state of a namespace at schema 6 is its checkpoint followed by the
occurrences written after it, and replaying them needs the memory module, which a migration does
not run. To go back to an older version, export the namespaces (``titans-agent export``: it writes
each namespace's full state) and import them with that version.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_META = sa.table("meta", sa.column("key", sa.String), sa.column("value", sa.Text))
_NS = sa.table(
    "namespaces",
    sa.column("id", sa.Integer),
    sa.column("memory_config", sa.JSON),
    sa.column("params", sa.LargeBinary),
    sa.column("state", sa.LargeBinary),
    sa.column("step", sa.Integer),
    sa.column("revision", sa.Integer),
    sa.column("parameters_id", sa.Integer),
)
_OCC = sa.table("occurrences", sa.column("id", sa.Integer), sa.column("namespace_id", sa.Integer))


def upgrade() -> None:
    bind = op.get_bind()
    tables = set(sa.inspect(bind).get_table_names())
    if "memory_parameters" not in tables:
        op.create_table(
            "memory_parameters",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("sha256", sa.String(length=64), nullable=False),
            sa.Column("memory_config", sa.JSON(), nullable=False),
            sa.Column("params", sa.LargeBinary(), nullable=False),
            sa.Column("created_at", sa.DateTime(), nullable=False),
            sa.PrimaryKeyConstraint("id"),
            sa.UniqueConstraint("sha256"),
        )
    if "memory_checkpoints" not in tables:
        op.create_table(
            "memory_checkpoints",
            sa.Column("namespace_id", sa.Integer(), nullable=False),
            sa.Column("revision", sa.Integer(), nullable=False),
            sa.Column("position", sa.Integer(), nullable=False),
            sa.Column("step", sa.Integer(), nullable=False),
            sa.Column("state", sa.LargeBinary(), nullable=False),
            sa.Column("created_at", sa.DateTime(), nullable=False),
            sa.ForeignKeyConstraint(["namespace_id"], ["namespaces.id"], ondelete="CASCADE"),
            sa.PrimaryKeyConstraint("namespace_id"),
        )
    have = {c["name"] for c in sa.inspect(bind).get_columns("namespaces")}
    if "parameters_id" not in have:
        if bind.dialect.name == "sqlite":  # a REFERENCES clause in place (Alembic would rebuild the table)
            op.execute("ALTER TABLE namespaces ADD COLUMN parameters_id INTEGER REFERENCES memory_parameters (id)")
        else:
            op.add_column("namespaces", sa.Column("parameters_id", sa.Integer(), nullable=True))
            op.create_foreign_key(None, "namespaces", "memory_parameters", ["parameters_id"], ["id"])
    if {"params", "state"} <= have:
        _move_blobs(bind)
        op.drop_column("namespaces", "params")
        op.drop_column("namespaces", "state")
    op.execute(_META.update().where(_META.c.key == "schema_version").values(value="6"))


def _parameters_key(params: bytes) -> str:
    """The sha256 of the tensors that the blob's safetensors header carries (equal tensors share a
    row whatever the order of the header's metadata), else of the bytes; kept here as this revision
    applies it (titans_agent.store.checkpoints.parameters_key is the same rule for new rows)."""
    try:
        n = int.from_bytes(params[:8], "little")
        digest = json.loads(params[8 : 8 + n].decode("utf-8")).get("__metadata__", {}).get("sha256")
    except (ValueError, UnicodeDecodeError, AttributeError):
        digest = None
    return digest if isinstance(digest, str) and len(digest) == 64 else hashlib.sha256(params).hexdigest()


def _move_blobs(bind: sa.engine.Connection) -> None:
    """Each namespace's parameters to ``memory_parameters`` (once per distinct set) and its state
    to a checkpoint at its revision, one namespace at a time."""
    params_t = sa.table(
        "memory_parameters",
        sa.column("id", sa.Integer),
        sa.column("sha256", sa.String),
        sa.column("memory_config", sa.JSON),
        sa.column("params", sa.LargeBinary),
        sa.column("created_at", sa.DateTime),
    )
    ckpt_t = sa.table(
        "memory_checkpoints",
        sa.column("namespace_id", sa.Integer),
        sa.column("revision", sa.Integer),
        sa.column("position", sa.Integer),
        sa.column("step", sa.Integer),
        sa.column("state", sa.LargeBinary),
        sa.column("created_at", sa.DateTime),
    )
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    known = {sha: pid for pid, sha in bind.execute(sa.select(params_t.c.id, params_t.c.sha256))}
    for (ns_id,) in bind.execute(sa.select(_NS.c.id).order_by(_NS.c.id)).all():
        cfg, params, state, step, rev = bind.execute(
            sa.select(_NS.c.memory_config, _NS.c.params, _NS.c.state, _NS.c.step, _NS.c.revision).where(
                _NS.c.id == ns_id
            )
        ).one()
        params, state = bytes(params), bytes(state)
        sha = _parameters_key(params)
        if sha not in known:
            bind.execute(sa.insert(params_t).values(sha256=sha, memory_config=cfg, params=params, created_at=now))
            known[sha] = bind.execute(sa.select(params_t.c.id).where(params_t.c.sha256 == sha)).scalar_one()
        position = bind.execute(sa.select(sa.func.max(_OCC.c.id)).where(_OCC.c.namespace_id == ns_id)).scalar() or 0
        bind.execute(
            sa.insert(ckpt_t).values(
                namespace_id=ns_id, revision=rev, position=position, step=step, state=state, created_at=now
            )
        )
        bind.execute(sa.update(_NS).where(_NS.c.id == ns_id).values(parameters_id=known[sha]))


def downgrade() -> None:
    raise NotImplementedError(
        "schema version 6 cannot be downgraded in place: a namespace's memory state is its checkpoint "
        "followed by the units written after it, which only the memory module can replay. Export the "
        "namespaces with `titans-agent export` and import them with the older version instead."
    )
