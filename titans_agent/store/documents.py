"""What recall's document signal reads: each document's name and opening, and its chunks.

Read once per namespace revision (the runtime caches the result, :mod:`titans_agent.runtime`):
documents change only through committed writes, which bump the revision.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from titans_agent.store.schema import Document, Occurrence, Record

__all__ = ["document_chunks", "document_openings", "document_sources"]

_first = aliased(Occurrence)


def document_openings(s: Session, ns_id: int) -> dict[int, tuple[str, str]]:
    """Every document of the namespace that has its first chunk stored: document id ->
    ``(source, text of its first chunk)``."""
    rows = s.execute(
        select(Document.id, Document.source, Record.text)
        .join(_first, (_first.document_id == Document.id) & (_first.chunk_index == 0))
        .join(Record, Record.id == _first.record_id)
        .where(Document.namespace_id == ns_id)
    ).all()
    return {int(d): (src, text) for d, src, text in rows}


def document_sources(s: Session, ns_id: int) -> dict[int, str]:
    """Every document of the namespace, its first chunk stored or not: document id -> source."""
    rows = s.execute(select(Document.id, Document.source).where(Document.namespace_id == ns_id)).all()
    return {int(d): src for d, src in rows}


def document_chunks(s: Session, ns_id: int) -> list[tuple[int, int]]:
    """``(record id, document id)`` of every chunk occurrence of the namespace, by document."""
    rows = s.execute(
        select(Occurrence.record_id, Occurrence.document_id)
        .where(Occurrence.namespace_id == ns_id, Occurrence.kind == "chunk", Occurrence.document_id.is_not(None))
        .order_by(Occurrence.document_id, Occurrence.chunk_index)
    ).all()
    return [(int(r), int(d)) for r, d in rows if d is not None]
