"""Every SQL statement of titans-agent's data flows, as named functions by table.

Each function takes the session it runs in (plain, snapshot or write: the caller chooses, see
:class:`~titans_agent.store.engine.Store`) and a namespace id where the table has one; the caller
commits. Values cross this boundary as plain Python: ints, strings, bytes (embeddings as float32
bytes, memory blobs as safetensors bytes), dicts and the frozen rows below, never ORM objects, so
nothing above the store imports SQLAlchemy.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, String, any_, bindparam, column, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import InstrumentedAttribute, Session

from titans_agent.filters import FilterNode
from titans_agent.rows import OCCURRENCE_COLUMNS, BatchRecord, NamespaceData, OccurrenceData, RecordData, UnitRow
from titans_agent.store.jsonfilter import filter_condition
from titans_agent.store.metaterms import index_metadata, narrowing
from titans_agent.store.schema import (
    Document,
    NamespaceRow,
    Occurrence,
    Record,
    SessionRow,
    Supersession,
    Turn,
)
from titans_agent.types import utcnow

__all__ = ["MAX_CONTEXT_CHARS", "in_ids"]

MAX_CONTEXT_CHARS = 2000  # lexical context of a record: its sources, roles and dates
_BATCH = 500  # ids per IN (...) list


def _chunks(ids: Sequence[int]) -> Iterable[list[int]]:
    for i in range(0, len(ids), _BATCH):
        yield list(ids[i : i + _BATCH])


def in_ids(s: Session, col: InstrumentedAttribute[int] | ColumnElement[int], ids: Iterable[int]) -> ColumnElement[bool]:
    """``col IN ids`` with the ids as ONE bound parameter, however many: a JSON array read by
    ``json_each`` on SQLite, a typed ``bigint[]`` parameter compared with ``= ANY`` on PostgreSQL (as
    :func:`~titans_agent.store.lexical.lexical_search` passes ``within``). The statement's SQL stays
    the same for any number of ids, so it is compiled once and cached, where an expanding
    ``IN (...)`` list is rendered and bound id by id on every call (~400 ids: milliseconds)."""
    ordered = sorted({int(i) for i in ids})
    if s.get_bind().dialect.name == "postgresql":  # typed, never text cast in SQL: that is parsed per row
        return col == any_(bindparam("ids", ordered, type_=ARRAY(BigInteger), unique=True))
    arr = bindparam("ids", json.dumps(ordered), type_=String, unique=True)
    return col.in_(select(column("value")).select_from(func.json_each(arr)))


def _occurrence(o: Occurrence) -> OccurrenceData:
    return OccurrenceData(id=o.id, **{c: getattr(o, c) for c in OCCURRENCE_COLUMNS})


def _record(r: Record) -> RecordData:
    return RecordData(r.id, r.text, r.surprise, r.hits, r.created_at, r.last_seen_at)


# ---------------------------------------------------------------------- namespaces
def namespace_embedders(s: Session) -> list[tuple[str, str, int]]:
    """``(name, embedder, dim)`` of every namespace."""
    return [(n, e, d) for n, e, d in s.execute(select(NamespaceRow.name, NamespaceRow.embedder, NamespaceRow.dim))]


def namespace_names(s: Session) -> list[str]:
    """Every namespace's name, sorted."""
    return sorted(s.execute(select(NamespaceRow.name)).scalars())


def find_namespace(s: Session, name: str) -> NamespaceData | None:
    """The namespace called ``name``, or None."""
    row = s.execute(select(NamespaceRow).where(NamespaceRow.name == name)).scalar_one_or_none()
    if row is None:
        return None
    return NamespaceData(
        row.id,
        row.name,
        row.embedder,
        row.dim,
        row.memory_config,
        row.parameters_id,
        row.revision,
        row.chunking,
        row.created_at,
        row.incarnation,
    )


def namespace_summary(s: Session, name: str) -> tuple[int, int, int, dict[str, Any]] | None:
    """``(id, dim, step, memory_config)`` of the namespace called ``name`` (no blob is read), or None."""
    n = NamespaceRow
    row = s.execute(select(n.id, n.dim, n.step, n.memory_config).where(n.name == name)).one_or_none()
    return None if row is None else (row.id, row.dim, row.step, row.memory_config)


