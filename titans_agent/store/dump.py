"""What export reads and import writes, by table: the SQL of :mod:`titans_agent.transfer`.

Export reads a namespace in one snapshot (:meth:`~titans_agent.store.engine.Store.snapshot_session`):
:func:`namespace_row` and the ``*_rows`` generators give its rows as plain dicts of their columns
(keyed by the models' attribute names: ``meta`` is the occurrence's ``metadata`` column), ids and
foreign ids included so the caller can turn them into the file's refs, in the order of the export
file. Import writes in one write session (:meth:`~titans_agent.store.engine.Store.write_session`):
the ``insert_*`` functions take the columns' values and return the new ids the importer maps the
file's refs to; ``add_*`` ones add a row whose id nobody needs (inserted at the next flush or the
commit). The caller commits. Values are plain Python (bytes, dicts, timezone-aware datetimes), never
ORM objects.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Executable, select
from sqlalchemy.orm import Session

from titans_agent import rows
from titans_agent.store import checkpoints, repository
from titans_agent.store.metaterms import index_metadata
from titans_agent.store.schema import Document, NamespaceRow, Occurrence, Record, SessionRow, Supersession, Turn

__all__ = [
    "OCCURRENCE_COLUMNS",
    "RECORD_COLUMNS",
    "add_supersession",
    "add_turn",
    "document_rows",
    "insert_document",
    "insert_namespace",
    "insert_occurrences",
    "insert_records",
    "insert_session",
    "last_occurrence_id",
    "namespace_exists",
    "namespace_row",
    "occurrence_rows",
    "parameters_id",
    "record_rows",
    "save_checkpoint",
    "session_rows",
    "supersession_rows",
    "turn_rows",
]

RECORD_COLUMNS = (
    "text",
    "context",
    "text_hash",
    "embedding",
    "surprise",
    "decision",
    "hits",
    "created_at",
    "last_seen_at",
)
"""The keys of a record's dict (besides ``id``): what :func:`record_rows` gives and :func:`insert_records` takes."""
OCCURRENCE_COLUMNS = rows.OCCURRENCE_COLUMNS
"""The keys of an occurrence's dict (besides ``id``): what :func:`occurrence_rows` gives and
:func:`insert_occurrences` takes; derived from :class:`titans_agent.rows.OccurrenceData`."""


def _dicts(s: Session, stmt: Executable) -> Iterator[dict[str, Any]]:
    for row in s.execute(stmt).mappings():
        yield dict(row)


# ---------------------------------------------------------------------- export (reads)
def namespace_row(s: Session, name: str) -> dict[str, Any]:
    """The namespace called ``name``: ``id``, ``name``, ``memory_config``, ``params`` (its outer
    parameters' bytes), ``step``, ``created_at``, ``updated_at``, ``chunking``, and ``checkpoint``:
    ``(CheckpointHead, state bytes)`` or None (its state is M_0 followed by its occurrences).

    Raises:
        sqlalchemy.exc.NoResultFound: there is no such namespace (callers check names first).
        LookupError: its parameters are missing (a damaged database).
    """
    n = NamespaceRow
    stmt = select(n.id, n.name, n.memory_config, n.parameters_id, n.step, n.created_at, n.updated_at, n.chunking)
    row = dict(s.execute(stmt.where(n.name == name)).mappings().one())
    pid = row.pop("parameters_id")
    if pid is None:
        raise LookupError(f"namespace {name!r} has no memory parameters (a damaged database)")
    row["params"] = checkpoints.parameters_blob(s, pid)
    row["checkpoint"] = checkpoints.checkpoint_state(s, row["id"])
    return row


def document_rows(s: Session, ns_id: int) -> Iterator[dict[str, Any]]:
    """The namespace's documents, by source: ``id``, ``source``, ``sha256``, ``n_chunks``,
    ``chunks_done``, ``complete``, ``created_at``, ``updated_at``."""
    d = Document
    cols = (d.id, d.source, d.sha256, d.n_chunks, d.chunks_done, d.complete, d.created_at, d.updated_at)
    return _dicts(s, select(*cols).where(d.namespace_id == ns_id).order_by(d.source))


def record_rows(s: Session, ns_id: int) -> Iterator[dict[str, Any]]:
    """The namespace's records in the order written (by id): ``id`` and :data:`RECORD_COLUMNS`."""
    cols = [Record.id, *(getattr(Record, c) for c in RECORD_COLUMNS)]
    return _dicts(s, select(*cols).where(Record.namespace_id == ns_id).order_by(Record.id))


def occurrence_rows(s: Session, ns_id: int) -> Iterator[dict[str, Any]]:
    """The namespace's occurrences in the order written (by id): ``id`` and :data:`OCCURRENCE_COLUMNS`."""
    cols = [Occurrence.id, *(getattr(Occurrence, c) for c in OCCURRENCE_COLUMNS)]
    return _dicts(s, select(*cols).where(Occurrence.namespace_id == ns_id).order_by(Occurrence.id))


