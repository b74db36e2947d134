"""BM25 over one namespace's records, held in memory beside the dense index: recall's lexical signal.

A record is indexed by the terms (:func:`titans_agent.text.index_terms`) of its text and of its
context (sources, roles, dates, the turn before), the context weighing half: a term's frequency in
a record is ``tf = tf_text + 0.5 tf_context``. A query (the OR of its terms) scores a record with
Okapi BM25 (Robertson, Walker et al.) in the form SQLite FTS5's ``bm25()`` computes it, which this
index replaced::

    score(q, r) = sum over terms t of q in r of  idf(t) * tf (k1 + 1) / (tf + k1 (1 - b + b |r| / avgdl))
    idf(t)      = ln((N - n_t + 0.5) / (n_t + 0.5)), floored at 1e-6   (:func:`idf`)

with ``k1 = 1.2``, ``b = 0.75``, ``|r|`` the record's number of terms (text and context, unweighted),
``avgdl`` their mean, ``N`` the records of the namespace and ``n_t`` those holding ``t``. The
statistics are the namespace's own: FTS5 counted every namespace of the database, so one user's
records moved another's scores (PrivacyQA R@16 .803 alone, .773 sharing a file with ContractNLI).

Why in memory: FTS5 and PostgreSQL's ``ts_rank_cd`` compute a score for every row that matches any
query word before the best are kept (92 ms of a 172 ms recall at 100,000 records on SQLite); here a
term's postings are one array and a query costs a few vectorised passes over them.

The term score and the idf are pure functions (:func:`term_score`, :func:`idf`,
:func:`idf_nonnegative`) that the document signal (:class:`titans_agent.retrieval.DocumentIndex`)
shares.

Pure: no I/O. The runtime (:mod:`titans_agent.runtime`) keeps one per namespace, and recall brings it
to the database's revision (:mod:`titans_agent.recall`). Not thread-safe: one thread at a time, as
the namespace's lock guarantees.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from typing import TypeVar

import numpy as np

from titans_agent.text import index_terms

__all__ = ["B", "CONTEXT_WEIGHT", "K1", "BM25Index", "idf", "idf_nonnegative", "term_score"]

K1 = 1.2
"""BM25's term-frequency saturation."""
B = 0.75
"""BM25's length normalisation."""
CONTEXT_WEIGHT = 0.5
"""A term in a record's context counts half a term in its text."""
_IDF_FLOOR = 1e-6

_Float = TypeVar("_Float", float, np.ndarray)


def idf(n: int, n_t: int) -> float:
    """The inverse document frequency of a term held by ``n_t`` of ``n`` items in the form SQLite
    FTS5 computes it, ``ln((n - n_t + 0.5) / (n_t + 0.5))``, floored at 1e-6 (a term in more than
    half the items still counts a little)."""
    return max(math.log((n - n_t + 0.5) / (n_t + 0.5)), _IDF_FLOOR)


def idf_nonnegative(n: int, n_t: int) -> float:
    """The non-negative inverse document frequency (Robertson and Zaragoza 2009),
    ``ln(1 + (n - n_t + 0.5) / (n_t + 0.5))``: near 0 for a term every item holds."""
    return math.log(1.0 + (n - n_t + 0.5) / (n_t + 0.5))


def term_score(weight: float, tf: _Float, length: _Float, avgdl: float, k1: float = K1, b: float = B) -> _Float:
    """Okapi BM25's score of one term in items of term frequency ``tf`` and length ``length``
    (floats, or arrays ``(m,)`` of one shape), their mean length ``avgdl``:
    ``weight * tf (k1 + 1) / (tf + k1 (1 - b + b length / avgdl))``, evaluated left to right in
    this order (scores are compared exactly, so the order of the operations is part of the result).
    ``weight`` is the term's idf, or 1.0 for the bare saturation (the product by 1.0 is exact)."""
    return weight * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * length / avgdl))