def namespace_id(s: Session, name: str) -> int | None:
    """The id of the namespace called ``name``, or None."""
    return s.execute(select(NamespaceRow.id).where(NamespaceRow.name == name)).scalar()


def namespace_revision(s: Session, ns_id: int, incarnation: str | None) -> int | None:
    """The revision (bumped by every commit that changes it) of namespace ``ns_id`` as loaded with
    ``incarnation`` (the row's random token), or None when that namespace is gone: no row of that
    id, or a row of another incarnation (a dropped namespace's id can come back: SQLite reuses the
    highest id)."""
    row = s.execute(
        select(NamespaceRow.revision, NamespaceRow.incarnation).where(NamespaceRow.id == ns_id)
    ).one_or_none()
    return None if row is None or row.incarnation != incarnation else row.revision


def lock_namespace_name(s: Session, name: str) -> None:
    """Take, in ``s``'s transaction, the write lock of the namespace name ``name`` (which may not
    exist yet): on PostgreSQL a transaction-level advisory lock on the name, the one
    :meth:`~titans_agent.store.engine.Store.write_session` takes for ``name=``, so that creating,
    importing, writing to and dropping a name never interleave; nothing on SQLite, whose write
    session holds the database's single writer lock already."""
    if s.get_bind().dialect.name == "postgresql":
        s.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:n, 0))"), {"n": name})


def insert_namespace(
    s: Session,
    name: str,
    *,
    embedder: str,
    dim: int,
    memory_config: dict[str, Any],
    parameters_id: int,
    chunking: dict[str, Any] | None,
    step: int = 0,
    created_at: dt.datetime | None = None,
    updated_at: dt.datetime | None = None,
) -> int:
    """Add a namespace row at revision 0 with a new random incarnation (the caller holds the name's
    write lock and commits); its new id. ``parameters_id``: its outer parameters' row
    (:func:`titans_agent.store.checkpoints.parameters_id`). ``step`` and the times default to a new
    namespace's (0, now); an import passes the exported ones."""
    now = utcnow()
    row = NamespaceRow(
        name=name,
        embedder=embedder,
        dim=dim,
        memory_config=memory_config,
        parameters_id=parameters_id,
        step=step,
        revision=0,
        chunking=chunking,
        created_at=created_at or now,
        updated_at=updated_at or now,
        incarnation=uuid.uuid4().hex,
    )
    s.add(row)
    s.flush()
    return row.id


def set_chunking(s: Session, ns_id: int, chunking: dict[str, Any]) -> None:
    """Record the chunking configuration a namespace's documents are cut with."""
    s.execute(update(NamespaceRow).where(NamespaceRow.id == ns_id).values(chunking=chunking))


def advance(s: Session, ns_id: int, step: int, revision: int, now: dt.datetime) -> None:
    """Set the namespace's units written (``step``) and revision (the write's transaction); the
    state itself is the log, checkpointed by :func:`titans_agent.store.checkpoints.save_checkpoint`."""
    s.execute(update(NamespaceRow).where(NamespaceRow.id == ns_id).values(step=step, revision=revision, updated_at=now))


def bump_revision(s: Session, ns_id: int) -> None:
    """Mark the namespace changed (in the caller's transaction) so other processes reload it."""
    s.execute(update(NamespaceRow).where(NamespaceRow.id == ns_id).values(revision=NamespaceRow.revision + 1))


# ---------------------------------------------------------------------- records
def record_index(s: Session, ns_id: int, after_id: int = 0) -> tuple[list[int], list[bytes]]:
    """Ids (ascending) and embedding blobs of the namespace's records with id > ``after_id``."""
    rows = s.execute(
        select(Record.id, Record.embedding)
        .where(Record.namespace_id == ns_id, Record.id > after_id)
        .order_by(Record.id)
    ).all()
    return [r[0] for r in rows], [r[1] for r in rows]


def count_records(s: Session, ns_id: int, up_to_id: int | None = None) -> int:
    """How many records the namespace has (with id <= ``up_to_id`` when given)."""
    stmt = select(func.count()).select_from(Record).where(Record.namespace_id == ns_id)
    if up_to_id is not None:
        stmt = stmt.where(Record.id <= up_to_id)
    return s.execute(stmt).scalar_one()


def record_embedding(s: Session, record_id: int) -> bytes | None:
    """One record's embedding blob, or None."""
    return s.execute(select(Record.embedding).where(Record.id == record_id)).scalar()


