"""What recall reads about its candidates: neighbours, groups, supersession links and texts.

One call, :func:`read_recall_context`, serves a recall in its snapshot session; the pieces are
named functions so the write path (supersession detection) and tests can use them alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session, aliased

from titans_agent.rows import Snapshot
from titans_agent.store.repository import _chunks, record_texts
from titans_agent.store.schema import Occurrence, Supersession, Turn

__all__ = ["groups", "neighbours", "read_recall_context", "supersession_links"]

_t2, _o2 = aliased(Turn), aliased(Occurrence)  # the neighbour side of neighbours()'s self-join


def groups(s: Session, record_ids: Iterable[int], kinds: Iterable[str]) -> dict[int, set[tuple[str, int]]]:
    """The groups of ``record_ids``: a turn's session ``("session", session pk)`` and a chunk's
    document ``("document", document id)``, over every occurrence of each record; only for the
    record kinds in ``kinds`` ("turn", "chunk"). Records in no group are left out."""
    ids = list(record_ids)
    kinds = set(kinds)
    out: dict[int, set[tuple[str, int]]] = {}
    if not ids or not kinds:
        return out
    for part in _chunks(ids):
        if "turn" in kinds:
            for rid, pk in s.execute(
                select(Occurrence.record_id, Turn.session_pk)
                .join(Turn, Turn.occurrence_id == Occurrence.id)
                .where(Occurrence.record_id.in_(part))
            ).all():
                out.setdefault(int(rid), set()).add(("session", int(pk)))
        if "chunk" in kinds:
            for rid, doc in s.execute(
                select(Occurrence.record_id, Occurrence.document_id).where(
                    Occurrence.record_id.in_(part), Occurrence.document_id.is_not(None), Occurrence.kind == "chunk"
                )
            ).all():
                out.setdefault(int(rid), set()).add(("document", int(doc)))
    return out


def neighbours(s: Session, ns_id: int, record_ids: Iterable[int], kinds: Iterable[str]) -> dict[int, set[int]]:
    """Adjacent records of ``record_ids``: turns at sequence numbers +-1 of the same session, and
    chunks at chunk index +-1 of the same document (over every occurrence of each record); only
    for the record kinds in ``kinds`` ("turn", "chunk").

    Returns:
        record id -> the ids of its adjacent records, for the given records and, symmetrically,
        for their neighbours (a record is never its own neighbour).
    """
    ids = list(record_ids)
    adj: dict[int, set[int]] = {}
    kinds = set(kinds)
    if not ids or not kinds:
        return adj

    def link(a: int, b: int) -> None:
        if a != b:
            adj.setdefault(a, set()).add(b)
            adj.setdefault(b, set()).add(a)

    for part in _chunks(ids):
        if "turn" in kinds:
            # One self-join: each turn of the given records with the turns at seq +-1 of its session
            # (a (session, seq) holds one turn); turns whose occurrence went are not neighbours.
            for rid, other in s.execute(
                select(Occurrence.record_id, _o2.record_id)
                .join(Turn, Turn.occurrence_id == Occurrence.id)
                .join(_t2, (_t2.session_pk == Turn.session_pk) & _t2.seq.in_([Turn.seq - 1, Turn.seq + 1]))
                .join(_o2, _o2.id == _t2.occurrence_id)
                .where(Occurrence.record_id.in_(part))
            ).all():
                link(rid, other)
        if "chunk" not in kinds:
            continue
        chunk_pos = s.execute(
            select(Occurrence.record_id, Occurrence.document_id, Occurrence.chunk_index).where(
                Occurrence.record_id.in_(part),
                Occurrence.document_id.is_not(None),
                Occurrence.chunk_index.is_not(None),
            )
        ).all()
        want = {(doc, ci + d) for _, doc, ci in chunk_pos for d in (-1, 1)}
        if want:
            found = {
                (doc, ci): rid
                for rid, doc, ci in s.execute(
                    select(Occurrence.record_id, Occurrence.document_id, Occurrence.chunk_index).where(
                        Occurrence.namespace_id == ns_id,
                        tuple_(Occurrence.document_id, Occurrence.chunk_index).in_(list(want)),
                    )
                ).all()
            }
            for rid, doc, ci in chunk_pos:
                for d in (-1, 1):
                    if (doc, ci + d) in found:
                        link(rid, found[(doc, ci + d)])
    return adj


def supersession_links(
    s: Session, record_ids: Iterable[int], as_of: dt.datetime | None = None
) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """The links touching ``record_ids`` in effect at ``as_of`` (all when None):
    ``(superseded_by, supersedes)``, each id -> ids in link order."""
    ids = list(record_ids)
    superseded_by: dict[int, list[int]] = {}
    supersedes: dict[int, list[int]] = {}
    if not ids:
        return superseded_by, supersedes
    stmt = select(Supersession.old_record_id, Supersession.new_record_id).where(
        (Supersession.old_record_id.in_(ids)) | (Supersession.new_record_id.in_(ids))
    )
    if as_of is not None:
        stmt = stmt.where(Supersession.effective_at <= as_of)
    for old, new in s.execute(stmt.order_by(Supersession.id)).all():
        superseded_by.setdefault(old, []).append(new)
        supersedes.setdefault(new, []).append(old)
    return superseded_by, supersedes


def read_recall_context(
    s: Session,
    ns_id: int,
    scored: Collection[int],
    *,
    neighbour_kinds: Iterable[str] | None,
    group_kinds: Iterable[str] | None = None,
    as_of: dt.datetime | None,
    texts_of_scored: bool,
    texts_of_pool: bool,
    known: Collection[int] = (),
) -> Snapshot:
    """What recall reads about its candidates, in the caller's (snapshot) session.

    Args:
        scored: the candidates the signals ranked.
        neighbour_kinds: the kinds whose adjacent records count as neighbours (None: none).
        group_kinds: the kinds whose groups (:func:`groups`) of the candidates are read (None: none).
        as_of: only the supersession links in effect then (None: all).
        texts_of_scored: read the texts of the candidates and of their successors.
        texts_of_pool: read the texts of candidates, successors and neighbours not in ``known``.

    Returns:
        The neighbours of candidates (symmetric), the candidates' groups, the links touching
        candidates and neighbours, and the texts asked for.
    """
    adjacent = neighbours(s, ns_id, scored, neighbour_kinds) if neighbour_kinds else {}
    superseded_by, supersedes = supersession_links(s, set(scored) | set(adjacent), as_of)
    heads = set(scored) | {n for old in scored for n in superseded_by.get(old, ())}
    want: set[int] = set(heads) if texts_of_scored else set()
    if texts_of_pool:
        want |= (heads | {n for r in heads for n in adjacent.get(r, ())}) - set(known)
    texts = record_texts(s, want) if want else {}
    return Snapshot(adjacent, superseded_by, supersedes, texts, groups(s, scored, group_kinds) if group_kinds else {})
