"""Every table of a titans-agent database, as SQLAlchemy 2 typed models.

What is persisted, per database:

- ``meta``: the schema version (``schema_version``); ``alembic_version``: the Alembic revision
  (:mod:`titans_agent.store.migrations` makes and upgrades the schema on open).
- ``namespaces``: one row per namespace: its memory config, a reference to its outer parameters,
  the number of units written (``step``), its revision, the chunking configuration its documents
  were cut with, the embedder's name and dimension (a database is bound to one embedder), and its
  ``incarnation``: a random token set when the row is made (a new one when a dropped name is made
  again or imported), what tells a namespace from a later one that got its id or its name. The
  row holds no blob, so the revision check every recall makes reads a few bytes.
- ``memory_parameters``: the outer parameters of the neural memory (W_K, W_V, W_Q, the gates, M_0)
  as safetensors bytes, stored ONCE per distinct parameter set (keyed by their tensors' sha256) and
  referenced by every namespace made with them: ten thousand namespaces of one configuration store
  them once.
- ``memory_checkpoints``: at most one row per namespace: its test-time state (weights, momentum,
  pending chunk, step) as safetensors bytes, as of the write of ``revision``, which had applied
  every occurrence of the namespace up to id ``position``. The state of the namespace is that
  checkpoint followed by its occurrences after ``position``, replayed in their writes (the records
  are the log; :mod:`titans_agent.runtime`). A namespace without a row starts from M_0. Writes
  checkpoint every ``AgentConfig.checkpoint_units`` units, and every operation that deletes
  occurrences (forget, a replaced note, a rebuild) or sets the state (import) checkpoints at once.
- ``documents``: one row per ingested source (file or named text): its content hash, how many chunks
  it has, how many are done, whether it is complete. A document counts as done only once the batch
  holding its last chunk committed.
- ``records``: the memory units, one per distinct text: text, embedding (float32 bytes), surprise
  and write decision of the first write, hit count and times.
- ``occurrences``: where each record was written (a document chunk with its line range and
  location, a note, a turn of a session), with the caller's metadata (JSON), the revision of the
  write that made it and, when it differs from its record's, the embedding it was written with
  (what a rebuild of the memory replays). A record lives while it has one.
- ``metadata_terms``: the occurrences' metadata flattened, one row per path, indexed: what narrows
  a metadata filter before its exact JSON condition runs (:mod:`titans_agent.store.metaterms`).
- ``sessions`` and ``turns``: conversations, each turn with an explicit sequence number and a link
  to its occurrence.
- ``supersessions``: knowledge-update links "new record supersedes old record from a time on".

Times are stored as naive UTC and returned timezone-aware.
"""

from __future__ import annotations

import datetime as dt
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
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from titans_agent.types import utcnow

__all__ = [
    "SCHEMA_VERSION",
    "Base",
    "Document",
    "Meta",
    "MemoryCheckpoint",
    "MemoryParameters",
    "MetadataTerm",
    "NamespaceRow",
    "Occurrence",
    "Record",
    "SessionRow",
    "Supersession",
    "Turn",
    "UTCDateTime",
    "utcnow",
]

SCHEMA_VERSION = 8  # meta.schema_version at the head revision (titans_agent.store.migrations)


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
    # The outer parameters (schema version 6, migration 0006; before it each row held its own copy
    # and its state: both moved to memory_parameters and memory_checkpoints).
    parameters_id: Mapped[int | None] = mapped_column(ForeignKey("memory_parameters.id"), nullable=True)
    step: Mapped[int] = mapped_column(Integer, default=0)
    # Bumped by every commit that changes the namespace: a process whose cached state has another
    # revision reloads it, and a write based on a stale revision is refused (optimistic locking).
    revision: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The chunking configuration the namespace's documents were cut with (chunk_tokens,
    # chunk_overlap_tokens, the embedder's window); NULL until set, and for namespaces made
    # before schema version 3 (migration 0003).
    chunking: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    # A random token (uuid4 hex) set when the row is made, never copied: with the id, what a cached
    # runtime and every write transaction check, so that nothing written for a namespace lands in a
    # later one that got its id (SQLite reuses the highest id) or its name (schema version 8,
    # migration 0008, which gave every older row one; nullable only because SQLite adds a NOT NULL
    # column in place only with a default).
    incarnation: Mapped[str | None] = mapped_column(String(32), nullable=True)


