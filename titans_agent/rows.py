"""Plain rows read from the database and written to it: what crosses the store's boundary.

:mod:`titans_agent.store.repository` returns and takes these (never ORM objects), so the pipelines and
the pure ranking above the store never touch SQLAlchemy. Times are timezone-aware UTC.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = [
    "OCCURRENCE_COLUMNS",
    "OCCURRENCE_FIELDS",
    "BatchRecord",
    "CheckpointHead",
    "NamespaceData",
    "OccurrenceData",
    "OccurrenceFields",
    "RecordData",
    "Snapshot",
    "UnitRow",
]


@dataclass(frozen=True)
class NamespaceData:
    """A namespace row: its memory config and outer parameters (the id of their shared row; None
    only in a row that a half-finished import left), embedder, revision, creation time and
    incarnation (a random token of the row: with the id, what tells it from a later namespace that
    got its id or its name)."""

    id: int
    name: str
    embedder: str
    dim: int
    memory_config: dict[str, Any]
    parameters_id: int | None
    revision: int
    chunking: dict[str, Any] | None
    created_at: dt.datetime | None = None
    incarnation: str | None = None


@dataclass(frozen=True)
class CheckpointHead:
    """Where a namespace's persisted state stands (no blob): the revision that wrote it, the last
    occurrence id it has applied (0: none) and the units written up to it."""

    revision: int
    position: int
    step: int


@dataclass(frozen=True)
class RecordData:
    """A record: one distinct text of a namespace."""

    id: int
    text: str
    surprise: float | None
    hits: int
    created_at: dt.datetime
    last_seen_at: dt.datetime


@dataclass(frozen=True, kw_only=True)
class OccurrenceFields:
    """Where a unit is written: the fields of an occurrence that its writer gives, declared once.

    The other spellings of an occurrence derive from these fields (:data:`OCCURRENCE_FIELDS`): the
    unit a pipeline writes (:class:`titans_agent.write.WriteUnit`) and the stored occurrence
    (:class:`OccurrenceData`) extend it, the commit copies it into the ``occurrences`` row, and
    export and import name its columns by :data:`OCCURRENCE_COLUMNS`. A new field of an
    occurrence is a field here (with its column, its migration and its export line).

    Attributes:
        kind: "chunk", "note" or "turn".
        source, document_id, chunk_index, start_line, end_line: where a chunk or note comes from.
        meta: the caller's metadata (the ``metadata`` column; None reads as ``{}``).
        location: where in its document a chunk is (page, headings, ...), as stored.
        session_id, role, timestamp: a turn's conversation, speaker and time.
    """

    kind: str
    source: str | None = None
    document_id: int | None = None
    chunk_index: int | None = None
    start_line: int | None = None
    end_line: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    location: dict[str, Any] | None = None
    session_id: str | None = None
    role: str | None = None
    timestamp: dt.datetime | None = None

    def __post_init__(self) -> None:
        if self.meta is None:  # a NULL column: no metadata
            object.__setattr__(self, "meta", {})

    @property
    def place(self) -> OccurrenceFields:
        """Just these fields (of a subclass's instance too)."""
        return OccurrenceFields(**self.place_values())

    def place_values(self) -> dict[str, Any]:
        """These fields by name (the values themselves, not copies)."""
        return {name: getattr(self, name) for name in OCCURRENCE_FIELDS}


@dataclass(frozen=True, kw_only=True)
class OccurrenceData(OccurrenceFields):
    """A stored occurrence: where a record was written (a chunk of a document, a note, or a turn of a
    session), with what its write added: its id, its record, its time, the namespace revision the
    write committed and the unit's own embedding where it differs from its record's (else None)."""

    id: int
    record_id: int
    created_at: dt.datetime
    write_revision: int | None = None
    embedding: bytes | None = None


OCCURRENCE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(OccurrenceFields))
"""The names of :class:`OccurrenceFields`, in declaration order."""
OCCURRENCE_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(OccurrenceData) if f.name != "id")
"""The columns of an ``occurrences`` row besides ``id`` and ``namespace_id``, by the model's attribute
names (``meta`` is the ``metadata`` column): what export reads and import writes."""


@dataclass(frozen=True)
class BatchRecord:
    """The record that unit ``index`` of the same batch creates (the target of a unit repeating it)."""

    index: int


@dataclass(frozen=True)
class UnitRow:
    """One unit to commit: its text, lexical context and embedding, where it goes (``place``), and
    the gate's decision.

    Attributes:
        target: the record it goes to: None for a new record, a record id for an existing record of
            the namespace, or a :class:`BatchRecord` for the record an earlier unit of the batch creates.
        decision: "repeat", "merged", "known" or "new" (kept on a new record).
        surprise: its surprise, None when it was not finite (kept on a new record).
        session_pk, turn_content: for a turn's first piece, its session's key and the turn's whole
            content: the transcript line it adds (``session_pk`` None: none).
    """

    text: str
    text_hash: str
    context: str
    embedding: bytes
    place: OccurrenceFields
    target: int | BatchRecord | None
    decision: str
    surprise: float | None
    session_pk: int | None = None
    turn_content: str | None = None


@dataclass(frozen=True)
class Snapshot:
    """What recall reads of its candidates, in one snapshot (see :func:`read_recall_context`)."""

    neighbours: dict[int, set[int]]
    superseded_by: dict[int, list[int]]
    supersedes: dict[int, list[int]]
    texts: dict[int, str]
    groups: dict[int, set[tuple[str, int]]] = field(default_factory=dict)