def record_in_namespace(s: Session, ns_id: int, record_id: int) -> bool:
    """Whether the record exists in the namespace."""
    return s.execute(select(Record.id).where(Record.id == record_id, Record.namespace_id == ns_id)).scalar() is not None


def first_records_by_hash(s: Session, ns_id: int, hashes: Collection[str]) -> dict[str, int]:
    """text hash -> the oldest record of the namespace with that normalised text."""
    return dict(
        s.execute(
            select(Record.text_hash, func.min(Record.id))
            .where(Record.namespace_id == ns_id, Record.text_hash.in_(set(hashes)))
            .group_by(Record.text_hash)
        ).all()
    )


def record_texts(s: Session, record_ids: Iterable[int]) -> dict[int, str]:
    """record id -> text, for the records that exist."""
    ids = set(record_ids)
    if not ids:
        return {}
    return dict(s.execute(select(Record.id, Record.text).where(in_ids(s, Record.id, ids))).all())


def set_contexts(s: Session, contexts: Mapping[int, str], revision: int) -> None:
    """Set the lexical context of records (record id -> context), derived again after an erasure,
    and their ``changed_revision`` to ``revision`` (the erasing transaction's), so that every
    process's BM25 index indexes them again (:func:`titans_agent.store.context.lexical_rows`)."""
    rows = [{"id": rid, "context": ctx, "changed_revision": revision} for rid, ctx in contexts.items()]
    for i in range(0, len(rows), _BATCH):
        s.execute(update(Record), rows[i : i + _BATCH])  # ORM bulk UPDATE by primary key


def delete_orphans(s: Session, ns_id: int) -> None:
    """Delete the namespace's records that no longer occur anywhere."""
    has_place = select(Occurrence.id).where(Occurrence.record_id == Record.id).exists()
    s.execute(delete(Record).where(Record.namespace_id == ns_id, ~has_place))


def namespace_counts(s: Session, ns_id: int) -> dict[str, Any]:
    """Occurrences by kind, records, mean surprise, complete documents and sessions of a namespace."""
    by_kind = dict(
        s.execute(
            select(Occurrence.kind, func.count()).where(Occurrence.namespace_id == ns_id).group_by(Occurrence.kind)
        ).all()
    )
    mean = s.execute(select(func.avg(Record.surprise)).where(Record.namespace_id == ns_id)).scalar()
    docs = s.execute(
        select(func.count()).select_from(Document).where(Document.namespace_id == ns_id, Document.complete.is_(True))
    ).scalar()
    sessions = s.execute(select(func.count()).select_from(SessionRow).where(SessionRow.namespace_id == ns_id)).scalar()
    return {
        "by_kind": by_kind,
        "records": count_records(s, ns_id),
        "mean_surprise": None if mean is None else float(mean),
        "documents": docs or 0,
        "sessions": sessions or 0,
    }


