"""The metadata index: each occurrence's metadata flattened into ``metadata_terms`` rows, so that a
selective filter reaches its occurrences through a B-tree instead of reading every occurrence's JSON.

One row per path of an occurrence's metadata (object keys, outermost first; every node, not only the
leaves, so ``$exists`` can be answered): ``path`` is the path as a JSON array (``["client",
"region"]``: unambiguous whatever the keys hold), ``term`` says the value's type and, for a string,
its value (``"s"`` + the string as ASCII JSON, cut to :data:`TERM_CHARS` characters), ``"t"``,
``"f"``, ``"z"`` (null), ``"o"`` (object), ``"a"`` (array), ``"n"`` (number), and ``num`` a number's
value as a float (NULL otherwise). Indexed by ``(namespace_id, path, term)`` and ``(namespace_id,
path, num)``; rows go with their occurrence (``ON DELETE CASCADE``) and with their namespace.

The index only narrows: :func:`narrowing` gives a set of occurrences that holds every occurrence
passing the filter (cut strings and floats can only widen it), and the exact condition
(:func:`titans_agent.store.jsonfilter.filter_condition`) still decides on those rows. Conditions
that a missing key passes (``$ne``, ``$nin``, ``$exists: false``) and orderings of strings narrow
nothing; a filter of only those reads every occurrence as before. Metadata with more than
:data:`MAX_TERMS` nodes is not flattened: its occurrence gets one row of path ``"*"``, a candidate of
every narrowing. :func:`index_metadata` writes the rows (the write path, metadata updates and
imports call it in their transactions); the rest is pure but for the SQLAlchemy expressions it builds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Select, and_, delete, insert, or_, select, union_all
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from titans_agent.filters import AllOf, Condition, FilterNode
from titans_agent.store.schema import MetadataTerm

__all__ = ["MAX_TERMS", "TERM_CHARS", "index_metadata", "narrowing", "term_rows"]

TERM_CHARS = 200  # characters of a string term (B-tree entries stay small on PostgreSQL)
MAX_TERMS = 256  # nodes of one occurrence's metadata that are flattened
_MAX_DEPTH = 32
_MAX_PATH_CHARS = 400  # a longer path (as JSON) leaves the metadata unindexed
_UNINDEXED = "*"


def _path(steps: tuple[str, ...]) -> str:
    return json.dumps(list(steps), ensure_ascii=True)


def _string_term(value: str) -> str:
    return ("s" + json.dumps(value, ensure_ascii=True))[:TERM_CHARS]


def _float(value: int | float) -> float | None:
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _nodes(value: Any, steps: tuple[str, ...], depth: int) -> Iterator[tuple[str, str, float | None]]:
    if steps:
        if isinstance(value, bool):
            yield _path(steps), "t" if value else "f", None
        elif isinstance(value, (int, float)):
            yield _path(steps), "n", _float(value)
        elif isinstance(value, str):
            yield _path(steps), _string_term(value), None
        elif value is None:
            yield _path(steps), "z", None
        elif isinstance(value, Mapping):
            yield _path(steps), "o", None
        else:
            yield _path(steps), "a", None
    if isinstance(value, Mapping) and depth < _MAX_DEPTH:
        for key, child in value.items():
            yield from _nodes(child, (*steps, str(key)), depth + 1)


def term_rows(metadata: Any) -> list[tuple[str, str, float | None]]:
    """The ``(path, term, num)`` rows of one occurrence's metadata (see the module docstring);
    one ``("*", "*", None)`` row when it has more than :data:`MAX_TERMS` nodes, a path longer than
    the index keeps, or nesting deeper than it follows."""
    if not isinstance(metadata, Mapping) or not metadata:
        return []
    rows: list[tuple[str, str, float | None]] = []
    for row in _nodes(metadata, (), 0):
        rows.append(row)
        if len(rows) > MAX_TERMS or len(row[0]) > _MAX_PATH_CHARS:
            return [(_UNINDEXED, _UNINDEXED, None)]
    if _too_deep(metadata, 0):
        return [(_UNINDEXED, _UNINDEXED, None)]
    return rows


def _too_deep(value: Any, depth: int) -> bool:
    if not isinstance(value, Mapping):
        return False
    if depth >= _MAX_DEPTH:
        return bool(value)
    return any(_too_deep(v, depth + 1) for v in value.values())


def index_metadata(s: Session, ns_id: int, items: Sequence[tuple[int, Any]], *, replace: bool = False) -> None:
    """Write the index rows of occurrences ``(id, metadata)`` of namespace ``ns_id``; with
    ``replace``, their old rows go first (metadata that changed). The caller commits."""
    if replace:
        ids = [occ_id for occ_id, _ in items]
        for i in range(0, len(ids), 500):
            s.execute(delete(MetadataTerm).where(MetadataTerm.occurrence_id.in_(ids[i : i + 500])))
    rows = [
        {"occurrence_id": occ_id, "path": p, "namespace_id": ns_id, "term": t, "num": n}
        for occ_id, meta in items
        for p, t, n in term_rows(meta)
    ]
    if rows:
        s.execute(insert(MetadataTerm), rows)


# ---------------------------------------------------------------------- narrowing
def _terms(ns_id: int, path: tuple[str, ...], *where: ColumnElement[bool]) -> Select[Any]:
    t = MetadataTerm
    return select(t.occurrence_id).where(t.namespace_id == ns_id, t.path == _path(path), *where)


def _leaf(ns_id: int, node: Condition) -> list[Select[Any]] | None:
    """Queries whose union holds every occurrence passing ``node``; None: no narrowing."""
    t = MetadataTerm
    op, value = node.op, node.value
    if op == "$exists":
        return [_terms(ns_id, node.path)] if value else None
    if op in ("$eq", "$in"):
        values = (value,) if op == "$eq" else tuple(value)
        terms = [
            "t" if v is True else "f" if v is False else "z" if v is None else _string_term(v)
            for v in values
            if not isinstance(v, (int, float)) or isinstance(v, bool)
        ]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        # NaN, an infinity or an integer beyond every double equals no stored number (each is a
        # 64-bit integer or a finite double): it needs no index row
        floats = [f for f in map(_float, numbers) if f is not None]
        parts = []
        if terms:
            parts.append(_terms(ns_id, node.path, t.term.in_(terms)))
        if floats:
            parts.append(_terms(ns_id, node.path, t.num.in_(floats)))
        return parts
    if op in ("$gt", "$gte", "$lt", "$lte") and not isinstance(value, str):
        bound = _float(value)
        if bound is None:
            return None
        # a float bound, inclusive either way: rounding can only widen the set
        cond = t.num >= bound if op in ("$gt", "$gte") else t.num <= bound
        return [_terms(ns_id, node.path, cond)]
    return None


def _narrow(ns_id: int, node: FilterNode, occ: Any) -> list[ColumnElement[bool]] | None:
    """Conditions on ``occ`` (the occurrence id column) whose conjunction every passing occurrence
    meets; None: no narrowing. Each is one ``IN`` over a union of index lookups (the unindexed
    occurrences always among them), which both databases run as a semi-join from the index."""
    if isinstance(node, Condition):
        parts = _leaf(ns_id, node)
        if parts is None:
            return None
        unindexed = select(MetadataTerm.occurrence_id).where(
            MetadataTerm.namespace_id == ns_id, MetadataTerm.path == _UNINDEXED
        )
        return [occ.in_(union_all(*parts, unindexed))]
    if isinstance(node, AllOf):
        conds = [c for p in node.parts for c in (_narrow(ns_id, p, occ) or [])]
        return conds or None
    branches = [_narrow(ns_id, p, occ) for p in node.parts]
    if any(b is None for b in branches):
        return None
    return [or_(*(and_(*b) for b in branches if b is not None))]


def narrowing(ns_id: int, node: FilterNode, occurrence_id: Any) -> ColumnElement[bool] | None:
    """A condition on ``occurrence_id`` (the occurrences' id column) that every occurrence of
    namespace ``ns_id`` passing ``node`` meets and that the index answers; None when the filter
    narrows nothing (then every occurrence is read)."""
    conds = _narrow(ns_id, node, occurrence_id)
    return None if conds is None else and_(*conds)
