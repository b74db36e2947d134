"""Schema migrations: the Alembic revisions that take a titans-agent database to this code's schema.

The revisions (``versions/``, append-only; a released one is never edited):

====  ==============  =========================================================================
rev   schema_version  what it does
====  ==============  =========================================================================
0001  1               the first released schema: meta, namespaces, documents, records,
                      occurrences, sessions, turns; SQLite FTS5 ``records_fts`` and triggers, or
                      PostgreSQL ``records.tsv`` with a GIN index
0002  2               the ``supersessions`` table (knowledge updates)
0003  3               nullable JSON columns ``occurrences.location`` (a chunk's page, headings,
                      section and citation, apart from the caller's metadata) and
                      ``namespaces.chunking`` (the chunking configuration of its documents)
0004  4               nullable ``occurrences.write_revision`` and ``occurrences.embedding``: the
                      write each unit came in and, when it differs from its record's, the
                      embedding it was written with (what a rebuild of the memory replays)
0005  5               the ``metadata_terms`` table (the occurrences' metadata flattened and
                      indexed, to narrow metadata filters), filled from the stored occurrences
0006  6               ``memory_parameters`` (outer parameters stored once per distinct set,
                      referenced by ``namespaces.parameters_id``) and ``memory_checkpoints`` (a
                      namespace's state and its position in the log); moves every namespace's
                      ``params`` and ``state`` there and drops those columns
0007  7               drops the SQL full-text indexes (SQLite ``records_fts`` and its triggers,
                      PostgreSQL ``records.tsv`` and its GIN index): recall ranks with an
                      in-memory BM25 index of each namespace (:mod:`titans_agent.bm25`)
0008  8               nullable ``namespaces.incarnation``: a random token per namespace row (every
                      older row gets one), what tells a namespace from a later one that got its
                      id or its name
====  ==============  =========================================================================

They run through :class:`titans_agent.store.Store` when a database is opened, on the connection the
store holds under its schema lock, inside its transaction (Alembic runs programmatically: no
``alembic.ini``; ``env.py`` takes the connection from ``Config.attributes``). The ``meta`` table's
``schema_version`` key follows the revisions, so older tools that read it keep working.
"""

from __future__ import annotations

import datetime as dt
import logging
import sqlite3
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection

__all__ = [
    "REVISION_OF_VERSION",
    "SCRIPT_LOCATION",
    "backup_sqlite",
    "current_revision",
    "head_revision",
    "known_revisions",
    "stamp",
    "upgrade",
]

log = logging.getLogger(__name__)

SCRIPT_LOCATION = Path(__file__).resolve().parent
REVISION_OF_VERSION = {1: "0001", 2: "0002", 3: "0003", 4: "0004", 5: "0005", 6: "0006", 7: "0007", 8: "0008"}
"""The Alembic revision of each ``meta.schema_version``: a database of version 1 made before
migrations existed (no ``alembic_version`` table) is stamped with ``0001``."""


@lru_cache(maxsize=1)
def _script() -> ScriptDirectory:
    return ScriptDirectory(str(SCRIPT_LOCATION))


def head_revision() -> str:
    """The newest revision this code knows (the one a new database is created at)."""
    head = _script().get_current_head()
    if head is None:  # pragma: no cover - the package ships its revisions
        raise RuntimeError(f"no migrations found under {SCRIPT_LOCATION}")
    return head


def known_revisions() -> frozenset[str]:
    """Every revision this code knows; a database at another one was made by a newer titans-agent."""
    return frozenset(s.revision for s in _script().walk_revisions())


def current_revision(conn: Connection) -> str | None:
    """The revision recorded in the database's ``alembic_version`` table (None when it is empty).

    The table must exist (read directly rather than through Alembic's MigrationContext, which logs
    on every open)."""
    rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    if len(rows) > 1:  # pragma: no cover - the revisions form one line
        raise RuntimeError(f"the database has several Alembic heads: {rows}")
    return rows[0] if rows else None


def _config(conn: Connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPT_LOCATION).replace("%", "%%"))
    cfg.attributes["connection"] = conn
    return cfg


def upgrade(conn: Connection, target: str = "head") -> None:
    """Apply the revisions from the database's current one up to ``target`` on ``conn``.

    Runs inside the caller's transaction (the caller commits, so a failure leaves nothing behind
    on SQLite and PostgreSQL, whose DDL is transactional)."""
    command.upgrade(_config(conn), target)


def stamp(conn: Connection, revision: str) -> None:
    """Record ``revision`` in ``alembic_version`` without running anything (the caller commits)."""
    command.stamp(_config(conn), revision)


def backup_sqlite(db_path: Path, version: int, busy_timeout_s: float = 30.0) -> Path:
    """Copy a SQLite database next to itself before it is migrated: ``<name>.bak-v<version>-<UTC time>``.

    Uses SQLite's online backup API (the copy is a consistent database, WAL contents included).
    Call it while holding the database's write lock, before writing anything, so the copy is the
    database as it was before the migration.

    Args:
        db_path: the database file.
        version: the schema version being migrated from (in the backup's name).
        busy_timeout_s: how long the read of the file may wait for a lock.

    Returns:
        The backup file's path (a complete SQLite database).

    Raises:
        sqlite3.Error, OSError: the copy could not be written.
    """
    stamp_utc = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = db_path.with_name(f"{db_path.name}.bak-v{version}-{stamp_utc}")
    n = 1
    while target.exists():
        n += 1
        target = db_path.with_name(f"{db_path.name}.bak-v{version}-{stamp_utc}-{n}")
    # A second connection reads the file: the caller's holds the write lock (so no one can write
    # between the copy and the migration), and SQLite refuses to back up from a connection that is
    # in a write transaction. Nothing has been written in that transaction yet.
    source = sqlite3.connect(f"file:{quote(str(db_path))}?mode=ro", uri=True, timeout=busy_timeout_s)
    dest = sqlite3.connect(target)
    try:
        source.backup(dest)
        dest.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, whatever the source's mode
    finally:
        dest.close()
        source.close()
    return target
