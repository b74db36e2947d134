"""Ranking for MemoryAgent.recall: per-signal ranks and scores, their fusion, locality, and hits.

Signals (each optional, see :class:`~titans_agent.config.RetrievalConfig`):

- lexical: BM25 over the namespace's in-memory index (:class:`titans_agent.bm25.BM25Index`);
- dense: cosine similarity of the query embedding ``(d,)`` to the record embeddings ``(n, d)``;
- neural: cosine similarity of the memory read-out ``M*(q)`` (Titans eq. 15) to the records' value
  projections ``W_V x`` ``(n, d)``.

Fusion is calibrated score fusion by default (:func:`fuse_standardised`): each signal's scores
standardised over the records that may be returned, ``score(r) = softplus(sum_s w_s (x_s(r) -
mean_s) / std_s)``; or weighted reciprocal-rank fusion
(Cormack, Clarke and Buettcher 2009, :func:`fuse_scores`): ``score(r) = sum_s w_s / (rrf_k +
rank_s(r))`` over the signals that ranked ``r``. Ties break by record id, so a database always
gives the same order.

Session locality (:func:`add_group_bonus`): a turn also scores ``session_weight`` times the best
score of its session (a chunk, of its document), ``score'(r) = score(r) + w_g * max_{g(r') = g(r)}
score(r')``.

Locality (neighbour expansion) is applied to the fused scores: a turn also scores
``neighbour_weight`` times the best fused score of its adjacent turns in the same session (sequence
numbers +-1), and, when ``neighbour_kinds`` lists "chunk", a document chunk that of its adjacent
chunks of the same document, so a turn that answers a question found through its neighbour's words is ranked too:
``score'(r) = score(r) + w_n * max_{n in adj(r)} score(n)``. Superseded records (see
:mod:`titans_agent.updates`) are demoted first, ``score(r) <- superseded_weight * score(r)``, so a
statement that is no longer true lifts its neighbours less, and its successor scores at least what it
scored before the demotion. For a query about the asker ("Who is my
manager?"), records about another person ("My partner's manager is ...") are demoted the same way
by ``other_person_weight``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from titans_agent.bm25 import idf_nonnegative, term_score
from titans_agent.code_rank import CodeFiles
from titans_agent.facts import ASSISTANT_ROLES, is_question, other_subjects, states_relation, third_parties
from titans_agent.rows import OccurrenceData, RecordData
from titans_agent.text import FIRST_PERSON_SINGULAR, STOPWORDS, content_words, tokens
from titans_agent.types import Hit, Location
from titans_agent.updates import UpdateLinks

__all__ = [
    "DocumentIndex",
    "Ranks",
    "ScoreVector",
    "SignalScores",
    "about_oneself",
    "asks_about_asker",
    "add_group_bonus",
    "build_hits",
    "make_hit",
    "demote_other_people",
    "demote_questions",
    "demote_replies",
    "favour_relations",
    "demote_superseded",
    "successors_above",
    "content_words",
    "expand_neighbours",
    "fuse_scores",
    "fuse_standardised",
    "matches",
    "neighbour_shares",
    "rank_by_similarity",
    "rank_ids",
    "top_k",
]

Ranks = dict[int, dict[str, int]]
"""record id -> {signal name: 1-based rank}."""


@dataclass(frozen=True)
class SignalScores:
    """One signal's raw scores for standardisation (:func:`fuse_standardised`).

    Attributes:
        values: record id -> raw score (higher is better) of every record the signal scored.
        mean, std: of the raw scores over every record that may be returned (``n`` of them), the
            ones absent from ``values`` counted as ``fill``.
        fill: the raw score of a record absent from ``values`` (0 for full-text search: no match).
    """

    values: Mapping[int, float]
    mean: float
    std: float
    fill: float = 0.0

    def at(self, ids: np.ndarray) -> np.ndarray:
        """The raw scores ``(n,)`` of record ids ``(n,)`` (``fill`` for those not scored)."""
        if isinstance(self.values, ScoreVector):
            return self.values.at(ids, self.fill)
        return np.fromiter((self.values.get(int(i), self.fill) for i in ids), dtype=np.float64, count=ids.shape[0])

    @classmethod
    def sparse(cls, values: dict[int, float], n: int) -> SignalScores:
        """Scores of the matching records only (the others score 0) among ``n`` records."""
        a = np.fromiter(values.values(), dtype=np.float64, count=len(values))
        mean, std = _background_stats(a, max(n, len(values)) - len(values))
        return cls(values, mean, std)

    @classmethod
    def dense(cls, ids: np.ndarray, sims: np.ndarray, keep: np.ndarray | None = None) -> SignalScores:
        """A similarity of every record ``ids`` (ascending, ``(n,)``) in ``sims`` ``(n,)``; only the
        records in the boolean ``keep`` ``(n,)`` (all when None) whose similarity is finite count
        and may be looked up. A record not there takes the mean (a standardised 0)."""
        sims = sims.astype(np.float64)
        finite = np.isfinite(sims)  # an embedding gone wrong must not move every score
        keep = finite if keep is None else keep & finite
        ids, sims = ids[keep], sims[keep]
        mean, std = _background_stats(sims, 0)
        return cls(ScoreVector(ids, sims), mean, std, mean)


def _background_stats(values: np.ndarray, zeros: int) -> tuple[float, float]:
    """Mean and standard deviation of ``values`` ``(m,)`` with ``zeros`` more records scoring 0 and
    one background record scoring 0 (a record that matches nothing), so a namespace of one record
    still measures how far its record stands from no match."""
    n = values.shape[0] + zeros + 1
    mean = float(values.sum()) / n
    var = max(float((values * values).sum()) / n - mean * mean, 0.0)
    return mean, var**0.5


class ScoreVector(Mapping[int, float]):
    """Scores ``(n,)`` of the records ``ids`` ``(n,)`` (ascending) as a read-only mapping."""

    def __init__(self, ids: np.ndarray, scores: np.ndarray) -> None:
        self._ids, self._scores = ids, scores

    def at(self, rids: np.ndarray, fill: float) -> np.ndarray:
        """The scores ``(n,)`` of ``rids`` ``(n,)``, ``fill`` for ids not held (vectorised)."""
        if self._ids.shape[0] == 0:
            return np.full(rids.shape[0], fill, dtype=np.float64)
        pos = np.minimum(np.searchsorted(self._ids, rids), self._ids.shape[0] - 1)
        held = self._ids[pos] == rids
        return np.where(held, self._scores[pos], fill).astype(np.float64)

    def __getitem__(self, rid: int) -> float:
        i = int(np.searchsorted(self._ids, rid))
        if i < self._ids.shape[0] and self._ids[i] == rid:
            return float(self._scores[i])
        raise KeyError(rid)

    def __iter__(self) -> Iterator[int]:
        return (int(i) for i in self._ids)

    def __len__(self) -> int:
        return int(self._ids.shape[0])


TITLE_TF = 0.5
"""A word of a document's title counts this much of a word of its name in the document signal
(BM25F-style field weights: a title also holds generic words, "Confidential Information")."""


def header_words(text: str) -> list[str]:
    """The words the document signal matches: :func:`~titans_agent.text.tokens` without single
    letters (a possessive's "s", a spaced-out title "N o n - d i s c l o s u r e"); digits stay
    ("GPL 3")."""
    return [w for w in tokens(text) if len(w) > 1 or w.isdigit()]


@dataclass(frozen=True)
class DocumentIndex:
    """The document signal's index: each document's header words and its chunk records.

    A document's score for a query is Okapi BM25 (:func:`titans_agent.bm25.term_score`) of the
    query's words (:func:`header_words`, stopwords left out) over the headers (``k1`` = 1.2,
    ``b`` = 0.75; a title word counts :data:`TITLE_TF` of a name word, as BM25F weighs fields),
    each term weighted by ``idf(t)^2`` with ``idf(t) = ln(1 + (N - n_t + 0.5) / (n_t + 0.5))``
    (:func:`titans_agent.bm25.idf_nonnegative`) counted over the ``N`` DOCUMENTS
    (Robertson and Zaragoza 2009, the non-negative form; squared because the query's term
    weighs its idf too, as in the tf-idf product). So a word in every file name ("txt", the
    folder) weighs nothing, and a name that one document carries ("CopAcc") outweighs several
    words that many titles share ("Confidential Information"), however many chunks each
    document has. Words are unstemmed ("Confidential" does not match "Confidentiality").

    Attributes:
        postings: word -> ``(document id, weighted count)`` of every header holding it.
        length: document id -> its header's weighted length in words.
        avg_length: the mean header length (at least 1).
        documents_of: chunk record id -> the documents it stands in.
        chunks_of: document id -> its chunk record ids in document order.
        all_documents: how many documents the namespace holds, source code included (which has
            no header here).
        code: the source code files, for the file signal and the auxiliary prior
            (:class:`titans_agent.code_rank.CodeFiles`; empty when there are none).
    """

    postings: Mapping[str, tuple[tuple[int, float], ...]]
    length: Mapping[int, float]
    avg_length: float
    documents_of: Mapping[int, tuple[int, ...]]
    chunks_of: Mapping[int, tuple[int, ...]]
    all_documents: int = 0
    code: CodeFiles = field(default_factory=lambda: CodeFiles.build({}, ()))

    @classmethod
    def build(
        cls,
        headers: Mapping[int, tuple[str, str]],
        chunks: Iterable[tuple[int, int]],
        all_documents: int | None = None,
        code_sources: Mapping[int, str] | None = None,
    ) -> DocumentIndex:
        """From document id -> ``(name words, title)`` of its header, ``(record id, document id)``
        pairs in document order, how many documents there are in all (default: the headers), and
        document id -> source path of the source code files (which have no header)."""
        chunks = list(chunks)
        code = CodeFiles.build(code_sources or {}, chunks)
        postings: dict[str, list[tuple[int, float]]] = {}
        length: dict[int, float] = {}
        for d, (name, title) in headers.items():
            c: dict[str, float] = {}
            for w in header_words(name):
                c[w] = c.get(w, 0.0) + 1.0
            for w in header_words(title):
                c[w] = c.get(w, 0.0) + TITLE_TF
            length[d] = float(sum(c.values()))
            for w, f in c.items():
                postings.setdefault(w, []).append((d, f))
        docs_of: dict[int, list[int]] = {}
        chunks_of: dict[int, list[int]] = {}
        for rid, doc in chunks:
            if doc not in headers:
                continue
            docs_of.setdefault(rid, []).append(doc)
            chunks_of.setdefault(doc, []).append(rid)
        avg = max(sum(length.values()) / max(len(length), 1), 1.0)
        return cls(
            {w: tuple(p) for w, p in postings.items()},
            length,
            avg,
            {r: tuple(d) for r, d in docs_of.items()},
            {d: tuple(r) for d, r in chunks_of.items()},
            len(headers) if all_documents is None else all_documents,
            code,
        )

    @property
    def n_documents(self) -> int:
        return len(self.length)

    def scores(self, query: str, k1: float = 1.2, b: float = 0.75) -> dict[int, float]:
        """Document id -> BM25 score (> 0) of ``query`` (see the class), for the documents whose
        header holds one of its words."""
        n = self.n_documents
        out: dict[int, float] = {}
        for w in dict.fromkeys(header_words(query)):
            posting = self.postings.get(w)
            if w in STOPWORDS or not posting:
                continue
            idf = idf_nonnegative(n, len(posting))
            for d, f in posting:  # idf^2 times the saturation, in this order (scores compare exactly)
                out[d] = out.get(d, 0.0) + idf * idf * term_score(1.0, f, self.length[d], self.avg_length, k1, b)
        return {d: v for d, v in out.items() if v > 0}

    def signal(self, query: str, top: int) -> tuple[SignalScores | None, list[int]]:
        """The document signal of ``query``: a chunk record scores its best document's score,
        standardised over the documents (``mean``/``std`` over all ``N`` of them, 0 for those the
        query does not name); and the chunk records of the ``top`` best documents, best document
        first, which enter recall's candidates. ``(None, [])`` when the query names none."""
        by_doc = self.scores(query)
        if not by_doc:
            return None, []
        a = np.fromiter(by_doc.values(), dtype=np.float64, count=len(by_doc))
        mean, std = _background_stats(a, self.n_documents - len(by_doc))
        best = sorted(by_doc, key=lambda d: (-by_doc[d], d))[:top]
        values = _ChunkScores(by_doc, self.documents_of, self.chunks_of)
        return SignalScores(values, mean, std), [rid for d in best for rid in self.chunks_of.get(d, ())]


