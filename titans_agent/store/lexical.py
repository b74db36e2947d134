"""Full-text search over a namespace's records in SQL: SQLite FTS5 or PostgreSQL tsvector.

Recall's lexical signal no longer reads these indexes: it ranks with the in-memory BM25 index of
each namespace (:mod:`titans_agent.bm25`), whose statistics are the namespace's own and whose cost
does not grow with every row a query word matches. This search stays for the benchmarks that
compare the two and for databases read by earlier versions.

The index itself (SQLite's ``records_fts`` table and its triggers; PostgreSQL's generated
``records.tsv`` column and its GIN index) is made by the migrations
(``titans_agent/store/migrations/versions/0001_schema_v1.py``). Words come from
:mod:`titans_agent.text` (tokens, stopwords), the one lexicon.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from sqlalchemy import BigInteger, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from titans_agent.text import MAX_QUERY_TERMS, query_terms

__all__ = ["MAX_QUERY_TERMS", "fts_query", "lexical_search", "query_terms"]


def fts_query(query: str, max_terms: int = MAX_QUERY_TERMS) -> str | None:
    """An FTS5 MATCH expression: the query's words without stopwords, each quoted (so operators and
    wildcards are literal), joined with OR. A query made only of stopwords keeps them all. None when
    the query has no word characters."""
    words = query_terms(query, max_terms)
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


# ts_rank_cd weights for {D, C, B, A}: context (B) weighs half the text (A), as in the FTS5 bm25 call.
_PG_RANK_WEIGHTS = "{0.1, 0.2, 0.5, 1.0}"


def lexical_search(
    s: Session, namespace_id: int, query: str, limit: int, within: Collection[int] | None = None
) -> list[tuple[int, float]]:
    """Full-text search over the records' text and context: ``[(record_id, score)]``, best
    first, higher is better; text weighs twice the context (sources, roles, dates).

    ``within``: only these record ids (the records a recall's filters allow), restricted in the
    query itself, so the ``limit`` best are the best allowed ones. They travel as one parameter
    (a JSON array read by ``json_each`` on SQLite, a ``bigint[]`` on PostgreSQL).

    The query is the OR of its non-stopword terms (:func:`query_terms`). SQLite: FTS5 with
    score = -bm25. PostgreSQL: the ``tsv`` column (GIN index) with score = ``ts_rank_cd``
    (cover density, ``english`` stemming; a query of stopwords only matches nothing there).
    Empty when the query has no words. The store refuses other backends at open."""
    if within is not None and not within:
        return []
    if s.get_bind().dialect.name == "postgresql":
        return _pg_lexical_search(s, namespace_id, query, limit, within)
    match = fts_query(query)
    if match is None:
        return []
    params: dict[str, Any] = {"q": match, "ns": namespace_id, "lim": limit}
    restrict = ""
    if within is not None:
        restrict = "AND r.id IN (SELECT value FROM json_each(:within)) "
        params["within"] = json.dumps(sorted(within))
    # The namespace check reads the covering index (namespace_id, rowid) rather than each
    # matching record's row (text, context and embedding: about 2 KB), which SQLite picks by
    # itself: p50 34 ms instead of 59 ms over 21,000 records (benchmarks/recall_latency.py).
    rows = s.execute(
        text(
            "SELECT r.id, bm25(records_fts, 1.0, 0.5) AS score FROM records_fts "
            "JOIN records r INDEXED BY ix_records_namespace_id ON r.id = records_fts.rowid "
            "WHERE records_fts MATCH :q AND r.namespace_id = :ns "
            f"{restrict}ORDER BY score, r.id LIMIT :lim"
        ),
        params,
    ).fetchall()
    return [(int(r[0]), -float(r[1])) for r in rows]


def _pg_lexical_search(
    s: Session, namespace_id: int, query: str, limit: int, within: Collection[int] | None
) -> list[tuple[int, float]]:
    terms = query_terms(query)
    if not terms:
        return []
    # Each term through plainto_tsquery (so it is literal text, never tsquery syntax), OR-ed.
    tsq = " || ".join(f"plainto_tsquery('english', :t{i})" for i in range(len(terms)))
    params: dict[str, Any] = {f"t{i}": t for i, t in enumerate(terms)}
    params.update(ns=namespace_id, lim=limit)
    # The weights are a literal and ``within`` a typed bigint[] parameter: a text parameter cast to
    # an array inside the statement is parsed again for every row (array_in is not immutable, so
    # it is never folded into a constant): 286 ids over 5,000 rows cost 110 ms that way.
    restrict = "" if within is None else "AND r.id = ANY(:within) "
    stmt = text(
        f"SELECT r.id, ts_rank_cd('{_PG_RANK_WEIGHTS}'::float4[], r.tsv, q.q) AS score "
        f"FROM records r, (SELECT {tsq} AS q) q "
        f"WHERE r.namespace_id = :ns AND r.tsv @@ q.q {restrict}"
        "ORDER BY score DESC, r.id LIMIT :lim"
    )
    if within is not None:
        stmt = stmt.bindparams(bindparam("within", type_=ARRAY(BigInteger)))
        params["within"] = sorted(int(i) for i in within)
    rows = s.execute(stmt, params).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]