# ---------------------------------------------------------------------- the gated write's commit
def commit_units(
    s: Session,
    ns_id: int,
    units: Sequence[UnitRow],
    now: dt.datetime,
    write_revision: int | None = None,
) -> tuple[list[int], list[int], list[int | None]]:
    """Write a batch of units: new records, touched records, occurrences and transcript lines.

    Args:
        units: the units, in write order, each with its record (``target``: a new record, an
            existing one, or the one an earlier unit of the batch creates), its place and its line.
        now: the write's time.
        write_revision: the namespace revision this write commits, kept on every occurrence with,
            where it differs from its record's, the unit's embedding (what a rebuild replays).

    Returns:
        ``(record ids, occurrence ids, turn sequence numbers)``, one per unit (the sequence number
        is None for a unit that adds no transcript line).

    Raises:
        LookupError: a target record or a turn's session is not in the namespace (it vanished; the
            transaction must roll back).
    """
    created: dict[int, Record] = {}
    records: list[Record] = []
    for i, u in enumerate(units):
        target = u.target
        if target is None:
            rec = Record(
                namespace_id=ns_id,
                text=u.text,
                context=u.context,
                text_hash=u.text_hash,
                embedding=u.embedding,
                surprise=u.surprise,
                decision=u.decision,
                hits=1,
                created_at=now,
                last_seen_at=now,
                changed_revision=write_revision,
            )
            s.add(rec)
            created[i] = rec
            records.append(rec)
            continue
        found = created.get(target.index) if isinstance(target, BatchRecord) else s.get(Record, target)
        if found is None or found.namespace_id != ns_id:  # an id may come back in another namespace
            raise LookupError(f"record {target} vanished during a write")
        found.hits += 1
        found.last_seen_at = now
        if u.context and u.context not in found.context and len(found.context) < MAX_CONTEXT_CHARS:
            found.context = f"{found.context} | {u.context}" if found.context else u.context
            found.changed_revision = write_revision
        records.append(found)
    s.flush()
    occurrences = [
        Occurrence(
            **u.place.place_values(),
            record_id=rec.id,
            namespace_id=ns_id,
            created_at=now,
            write_revision=write_revision,
            embedding=None if u.embedding == rec.embedding else u.embedding,
        )
        for u, rec in zip(units, records, strict=True)
    ]
    s.add_all(occurrences)
    s.flush()
    index_metadata(s, ns_id, [(o.id, o.meta) for o in occurrences])
    seqs: list[int | None] = []
    for u, occ in zip(units, occurrences, strict=True):
        if u.session_pk is None:
            seqs.append(None)
            continue
        sess = s.get(SessionRow, u.session_pk)
        if sess is None or sess.namespace_id != ns_id:
            raise LookupError(f"session {u.place.session_id!r} vanished while writing its turn")
        sess.n_turns += 1
        sess.updated_at = now
        s.add(
            Turn(
                session_pk=sess.id,
                seq=sess.n_turns,
                role=u.place.role or "",
                content=u.turn_content if u.turn_content is not None else u.text,
                timestamp=u.place.timestamp or now,
                occurrence_id=occ.id,
            )
        )
        seqs.append(sess.n_turns)
    return [r.id for r in records], [o.id for o in occurrences], seqs


# ---------------------------------------------------------------------- occurrences
def occurrence_places(s: Session, record_ids: Iterable[int]) -> dict[int, list[tuple[str, str | None, dt.datetime]]]:
    """record id -> ``(kind, role, time)`` of each occurrence; time is the turn's timestamp, else
    when it was written."""
    out: dict[int, list[tuple[str, str | None, dt.datetime]]] = {}
    for part in _chunks(sorted(set(record_ids))):
        rows = s.execute(
            select(
                Occurrence.record_id, Occurrence.kind, Occurrence.role, Occurrence.timestamp, Occurrence.created_at
            ).where(Occurrence.record_id.in_(part))
        ).all()
        for rid, kind, role, ts, created in rows:
            out.setdefault(rid, []).append((kind, role, ts or created))
    return out


def filtered_occurrences(
    s: Session,
    ns_id: int,
    *,
    kinds: Sequence[str] | None = None,
    source: str | None = None,
    session_id: str | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    metadata: FilterNode | None = None,
) -> list[tuple[int, int]]:
    """``(record id, occurrence id)`` of the namespace's occurrences that pass the filters; an
    occurrence's time is its timestamp (turns), else when it was written (inclusive bounds);
    ``metadata`` is a parsed filter on the occurrence's metadata (:mod:`~titans_agent.store.jsonfilter`)."""
    stmt = select(Occurrence.record_id, Occurrence.id).where(Occurrence.namespace_id == ns_id)
    if kinds is not None:
        stmt = stmt.where(Occurrence.kind.in_(list(kinds)))
    if source is not None:
        stmt = stmt.where(Occurrence.source == source)
    if session_id is not None:
        stmt = stmt.where(Occurrence.session_id == session_id)
    when = func.coalesce(Occurrence.timestamp, Occurrence.created_at)
    if since is not None:
        stmt = stmt.where(when >= since)
    if until is not None:
        stmt = stmt.where(when <= until)
    if metadata is not None:
        # the index narrows (a superset, through B-trees), the JSON condition decides on what is left
        narrow = narrowing(ns_id, metadata, Occurrence.id)
        if narrow is not None:
            stmt = stmt.where(narrow)
        stmt = stmt.where(filter_condition(metadata, Occurrence.meta, s.get_bind().dialect.name))
    # through the connection: plain rows, without the ORM's per-row work (50,000 rows: ~2x faster)
    return [(r, o) for r, o in s.connection().execute(stmt).all()]


