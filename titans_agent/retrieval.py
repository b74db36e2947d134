"""Ranking for MemoryAgent.recall: per-signal ranks, reciprocal-rank fusion, and hits.

Signals (each optional, see :class:`~titans_agent.config.RetrievalConfig`):

- lexical: BM25 over SQLite FTS5 (:meth:`~titans_agent.store.Store.lexical_search`);
- dense: cosine similarity of the query embedding ``(d,)`` to the record embeddings ``(n, d)``;
- neural: cosine similarity of the memory read-out ``M*(q)`` (Titans eq. 15) to the records' value
  projections ``W_V x`` ``(n, d)``.

Fusion is weighted reciprocal-rank fusion (Cormack, Clarke and Buettcher 2009):
``score(r) = sum_s w_s / (rrf_k + rank_s(r))`` over the signals that ranked ``r``; ties break by
record id, so a database always gives the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch

from titans_agent.store import Occurrence, Record
from titans_agent.types import Hit

__all__ = ["Ranks", "build_hits", "fuse", "matches", "rank_by_similarity", "rank_ids"]

Ranks = dict[int, dict[str, int]]
"""record id -> {signal name: 1-based rank}."""


def rank_ids(ranks: Ranks, name: str, ordered_ids: Iterable[int], allowed: set[int] | None, n: int) -> None:
    """Record the ranks of ``ordered_ids`` (best first) under ``name``: the first ``n`` allowed ones."""
    pos = 0
    for rid in ordered_ids:
        if allowed is None or rid in allowed:
            pos += 1
            ranks.setdefault(rid, {})[name] = pos
            if pos >= n:
                break


def rank_by_similarity(
    ranks: Ranks, name: str, ids: np.ndarray, scores: torch.Tensor, mask: torch.Tensor | None, n: int
) -> None:
    """Rank records by ``scores`` ``(n_records,)`` (higher is better), aligned with ``ids``; records
    outside ``mask`` (a boolean ``(n_records,)``) are left out. Ties break by record id."""
    if scores.shape[0] == 0:
        return
    if mask is not None:
        scores = scores.masked_fill(~mask, -float("inf"))
    top = torch.topk(scores, min(n, scores.shape[0]))
    order = sorted(zip(top.values.tolist(), top.indices.tolist()), key=lambda t: (-t[0], ids[t[1]]))
    for pos, (val, idx) in enumerate(order, start=1):
        if val == -float("inf"):
            break
        ranks.setdefault(int(ids[idx]), {})[name] = pos


def fuse(ranks: Ranks, weights: dict[str, float], rrf_k: int, k: int) -> list[tuple[float, int]]:
    """The ``k`` best ``(score, record id)`` by weighted reciprocal-rank fusion, best first."""
    scored = (
        (sum(weights.get(sig, 0.0) / (rrf_k + r) for sig, r in sig_ranks.items()), rid)
        for rid, sig_ranks in ranks.items()
    )
    return sorted(scored, key=lambda t: (-t[0], t[1]))[:k]


def matches(o: Occurrence, kinds: Sequence[str] | None, source: str | None, session_id: str | None) -> bool:
    """Whether an occurrence passes recall's filters."""
    return (
        (kinds is None or o.kind in kinds)
        and (source is None or o.source == source)
        and (session_id is None or o.session_id == session_id)
    )


def build_hits(
    fused: list[tuple[float, int]],
    ranks: Ranks,
    records: dict[int, Record],
    places: dict[int, list[Occurrence]],
    kinds: Sequence[str] | None,
    source: str | None,
    session_id: str | None,
) -> list[Hit]:
    """Hits in fused order. Provenance is the first occurrence that passes the filters (the
    earliest occurrence when there are none); records without occurrences are left out."""
    hits = []
    for score, rid in fused:
        r, occ = records.get(rid), places.get(rid, [])
        if r is None or not occ:
            continue
        o = next((p for p in occ if matches(p, kinds, source, session_id)), occ[0])
        hits.append(
            Hit(
                id=r.id,
                text=r.text,
                score=score,
                source=o.source,
                location=f"{o.start_line}-{o.end_line}" if o.start_line is not None else None,
                start_line=o.start_line,
                end_line=o.end_line,
                kind=o.kind,
                metadata=o.meta or {},
                surprise=r.surprise,
                hits=r.hits,
                created_at=r.created_at,
                last_seen_at=r.last_seen_at,
                signals=ranks[rid],
                session_id=o.session_id,
                role=o.role,
                timestamp=o.timestamp,
                occurrences=len(occ),
                sources=sorted({p.source for p in occ if p.source and p.source != o.source})[:20],
            )
        )
    return hits