class BM25Index:
    """An inverted index of records: per term, the positions of the records that hold it and their
    weighted term frequencies, appendable (``array``s, 4 bytes an entry).

    A record added again (its context grew: a merge appended a source) is indexed at a new
    position and its old position is dead (left out of every statistic; :attr:`dead` counts them,
    and the owner builds a new index when they outnumber the live ones). Records are never removed
    otherwise: a namespace whose records were deleted gets a new index.

    Attributes:
        revision: the namespace revision the index reflects (kept by its owner).
        dead: positions of records indexed again since.
    """

    def __init__(self) -> None:
        self._vocab: dict[str, int] = {}
        self._postings: list[array] = []  # term id -> positions ('i')
        self._tfs: list[array] = []  # term id -> weighted tf ('f')
        self._ids = array("q")  # position -> record id
        self._lengths = array("d")  # position -> terms in text and context
        self._alive = bytearray()  # position -> 1 while it is its record's live position
        self._position: dict[int, int] = {}  # record id -> its live position
        self._total_length = 0.0
        self._entries = 0  # postings held, dead ones included
        self.dead = 0
        self.revision = -1

    def __len__(self) -> int:
        """Live records."""
        return len(self._position)

    @property
    def nbytes(self) -> int:
        """Approximate bytes held (O(1): the runtime cache asks at every use): 8 per posting, 17 per
        position, and about 150 per term and 100 per record for the dictionaries and array headers."""
        return 8 * self._entries + 17 * len(self._ids) + 150 * len(self._vocab) + 100 * len(self._position)

    def add(self, rows: Iterable[tuple[int, str, str]]) -> None:
        """Index records ``(id, text, context)``; a record already indexed is indexed again (its old
        position dies)."""
        for rid, text, context in rows:
            old = self._position.pop(rid, None)
            if old is not None:
                self._total_length -= self._lengths[old]
                self._alive[old] = 0
                self.dead += 1
            text_terms, context_terms = index_terms(text), index_terms(context or "")
            tf: dict[str, float] = dict(Counter(text_terms))
            for t in context_terms:
                tf[t] = tf.get(t, 0.0) + CONTEXT_WEIGHT
            pos = len(self._ids)
            for term, f in tf.items():
                tid = self._vocab.get(term)
                if tid is None:
                    tid = self._vocab[term] = len(self._postings)
                    self._postings.append(array("i"))
                    self._tfs.append(array("f"))
                self._postings[tid].append(pos)
                self._tfs[tid].append(f)
            self._entries += len(tf)
            length = float(len(text_terms) + len(context_terms))
            self._ids.append(rid)
            self._lengths.append(length)
            self._alive.append(1)
            self._position[rid] = pos
            self._total_length += length

    def live_postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """The live records holding index term ``term`` and its weighted frequency in each:
        ``(record ids (m,) int64, tf (m,) float64)``; empty arrays for an unknown term."""
        tid = self._vocab.get(term)
        if tid is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        pos = np.frombuffer(self._postings[tid], dtype=np.int32).astype(np.int64)
        tf = np.frombuffer(self._tfs[tid], dtype=np.float32).astype(np.float64)
        if self.dead:
            keep = np.frombuffer(self._alive, dtype=bool)[pos]
            pos, tf = pos[keep], tf[keep]
        return np.frombuffer(self._ids, dtype=np.int64)[pos], tf

    def live_lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Every live record and its length in terms (text and context):
        ``(record ids (n,) int64, lengths (n,) float64)``, in index order."""
        ids = np.frombuffer(self._ids, dtype=np.int64)
        lengths = np.frombuffer(self._lengths, dtype=np.float64)
        if self.dead:
            keep = np.frombuffer(self._alive, dtype=bool)
            return ids[keep].copy(), lengths[keep].copy()
        return ids.copy(), lengths.copy()

    def search(
        self, terms: Sequence[str], limit: int, within: Collection[int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``limit`` records with the highest BM25 score for the OR of ``terms`` (index terms,
        :func:`titans_agent.text.index_terms`), as ``[(record id, score)]``, best first, ties by
        ascending id; only records holding at least one term; with ``within``, only those ids (the
        best allowed ones, however many others score higher)."""
        n = len(self._position)
        if n == 0 or limit <= 0 or not terms or (within is not None and not within):
            return []
        size = len(self._ids)
        avgdl = self._total_length / n if self._total_length > 0 else 1.0
        lengths = np.frombuffer(self._lengths, dtype=np.float64).copy()
        alive = np.frombuffer(self._alive, dtype=bool).copy() if self.dead else None
        scores = np.zeros(size, dtype=np.float64)
        matched = np.zeros(size, dtype=bool)
        for term in dict.fromkeys(terms):
            tid = self._vocab.get(term)
            if tid is None:
                continue
            pos = np.frombuffer(self._postings[tid], dtype=np.int32).astype(np.int64)
            tf = np.frombuffer(self._tfs[tid], dtype=np.float32).astype(np.float64)
            if alive is not None:
                keep = alive[pos]
                pos, tf = pos[keep], tf[keep]
            if pos.shape[0] == 0:
                continue
            # only the positions this term holds, which are distinct
            scores[pos] += term_score(idf(n, pos.shape[0]), tf, lengths[pos], avgdl)
            matched[pos] = True
        hit = np.flatnonzero(matched)
        ids = np.frombuffer(self._ids, dtype=np.int64)[hit]
        if within is not None:
            allowed = np.fromiter(within, dtype=np.int64, count=len(within))
            keep = np.isin(ids, allowed)
            hit, ids = hit[keep], ids[keep]
        top = scores[hit]
        if top.shape[0] > limit:  # the limit-th best score; ties at it are settled by id below
            cut = np.partition(top, top.shape[0] - limit)[top.shape[0] - limit]
            keep = top >= cut
            top, ids = top[keep], ids[keep]
        order = np.lexsort((ids, -top))[:limit]
        return [(int(ids[i]), float(top[i])) for i in order]