def records_with_occurrences(
    s: Session, record_ids: Sequence[int]
) -> tuple[dict[int, RecordData], dict[int, list[OccurrenceData]]]:
    """The records ``record_ids`` and each one's occurrences in write order."""
    records: dict[int, RecordData] = {}
    places: dict[int, list[OccurrenceData]] = {}
    if not record_ids:
        return records, places
    records.update(
        (r.id, _record(r)) for r in s.execute(select(Record).where(in_ids(s, Record.id, record_ids))).scalars()
    )
    stmt = select(Occurrence).where(in_ids(s, Occurrence.record_id, record_ids)).order_by(Occurrence.id)
    for o in s.execute(stmt).scalars():
        places.setdefault(o.record_id, []).append(_occurrence(o))
    return records, places


def list_occurrences(
    s: Session,
    ns_id: int,
    *,
    source: str | None,
    kinds: Sequence[str] | None,
    limit: int | None,
    offset: int,
) -> list[tuple[RecordData, OccurrenceData]]:
    """The namespace's occurrences in write order, each with its record."""
    stmt = (
        select(Occurrence, Record)
        .join(Record, Record.id == Occurrence.record_id)
        .where(Occurrence.namespace_id == ns_id)
        .order_by(Occurrence.id)
        .offset(offset)
    )
    if source is not None:
        stmt = stmt.where(Occurrence.source == source)
    if kinds is not None:
        stmt = stmt.where(Occurrence.kind.in_(list(kinds)))
    if limit is not None:
        stmt = stmt.limit(limit)
    return [(_record(r), _occurrence(o)) for o, r in s.execute(stmt).all()]


def update_source_metadata(s: Session, ns_id: int, source: str, metadata: dict[str, Any], merge: bool) -> int:
    """Merge ``metadata`` into (or replace with it) the metadata of every occurrence of ``source``;
    returns how many changed."""
    occs = (
        s.execute(select(Occurrence).where(Occurrence.namespace_id == ns_id, Occurrence.source == source))
        .scalars()
        .all()
    )
    for o in occs:
        o.meta = {**(o.meta or {}), **metadata} if merge else dict(metadata)
    index_metadata(s, ns_id, [(o.id, o.meta) for o in occs], replace=True)
    return len(occs)


def delete_occurrences(s: Session, ns_id: int, *, source: str | None = None, record_id: int | None = None) -> int:
    """Delete the occurrences of a source (with its document row) or of one record, their turns
    with them; then the sessions left without turns and the records left without occurrences.
    Returns how many occurrences went."""
    where: tuple[Any, ...]
    if record_id is not None:
        where = (Occurrence.record_id == record_id,)
    else:
        where = (Occurrence.namespace_id == ns_id, Occurrence.source == source)
    n = s.execute(select(func.count()).select_from(Occurrence).where(*where)).scalar_one()
    s.execute(delete(Occurrence).where(*where))  # turns go with their occurrence
    if source is not None:
        s.execute(delete(Document).where(Document.namespace_id == ns_id, Document.source == source))
    # a session left without turns goes too (its id is the caller's data)
    has_turn = select(Turn.id).where(Turn.session_pk == SessionRow.id).exists()
    s.execute(delete(SessionRow).where(SessionRow.namespace_id == ns_id, ~has_turn))
    delete_orphans(s, ns_id)
    return n


# ---------------------------------------------------------------------- documents
def open_document(
    s: Session,
    ns_id: int,
    source: str,
    sha256: str,
    n_chunks: int,
    before_delete: Callable[[], None] | None = None,
) -> tuple[int | None, int, bool]:
    """Find or create a source's document row (the caller holds the write lock and commits).
    ``before_delete`` is called, in the same transaction, just before a changed document's old
    occurrences are deleted (the write pipeline materialises the memory state there).

    Returns:
        ``(id, first chunk to write, replaced)``: ``(None, 0, False)`` when the same content is
        completely ingested; ``replaced`` when the content changed and the old occurrences (and
        records left without any) were deleted.
    """
    doc = s.execute(
        select(Document).where(Document.namespace_id == ns_id, Document.source == source)
    ).scalar_one_or_none()
    if doc is not None and doc.sha256 == sha256 and doc.n_chunks == n_chunks:
        return (None, 0, False) if doc.complete else (doc.id, doc.chunks_done, False)
    if doc is not None:  # content changed: its old records go, the new ones replace them
        if before_delete is not None:
            before_delete()
        s.execute(delete(Occurrence).where(Occurrence.document_id == doc.id))
        delete_orphans(s, ns_id)
        doc.sha256, doc.n_chunks, doc.chunks_done, doc.complete = sha256, n_chunks, 0, False
        doc.updated_at = utcnow()
        s.flush()
        return doc.id, 0, True
    doc = Document(namespace_id=ns_id, source=source, sha256=sha256, n_chunks=n_chunks)
    s.add(doc)
    s.flush()
    return doc.id, 0, False