class _ChunkScores(Mapping[int, float]):
    """Chunk record id -> the best score of its documents, looked up when asked (a query that
    names many documents does not build a map of all their chunks)."""

    def __init__(
        self,
        by_doc: Mapping[int, float],
        documents_of: Mapping[int, tuple[int, ...]],
        chunks_of: Mapping[int, tuple[int, ...]],
    ) -> None:
        self._by_doc, self._documents_of, self._chunks_of = by_doc, documents_of, chunks_of

    def __getitem__(self, rid: int) -> float:
        best = max((self._by_doc.get(d, 0.0) for d in self._documents_of.get(rid, ())), default=0.0)
        if best <= 0:
            raise KeyError(rid)
        return best

    def __iter__(self) -> Iterator[int]:
        return iter(dict.fromkeys(rid for d in self._by_doc for rid in self._chunks_of.get(d, ())))

    def __len__(self) -> int:
        return sum(1 for _ in self)


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


def fuse_scores(ranks: Ranks, weights: dict[str, float], rrf_k: int) -> dict[int, float]:
    """Weighted reciprocal-rank fusion score of every ranked record (records only ranked by
    signals of weight 0 are left out)."""
    out = {}
    for rid, sig_ranks in ranks.items():
        score = sum(weights.get(sig, 0.0) / (rrf_k + r) for sig, r in sig_ranks.items())
        if score > 0:
            out[rid] = score
    return out


