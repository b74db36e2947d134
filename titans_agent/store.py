"""Persistence: SQLAlchemy 2 typed models over SQLite (a path) or any SQLAlchemy URL.

What is persisted, per database:

- ``meta``: the schema version.
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
- ``records_fts``: an FTS5 index over the records' text and context (SQLite only), kept by triggers.
- ``sessions`` and ``turns``: conversations, each turn with an explicit sequence number and a link
  to its occurrence.

SQLite is opened in WAL mode with a busy timeout and foreign keys on. Times are stored as UTC and
returned timezone-aware. Each ingest batch is one transaction: its records, its documents' progress
and the namespace's new memory state commit together or not at all.
"""

from __future__ import annotations

import datetime as dt
import re
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
    insert,
    select,
    text,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from titans_agent.errors import StoreError

__all__ = ["Base", "Document", "Meta", "NamespaceRow", "Occurrence", "Record", "SessionRow", "Store", "Turn", "utcnow"]

SCHEMA_VERSION = 1


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


_FTS_DDL = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS records_fts USING fts5(text, context, content='records', "
    "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER IF NOT EXISTS records_ai AFTER INSERT ON records BEGIN "
    "INSERT INTO records_fts(rowid, text, context) VALUES (new.id, new.text, new.context); END",
    "CREATE TRIGGER IF NOT EXISTS records_ad AFTER DELETE ON records BEGIN "
    "INSERT INTO records_fts(records_fts, rowid, text, context) VALUES ('delete', old.id, old.text, old.context); END",
    "CREATE TRIGGER IF NOT EXISTS records_au AFTER UPDATE OF text, context ON records BEGIN "
    "INSERT INTO records_fts(records_fts, rowid, text, context) VALUES ('delete', old.id, old.text, old.context); "
    "INSERT INTO records_fts(rowid, text, context) VALUES (new.id, new.text, new.context); END",
]

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


def fts_query(query: str, max_terms: int = 64) -> str | None:
    """An FTS5 MATCH expression: the query's words without stopwords, each quoted (so operators and
    wildcards are literal), joined with OR. A query made only of stopwords keeps them all. None when
    the query has no word characters."""
    words: list[str] = []
    for w in _WORD.findall(query.lower()):
        if w not in words:
            words.append(w)
    content = [w for w in words if w not in STOPWORDS]
    words = content or words
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words[:max_terms])


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
    """The database behind a MemoryAgent.

    Args:
        path_or_url: a file path (SQLite; parent folders are created) or a SQLAlchemy URL.
        busy_timeout_s: how long SQLite waits on a locked database before failing.

    Raises:
        StoreError: the database cannot be opened, is not a titans-agent database, or has a newer
            schema than this version understands.
    """

    def __init__(self, path_or_url: str | Path, busy_timeout_s: float = 30.0) -> None:
        url = _to_url(path_or_url)
        try:
            parsed = make_url(url)
            self.engine: Engine = create_engine(url, connect_args=self._connect_args(parsed, busy_timeout_s))
        except (ArgumentError, SQLAlchemyError, ImportError) as exc:
            raise StoreError(f"cannot open database {path_or_url!r}: {exc}") from exc
        self.url = url
        self.is_sqlite = self.engine.dialect.name == "sqlite"
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
            self._create_schema()
        except OperationalError as exc:
            raise StoreError(f"cannot open database {path_or_url!r}: {exc.orig}") from exc

    @staticmethod
    def _connect_args(parsed: Any, busy_timeout_s: float) -> dict[str, Any]:
        if parsed.get_backend_name() == "sqlite":
            return {"timeout": busy_timeout_s, "check_same_thread": False}
        return {}

    def _create_schema(self) -> None:
        with self.engine.begin() as conn:
            if self.is_sqlite:
                tables = [r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type='table'"))]
                if tables and "meta" not in tables:
                    names = ", ".join(sorted(tables))[:200]
                    raise StoreError(f"{self.url} is not a titans-agent database (it has tables: {names})")
            Base.metadata.create_all(conn)
            if self.is_sqlite:
                for ddl in _FTS_DDL:
                    conn.execute(text(ddl))
            row = conn.execute(select(Meta.value).where(Meta.key == "schema_version")).scalar()
            if row is None:
                conn.execute(insert(Meta).values(key="schema_version", value=str(SCHEMA_VERSION)))
            elif int(row) > SCHEMA_VERSION:
                raise StoreError(
                    f"database schema version {row} is newer than this titans-agent supports "
                    f"({SCHEMA_VERSION}); upgrade titans-agent"
                )

    def session(self) -> Session:
        """A new ORM session (use as a context manager; commit explicitly)."""
        return self._sessions()

    def lexical_search(self, s: Session, namespace_id: int, query: str, limit: int) -> list[tuple[int, float]]:
        """BM25 over the FTS5 index: ``[(record_id, score)]``, best first; score = -bm25 (higher is
        better). Text weighs 1.0, context (source, role, date) 0.5. Empty when the query has no words
        or the backend has no FTS5."""
        if not self.is_sqlite:
            return []
        match = fts_query(query)
        if match is None:
            return []
        rows = s.execute(
            text(
                "SELECT r.id, bm25(records_fts, 1.0, 0.5) AS score FROM records_fts "
                "JOIN records r ON r.id = records_fts.rowid "
                "WHERE records_fts MATCH :q AND r.namespace_id = :ns "
                "ORDER BY score, r.id LIMIT :lim"
            ),
            {"q": match, "ns": namespace_id, "lim": limit},
        ).fetchall()
        return [(int(r[0]), -float(r[1])) for r in rows]

    def close(self) -> None:
        """Dispose of the connection pool."""
        self.engine.dispose()