class MemoryParameters(Base):
    """One set of outer parameters of the neural memory, shared by every namespace that uses it
    (schema version 6)."""

    __tablename__ = "memory_parameters"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)  # of its tensors: checkpoints.parameters_key
    memory_config: Mapped[dict[str, Any]] = mapped_column(JSON)
    params: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class MemoryCheckpoint(Base):
    """A namespace's persisted memory state and where in its log it stands (schema version 6)."""

    __tablename__ = "memory_checkpoints"
    namespace_id: Mapped[int] = mapped_column(ForeignKey("namespaces.id", ondelete="CASCADE"), primary_key=True)
    revision: Mapped[int] = mapped_column(Integer)  # the namespace revision that wrote it
    position: Mapped[int] = mapped_column(Integer)  # the last occurrence id it has applied (0: none)
    step: Mapped[int] = mapped_column(Integer)  # units written up to it (the state's step)
    state: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


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
    __table_args__ = (
        Index("ix_records_ns_hash", "namespace_id", "text_hash"),
        Index("ix_records_ns_changed", "namespace_id", "changed_revision"),
    )
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
    # the namespace revision of the write that last set text or context (NULL: before schema 7):
    # what a process's in-memory lexical index reads to catch up with other processes' commits
    changed_revision: Mapped[int | None] = mapped_column(Integer, nullable=True)


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
    # Where in its document a chunk is: titans_agent.types.Location in its short JSON form
    # (Location.to_dict(), {} for a chunk of code); NULL for notes and turns, and for chunks stored
    # before schema version 3 (migration 0003). Kept apart from the caller's metadata. None is
    # stored as SQL NULL (none_as_null), never as the JSON value null.
    location: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    # The write that made it (schema version 4, migration 0004; NULL in older rows): the namespace
    # revision its transaction committed, so that a rebuild of the memory (titans_agent/erase.py)
    # replays the units written together as one update, and the unit's embedding when it differs
    # from its record's (a repeat or merged near duplicate embedded otherwise; NULL: the record's).
    write_revision: Mapped[int | None] = mapped_column(Integer, nullable=True)
    embedding: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)


class MetadataTerm(Base):
    """One path of an occurrence's metadata, flattened for the index that narrows metadata filters
    (:mod:`titans_agent.store.metaterms` says what ``path``, ``term`` and ``num`` hold; schema
    version 5, migration 0005). Derived from ``occurrences.metadata``: rewritten with it, gone with
    its occurrence."""

    __tablename__ = "metadata_terms"
    __table_args__ = (
        Index("ix_meta_terms_term", "namespace_id", "path", "term"),
        Index("ix_meta_terms_num", "namespace_id", "path", "num"),
    )
    occurrence_id: Mapped[int] = mapped_column(ForeignKey("occurrences.id", ondelete="CASCADE"), primary_key=True)
    path: Mapped[str] = mapped_column(Text, primary_key=True)
    namespace_id: Mapped[int] = mapped_column(ForeignKey("namespaces.id", ondelete="CASCADE"))
    term: Mapped[str] = mapped_column(Text)
    num: Mapped[float | None] = mapped_column(Float, nullable=True)


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


# No SQL full-text index: recall's lexical signal is an in-memory BM25 index of each namespace
# (titans_agent/bm25.py); migration 0007 dropped the FTS5 table and the tsvector column of 0001.


class Supersession(Base):
    """A link "``new_record_id`` supersedes ``old_record_id`` from ``effective_at`` on" (a new table:
    databases made before it get it from migration 0002 on open)."""

    __tablename__ = "supersessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    namespace_id: Mapped[int] = mapped_column(ForeignKey("namespaces.id", ondelete="CASCADE"), index=True)
    old_record_id: Mapped[int] = mapped_column(ForeignKey("records.id", ondelete="CASCADE"), index=True)
    new_record_id: Mapped[int] = mapped_column(ForeignKey("records.id", ondelete="CASCADE"), index=True)
    similarity: Mapped[float] = mapped_column(Float)  # embedding cosine of the two records
    effective_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)  # the new statement's time
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