def set_document_progress(s: Session, ns_id: int, progress: dict[int, tuple[int, bool]], now: dt.datetime) -> None:
    """document id -> (chunks done, complete), for the namespace's documents.

    Raises:
        LookupError: a document is not in the namespace (it vanished; the transaction must roll back).
    """
    for doc_id, (done, complete) in progress.items():
        result = s.execute(
            update(Document)
            .where(Document.id == doc_id, Document.namespace_id == ns_id)
            .values(chunks_done=done, complete=complete, updated_at=now)
        )
        if not result.rowcount:  # type: ignore[attr-defined]
            raise LookupError(f"document {doc_id} vanished during a write")


def document_count(s: Session, ns_id: int) -> int:
    """How many documents (complete or not) the namespace has."""
    return s.execute(select(func.count()).select_from(Document).where(Document.namespace_id == ns_id)).scalar_one()


# ---------------------------------------------------------------------- sessions and turns
def session_keys(s: Session, ns_id: int, names: Collection[str], create: bool = True) -> dict[str, int]:
    """session id -> primary key of the namespace's sessions ``names``, adding the missing ones
    (flushed; the caller commits) when ``create``."""
    found = dict(
        s.execute(
            select(SessionRow.session_id, SessionRow.id).where(
                SessionRow.namespace_id == ns_id, SessionRow.session_id.in_(list(names))
            )
        ).all()
    )
    missing = [n for n in sorted(names) if n not in found]
    if missing and create:
        rows = [SessionRow(namespace_id=ns_id, session_id=n) for n in missing]
        s.add_all(rows)
        s.flush()
        found.update({r.session_id: r.id for r in rows})
    return found


def transcript(s: Session, ns_id: int, session_id: str) -> list[dict[str, Any]]:
    """A session's turns in sequence order: seq, role, content, timestamp, record_id."""
    rows = s.execute(
        select(Turn, Occurrence.record_id)
        .join(SessionRow, Turn.session_pk == SessionRow.id)
        .outerjoin(Occurrence, Turn.occurrence_id == Occurrence.id)
        .where(SessionRow.namespace_id == ns_id, SessionRow.session_id == session_id)
        .order_by(Turn.seq)
    ).all()
    return [
        {"seq": t.seq, "role": t.role, "content": t.content, "timestamp": t.timestamp, "record_id": rid}
        for t, rid in rows
    ]


def last_turns(s: Session, ns_id: int, session_ids: Collection[str]) -> dict[str, str]:
    """The content of the last turn (highest sequence number) of each of the namespace's sessions
    ``session_ids``: session id -> content; sessions without turns, or not in it, are left out."""
    if not session_ids:
        return {}
    last = (
        select(Turn.session_pk, func.max(Turn.seq).label("seq"))
        .join(SessionRow, SessionRow.id == Turn.session_pk)
        .where(SessionRow.namespace_id == ns_id, SessionRow.session_id.in_(list(session_ids)))
        .group_by(Turn.session_pk)
        .subquery()
    )
    rows = s.execute(
        select(SessionRow.session_id, Turn.content)
        .join(last, (Turn.session_pk == last.c.session_pk) & (Turn.seq == last.c.seq))
        .join(SessionRow, SessionRow.id == Turn.session_pk)
    ).all()
    return dict(rows)


# ---------------------------------------------------------------------- supersessions
def add_supersessions(s: Session, ns_id: int, links: Iterable[tuple[int, int, float, dt.datetime]]) -> None:
    """Add links ``(old record id, new record id, similarity, effective at)``."""
    s.add_all(
        Supersession(namespace_id=ns_id, old_record_id=o, new_record_id=n, similarity=sim, effective_at=at)
        for o, n, sim, at in links
    )
