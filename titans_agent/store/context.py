"""What recall reads about its candidates: neighbours, groups, supersession links and texts.

One call, :func:`read_recall_context`, serves a recall in its snapshot session with three
statements: the candidates' locality (:func:`locality`: neighbours and groups in one query), the
supersession links, the texts. Each passes its ids as one parameter
(:func:`~titans_agent.store.repository.in_ids`), so a recall over ~400 candidates binds three
parameters, not a thousand. :func:`neighbours` and :func:`groups` read the two halves of
:func:`locality` apart, plainly: the tests' oracle for it, as ``core/scan_reference.py`` is for
``core/scan.py``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable

from sqlalchemy import Select, literal_column, null, select, tuple_, union_all
from sqlalchemy.orm import Session, aliased

from titans_agent.rows import Snapshot
from titans_agent.store.repository import in_ids, record_texts
from titans_agent.store.schema import Occurrence, Record, Supersession, Turn

__all__ = [
    "groups",
    "lexical_rows",
    "locality",
    "neighbours",
    "read_recall_context",
    "supersession_links",
]

_t2, _o2 = aliased(Turn), aliased(Occurrence)  # the neighbour side of the self-joins


def _turn_rows(s: Session, ids: set[int], with_neighbours: bool) -> Select:
    """``(0, record id, session pk, kind, neighbour record id)`` for each turn occurrence of ``ids``,
    one row per neighbour: the turns at seq +-1 of its session (a (session, seq) holds one turn)
    whose occurrence is still there; NULL when it has none or ``with_neighbours`` is false."""
    other = _o2.record_id if with_neighbours else null()
    stmt: Select = select(literal_column("0"), Occurrence.record_id, Turn.session_pk, Occurrence.kind, other).join(
        Turn, Turn.occurrence_id == Occurrence.id
    )
    if with_neighbours:
        beside = (_t2.session_pk == Turn.session_pk) & _t2.seq.in_([Turn.seq - 1, Turn.seq + 1])
        stmt = stmt.outerjoin(_t2, beside).outerjoin(_o2, _o2.id == _t2.occurrence_id)
    return stmt.where(in_ids(s, Occurrence.record_id, ids))


def _document_rows(s: Session, ns_id: int, ids: set[int], with_neighbours: bool) -> Select:
    """``(1, record id, document id, kind, neighbour record id)`` for each occurrence of ``ids`` in a
    document, one row per neighbour: the namespace's occurrences at chunk index +-1 of the same
    document; NULL when it has none (a NULL chunk index has none) or ``with_neighbours`` is false."""
    other = _o2.record_id if with_neighbours else null()
    stmt: Select = select(literal_column("1"), Occurrence.record_id, Occurrence.document_id, Occurrence.kind, other)
    if with_neighbours:
        beside = (
            (_o2.namespace_id == ns_id)
            & (_o2.document_id == Occurrence.document_id)
            & _o2.chunk_index.in_([Occurrence.chunk_index - 1, Occurrence.chunk_index + 1])
        )
        stmt = stmt.outerjoin(_o2, beside)
    return stmt.where(in_ids(s, Occurrence.record_id, ids), Occurrence.document_id.is_not(None))


def locality(
    s: Session,
    ns_id: int,
    record_ids: Iterable[int],
    neighbour_kinds: Iterable[str] | None,
    group_kinds: Iterable[str] | None,
) -> tuple[dict[int, set[int]], dict[int, set[tuple[str, int]]]]:
    """:func:`neighbours` of ``record_ids`` for ``neighbour_kinds`` and their :func:`groups` for
    ``group_kinds``, in one query: the turn occurrences with their sessions and the turns beside
    them, UNION ALL the document occurrences with their documents and the chunks beside them.

    Returns:
        ``(neighbours, groups)``, equal to what the two functions return (None or no kinds: empty).
    """
    ids = set(record_ids)
    n_kinds, g_kinds = set(neighbour_kinds or ()), set(group_kinds or ())
    adj: dict[int, set[int]] = {}
    out: dict[int, set[tuple[str, int]]] = {}
    parts = []
    if ids and "turn" in n_kinds | g_kinds:
        parts.append(_turn_rows(s, ids, "turn" in n_kinds))
    if ids and "chunk" in n_kinds | g_kinds:
        parts.append(_document_rows(s, ns_id, ids, "chunk" in n_kinds))
    if not parts:
        return adj, out
    stmt = parts[0] if len(parts) == 1 else union_all(*parts)
    # through the connection: plain rows, without the ORM's per-row work
    for part, rid, group, kind, other in s.connection().execute(stmt).all():
        of = "turn" if part == 0 else "chunk"
        if of in g_kinds and (part == 0 or kind == "chunk"):
            out.setdefault(rid, set()).add(("session" if part == 0 else "document", group))
        if of in n_kinds and other is not None and other != rid:
            adj.setdefault(rid, set()).add(other)
            adj.setdefault(other, set()).add(rid)
    return adj, out


def groups(s: Session, record_ids: Iterable[int], kinds: Iterable[str]) -> dict[int, set[tuple[str, int]]]:
    """The groups of ``record_ids``: a turn's session ``("session", session pk)`` and a chunk's
    document ``("document", document id)``, over every occurrence of each record; only for the
    record kinds in ``kinds`` ("turn", "chunk"). Records in no group are left out."""
    ids = set(record_ids)
    kinds = set(kinds)
    out: dict[int, set[tuple[str, int]]] = {}
    if not ids or not kinds:
        return out
    if "turn" in kinds:
        for rid, pk in s.execute(
            select(Occurrence.record_id, Turn.session_pk)
            .join(Turn, Turn.occurrence_id == Occurrence.id)
            .where(in_ids(s, Occurrence.record_id, ids))
        ).all():
            out.setdefault(int(rid), set()).add(("session", int(pk)))
    if "chunk" in kinds:
        for rid, doc in s.execute(
            select(Occurrence.record_id, Occurrence.document_id).where(
                in_ids(s, Occurrence.record_id, ids), Occurrence.document_id.is_not(None), Occurrence.kind == "chunk"
            )
        ).all():
            if doc is not None:  # the WHERE reads documents only
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
    ids = set(record_ids)
    adj: dict[int, set[int]] = {}
    kinds = set(kinds)
    if not ids or not kinds:
        return adj

    def link(a: int, b: int) -> None:
        if a != b:
            adj.setdefault(a, set()).add(b)
            adj.setdefault(b, set()).add(a)

    if "turn" in kinds:
        for rid, other in s.execute(
            select(Occurrence.record_id, _o2.record_id)
            .join(Turn, Turn.occurrence_id == Occurrence.id)
            .join(_t2, (_t2.session_pk == Turn.session_pk) & _t2.seq.in_([Turn.seq - 1, Turn.seq + 1]))
            .join(_o2, _o2.id == _t2.occurrence_id)
            .where(in_ids(s, Occurrence.record_id, ids))
        ).all():
            link(rid, other)
    if "chunk" not in kinds:
        return adj
    chunk_pos = [
        (rid, doc, ci)
        for rid, doc, ci in s.execute(
            select(Occurrence.record_id, Occurrence.document_id, Occurrence.chunk_index).where(
                in_ids(s, Occurrence.record_id, ids),
                Occurrence.document_id.is_not(None),
                Occurrence.chunk_index.is_not(None),
            )
        ).all()
        if doc is not None and ci is not None  # the WHERE's own guarantee, for the type checker
    ]
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
    ids = set(record_ids)
    superseded_by: dict[int, list[int]] = {}
    supersedes: dict[int, list[int]] = {}
    if not ids:
        return superseded_by, supersedes
    stmt = select(Supersession.old_record_id, Supersession.new_record_id).where(
        in_ids(s, Supersession.old_record_id, ids) | in_ids(s, Supersession.new_record_id, ids)
    )
    if as_of is not None:
        stmt = stmt.where(Supersession.effective_at <= as_of)
    for old, new in s.connection().execute(stmt.order_by(Supersession.id)).all():
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
    adjacent, grouped = locality(s, ns_id, scored, neighbour_kinds, group_kinds)
    superseded_by, supersedes = supersession_links(s, set(scored) | set(adjacent), as_of)
    heads = set(scored) | {n for old in scored for n in superseded_by.get(old, ())}
    want: set[int] = set(heads) if texts_of_scored else set()
    if texts_of_pool:
        want |= (heads | {n for r in heads for n in adjacent.get(r, ())}) - set(known)
    texts = record_texts(s, want) if want else {}
    return Snapshot(adjacent, superseded_by, supersedes, texts, grouped)


# ---------------------------------------------------------------------- the lexical index's reads
def lexical_rows(s: Session, ns_id: int, changed_after: int | None = None) -> list[tuple[int, str, str]]:
    """``(id, text, context)`` of the namespace's records, ascending: what
    :class:`titans_agent.bm25.BM25Index` indexes. With ``changed_after``, only the records whose
    text or context a write after that namespace revision set (``changed_revision``, read through
    the index ``ix_records_ns_changed``): new records and contexts grown by merges."""
    stmt = select(Record.id, Record.text, Record.context).where(Record.namespace_id == ns_id)
    if changed_after is not None:
        stmt = stmt.where(Record.changed_revision > changed_after)
    return [(int(r[0]), r[1], r[2] or "") for r in s.execute(stmt.order_by(Record.id))]