def fuse_standardised(
    signals: dict[str, SignalScores], weights: dict[str, float], candidates: Iterable[int]
) -> dict[int, float]:
    """Calibrated score fusion of ``candidates``: ``softplus(sum_s w_s (x_s(r) - mean_s) / std_s)``
    over the signals of positive weight and positive spread: standard deviations above the
    namespace's mean, which depend on the namespace (its size, its other records), so scores of
    different namespaces do not compare. softplus (``log(1 + e^z)``, floored at the smallest
    positive float) keeps them positive and in order, so every candidate stays a hit and the
    multiplicative demotions and additive locality bonuses apply as to any score. A candidate a
    signal did not score takes that signal's ``fill``."""
    cands = list(dict.fromkeys(candidates))
    ids = np.fromiter(cands, dtype=np.int64, count=len(cands))
    raw = np.zeros(len(cands), dtype=np.float64)
    for name, sig in signals.items():
        w = weights.get(name, 0.0)
        if w <= 0 or sig.std <= 0:
            continue
        raw += (w / sig.std) * (sig.at(ids) - sig.mean)
    # the smallest positive float below: a score that underflows still counts as a hit
    fused = np.maximum(np.logaddexp(0.0, raw), np.finfo(np.float64).tiny)
    return dict(zip(cands, fused.tolist()))


