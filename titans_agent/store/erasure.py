"""The SQL of erasure (:mod:`titans_agent.erase`): what a rebuild of the memory replays, the
records' bookkeeping it rewrites, and dropping a whole namespace.

Like :mod:`~titans_agent.store.repository`, each function runs in the caller's session (a write
session holding the namespace's lock) and the caller commits; values are plain Python.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from titans_agent.store.schema import (
    Document,
    MemoryCheckpoint,
    MetadataTerm,
    NamespaceRow,
    Occurrence,
    Record,
    SessionRow,
    Supersession,
    Turn,
)

__all__ = ["RecordBook", "WriteGroup", "drop_namespace", "set_record_books", "write_groups"]

_YIELD = 1000  # occurrences fetched at a time


@dataclass
class WriteGroup:
    """The remaining units of one write, in write order.

    Attributes:
        record_ids: per unit, its record.
        embeddings: per unit, the float32 embedding bytes it was written with (its occurrence's, else
            its record's).
        created_at: per unit, when it was written.
        legacy: how many of its units were written before schema version 4 (no write revision: grouped
            by write time; no embedding of their own: their record's is replayed).
        last_id: its last unit's occurrence id (where a replay that ends with it stands in the log).
    """

    record_ids: list[int]
    embeddings: list[bytes]
    created_at: list[dt.datetime]
    legacy: int = 0
    last_id: int = 0


@dataclass
class RecordBook:
    """A record's bookkeeping as its remaining occurrences give it (what a rebuild writes back).

    Attributes:
        surprise: its first remaining unit's surprise under the rebuilt memory (None: not finite).
        hits: how many occurrences remain.
        created_at, last_seen_at: when its first and last remaining units were written.
    """

    surprise: float | None
    hits: int
    created_at: dt.datetime
    last_seen_at: dt.datetime


def write_groups(s: Session, ns_id: int, after_id: int = 0) -> Iterator[WriteGroup]:
    """The namespace's remaining occurrences with id > ``after_id`` in the order written (by id),
    as their writes (each group's ``last_id``: its highest occurrence id).

    Consecutive occurrences of the same write revision and write time belong to one write: the
    revision is unique per commit of a namespace, and the time tells apart the writes of a namespace
    imported from a file (whose revision restarts) and of rows older than schema version 4 (NULL
    revision). Streamed (``yield_per``), so a large namespace is never held in memory at once.
    """
    stmt = (
        select(
            Occurrence.id,
            Occurrence.record_id,
            Occurrence.write_revision,
            Occurrence.created_at,
            Occurrence.embedding,
            Record.embedding,
        )
        .join(Record, Record.id == Occurrence.record_id)
        .where(Occurrence.namespace_id == ns_id, Occurrence.id > after_id)
        .order_by(Occurrence.id)
        .execution_options(yield_per=_YIELD)
    )
    group: WriteGroup | None = None
    key: tuple[int | None, dt.datetime] | None = None
    for occ_id, record_id, revision, created_at, own, record_emb in s.execute(stmt):
        if group is None or (revision, created_at) != key:
            if group is not None:
                yield group
            group, key = WriteGroup([], [], []), (revision, created_at)
        group.record_ids.append(record_id)
        group.embeddings.append(own if own is not None else record_emb)
        group.created_at.append(created_at)
        group.legacy += revision is None
        group.last_id = occ_id
    if group is not None:
        yield group


def set_record_books(s: Session, books: Mapping[int, RecordBook]) -> None:
    """Write each record's rebuilt surprise, hits and times (record id -> :class:`RecordBook`)."""
    rows = [
        {"id": rid, "surprise": b.surprise, "hits": b.hits, "created_at": b.created_at, "last_seen_at": b.last_seen_at}
        for rid, b in books.items()
    ]
    for i in range(0, len(rows), _YIELD):
        s.execute(update(Record), rows[i : i + _YIELD])  # ORM bulk UPDATE by primary key


def drop_namespace(s: Session, ns_id: int) -> dict[str, int]:
    """Delete a namespace and everything of it: turns, supersession links, occurrences, records
    (and their metadata index rows), documents, sessions, its memory checkpoint and the namespace
    row (its outer parameters are shared with other namespaces and stay). Returns how many rows
    went, by table."""
    sessions = select(SessionRow.id).where(SessionRow.namespace_id == ns_id).scalar_subquery()
    counts: dict[str, int] = {}
    statements = (
        ("turns", delete(Turn).where(Turn.session_pk.in_(sessions))),
        ("supersessions", delete(Supersession).where(Supersession.namespace_id == ns_id)),
        ("metadata_terms", delete(MetadataTerm).where(MetadataTerm.namespace_id == ns_id)),
        ("occurrences", delete(Occurrence).where(Occurrence.namespace_id == ns_id)),
        ("memory_checkpoints", delete(MemoryCheckpoint).where(MemoryCheckpoint.namespace_id == ns_id)),
        ("records", delete(Record).where(Record.namespace_id == ns_id)),
        ("documents", delete(Document).where(Document.namespace_id == ns_id)),
        ("sessions", delete(SessionRow).where(SessionRow.namespace_id == ns_id)),
        ("namespaces", delete(NamespaceRow).where(NamespaceRow.id == ns_id)),
    )
    for table, stmt in statements:
        result = s.execute(stmt.execution_options(synchronize_session=False))
        counts[table] = getattr(result, "rowcount", 0) or 0  # a CursorResult: rows deleted
    return counts
