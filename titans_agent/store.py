"""Persistence: SQLAlchemy 2 typed models over SQLite (a path) or PostgreSQL (a URL).

What is persisted, per database:

- ``meta``: the schema version (``schema_version``); ``alembic_version``: the Alembic revision
  (:mod:`titans_agent.migrations` makes and upgrades the schema on open).
- ``namespaces``: one row per namespace with its neural memory: the outer parameters and the
  test-time state (weights, momentum, pending chunk, step) as safetensors bytes, the memory config,
  and the embedder's name and dimension (a database is bound to one embedder).
- ``documents``: one row per ingested source (file or named text): its content hash, how many chunks
  it has, how many are done, whether it is complete. A document counts as done only once the batch
  holding its last chunk committed.
- ``records``: the memory units, one per distinct text: text, embedding (float32 bytes), surprise
  and write decision of the first write, hit count and times.
- ``occurrences``: where each record was written (a document chunk with its line range, a note, a
  turn of a session), with the caller's metadata (JSON). A record lives while it has one.
- ``records_fts``: an FTS5 index over the records' text and context (SQLite), kept by triggers. On
  PostgreSQL the ``records.tsv`` column (a stored generated tsvector: text weight A, context weight
  B, the ``english`` configuration) with a GIN index plays its part.
- ``sessions`` and ``turns``: conversations, each turn with an explicit sequence number and a link
  to its occurrence.

SQLite is opened in WAL mode with a busy timeout and foreign keys on. Times are stored as UTC and
returned timezone-aware. Each ingest batch is one transaction: its records, its documents' progress
and the namespace's new memory state commit together or not at all.

Concurrency: every write that reads and replaces a namespace's memory state runs in a
:meth:`Store.write_session`, whose transaction holds that namespace's write lock from its first
statement to its commit (SQLite: ``BEGIN IMMEDIATE``, the database's single writer lock;
PostgreSQL: ``SELECT ... FOR UPDATE`` of the namespace row). Transient lock errors (SQLite busy,
PostgreSQL lock timeout, deadlock or serialization failure) are retried with bounded, jittered
exponential backoff by :meth:`Store.write_attempts`. Readers load a namespace's state and record
index from one snapshot (:meth:`Store.snapshot_session`), so the two always match.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    create_engine,
    event,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, stop_after_delay, wait_exponential_jitter

from titans_agent import migrations
from titans_agent.errors import StoreError

__all__ = [
    "Base",
    "Document",
    "Meta",
    "NamespaceRow",
    "Occurrence",
    "Record",
    "SessionRow",
    "Store",
    "Turn",
    "fts_query",
    "query_terms",
    "utcnow",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2  # meta.schema_version at the head revision (titans_agent.migrations)

# SQLSTATEs of PostgreSQL errors that a retry of the whole transaction resolves: serialization
# failure, deadlock detected, lock not available (lock_timeout).
_PG_TRANSIENT = frozenset({"40001", "40P01", "55P03"})
_SCHEMA_LOCK_KEY = 0x7469_7461_6E73  # pg_advisory_xact_lock key that serialises schema creation ("titans")


def utcnow() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.timezone.utc)


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Stores datetimes as naive UTC; returns them timezone-aware (UTC)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)

    def process_result_value(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        return None if value is None else value.replace(tzinfo=dt.timezone.utc)


class Base(DeclarativeBase):
    pass


class Meta(Base):
    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class NamespaceRow(Base):
    __tablename__ = "namespaces"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(512), unique=True)
    embedder: Mapped[str] = mapped_column(String(512))
    dim: Mapped[int] = mapped_column(Integer)
    memory_config: Mapped[dict[str, Any]] = mapped_column(JSON)
    params: Mapped[bytes] = mapped_column(LargeBinary)
    state: Mapped[bytes] = mapped_column(LargeBinary)
    step: Mapped[int] = mapped_column(Integer, default=0)
    # Bumped by every commit that changes the namespace: a process whose cached state has another
    # revision reloads it, and a write based on a stale revision is refused (optimistic locking).
    revision: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class Document(Base):
    __tablename__ = "documents"
    __table_args__ = (UniqueConstraint("namespace_id", "source"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    namespace_id: Mapped[int] = mapped_column(ForeignKey("namespaces.id", ondelete="CASCADE"), index=True)
    source: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64))
    n_chunks: Mapped[int] = mapped_column(Integer)
    chunks_done: Mapped[int] = mapped_column(Integer, default=0)
    complete: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class Record(Base):
    """A memory unit: one per distinct text of a namespace (exact repeats and merged near
    duplicates add :class:`Occurrence` rows instead of records)."""

    __tablename__ = "records"
    __table_args__ = (Index("ix_records_ns_hash", "namespace_id", "text_hash"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    namespace_id: Mapped[int] = mapped_column(ForeignKey("namespaces.id", ondelete="CASCADE"), index=True)
    text: Mapped[str] = mapped_column(Text)
    context: Mapped[str] = mapped_column(Text, default="")  # indexed with the text: sources, roles, dates
    text_hash: Mapped[str] = mapped_column(String(64))
    embedding: Mapped[bytes] = mapped_column(LargeBinary)
    surprise: Mapped[float | None] = mapped_column(Float)
    decision: Mapped[str] = mapped_column(String(16))
    hits: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class Occurrence(Base):
    """Where a record was written: a chunk of a document, a note, or a turn of a session.

    A record lives as long as it has an occurrence; filters (kind, source, session) and
    ``forget`` work on occurrences, so text shared by two files or sessions belongs to both."""

    __tablename__ = "occurrences"
    __table_args__ = (
        Index("ix_occ_ns_source", "namespace_id", "source"),
        Index("ix_occ_ns_session", "namespace_id", "session_id"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    record_id: Mapped[int] = mapped_column(ForeignKey("records.id", ondelete="CASCADE"), index=True)
    namespace_id: Mapped[int] = mapped_column(ForeignKey("namespaces.id", ondelete="CASCADE"))
    document_id: Mapped[int | None] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))  # chunk | note | turn
    source: Mapped[str | None] = mapped_column(Text)
    chunk_index: Mapped[int | None] = mapped_column(Integer)
    start_line: Mapped[int | None] = mapped_column(Integer)
    end_line: Mapped[int | None] = mapped_column(Integer)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    session_id: Mapped[str | None] = mapped_column(Text)
    role: Mapped[str | None] = mapped_column(String(64))
    timestamp: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class SessionRow(Base):
    __tablename__ = "sessions"
    __table_args__ = (UniqueConstraint("namespace_id", "session_id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    namespace_id: Mapped[int] = mapped_column(ForeignKey("namespaces.id", ondelete="CASCADE"), index=True)
    session_id: Mapped[str] = mapped_column(Text)
    n_turns: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class Turn(Base):
    """One turn of a session's transcript; it goes when its occurrence is forgotten."""

    __tablename__ = "turns"
    __table_args__ = (UniqueConstraint("session_pk", "seq"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_pk: Mapped[int] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(64))
    content: Mapped[str] = mapped_column(Text)
    timestamp: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    occurrence_id: Mapped[int | None] = mapped_column(ForeignKey("occurrences.id", ondelete="CASCADE"), index=True)


# The lexical index (SQLite FTS5 table records_fts and its triggers; PostgreSQL records.tsv and its GIN
# index) is made by the migrations: titans_agent/migrations/versions/0001_schema_v1.py.

_WORD = re.compile(r"\w+", re.UNICODE)


# English function words: in an OR query each one matches nearly every record, and a rank fusion
# would then rank those records as lexical hits. (The list of Salton's SMART system, abridged.)
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me might more most must my myself no nor not now of off on once only or other our ours ourselves
    out over own same shall she should so some such than that the their theirs them themselves then
    there these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves""".split()
)


def query_terms(query: str, max_terms: int = 64) -> list[str]:
    """The query's distinct lower-cased words in order, without stopwords (a query made only of
    stopwords keeps them all); at most ``max_terms``. Empty when the query has no word characters."""
    words: list[str] = []
    for w in _WORD.findall(query.lower()):
        if w not in words:
            words.append(w)
    content = [w for w in words if w not in STOPWORDS]
    return (content or words)[:max_terms]


def fts_query(query: str, max_terms: int = 64) -> str | None:
    """An FTS5 MATCH expression: the query's words without stopwords, each quoted (so operators and
    wildcards are literal), joined with OR. A query made only of stopwords keeps them all. None when
    the query has no word characters."""
    words = query_terms(query, max_terms)
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


# ts_rank_cd weights for {D, C, B, A}: context (B) weighs half the text (A), as in the FTS5 bm25 call.
_PG_RANK_WEIGHTS = "{0.1, 0.2, 0.5, 1.0}"


class _TransientStoreError(StoreError):
    """A lock or serialization conflict; the whole transaction can be retried (internal)."""


def _is_transient(exc: BaseException) -> bool:
    """Whether a database error is a lock conflict that retrying the transaction resolves."""
    if not isinstance(exc, DBAPIError):
        return False
    sqlstate = getattr(exc.orig, "sqlstate", None)
    if sqlstate in _PG_TRANSIENT:
        return True
    msg = str(exc.orig).lower()
    return isinstance(exc, OperationalError) and ("database is locked" in msg or "database is busy" in msg)


def _to_url(path_or_url: str | Path) -> str:
    s = str(path_or_url)
    if "://" in s:
        return s
    p = Path(s).expanduser()
    if p.exists() and p.is_dir():
        raise StoreError(f"{s} is a directory; give a database file path")
    p.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{p.resolve()}"


class Store:
    """The database behind a MemoryAgent: SQLite (a file path) or PostgreSQL (a URL).

    Args:
        path_or_url: a file path (SQLite; parent folders are created) or a SQLAlchemy URL such as
            ``postgresql+psycopg://user@host:5432/db`` (needs the ``postgres`` extra: psycopg 3).
        busy_timeout_s: how long one attempt waits for a lock (SQLite's busy timeout, PostgreSQL's
            ``lock_timeout`` inside a write); :meth:`write_attempts` retries for up to three times
            that long in all.

    Raises:
        StoreError: the database cannot be opened, is not a titans-agent database, or has a newer
            schema than this version understands.
    """

    def __init__(self, path_or_url: str | Path, busy_timeout_s: float = 30.0) -> None:
        url = _to_url(path_or_url)
        try:
            parsed = make_url(url)
            self.engine: Engine = create_engine(
                url,
                connect_args=self._connect_args(parsed, busy_timeout_s),
                pool_pre_ping=parsed.get_backend_name() != "sqlite",  # a server may drop idle connections
            )
        except (ArgumentError, SQLAlchemyError, ImportError) as exc:
            raise StoreError(f"cannot open database {path_or_url!r}: {exc}") from exc
        self.url = parsed.render_as_string(hide_password=True)  # for messages: never the password
        self.busy_timeout_s = busy_timeout_s
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self.is_postgres = self.engine.dialect.name == "postgresql"
        if self.is_sqlite:
            timeout_ms = int(busy_timeout_s * 1000)

            @event.listens_for(self.engine, "connect")
            def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                cur = dbapi_conn.cursor()
                cur.execute(f"PRAGMA busy_timeout={timeout_ms}")
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.execute("PRAGMA foreign_keys=ON")
                cur.close()

        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        try:
            for attempt in self.write_attempts():
                with attempt:
                    try:
                        self._create_schema()
                    except DBAPIError as exc:
                        # Also while connecting: SQLite can answer "database is locked" to
                        # ``PRAGMA journal_mode=WAL`` at once, without its busy handler, while another
                        # process is creating the same new file (seen with two processes starting).
                        if _is_transient(exc):
                            raise _TransientStoreError(f"database {self.url} is busy: {exc.orig}") from exc
                        raise
        except (OperationalError, DBAPIError) as exc:
            self.engine.dispose()
            raise StoreError(f"cannot open database {self.url}: {exc.orig}") from exc
        except StoreError:
            self.engine.dispose()
            raise

    @staticmethod
    def _connect_args(parsed: Any, busy_timeout_s: float) -> dict[str, Any]:
        if parsed.get_backend_name() == "sqlite":
            return {"timeout": busy_timeout_s, "check_same_thread": False}
        if parsed.get_backend_name() == "postgresql":
            return {"connect_timeout": max(1, int(busy_timeout_s))}
        return {}

    def _create_schema(self) -> None:
        """Create a new database at the newest schema, or migrate an older one; check the version.

        Runs under the database's write lock (SQLite ``BEGIN IMMEDIATE``; PostgreSQL an advisory
        transaction lock) in one transaction, so processes opening a new or old database at the same
        time create or migrate it once. The schema is Alembic's (:mod:`titans_agent.migrations`):
        a new database gets every revision; a version-1 database made before migrations existed (no
        ``alembic_version`` table) is stamped ``0001``; an older one is upgraded to the head after a
        backup copy (SQLite only: :func:`~titans_agent.migrations.backup_sqlite`).

        Raises:
            StoreError: not a titans-agent database; a schema newer than this code (a higher
                ``meta.schema_version`` or an unknown Alembic revision); the backup failed.
        """
        with self.engine.connect() as conn:
            try:
                if self.is_sqlite:
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                elif self.is_postgres:
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK_KEY})
            except DBAPIError as exc:
                if _is_transient(exc):
                    raise _TransientStoreError(f"database {self.url} is busy: {exc.orig}") from exc
                raise
            tables = set(inspect(conn).get_table_names())
            ours = set(Base.metadata.tables) | {"alembic_version"}
            # A SQLite file is ours alone; a PostgreSQL database may hold other applications' tables.
            foreign = tables if self.is_sqlite else tables & ours
            if foreign and "meta" not in tables:
                names = ", ".join(sorted(foreign))[:200]
                raise StoreError(f"{self.url} is not a titans-agent database (it has tables: {names})")
            if "meta" not in tables:
                migrations.upgrade(conn, "head")
                log.info("created the titans-agent schema (revision %s) in %s", migrations.head_revision(), self.url)
            else:
                self._migrate(conn, has_alembic="alembic_version" in tables)
            conn.commit()

    def _migrate(self, conn: Connection, *, has_alembic: bool) -> None:
        """Bring an existing database to the head revision (see :meth:`_create_schema`)."""
        row = conn.execute(select(Meta.value).where(Meta.key == "schema_version")).scalar()
        try:
            version = int(row) if row is not None else 1
        except ValueError:
            raise StoreError(
                f"{self.url} has a malformed schema version {row!r}; it is not a database to open"
            ) from None
        if version < 1:
            raise StoreError(f"{self.url} has an unknown schema version {row!r}")
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"database schema version {row} is newer than this titans-agent supports "
                f"({SCHEMA_VERSION}); upgrade titans-agent"
            )
        current = migrations.current_revision(conn) if has_alembic else None
        if current is not None and current not in migrations.known_revisions():
            raise StoreError(
                f"database schema revision {current!r} is newer than this titans-agent supports "
                f"(head {migrations.head_revision()!r}); upgrade titans-agent"
            )
        head = migrations.head_revision()
        if current == head:
            return
        backup = self._backup(version)
        if current is None:  # made before migrations existed: its meta version says which revision it is
            current = migrations.REVISION_OF_VERSION[version]
            migrations.stamp(conn, current)
        migrations.upgrade(conn, "head")
        log.warning(
            "migrated %s from schema revision %s to %s%s",
            self.url,
            current,
            head,
            f"; the database before it is copied at {backup}" if backup else "",
        )

    def _backup(self, version: int) -> Path | None:
        """Copy a SQLite database file next to itself before a migration (None on PostgreSQL or in memory)."""
        database = self.engine.url.database
        if not self.is_sqlite or not database or database == ":memory:":
            return None
        try:
            return migrations.backup_sqlite(Path(database), version, self.busy_timeout_s)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot back up {self.url} before migrating it (nothing was changed): {exc}") from exc

    def session(self) -> Session:
        """A new ORM session (use as a context manager; commit explicitly). Its reads are not
        guaranteed to share one snapshot; use :meth:`snapshot_session` or :meth:`write_session`
        when they must."""
        return self._sessions()

    @contextmanager
    def snapshot_session(self) -> Iterator[Session]:
        """A read session whose statements all see one committed snapshot of the database.

        SQLite: an explicit ``BEGIN`` (the snapshot is taken at the first read, WAL readers never
        wait for writers). PostgreSQL: a ``REPEATABLE READ`` transaction. Never commit in it."""
        with self._sessions() as s:
            if self.is_sqlite:
                s.connection().exec_driver_sql("BEGIN")
            elif self.is_postgres:
                s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            yield s

    @contextmanager
    def write_session(self, namespace_id: int | None = None, *, name: str | None = None) -> Iterator[Session]:
        """A session whose transaction holds a namespace's write lock until it commits or ends.

        SQLite: ``BEGIN IMMEDIATE`` takes the database's writer lock (waiting up to the busy
        timeout). PostgreSQL: ``SELECT ... FOR UPDATE`` of the namespace row (``namespace_id``), or,
        for a namespace that may not exist yet, a transaction-level advisory lock on its ``name``;
        waits at most ``busy_timeout_s`` (``lock_timeout``). The caller commits; leaving the block
        without a commit rolls everything back and releases the lock.

        Raises:
            StoreError: the lock could not be taken (a subclass :meth:`write_attempts` retries).
        """
        with self._sessions() as s:
            try:
                if self.is_sqlite:
                    s.connection().exec_driver_sql("BEGIN IMMEDIATE")
                elif self.is_postgres:
                    ms = int(self.busy_timeout_s * 1000)
                    s.execute(text(f"SET LOCAL lock_timeout = {ms}"))
                    if namespace_id is not None:
                        s.execute(select(NamespaceRow.id).where(NamespaceRow.id == namespace_id).with_for_update())
                    if name is not None:
                        s.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:n, 0))"), {"n": name})
                yield s
            except DBAPIError as exc:
                s.rollback()
                if _is_transient(exc):
                    raise _TransientStoreError(f"the database is busy ({exc.orig}); nothing was written") from exc
                raise

    def write_attempts(self) -> Retrying:
        """Attempts of a write transaction: ``for attempt in store.write_attempts(): with attempt: ...``.

        A lock conflict (SQLite busy, PostgreSQL lock timeout, deadlock or serialization failure,
        raised inside :meth:`write_session`) rolls the attempt back and retries it after a jittered
        exponential backoff (20 ms doubling, at most 1 s), for at most 3 x ``busy_timeout_s`` and 25
        attempts; then the last :class:`StoreError` is raised. Other errors are raised at once.
        """
        return Retrying(
            retry=retry_if_exception_type(_TransientStoreError),
            stop=stop_after_delay(3 * self.busy_timeout_s) | stop_after_attempt(25),
            wait=wait_exponential_jitter(multiplier=0.02, max=1.0),
            before_sleep=lambda rs: log.debug("retrying a write after a lock conflict (attempt %d)", rs.attempt_number),
            reraise=True,
        )

    def lexical_search(self, s: Session, namespace_id: int, query: str, limit: int) -> list[tuple[int, float]]:
        """Full-text search over the records' text and context: ``[(record_id, score)]``, best
        first, higher is better; text weighs twice the context (sources, roles, dates).

        The query is the OR of its non-stopword terms (:func:`query_terms`). SQLite: FTS5 with
        score = -bm25. PostgreSQL: the ``tsv`` column (GIN index) with score = ``ts_rank_cd``
        (cover density, ``english`` stemming; a query of stopwords only matches nothing there).
        Empty when the query has no words or the backend has no full-text search."""
        if self.is_postgres:
            return self._pg_lexical_search(s, namespace_id, query, limit)
        if not self.is_sqlite:
            return []
        match = fts_query(query)
        if match is None:
            return []
        # The namespace check reads the covering index (namespace_id, rowid) rather than each
        # matching record's row (text, context and embedding: about 2 KB), which SQLite picks by
        # itself: p50 34 ms instead of 59 ms over 21,000 records (benchmarks/recall_latency.py).
        rows = s.execute(
            text(
                "SELECT r.id, bm25(records_fts, 1.0, 0.5) AS score FROM records_fts "
                "JOIN records r INDEXED BY ix_records_namespace_id ON r.id = records_fts.rowid "
                "WHERE records_fts MATCH :q AND r.namespace_id = :ns "
                "ORDER BY score, r.id LIMIT :lim"
            ),
            {"q": match, "ns": namespace_id, "lim": limit},
        ).fetchall()
        return [(int(r[0]), -float(r[1])) for r in rows]

    @staticmethod
    def _pg_lexical_search(s: Session, namespace_id: int, query: str, limit: int) -> list[tuple[int, float]]:
        terms = query_terms(query)
        if not terms:
            return []
        # Each term through plainto_tsquery (so it is literal text, never tsquery syntax), OR-ed.
        tsq = " || ".join(f"plainto_tsquery('english', :t{i})" for i in range(len(terms)))
        params: dict[str, Any] = {f"t{i}": t for i, t in enumerate(terms)}
        params.update(ns=namespace_id, lim=limit, w=_PG_RANK_WEIGHTS)
        rows = s.execute(
            text(
                f"SELECT r.id, ts_rank_cd(CAST(:w AS float4[]), r.tsv, q.q) AS score "
                f"FROM records r, (SELECT {tsq} AS q) q "
                "WHERE r.namespace_id = :ns AND r.tsv @@ q.q "
                "ORDER BY score DESC, r.id LIMIT :lim"
            ),
            params,
        ).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def close(self) -> None:
        """Dispose of the connection pool."""
        self.engine.dispose()