def add_group_bonus(
    scores: dict[int, float],
    groups: dict[int, set[tuple[str, int]]],
    weight: float,
    share: dict[int, float] | None = None,
) -> dict[int, float]:
    """Session locality: ``score'(r) = score(r) + weight * share(r) * max over r's groups g of the
    best score in g`` (a record in several groups takes the best of them; one in none is
    unchanged). ``share`` (default 1) is :func:`neighbour_shares`: a content-free turn takes none.
    ``scores`` is not changed."""
    if weight <= 0 or not groups:
        return dict(scores)
    best: dict[tuple[str, int], float] = {}
    for rid, v in scores.items():
        for g in groups.get(rid, ()):
            if v > best.get(g, 0.0):
                best[g] = v
    out = {}
    for rid, v in scores.items():
        part = 1.0 if share is None else share.get(rid, 1.0)
        out[rid] = v + weight * part * max((best.get(g, 0.0) for g in groups.get(rid, ())), default=0.0)
    return out


def top_k(scores: dict[int, float], k: int) -> list[tuple[float, int]]:
    """The ``k`` best ``(score, record id)``, best first; ties by record id."""
    return sorted(((v, rid) for rid, v in scores.items() if v > 0), key=lambda t: (-t[0], t[1]))[:k]


def expand_neighbours(
    scores: dict[int, float],
    adjacent: dict[int, set[int]],
    weight: float,
    allowed: set[int] | None = None,
    share: dict[int, float] | None = None,
) -> dict[int, float]:
    """Neighbour expansion: ``score'(r) = score(r) + weight * share(r) * max over adjacent n of score(n)``.

    A record that no signal ranked enters with that bonus alone, when it is ``allowed`` (None: every
    record is). ``share`` (default 1 for every record) scales what a record may take from its
    neighbours: :func:`neighbour_shares` gives 0 to a turn with no content words ("ok", "Thanks!"),
    which answers nothing however relevant its neighbour is. ``scores`` is not changed.
    """
    if weight <= 0:
        return dict(scores)
    out = dict(scores)
    for rid in set(scores) | {n for r in scores for n in adjacent.get(r, ())}:
        if allowed is not None and rid not in allowed:
            continue
        best = max((scores.get(n, 0.0) for n in adjacent.get(rid, ())), default=0.0)
        part = 1.0 if share is None else share.get(rid, 1.0)
        if best > 0 and part > 0:
            out[rid] = scores.get(rid, 0.0) + weight * part * best
    return out


