"""The SQL of erasure (:mod:`titans_agent.erase`): what a rebuild of the memory replays, the
records' bookkeeping it rewrites, what the lexical contexts of other records were derived from
(the transcript around a forgotten turn, the first chunk of a document, the chunks of a code file),
the transcript lines a forgotten piece of a turn is cut out of, the locations of the chunks that remain, and
dropping a whole namespace.

Like :mod:`~titans_agent.store.repository`, each function runs in the caller's session (a write
session holding the namespace's lock) and the caller commits; values are plain Python.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from titans_agent.store.repository import in_ids
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

__all__ = [
    "ChunkPlace",
    "Doomed",
    "RecordBook",
    "TurnLine",
    "WriteGroup",
    "chunk_locations",
    "document_headers",
    "document_chunks",
    "doomed_occurrences",
    "drop_namespace",
    "record_places",
    "session_lines",
    "set_locations",
    "set_record_books",
    "set_turn_lines",
    "write_groups",
]

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


# ---------------------------------------------------------------------- what contexts were derived from
@dataclass(frozen=True)
class Doomed:
    """An occurrence about to be forgotten: its id, record, kind, session id (turns), document
    and chunk index (chunks) and source."""

    id: int
    record_id: int
    kind: str
    session_id: str | None
    document_id: int | None
    chunk_index: int | None
    source: str | None = None


@dataclass
class TurnLine:
    """A transcript line and the occurrences that wrote it.

    Attributes:
        seq, role, content, timestamp: the line.
        occurrence_id: its first piece's occurrence (None: a line without one).
        occurrences: ``(occurrence id, record id)`` of each of its pieces, the first included.
        turn_id: the line's row id.
    """

    seq: int
    role: str
    content: str
    timestamp: dt.datetime
    occurrence_id: int | None
    occurrences: list[tuple[int, int]] = field(default_factory=list)
    turn_id: int | None = None


def doomed_occurrences(s: Session, ns_id: int, *, source: str | None, record_id: int | None) -> list[Doomed]:
    """The occurrences :func:`titans_agent.store.repository.delete_occurrences` would delete with
    the same arguments (those of ``record_id``, else of ``source``), by id."""
    o = Occurrence
    where = (o.record_id == record_id,) if record_id is not None else (o.namespace_id == ns_id, o.source == source)
    stmt = select(o.id, o.record_id, o.kind, o.session_id, o.document_id, o.chunk_index, o.source)
    stmt = stmt.where(*where).order_by(o.id)
    return [Doomed(*row) for row in s.execute(stmt).all()]


def session_lines(s: Session, ns_id: int, session_ids: Collection[str]) -> dict[str, list[TurnLine]]:
    """Session id -> its transcript lines in sequence order, each with the occurrences of its
    pieces: the line's own occurrence and the turn occurrences of the session that follow it
    without a line of their own (the further pieces of a turn longer than the embedder's window)."""
    ids = sorted(set(session_ids))
    if not ids:
        return {}
    lines: dict[str, list[TurnLine]] = {}
    by_occurrence: dict[int, TurnLine] = {}
    rows = s.execute(
        select(SessionRow.session_id, Turn.seq, Turn.role, Turn.content, Turn.timestamp, Turn.occurrence_id, Turn.id)
        .join(SessionRow, SessionRow.id == Turn.session_pk)
        .where(SessionRow.namespace_id == ns_id, SessionRow.session_id.in_(ids))
        .order_by(SessionRow.session_id, Turn.seq)
    ).all()
    for sid, seq, role, content, ts, occ, turn_id in rows:
        line = TurnLine(seq, role, content, ts, occ, turn_id=turn_id)
        lines.setdefault(sid, []).append(line)
        if occ is not None:
            by_occurrence[occ] = line
    o = Occurrence
    pieces = s.execute(
        select(o.id, o.record_id, o.session_id)
        .where(o.namespace_id == ns_id, o.kind == "turn", o.session_id.in_(ids))
        .order_by(o.id)
    ).all()
    current: dict[str, TurnLine] = {}
    for occ, rid, owner in pieces:
        found = by_occurrence.get(occ)
        if owner is None:
            continue  # a turn occurrence always names its session
        if found is not None:
            current[owner] = found
        elif owner not in current:
            continue  # a piece before any line of its session: nothing to attach it to
        current[owner].occurrences.append((occ, rid))
    return lines


def set_turn_lines(s: Session, lines: Mapping[int, tuple[str, int] | None]) -> None:
    """Rewrite transcript lines (turn id -> ``(content, occurrence id)``) or delete them (None)."""
    for turn_id, line in lines.items():
        if line is None:
            s.execute(delete(Turn).where(Turn.id == turn_id))
        else:
            s.execute(update(Turn).where(Turn.id == turn_id).values(content=line[0], occurrence_id=line[1]))


@dataclass(frozen=True)
class ChunkPlace:
    """A chunk occurrence of a document: its id, record, source, chunk index, first and last line
    (None before they were stored) and its record's text."""

    id: int
    record_id: int
    source: str | None
    chunk_index: int | None
    start_line: int | None
    end_line: int | None
    text: str


def document_chunks(s: Session, doc_ids: Collection[int]) -> dict[int, list[ChunkPlace]]:
    """Document id -> its chunk occurrences in chunk order, for the documents ``doc_ids``."""
    if not doc_ids:
        return {}
    o = Occurrence
    out: dict[int, list[ChunkPlace]] = {}
    rows = s.execute(
        select(o.document_id, o.id, o.record_id, o.source, o.chunk_index, o.start_line, o.end_line, Record.text)
        .join(Record, Record.id == o.record_id)
        .where(in_ids(s, o.document_id, doc_ids), o.kind == "chunk")  # type: ignore[arg-type]
        .order_by(o.document_id, o.chunk_index, o.id)
    ).all()
    for doc, occ, rid, source, index, start, end, text in rows:
        out.setdefault(int(doc or 0), []).append(ChunkPlace(occ, rid, source, index, start, end, text))
    return out


def document_headers(s: Session, doc_ids: Collection[int]) -> tuple[dict[int, tuple[int, str]], dict[int, set[int]]]:
    """For the documents ``doc_ids``: ``(document id -> (record id, text) of its chunk 0, document
    id -> the records with an occurrence in it)``."""
    if not doc_ids:
        return {}, {}
    o = Occurrence
    firsts: dict[int, tuple[int, str]] = {}
    holders: dict[int, set[int]] = {}
    rows = s.execute(
        select(o.document_id, o.record_id, o.chunk_index, Record.text)
        .join(Record, Record.id == o.record_id)
        .where(in_ids(s, cast(Any, o.document_id), doc_ids))
    ).all()
    for doc, rid, index, text in rows:
        if doc is None:
            continue  # the WHERE reads documents only
        holders.setdefault(doc, set()).add(rid)
        if index == 0:
            firsts[doc] = (rid, text)
    return firsts, holders


def record_places(s: Session, record_ids: Collection[int]) -> dict[int, tuple[str, list[tuple[int, str, str | None]]]]:
    """record id -> ``(its context, (occurrence id, kind, session id) of each of its occurrences
    by id)``, for the records that exist."""
    if not record_ids:
        return {}
    out: dict[int, tuple[str, list[tuple[int, str, str | None]]]] = {
        rid: (ctx or "", [])
        for rid, ctx in s.execute(select(Record.id, Record.context).where(in_ids(s, Record.id, record_ids)))
    }
    o = Occurrence
    for occ, rid, kind, sid in s.execute(
        select(o.id, o.record_id, o.kind, o.session_id).where(in_ids(s, o.record_id, record_ids)).order_by(o.id)
    ):
        out[rid][1].append((occ, kind, sid))
    return out


def chunk_locations(s: Session, doc_ids: Collection[int]) -> list[tuple[int, int, dict[str, Any]]]:
    """``(occurrence id, document id, location)`` of each chunk occurrence of the documents
    ``doc_ids`` that has a location (not NULL), by id."""
    if not doc_ids:
        return []
    o = Occurrence
    rows = s.execute(
        select(o.id, o.document_id, o.location)
        .where(in_ids(s, o.document_id, doc_ids), o.kind == "chunk", o.location.is_not(None))  # type: ignore[arg-type]
        .order_by(o.id)
    ).all()
    return [(occ, int(doc), loc) for occ, doc, loc in rows if loc is not None]


def set_locations(s: Session, locations: Mapping[int, dict[str, Any]]) -> None:
    """Rewrite occurrences' locations (occurrence id -> its location's JSON form)."""
    for occ, loc in locations.items():
        s.execute(update(Occurrence).where(Occurrence.id == occ).values(location=loc))