def supersession_rows(s: Session, ns_id: int) -> Iterator[dict[str, Any]]:
    """The namespace's knowledge-update links in the order found (by id): ``old_record_id``,
    ``new_record_id``, ``similarity``, ``effective_at``, ``created_at``."""
    x = Supersession
    cols = (x.old_record_id, x.new_record_id, x.similarity, x.effective_at, x.created_at)
    return _dicts(s, select(*cols).where(x.namespace_id == ns_id).order_by(x.id))


def session_rows(s: Session, ns_id: int) -> Iterator[dict[str, Any]]:
    """The namespace's sessions, by session id: ``session_id``, ``n_turns``, ``created_at``, ``updated_at``."""
    x = SessionRow
    cols = (x.session_id, x.n_turns, x.created_at, x.updated_at)
    return _dicts(s, select(*cols).where(x.namespace_id == ns_id).order_by(x.session_id))


def turn_rows(s: Session, ns_id: int) -> Iterator[dict[str, Any]]:
    """The namespace's turns, by session id then sequence: ``session_id`` (the caller's name, not
    the key), ``seq``, ``role``, ``content``, ``timestamp``, ``occurrence_id``."""
    stmt = (
        select(SessionRow.session_id, Turn.seq, Turn.role, Turn.content, Turn.timestamp, Turn.occurrence_id)
        .join(SessionRow, Turn.session_pk == SessionRow.id)
        .where(SessionRow.namespace_id == ns_id)
        .order_by(SessionRow.session_id, Turn.seq)
    )
    return _dicts(s, stmt)


# ---------------------------------------------------------------------- import (writes)
def namespace_exists(s: Session, name: str) -> bool:
    """Whether a namespace called ``name`` exists."""
    return repository.namespace_id(s, name) is not None


insert_namespace = repository.insert_namespace
"""Add a namespace row as exported (its step and times; revision 0); its new id."""

parameters_id = checkpoints.parameters_id
"""The id of the row of an imported namespace's outer parameters (an identical set is shared)."""

save_checkpoint = checkpoints.save_checkpoint
"""An imported namespace's state, positioned after its imported occurrences."""

last_occurrence_id = checkpoints.last_occurrence_id


def insert_document(
    s: Session,
    ns_id: int,
    *,
    source: str,
    sha256: str,
    n_chunks: int,
    chunks_done: int,
    complete: bool,
    created_at: dt.datetime,
    updated_at: dt.datetime,
) -> int:
    """Add a document row; its new id."""
    doc = Document(
        namespace_id=ns_id,
        source=source,
        sha256=sha256,
        n_chunks=n_chunks,
        chunks_done=chunks_done,
        complete=complete,
        created_at=created_at,
        updated_at=updated_at,
    )
    s.add(doc)
    s.flush()
    return doc.id


def _insert_all(s: Session, rows: list[Any]) -> list[int]:
    s.add_all(rows)
    s.flush()
    return [r.id for r in rows]


def insert_records(s: Session, ns_id: int, rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """Add records (each a dict of :data:`RECORD_COLUMNS`); their new ids, in the order given."""
    return _insert_all(s, [Record(namespace_id=ns_id, **{c: r[c] for c in RECORD_COLUMNS}) for r in rows])


def insert_occurrences(s: Session, ns_id: int, rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """Add occurrences (each a dict of :data:`OCCURRENCE_COLUMNS`, with the new record and document
    ids); their new ids, in the order given."""
    occurrences = [Occurrence(namespace_id=ns_id, **{c: r[c] for c in OCCURRENCE_COLUMNS}) for r in rows]
    ids = _insert_all(s, occurrences)
    index_metadata(s, ns_id, [(o.id, o.meta) for o in occurrences])
    return ids


def add_supersession(
    s: Session,
    ns_id: int,
    *,
    old_record_id: int,
    new_record_id: int,
    similarity: float,
    effective_at: dt.datetime,
    created_at: dt.datetime,
) -> None:
    """Add a knowledge-update link between two (new) record ids."""
    s.add(
        Supersession(
            namespace_id=ns_id,
            old_record_id=old_record_id,
            new_record_id=new_record_id,
            similarity=similarity,
            effective_at=effective_at,
            created_at=created_at,
        )
    )


def insert_session(
    s: Session, ns_id: int, *, session_id: str, n_turns: int, created_at: dt.datetime, updated_at: dt.datetime
) -> int:
    """Add a session row; its new key (what a turn's ``session_pk`` names)."""
    sess = SessionRow(
        namespace_id=ns_id, session_id=session_id, n_turns=n_turns, created_at=created_at, updated_at=updated_at
    )
    s.add(sess)
    s.flush()
    return sess.id


def add_turn(
    s: Session,
    session_pk: int,
    *,
    seq: int,
    role: str,
    content: str,
    timestamp: dt.datetime,
    occurrence_id: int | None,
) -> None:
    """Add a turn of a session (``session_pk``: :func:`insert_session`'s key)."""
    s.add(
        Turn(
            session_pk=session_pk,
            seq=seq,
            role=role,
            content=content,
            timestamp=timestamp,
            occurrence_id=occurrence_id,
        )
    )