def neighbour_shares(words: dict[int, int], min_words: int) -> dict[int, float]:
    """Per record, ``min(1, words / min_words)`` from its :func:`content_words` count: the share of the
    neighbour bonus it may take (:func:`expand_neighbours`); with ``min_words`` 1 only content-free
    turns get 0."""
    if min_words <= 0:
        return {}
    return {rid: min(1.0, n / min_words) for rid, n in words.items()}


def asks_about_asker(query: str) -> bool:
    """Whether ``query`` is the asker's question about their own life ("Where do I live now?",
    "What's my daughter's name?"): first-person singular words. A chatbot's questions are; LoCoMo's
    third-person ones ("What did Caroline paint?") are not."""
    return not FIRST_PERSON_SINGULAR.isdisjoint(tokens(query))


def about_oneself(query: str) -> bool:
    """Whether ``query`` asks about the asker ("Who is my manager?"): first-person words, and no other
    person (:func:`~titans_agent.facts.third_parties`)."""
    words = set(tokens(query))
    return not FIRST_PERSON_SINGULAR.isdisjoint(words) and not third_parties(query)


def demote_other_people(
    scores: dict[int, float], texts: dict[int, str], weight: float, query: str = ""
) -> dict[int, float]:
    """Scores with every record about another person ("My sister lives at ...") multiplied by
    ``weight``; for queries :func:`about_oneself`. A record is about another person when one of its
    clauses has that person as its subject (:func:`~titans_agent.facts.other_subjects`): "I went
    hiking with my friends" is the speaker's own. Whom the query itself names is not another person:
    for "What is my daughter's name?" a record "My daughter is called Lucia" is what was asked, so
    only a record with someone the query's words leave out is demoted."""
    asked = frozenset(tokens(query))
    return {rid: v * weight if other_subjects(texts.get(rid, "")) - asked else v for rid, v in scores.items()}


def favour_relations(
    scores: dict[int, float], texts: dict[int, str], asked: frozenset[str], weight: float
) -> dict[int, float]:
    """Scores with every record in which the speaker states a relation the query asks about
    (:func:`titans_agent.facts.states_relation`: "What is my job?" asks ``work``; "I'm a nurse"
    states it) multiplied by ``1 + weight``; for queries about the asker."""
    if not asked or weight <= 0:
        return dict(scores)
    return {
        rid: v * (1.0 + weight) if rid in texts and states_relation(texts[rid], asked) else v
        for rid, v in scores.items()
    }


def demote_replies(
    scores: dict[int, float], roles: Mapping[int, Sequence[str | None]], weight: float, assistant: bool = True
) -> dict[int, float]:
    """Scores with every record said only by the assistant (all its roles in
    :data:`titans_agent.facts.ASSISTANT_ROLES`) multiplied by ``weight``: for a question about the
    asker that does not ask what the assistant said, the user's own words are the source and a
    reply that echoes them ("You live in Seattle now") comes after them. ``assistant=False``: the
    records said only by the other side (every role known and not the assistant's) instead, for a
    question about what the assistant said ("What book did you recommend?"), whose answer is the
    reply, not the request it answers. Records without roles (notes, documents) are left as they are."""
    out = dict(scores)
    for rid, said_by in roles.items():
        if rid not in out or not said_by or not all(said_by):  # a record without a role: left alone
            continue
        if all(((r or "").casefold() in ASSISTANT_ROLES) == assistant for r in said_by):
            out[rid] *= weight
    return out


def demote_questions(scores: dict[int, float], texts: dict[int, str], weight: float) -> dict[int, float]:
    """Scores with every stored question (:func:`titans_agent.facts.is_question`: "Where do I live
    now?", "How long have you lived in Lyon?") multiplied by ``weight``: a question is a weak answer,
    and a stored near-copy of the query must not outrank the statement that answers it. Records whose
    text is not in ``texts`` are left as they are."""
    return {rid: v * weight if rid in texts and is_question(texts[rid]) else v for rid, v in scores.items()}


