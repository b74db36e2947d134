"""Plain rows read from the database and written to it: what crosses the store's boundary.

:mod:`titans_agent.store.repository` returns and takes these (never ORM objects), so the pipelines and
the pure ranking above the store never touch SQLAlchemy. Times are timezone-aware UTC.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CheckpointHead", "NamespaceData", "OccurrenceData", "RecordData", "Snapshot", "UnitRow"]


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


@dataclass(frozen=True)
class OccurrenceData:
    """Where a record was written (a chunk of a document, a note, or a turn of a session)."""

    id: int
    record_id: int
    kind: str
    source: str | None
    document_id: int | None
    chunk_index: int | None
    start_line: int | None
    end_line: int | None
    meta: dict[str, Any]
    location: dict[str, Any] | None
    session_id: str | None
    role: str | None
    timestamp: dt.datetime | None
    created_at: dt.datetime


@dataclass
class UnitRow:
    """One unit to commit: where it goes (occurrence fields) and, for a turn's first piece, the
    transcript line (``session_pk``, ``turn_content``)."""

    text: str
    text_hash: str
    kind: str
    embedding: bytes
    context: str = ""
    source: str | None = None
    document_id: int | None = None
    chunk_index: int | None = None
    start_line: int | None = None
    end_line: int | None = None
    meta: dict[str, Any] | None = None
    location: dict[str, Any] | None = None
    session_id: str | None = None
    role: str | None = None
    timestamp: dt.datetime | None = None
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
