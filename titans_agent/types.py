"""Values returned by MemoryAgent: hits, write results, ingest reports, statistics."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Decision", "Hit", "IngestReport", "Location", "NamespaceStats", "SkippedSource", "WriteResult", "utcnow"]


def utcnow() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.timezone.utc)


Decision = Literal["new", "known", "merged", "repeat", "skipped"]
"""What the surprise gate did with a unit:

- ``new``: stored; the memory did not predict it (surprise >= write threshold).
- ``known``: stored; the memory already predicted it (surprise < threshold) but no record says the
  same thing, so it is kept: new information is never dropped.
- ``merged``: not stored again; it nearly duplicates a record (same words and numbers, embedding
  cosine >= duplicate_similarity) and was predicted by the memory; that record's hits and last-seen
  time were updated.
- ``repeat``: not stored again; its normalised text equals a record's (an exact repeat).
- ``skipped``: not written at all (``add_turns`` only): a turn whose content has nothing visible,
  such as one zero-width space; ``reason`` says why, ``record_id`` and ``surprise`` are None, and
  the session's transcript does not get it. ``add_turn`` raises ``EmptyInputError`` instead.
"""


class Location(BaseModel):
    """Where in its document a chunk is: its page, heading path, section or clause, and a citation.

    Made by the chunker (:attr:`titans_agent.ingest.chunking.Chunk.location`, from
    :meth:`titans_agent.ingest.structure.DocumentStructure.locate`) for documents: prose, Markdown,
    and PDF, DOCX and HTML once extracted. Only what the document has is set: a text without pages
    has no ``page``, one without headings empty ``headings``; source code gets an empty location
    (line ranges are kept apart, in ``start_line``/``end_line``).

    Persisted as JSON (the ``occurrences.location`` column, the export's occurrence lines) in its
    short form, only the fields that are set: write :meth:`to_dict` (``model_dump(exclude_defaults=
    True)``), read back with :meth:`from_dict` (``model_validate``); ``{}`` is an empty location,
    ``None`` (SQL NULL) no location at all (notes, turns, and chunks stored before locations were).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    page: int | None = Field(default=None, ge=1)
    """Page the chunk starts on, 1-based (the first page is 1); only for paged documents (a PDF, or a
    text holding form feeds, where page *n* is the text after the *(n-1)*-th form feed)."""
    end_page: int | None = Field(default=None, ge=1)
    """Last page the chunk runs onto, 1-based; set only when it is after ``page`` (rare: the chunker
    cuts the text at every page break), else ``None``."""
    headings: list[str] = Field(default_factory=list)
    """The heading path in force at the chunk, outermost first (``["Handbook", "Leave", "Sick
    leave"]``; a DOCX's Title heads it); each title whitespace-collapsed, at most 200 characters.
    Empty where the document has no headings (plain text, PDF)."""
    section: str | None = None
    """The section or clause number in force at the chunk (else the first one starting inside
    it), as written in legal texts: ``"4.2"``, ``"4.2(a)"``, ``"Article VII"``, ``"§ 12"``,
    ``"Clause 5"``."""
    sections: list[str] = Field(default_factory=list)
    """Every section or clause the chunk touches, in document order, when there is more than one
    (``["Article IV", "4.1"]``); empty otherwise (``section`` is then the only one)."""
    citation: str | None = None
    """The location in words, for showing to a reader or a model: ``"section 4.2, page 7"``,
    ``"Terms > Payment, pages 3-4"``, ``"page 1"``; ``None`` when nothing is known."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored in the ``occurrences.location`` column: only the fields that are
        set (``model_dump(exclude_defaults=True)``); ``{}`` for an empty location."""
        return self.model_dump(exclude_defaults=True)

    @classmethod
    def from_dict(cls, value: dict[str, Any] | None) -> Location | None:
        """Read the column back: ``None`` stays ``None`` (no location: a note, a turn, a chunk stored
        before locations existed); a dict is validated (``model_validate``; unknown keys refused)."""
        return None if value is None else cls.model_validate(value)


class Hit(BaseModel):
    """One recalled record.

    Attributes:
        id: record id (stable within a database).
        text: the stored text.
        score: fused score (higher is better): under the default score fusion, softplus of the
            weighted standard deviations above the namespace's mean, plus the locality bonuses;
            under rank fusion a reciprocal-rank score. Comparable within one recall only.
        source: file path, text source name, "session:<id>" for turns, or None for notes.
        location: "start-end" line range within the source for ingested chunks, else None.
        start_line, end_line: 1-based inclusive line range, for ingested chunks.
        kind: "chunk", "note" or "turn".
        metadata: the caller's metadata (JSON).
        surprise: the memory's surprise when the unit was first written.
        hits: how often the unit was written (repeats and merges count).
        created_at, last_seen_at: UTC.
        signals: each ranking signal's 1-based rank of this record (absent when it did not rank it).
        occurrences: in how many places the text was written (files, notes, turns).
        sources: the other sources that hold the same text (at most 20).
        session_id, role, timestamp: for conversation turns.
        superseded_by: ids of newer records that update this one (knowledge updates; see
            :mod:`titans_agent.updates`); empty while it is current.
        supersedes: ids of older records this one updates.
        stale_clauses: when newer records replace only part of this one ("Hi! I'm a nurse and I
            live in Lyon." then "I moved to Montreal."), the clauses they replace ("I live in
            Lyon."); the rest is still current. Empty when the record is replaced as a whole or is
            current. A partial replacement demotes the record (and ``include_superseded=False``
            drops it) only for a query about what changed (see :mod:`titans_agent.updates`); the
            links and clauses are shown whatever the query.
        doc_location: where in its document a chunk is (page, headings, section, citation; see
            :class:`Location`; empty for a chunk of code), or None for notes and turns (and for
            chunks ingested before locations were stored). Not to be confused with ``location``,
            the line range.

    Provenance (source, location, kind, metadata, session) is that of the first place the text
    occurs that matches recall's filters, or of the earliest place without filters.
    """

    model_config = ConfigDict(frozen=True)

    id: int
    text: str
    score: float
    source: str | None = None
    location: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    kind: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    surprise: float | None = None
    hits: int = 1
    created_at: dt.datetime
    last_seen_at: dt.datetime
    signals: dict[str, int] = Field(default_factory=dict)
    occurrences: int = 1
    sources: list[str] = Field(default_factory=list)
    session_id: str | None = None
    role: str | None = None
    timestamp: dt.datetime | None = None
    superseded_by: list[int] = Field(default_factory=list)
    supersedes: list[int] = Field(default_factory=list)
    stale_clauses: list[str] = Field(default_factory=list)
    doc_location: Location | None = None


class WriteResult(BaseModel):
    """The outcome of writing one unit (``remember``, ``add_turn``, one turn of ``add_turns``).

    Attributes:
        record_id: the record that holds the unit (an existing one when merged or repeated); None
            only for a skipped turn.
        decision: see :data:`Decision`.
        surprise: relative loss ``||M(k) - v||^2 / ||v||^2`` under the memory before the write;
            None only for a skipped turn.
        turn_seq: for ``add_turn``, the turn's 1-based position in its session.
        reason: why a turn was skipped (decision "skipped"); None otherwise.
    """

    record_id: int | None
    decision: Decision
    surprise: float | None
    turn_seq: int | None = None
    reason: str | None = None

    @property
    def stored(self) -> bool:
        """True when a new record was created."""
        return self.decision in ("new", "known")


class SkippedSource(BaseModel):
    """A file or text that was not ingested, with the reason."""

    path: str
    reason: str


class IngestReport(BaseModel):
    """What :meth:`MemoryAgent.ingest` did.

    Attributes:
        files: sources read and chunked (files and named texts).
        unchanged: sources skipped because the same content was already completely ingested.
        replaced: of ``files``, sources whose content changed since they were ingested: their
            earlier chunks were removed before the new content was written (the memory's weights
            keep what they learned of them, as after ``forget`` without ``unlearn``).
        chunks: chunks produced from the sources that were (re)processed.
        stored: new records (decisions "new" and "known").
        known: of ``stored``, those the memory already predicted.
        merged: chunks merged into an existing record (near duplicates) instead of stored again.
        repeats: chunks whose exact text was already a record.
        skipped: files not ingested, each with its reason.
        warnings: notes about files that were ingested (for example NUL bytes removed).
        seconds: wall time.
    """

    files: int = 0
    unchanged: int = 0
    replaced: int = 0
    chunks: int = 0
    stored: int = 0
    known: int = 0
    merged: int = 0
    repeats: int = 0
    skipped: list[SkippedSource] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    seconds: float = 0.0


class NamespaceStats(BaseModel):
    """Counts and memory state of one namespace (see :meth:`MemoryAgent.stats`).

    ``records`` counts distinct units; ``chunks``, ``notes`` and ``turns`` count the places they
    were written (a repeated turn is one record and several turns).
    """

    namespace: str
    records: int
    chunks: int
    notes: int
    turns: int
    documents: int
    sessions: int
    memory_step: int
    mean_surprise: float | None
    embedder: str
    dim: int
    memory: dict[str, Any]