def demote_superseded(
    scores: dict[int, float], links: UpdateLinks, weight: float, drop: bool, allowed: set[int] | None = None
) -> dict[int, float]:
    """Superseded records multiplied by ``weight`` (left out when ``drop``); each of their
    successors (when ``allowed``) scores at least what the superseded record scored, so a query
    that matches an old statement ("I work as an analyst at Initech") finds its current version
    ("I left my old job and started at Hooli"). With ``weight`` 1.0 and no ``drop`` the scores are
    returned unchanged (supersession does not touch the ranking)."""
    if weight >= 1.0 and not drop:
        return dict(scores)
    out = dict(scores)
    for old, news in links.superseded_by.items():
        if old in scores:
            for new in news:
                if allowed is None or new in allowed:
                    out[new] = max(out.get(new, 0.0), scores[old])
    if drop:
        return {rid: v for rid, v in out.items() if rid not in links.superseded_by}
    return {rid: v * weight if rid in links.superseded_by else v for rid, v in out.items()}


def successors_above(scores: dict[int, float], links: UpdateLinks, allowed: set[int] | None = None) -> dict[int, float]:
    """Scores in which every allowed successor of a scored superseded record scores just above it
    (``max(score(new), nextafter(score(old)))``), older records first so that a chain a -> b -> c
    ranks c over b over a. Applied after the locality bonuses, which can lift an old statement's
    session above its successor's: recall ranks the current version of a fact first."""
    out = dict(scores)
    for old in sorted(links.superseded_by):
        if old not in out or out[old] <= 0:
            continue
        for new in links.superseded_by[old]:
            if allowed is None or new in allowed:
                out[new] = max(out.get(new, 0.0), math.nextafter(out[old], math.inf))
    return out


def matches(o: OccurrenceData, kinds: Sequence[str] | None, source: str | None, session_id: str | None) -> bool:
    """Whether an occurrence passes recall's filters."""
    return (
        (kinds is None or o.kind in kinds)
        and (source is None or o.source == source)
        and (session_id is None or o.session_id == session_id)
    )


def make_hit(
    record: RecordData,
    occurrence: OccurrenceData,
    *,
    score: float = 0.0,
    signals: Mapping[str, int] | None = None,
    occurrences: Sequence[OccurrenceData] = (),
    links: UpdateLinks | None = None,
) -> Hit:
    """The one constructor of a :class:`Hit`: ``record`` as found at ``occurrence`` (its
    provenance), with its fused ``score``, each signal's rank (``signals``), all of its
    ``occurrences`` (for their count and the other sources; just ``occurrence`` when empty) and its
    knowledge-update ``links``."""
    places = occurrences or (occurrence,)
    rid = record.id
    return Hit(
        superseded_by=links.superseded_by.get(rid, []) if links else [],
        supersedes=links.supersedes.get(rid, []) if links else [],
        stale_clauses=links.stale.get(rid, []) if links else [],
        id=rid,
        text=record.text,
        score=score,
        source=occurrence.source,
        location=f"{occurrence.start_line}-{occurrence.end_line}" if occurrence.start_line is not None else None,
        doc_location=Location.from_dict(occurrence.location),
        start_line=occurrence.start_line,
        end_line=occurrence.end_line,
        kind=occurrence.kind,
        metadata=occurrence.meta,
        surprise=record.surprise,
        hits=record.hits,
        created_at=record.created_at,
        last_seen_at=record.last_seen_at,
        signals=dict(signals or {}),
        session_id=occurrence.session_id,
        role=occurrence.role,
        timestamp=occurrence.timestamp,
        occurrences=len(places),
        sources=sorted({p.source for p in places if p.source and p.source != occurrence.source})[:20],
    )


def build_hits(
    fused: list[tuple[float, int]],
    ranks: Ranks,
    records: dict[int, RecordData],
    places: dict[int, list[OccurrenceData]],
    kinds: Sequence[str] | None,
    source: str | None,
    session_id: str | None,
    links: UpdateLinks | None = None,
    ok: set[int] | None = None,
) -> list[Hit]:
    """Hits in fused order (:func:`make_hit`). Provenance is the first occurrence that passes the filters
    (the earliest occurrence when there are none; only occurrence ids in ``ok`` count as passing when
    given); records without occurrences are left out. ``links`` fills ``superseded_by`` and
    ``supersedes``."""
    hits = []
    for score, rid in fused:
        r, occ = records.get(rid), places.get(rid, [])
        if r is None or not occ:
            continue
        o = next((p for p in occ if matches(p, kinds, source, session_id) and (ok is None or p.id in ok)), occ[0])
        hits.append(make_hit(r, o, score=score, signals=ranks.get(rid, {}), occurrences=occ, links=links))
    return hits
