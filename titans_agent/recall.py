"""Recall: signals -> one snapshot read of the candidates' context -> pure scoring -> hits.

The query is embedded first, outside the database. Then one snapshot session (SQLite ``BEGIN``,
PostgreSQL ``REPEATABLE READ``) serves every read: the namespace's runtime is brought to that
snapshot's revision (dense index and memory state), the filters and the lexical signal run, the
candidates' neighbours, sessions, supersession links and texts are read, and the hits' records
and occurrences at the end. Between those reads the ranking is pure (:mod:`titans_agent.retrieval`):
calibrated score fusion (or reciprocal-rank fusion) of the lexical, dense and neural signals,
demotion of superseded records and (for a question about the asker) of records about other people,
then locality (the session's best score, then the adjacent turns').
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from titans_agent.code_rank import (
    asks_for_auxiliary,
    demote_auxiliary,
    demote_import_blocks,
    file_scores,
    file_signal,
    path_mentions,
    without_environment,
)
from titans_agent.config import RetrievalConfig
from titans_agent.context import PipelineContext
from titans_agent.core.memory import MemoryState
from titans_agent.errors import InvalidInputError, StoreError
from titans_agent.facts import addresses_assistant, asks_about_past, asks_what_assistant_said, query_relations
from titans_agent.filters import FilterNode, parse_filter
from titans_agent.retrieval import (
    Ranks,
    ScoreVector,
    SignalScores,
    about_oneself,
    add_group_bonus,
    asks_about_asker,
    build_hits,
    demote_other_people,
    demote_questions,
    demote_replies,
    demote_superseded,
    expand_neighbours,
    favour_relations,
    fuse_scores,
    fuse_standardised,
    neighbour_shares,
    rank_by_similarity,
    rank_ids,
    successors_above,
    top_k,
)
from titans_agent.rows import Snapshot
from titans_agent.runtime import Runtime
from titans_agent.store import repository
from titans_agent.store.context import read_recall_context
from titans_agent.text import MAX_QUERY_TERMS, index_terms, query_terms
from titans_agent.types import Hit
from titans_agent.updates import UpdateLinks
from titans_agent.validation import as_utc, check_kinds, check_name, check_query, require_namespace

__all__ = [
    "DOCUMENT_TOP",
    "FILE_TOP",
    "HALF_SCAN_ROWS",
    "RecallFilters",
    "lexical_terms",
    "recall",
    "recall_filters",
]

HALF_SCAN_ROWS = 8192
"""From this many records on, the dense scan reads a float16 copy of the embeddings (kept by the
runtime, :meth:`~titans_agent.runtime.Runtime.half_emb`): a matrix-vector product reads every row
once, so half the bytes is about a third of the time on the CPU (100,000 x 384: 5.3 ms against
17.2 ms on one core), with cosines within 3e-4 of float32 (accumulated in float32, rounded to
float16; the query is scaled to unit length first, so no embedder's scale overflows it). Smaller
namespaces scan their float32 rows exactly, with no extra copy."""

DOCUMENT_TOP = 3
"""The chunks of this many best documents of the document signal enter the candidates."""
FILE_TOP = 3
"""The chunks of this many best source files by the file signal (:mod:`titans_agent.code_rank`)
enter recall's candidates, as the document signal's best documents' do."""


@dataclass(frozen=True)
class RecallFilters:
    """What a recall may return (every field checked by the facade; None: no restriction).

    Attributes:
        kinds: record kinds ("chunk", "note", "turn").
        source: an exact source name.
        session_id: one conversation.
        since, until: an occurrence's time range (inclusive; UTC).
        as_of: what was known then: occurrences at or before it, the supersessions known then.
        include_superseded: keep superseded records (demoted) or drop them.
        metadata: a parsed filter on the occurrences' metadata (:func:`titans_agent.filters.parse_filter`).
    """

    kinds: Sequence[str] | None = None
    source: str | None = None
    session_id: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    as_of: dt.datetime | None = None
    include_superseded: bool = True
    metadata: FilterNode | None = None

    @property
    def restricts(self) -> bool:
        """Whether any occurrence filter applies."""
        fields = (self.kinds, self.source, self.session_id, self.since, self.until, self.as_of, self.metadata)
        return any(v is not None for v in fields)

    @property
    def latest(self) -> dt.datetime | None:
        """The latest time an occurrence may have (``until`` or ``as_of``, the earlier)."""
        return min((t for t in (self.as_of, self.until) if t is not None), default=None)


def recall_filters(
    kinds: Any, source: Any, session_id: Any, since: Any, until: Any, as_of: Any, include_superseded: Any, filter: Any
) -> RecallFilters:
    """The filters of :meth:`MemoryAgent.recall`, checked and in normal form.

    Raises:
        InvalidInputError: unknown kinds, a bad source, session id or time, or a malformed filter.
    """
    return RecallFilters(
        kinds=check_kinds(kinds),
        source=None if source is None else check_name(source, "source"),
        session_id=None if session_id is None else check_name(session_id, "session_id"),
        since=None if since is None else as_utc(since),
        until=None if until is None else as_utc(until),
        as_of=None if as_of is None else as_utc(as_of),
        include_superseded=bool(include_superseded),
        metadata=parse_filter(filter),
    )


def recall(
    ctx: PipelineContext,
    *,
    namespace: str,
    query: str,
    k: int,
    filters: RecallFilters,
    missing_ok: bool = False,
    count_tokens: Callable[[str], int] | None = None,
) -> list[Hit]:
    """The ``k`` records that best answer ``query``, best first (see the module docstring).

    Args:
        ctx: the agent's context (its ``config.retrieval`` ranks).
        namespace: checked name.
        query: non-blank text.
        k: at least 1.
        filters: what may be returned.
        missing_ok: a namespace that does not exist gives no hits (the default one always does).
        count_tokens: the embedder's token count of a text, for ``dense_coverage`` (None: the
            dense weight is not scaled).

    Raises:
        InvalidInputError: ``query`` is longer than ``ctx.config.max_text_chars`` (nothing is
            embedded).
        NamespaceNotFoundError: the namespace does not exist (in the snapshot read), is not the
            default one, and ``missing_ok`` is False.
        StoreError: the embedder returned a non-finite query embedding.
    """
    query = check_query(query, ctx.config.max_text_chars)  # before anything embeds it
    runtimes, config = ctx.runtimes, ctx.config.retrieval
    q_np = ctx.embedder.embed([query])
    if not np.isfinite(q_np).all():
        raise StoreError("the embedder returned a non-finite query embedding")
    q = torch.from_numpy(q_np).to(runtimes.device)
    with ctx.store.snapshot_session() as s:
        rt = runtimes.in_snapshot(s, namespace)
        if rt is None:
            require_namespace(namespace, False, missing_ok)  # raises unless a missing one reads as empty
            return []
        if rt.ids.shape[0] == 0:
            return []
        allowed, ok_occ = None, None
        if filters.restricts:
            rows = repository.filtered_occurrences(
                s,
                rt.ns_id,
                kinds=filters.kinds,
                source=filters.source,
                session_id=filters.session_id,
                since=filters.since,
                until=filters.latest,
                metadata=filters.metadata,
            )
            allowed, ok_occ = {r for r, _ in rows}, {o for _, o in rows}
            if not allowed:
                return []
        n_cand = max(config.candidates, k)
        weights = {
            "lexical": config.lexical_weight if config.use_lexical else 0.0,
            "dense": config.dense_weight * _coverage(ctx, query, count_tokens) if config.use_dense else 0.0,
            "neural": config.neural_weight if config.use_neural else 0.0,
            "document": config.document_weight,
            "file": config.file_weight,
        }
        ranks: Ranks = {}
        signals: dict[str, SignalScores] = {}
        n_eligible = len(allowed) if allowed is not None else rt.ids.shape[0]
        code = rt.document_index(s).code if rt.chunking is not None else None
        has_code = code is not None and len(code) > 0
        # what the lexical and file signals read: without environment dumps where there is code (a
        # namespace without it reads every word, "Milk: 0.99" lines included, as before)
        words = without_environment(query) if has_code else query
        if weights["lexical"] > 0:
            lex = rt.lexical_index(s).search(lexical_terms(words), n_cand, within=allowed)
            rank_ids(ranks, "lexical", (rid for rid, _ in lex), allowed, n_cand)
            if config.fusion == "score":
                signals["lexical"] = SignalScores.sparse(dict(lex), n_eligible)
        if weights["document"] > 0 and rt.chunking is not None:  # the namespace has had documents
            doc_signal, doc_chunks = rt.document_index(s).signal(query, DOCUMENT_TOP)
            rank_ids(ranks, "document", doc_chunks, allowed, n_cand)
            if doc_signal is not None and config.fusion == "score":
                signals["document"] = doc_signal
        if weights["file"] > 0 and code is not None and has_code:  # the namespace has source code
            per_file = file_scores(rt.lexical_index(s), code, lexical_terms(words), path_mentions(words))
            if per_file.any():
                ids, values, mean, std, top_chunks = file_signal(per_file, code, FILE_TOP)
                rank_ids(ranks, "file", top_chunks, allowed, n_cand)
                if config.fusion == "score":
                    signals["file"] = SignalScores(ScoreVector(ids, values), mean, std)
        by_score = config.fusion == "score"
        state = runtimes.state_in(rt, s) if weights["neural"] > 0 else None
        vectors = _vector_signals(rt, state, q, ranks, weights, allowed, n_cand, by_score)
        runtimes.note_size(rt)  # the lexical index and the float16 copy count against the budget
        if by_score:
            signals.update(vectors)
            scores = fuse_standardised(signals, weights, ranks)
        else:
            scores = fuse_scores(ranks, weights, config.rrf_k)
        prior = code is not None and config.auxiliary_weight < 1.0 and not asks_for_auxiliary(query)
        if prior and code is not None:
            scores = demote_auxiliary(scores, code, config.auxiliary_weight)  # tests, docs, examples
        demote_others = config.other_person_weight < 1.0 and about_oneself(query)
        expand = config.neighbour_weight > 0 and bool(scores)
        grouped = config.session_weight > 0 and bool(scores)
        snap = read_recall_context(
            s,
            rt.ns_id,
            scores,
            neighbour_kinds=config.neighbour_kinds if expand else None,
            group_kinds=config.neighbour_kinds if grouped else None,
            as_of=filters.as_of,
            texts_of_scored=True,  # questions are demoted; clause-level links are read from the texts
            texts_of_pool=(expand or grouped) and config.neighbour_min_words > 0,
            known=rt.content_words.keys(),
        )
        if prior and code is not None:  # and the chunks that only import
            scores = demote_import_blocks(scores, code, snap.texts, config.auxiliary_weight)
        asked = query_relations(query)
        all_links = UpdateLinks(snap.superseded_by, snap.supersedes)
        links = all_links.in_scope(snap.texts, asked)  # what ranks: a partial link only when asked about
        # the chatbot's rules (questions, echoes, the relation asked) are for conversations: a
        # namespace that holds documents, source code too (an issue's "I get an error when ..."),
        # ranks a first-person question ("what happens to my patent licence if I sue ...") by its
        # passages alone
        documents = rt.chunking is not None and rt.document_index(s).all_documents > 0
        about_me = asks_about_asker(query) and not documents

        def roles(ids: Iterable[int]) -> dict[int, list[str | None]]:
            return {r: [p[1] for p in ps] for r, ps in repository.occurrence_places(s, ids).items()}

        # who said it: for a question about the asker the assistant's echoes come after the user's
        # words; for a question about what the assistant said, the user's requests come after its replies
        demote_assistant: bool | None = None  # None: neither side
        if config.reply_weight < 1.0 and not documents:
            if asks_what_assistant_said(query):
                demote_assistant = False
            elif about_me and not addresses_assistant(query):
                demote_assistant = True
        said_by = roles if demote_assistant is not None else None

        fused = _score(
            rt, scores, snap, links, asked if about_me else None, config, filters, allowed,
            query if demote_others else None, k,
            past=asks_about_past(query), said_by=said_by, demote_assistant=bool(demote_assistant),
        )  # fmt: skip
        if not fused:
            return []
        records, places = repository.records_with_occurrences(s, [rid for _, rid in fused])
    shown = all_links.annotated(snap.texts)  # what a hit says: every link, and the clauses it replaced
    return build_hits(fused, ranks, records, places, filters.kinds, filters.source, filters.session_id, shown, ok_occ)


def _coverage(ctx: PipelineContext, query: str, count_tokens: Callable[[str], int] | None) -> float:
    """The share of the query's tokens the embedder reads, ``min(1, max_tokens / tokens)``, when
    ``RetrievalConfig.dense_coverage`` is on and a counter is given; else 1."""
    if not ctx.config.retrieval.dense_coverage or count_tokens is None:
        return 1.0
    try:
        n = count_tokens(query)
    except InvalidInputError:  # an embedder without a fast tokenizer cannot count: not scaled
        return 1.0
    return 1.0 if n <= 0 else min(1.0, ctx.embedder.max_tokens / n)


def lexical_terms(query: str) -> list[str]:
    """The index terms a query looks up: its words without stopwords
    (:func:`titans_agent.text.query_terms`), each analysed as the records are
    (:func:`titans_agent.text.index_terms`: ``render_progress`` looks up ``render`` and
    ``progress``), distinct, in order; at most :data:`~titans_agent.text.MAX_QUERY_TERMS`."""
    return list(dict.fromkeys(t for w in query_terms(query) for t in index_terms(w)))[:MAX_QUERY_TERMS]


def _vector_signals(
    rt: Runtime,
    state: MemoryState | None,
    q: torch.Tensor,
    ranks: Ranks,
    weights: dict[str, float],
    allowed: set[int] | None,
    n_cand: int,
    with_scores: bool = True,
) -> dict[str, SignalScores]:
    """The dense signal (cosine of the query ``(1, d)`` to the record embeddings) and the neural one
    (cosine of the memory read-out ``M*(q)`` under ``state``, eq. 15, to the records' value
    projections; ``state`` is needed only when the neural weight is positive): their
    ranks into ``ranks`` and, when ``with_scores`` (score fusion), each signal's scores of every
    allowed record with their mean and standard deviation (empty otherwise).

    With ``allowed``, only those records rank: a few (at most an eighth of the index) are scored
    alone, their rows gathered, so a selective filter costs less than none; more are masked."""
    ids, emb, values, mask = rt.ids, rt.emb, rt.values, None
    if allowed is not None:
        wanted = np.sort(np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
        pos = np.searchsorted(rt.ids, wanted)  # rt.ids is ascending
        pos = pos[pos < rt.ids.shape[0]]  # ids past the last one: at the end, wanted being sorted
        pos = pos[rt.ids[pos] == wanted[: pos.shape[0]]]  # ids the index does not hold
        if pos.shape[0] * 8 <= rt.ids.shape[0]:
            rows = torch.from_numpy(pos).to(q.device)
            # advanced indexing, not index_select: ~10x faster on CPU for a few thousand rows
            ids, emb, values = rt.ids[pos], rt.emb[rows], rt.values[rows]
        else:
            keep = np.zeros(rt.ids.shape[0], dtype=bool)
            keep[pos] = True
            mask = torch.from_numpy(keep).to(q.device)
    out: dict[str, SignalScores] = {}
    with torch.no_grad():
        if weights["dense"] > 0:
            if mask is None and emb is rt.emb and rt.emb.shape[0] >= HALF_SCAN_ROWS:
                norm = q[0].norm()  # a unit query in float16 (an embedder may break the contract)
                unit = (q[0] / norm.clamp_min(1e-30)).to(torch.float16)
                sims = (rt.half_emb() @ unit).float() * norm  # half the bytes to read
            else:
                sims = emb @ q[0]
            rank_by_similarity(ranks, "dense", ids, sims, mask, n_cand)
            if with_scores:
                out["dense"] = SignalScores.dense(ids, sims.detach().cpu().numpy(), _numpy(mask))
        if weights["neural"] > 0:
            assert state is not None
            y = rt.memory.read(state, q.to(rt.memory.dtype)).float()
            y = torch.nn.functional.normalize(y, dim=-1)[0]
            sims = values @ y
            rank_by_similarity(ranks, "neural", ids, sims, mask, n_cand)
            if with_scores:
                out["neural"] = SignalScores.dense(ids, sims.detach().cpu().numpy(), _numpy(mask))
    return out


def _numpy(x: torch.Tensor | None) -> np.ndarray | None:
    return None if x is None else x.detach().cpu().numpy()


def _demote_replies_on_top(
    scores: dict[int, float],
    said_by: Callable[[Iterable[int]], dict[int, list[str | None]]],
    weight: float,
    k: int,
    assistant: bool = True,
) -> dict[int, float]:
    """:func:`demote_replies` over the records that can reach the ``k`` best: the roles of the best
    ``4k`` are read, then of whatever a demotion lets rise into the ``k`` best, until the ``k`` best
    are all known (a demotion only lowers scores): a few dozen roles where the two sides mix, more
    (rounds of ``4k``) where most candidates are of the demoted side, never every candidate's
    unless they all are. ``assistant``: which side is demoted (:func:`demote_replies`)."""
    checked: set[int] = set()
    width = max(4 * k, 40)
    while True:
        order = [rid for _, rid in top_k(scores, width + len(checked))]
        fresh = [rid for rid in order if rid not in checked]
        if not fresh or all(rid in checked for rid in order[:k]):
            return scores
        checked.update(fresh)
        scores = demote_replies(scores, said_by(fresh), weight, assistant)


def _score(
    rt: Runtime,
    scores: dict[int, float],
    snap: Snapshot,
    links: UpdateLinks,
    asked: frozenset[str] | None,
    config: RetrievalConfig,
    filters: RecallFilters,
    allowed: set[int] | None,
    asker_query: str | None,
    k: int,
    past: bool = False,
    said_by: Callable[[Iterable[int]], dict[int, list[str | None]]] | None = None,
    demote_assistant: bool = True,
) -> list[tuple[float, int]]:
    """Demotions and locality over the fused scores (pure but for the content-word cache);
    the ``k`` best ``(score, record id)``. ``asker_query``: the query when it is about the asker
    (records about other people are demoted), else None."""
    # demoted before the expansion, so a superseded statement lifts its neighbours less
    # a question about the past ("When did I move?") ranks what was true then as it ranks the rest
    weight = 1.0 if past else config.superseded_weight
    # include_superseded=False drops what is superseded as a whole; a record still partly current
    # (stale clauses) is kept, demoted, below its successor
    dropped = links.whole_only() if not filters.include_superseded else UpdateLinks({}, {})
    if dropped.superseded_by:
        scores = demote_superseded(scores, dropped, weight, True, allowed)
    scores = demote_superseded(scores, links, weight, False, allowed)
    rt.learn_content_words(snap.texts)
    if asker_query is not None:
        scores = demote_other_people(scores, snap.texts, config.other_person_weight, asker_query)
    if asked is not None:
        scores = favour_relations(scores, snap.texts, asked, config.relation_weight)
    share = None
    if (snap.neighbours or snap.groups) and config.neighbour_min_words > 0:
        pool = set(scores) | {n for r in scores for n in snap.neighbours.get(r, ())}
        counts = {rid: rt.content_words[rid] for rid in pool if rid in rt.content_words}
        share = neighbour_shares(counts, config.neighbour_min_words)
    # a content-free turn ("ok") takes no share of its session's or its neighbours' scores
    scores = add_group_bonus(scores, snap.groups, config.session_weight, share)
    scores = expand_neighbours(scores, snap.neighbours, config.neighbour_weight, allowed, share)
    # after the locality bonuses: a stored question still lifts the answer next to it, and the
    # echo of a question about the asker is demoted whatever lifted it
    if asked is not None and config.question_weight < 1.0:  # a question about the asker
        scores = demote_questions(scores, snap.texts, config.question_weight)
    if said_by is not None:  # the side the question is not about (see recall)
        scores = _demote_replies_on_top(scores, said_by, config.reply_weight, k, demote_assistant)
    scores = {rid: v for rid, v in scores.items() if rid not in dropped.superseded_by}
    if weight < 1.0:  # 1.0: supersession does not touch the ranking
        scores = successors_above(scores, links, allowed)
    return top_k(scores, k)
