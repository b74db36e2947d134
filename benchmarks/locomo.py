"""LoCoMo evidence retrieval: titans-agent's recall against BM25, MiniLM cosine and their fusion.

Data: the LoCoMo development split (``../shared/data/locomo/locomo_dev.json``, 5 conversations,
CC BY-NC 4.0: evaluation only; nothing of it is written into the package). For every question of
categories 1-4 (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop) the stored turns of its own
conversation are ranked, and the evidence turns (``dia_id``) are scored:

- R@k: the fraction of the question's evidence turns in the top k, averaged over questions;
- MRR: 1 / rank of the first evidence turn (0 when none is in the top ``--depth``, default 100).

Evidence strings are split on ';' (one string holds "D8:6; D9:17"); ids that name no turn of the
conversation are dropped and listed; questions left without evidence (four category-3 questions
have none) are skipped and counted.

Retrievers, all in the same run over the same turns (turn text = the turn plus "[image: caption]"
for image turns):

- baselines, each question ranked against all of its conversation's turns written
  "[session date] speaker: text": BM25 (``rank_bm25.BM25Okapi`` over lowercased ``\\w+`` tokens,
  English stopwords removed, as in the issue's probe), all-MiniLM-L6-v2 cosine (the agent's own
  embedder), their reciprocal-rank fusion (k = 60), and the strongest non-neural pipeline: that
  fusion with neighbour expansion (a turn adds a share of its best adjacent turn's fused score in
  the same session), its two weights chosen leave-one-conversation-out (LOCO);
- titans-agent: every conversation is ingested once into its own namespace of ONE database with
  ``MemoryAgent.add_turns`` (session = LoCoMo session, role = speaker, timestamp = session date,
  ``dia_id`` in the metadata); the database is then reopened with each ``RetrievalConfig`` ablation
  (no re-ingest) and ``recall`` ranks the turns. A record that holds several turns (an exact repeat
  such as "Thanks!" is stored once) counts as all of them, in conversation order. Rows: the
  default, each signal off in turn (lexical, dense, locality, update demotion), the untrained
  neural memory, and a LOCO-tuned row over a grid of ``neighbour_weight`` x ``lexical_weight``;
- the meta-learned neural memory (``MemoryConfig(init="meta-learned")``, the parameters shipped in
  ``titans_agent/data``, trained by ``benchmarks/train_memory.py`` on Python docstrings, never on
  LoCoMo): a second database ingested with it (a namespace keeps the parameters it was created
  with); rows with the neural signal added to the default pipeline at weight 0.5 and at a weight
  chosen leave-one-conversation-out from ``NEURAL_GRID`` (the same for the untrained memory), and
  the neural signal alone.

Also reported: a paired bootstrap 95% interval of R@10 differences (titans-agent minus BM25 and
minus the strongest baseline, over the same questions; the meta-learned neural rows also minus the
default and minus the untrained neural rows), how many evidence turns were lost at write time with
the default settings, and the distribution of write-time surprise under both initialisations.
Embeddings are cached under the system temp folder (``titans-agent-locomo-cache``, never in the
repository), so a rerun embeds nothing again.

Prints a markdown table and writes ``<out>/locomo.md`` and ``<out>/locomo.png``.

    python benchmarks/locomo.py [--data PATH] [--conversations N] [--out DIR] [--db-dir DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared/data/locomo/locomo_dev.json"
DATE_FORMAT = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
RRF_K = 60
_TOKEN = re.compile(r"\w+")


# ---------------------------------------------------------------------------------------- data
@dataclass
class Turn:
    """One LoCoMo turn."""

    dia_id: str
    session: str  # "session_3"
    date: str  # the session's date string as in the data
    timestamp: dt.datetime | None
    speaker: str
    text: str  # the turn, plus " [image: caption]" for image turns

    @property
    def baseline_text(self) -> str:
        """The text the baselines rank: "[session date] speaker: text"."""
        return f"[{self.date}] {self.speaker}: {self.text}"


@dataclass
class Question:
    """A question of categories 1-4 with its cleaned evidence."""

    question: str
    category: int
    evidence: list[str]  # valid dia_ids, in order, no repeats


@dataclass
class Conversation:
    """A LoCoMo sample: its turns, scored questions, and what was left out."""

    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (question, reason)
    dropped_ids: list[tuple[str, str]] = field(default_factory=list)  # (question, bad id)


def parse_date(text: str | None) -> dt.datetime | None:
    """A session date ("1:56 pm on 8 May, 2023") as a naive datetime, or None if it does not parse."""
    if not text:
        return None
    try:
        return dt.datetime.strptime(text.strip(), DATE_FORMAT)
    except ValueError:
        return None


def parse_evidence(evidence: Iterable[str], valid_ids: set[str] | frozenset[str]) -> tuple[list[str], list[str]]:
    """Clean a question's evidence list.

    Each string is split on ';' (malformed strings hold several ids, e.g. "D8:6; D9:17") and
    stripped. Returns ``(ids, dropped)``: the ids that name a turn in ``valid_ids`` (first
    occurrence order, no repeats) and the non-empty ids that do not.
    """
    ids: list[str] = []
    dropped: list[str] = []
    for item in evidence:
        for part in str(item).split(";"):
            part = part.strip()
            if not part:
                continue
            if part in valid_ids:
                if part not in ids:
                    ids.append(part)
            else:
                dropped.append(part)
    return ids, dropped


def conversation_turns(conv: dict) -> list[Turn]:
    """The turns of a LoCoMo ``conversation`` dict, sessions in numeric order."""
    keys = sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
    turns = []
    for key in keys:
        date = conv.get(f"{key}_date_time", "") or ""
        ts = parse_date(date)
        for t in conv[key]:
            text = t["text"]
            if t.get("blip_caption"):
                text = f"{text} [image: {t['blip_caption']}]"
            turns.append(Turn(t["dia_id"], key, date, ts, t["speaker"], text))
    return turns


def load_conversations(path: str | Path, limit: int | None = None) -> list[Conversation]:
    """Read a LoCoMo JSON file: the first ``limit`` samples (all when None), categories 1-4 only."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    out = []
    for sample in data[:limit] if limit else data:
        turns = conversation_turns(sample["conversation"])
        valid = frozenset(t.dia_id for t in turns)
        conv = Conversation(sample["sample_id"], turns, [])
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            ids, dropped = parse_evidence(qa.get("evidence") or [], valid)
            conv.dropped_ids.extend((qa["question"], d) for d in dropped)
            if not ids:
                reason = "empty evidence" if not dropped else "no valid evidence id"
                conv.skipped.append((qa["question"], reason))
                continue
            conv.questions.append(Question(qa["question"], int(qa["category"]), ids))
        out.append(conv)
    return out


# ------------------------------------------------------------------------------------- metrics
def recall_at_k(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """Fraction of ``evidence`` found in the first ``k`` of ``ranked`` (0 for empty evidence)."""
    ev = set(evidence)
    if not ev:
        return 0.0
    return len(ev & set(ranked[:k])) / len(ev)


def mrr(ranked: Sequence[str], evidence: Sequence[str]) -> float:
    """Reciprocal rank (1-based) of the first evidence id in ``ranked``; 0 when none is there."""
    ev = set(evidence)
    for i, rid in enumerate(ranked, 1):
        if rid in ev:
            return 1.0 / i
    return 0.0


def _adjacent_ids(dia_id: str) -> set[str]:
    """``dia_id`` and the ids of the turns just before and after it ("D3:5" -> D3:4, D3:5, D3:6)."""
    m = re.fullmatch(r"(D\d+):(\d+)", dia_id)
    if not m:
        return {dia_id}
    return {f"{m.group(1)}:{int(m.group(2)) + d}" for d in (-1, 0, 1)}


def tolerant_recall(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """R@k where an evidence turn also counts as found when a turn next to it (same session, +-1) is in
    the first ``k``: LoCoMo's evidence citations are sometimes one turn off."""
    if not evidence:
        return 0.0
    top = set(ranked[:k])
    return sum(bool(_adjacent_ids(e) & top) for e in evidence) / len(evidence)


def dedupe(ids: Iterable[str]) -> list[str]:
    """``ids`` without repeats, first occurrence kept."""
    seen: set[str] = set()
    return [x for x in ids if not (x in seen or seen.add(x))]


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[str]:
    """Reciprocal-rank fusion: score(d) = sum over rankings of 1 / (k + rank); ties by first appearance."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for r, d in enumerate(ranking, 1):
            scores[d] = scores.get(d, 0.0) + 1.0 / (k + r)
    order = {d: i for i, d in enumerate(dedupe(d for ranking in rankings for d in ranking))}
    return sorted(scores, key=lambda d: (-scores[d], order[d]))


@dataclass
class Scores:
    """Per-question metrics of one retriever."""

    rows: list[tuple[int, float, float, float]] = field(default_factory=list)  # (category, R@5, R@10, MRR)
    groups: list[str] = field(default_factory=list)  # the conversation of each row
    tolerant: list[float] = field(default_factory=list)  # R@10 with +-1-turn tolerance

    def add(self, category: int, ranked: Sequence[str], evidence: Sequence[str], group: str = "") -> None:
        self.rows.append(
            (category, recall_at_k(ranked, evidence, 5), recall_at_k(ranked, evidence, 10), mrr(ranked, evidence))
        )
        self.groups.append(group)
        self.tolerant.append(tolerant_recall(ranked, evidence, 10))

    def r10(self) -> np.ndarray:
        """Per-question R@10, in question order."""
        return np.array([r[2] for r in self.rows])

    def mrrs(self) -> np.ndarray:
        """Per-question reciprocal rank, in question order."""
        return np.array([r[3] for r in self.rows])

    def subset(self, keep: Callable[[str], bool]) -> Scores:
        """The rows of the conversations ``keep`` accepts."""
        out = Scores()
        for row, g, tol in zip(self.rows, self.groups, self.tolerant):
            if keep(g):
                out.rows.append(row)
                out.groups.append(g)
                out.tolerant.append(tol)
        return out

    def summary(self, category: int | None = None) -> dict[str, float]:
        rows = [r for r in self.rows if category is None or r[0] == category]
        if not rows:
            return {"n": 0, "r5": float("nan"), "r10": float("nan"), "mrr": float("nan")}
        a = np.array([r[1:] for r in rows])
        tol = [x for r, x in zip(self.rows, self.tolerant) if category is None or r[0] == category]
        return {
            "n": len(rows),
            "r5": a[:, 0].mean(),
            "r10": a[:, 1].mean(),
            "mrr": a[:, 2].mean(),
            "r10_tol": float(np.mean(tol)),
        }


def tokenize(text: str) -> list[str]:
    """Lowercased ``\\w+`` tokens without English stopwords (the BM25 baseline's tokenizer).

    Stopwords matter: rank-bm25 gives every query word a positive weight, so "what", "did" and "the"
    rank turns full of function words. Without removing them this baseline scored R@10 .556 on the
    dev set where the issue's probe measured .602; with them removed it is .605 (.601 without the
    image captions the issue's probe left out).
    """
    from titans_agent.text import STOPWORDS

    return [w for w in _TOKEN.findall(text.lower()) if w not in STOPWORDS]


# ------------------------------------------------------------------------------------- running
CACHE_DIR = Path(tempfile.gettempdir()) / "titans-agent-locomo-cache"
NEIGHBOUR_GRID = (0.0, 0.25, 0.5)  # the RRF baseline's grid
LEXICAL_GRID = (1.0, 1.5, 2.0)
NEURAL_GRID = (0.1, 0.25, 0.5)  # neural weight beside dense 1.0 under score fusion
# titans-agent's grid (score fusion): lexical weight x session weight x neighbour weight
AGENT_LEXICAL_GRID = (0.3, 0.45, 0.7)
AGENT_SESSION_GRID = (0.2, 0.4, 0.6)
AGENT_NEIGHBOUR_GRID = (0.1, 0.2, 0.3)
FUSION_GRID = (0.3, 0.5, 0.7, 1.0, 1.5)  # the score-fusion baseline's BM25 weight beside MiniLM 1.0


class CachedEmbedder:
    """The embedder with an on-disk cache of its vectors (``CACHE_DIR``, outside the repository):
    reruns embed nothing they embedded before. Same vectors, same attributes as the wrapped one."""

    def __init__(
        self, inner, cache_dir: Path = CACHE_DIR, tag: str = "locomo", save_every: int | None = None
    ) -> None:
        """``save_every``: also save after that many new vectors (long runs keep their work)."""
        self.inner = inner
        self.name, self.dim, self.max_tokens, self.tokenizer = inner.name, inner.dim, inner.max_tokens, inner.tokenizer
        cache_dir.mkdir(parents=True, exist_ok=True)
        self.path = cache_dir / f"{tag}-{re.sub(r'[^A-Za-z0-9_.-]', '_', inner.name)}.npz"
        self.cache: dict[str, np.ndarray] = {}
        if self.path.is_file():
            with np.load(self.path) as z:
                self.cache = dict(zip(z["keys"].tolist(), z["vecs"]))
        self.dirty, self.save_every = 0, save_every

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [hashlib.sha1(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts]
        missing = [i for i, key in enumerate(keys) if key not in self.cache]
        if missing:
            for i, v in zip(missing, self.inner.embed([texts[i] for i in missing])):
                self.cache[keys[i]] = v
            self.dirty += len(missing)
            if self.save_every is not None and self.dirty >= self.save_every:
                self.save()
        return np.stack([self.cache[key] for key in keys]).astype(np.float32)

    def save(self) -> None:
        if self.dirty:
            keys = list(self.cache)
            tmp = self.path.with_suffix(f".{os.getpid()}.npz")
            np.savez(tmp, keys=np.array(keys), vecs=np.stack([self.cache[k] for k in keys]))
            os.replace(tmp, self.path)  # atomic: a concurrent reader never sees half a file
            self.dirty = 0


def agent_configs() -> dict[str, object]:
    """The titans-agent retrieval ablations, by label (each signal off in turn)."""
    from titans_agent import AgentConfig, RetrievalConfig

    R = RetrievalConfig
    return {
        DEFAULT_ROW: AgentConfig(),
        "titans-agent rank fusion (the previous default)": AgentConfig(
            retrieval=R(fusion="rank", lexical_weight=1.5, neighbour_weight=0.25, session_weight=0.0)
        ),
        "titans-agent without lexical": AgentConfig(retrieval=R(use_lexical=False)),
        "titans-agent without dense": AgentConfig(retrieval=R(use_dense=False)),
        "titans-agent without session locality": AgentConfig(retrieval=R(session_weight=0.0)),
        "titans-agent without locality": AgentConfig(retrieval=R(neighbour_weight=0.0, session_weight=0.0)),
        "titans-agent without update demotion": AgentConfig(retrieval=R(superseded_weight=1.0)),
        "titans-agent without question demotion": AgentConfig(retrieval=R(question_weight=1.0)),
        "titans-agent neural only (untrained)": AgentConfig(retrieval=NEURAL_ONLY),
    }


DEFAULT_ROW = "titans-agent default (in-fold: chosen on these conversations)"
TUNED_ROW = "titans-agent tuned (LOCO, out of fold)"
FUSION_ROW = "BM25 + MiniLM score fusion (one weight, LOCO)"
RRF_ROW = "BM25 + MiniLM RRF + neighbours (tuned LOCO)"


NEURAL_ONLY = dict(
    use_lexical=False, use_dense=False, use_neural=True, neural_weight=1.0, neighbour_weight=0.0, session_weight=0.0
)


def neural_configs() -> dict[object, object]:
    """The neural signal on top of the default pipeline: weight -> config (NEURAL_GRID, for the
    leave-one-conversation-out choice), and "only" -> the neural signal alone."""
    from titans_agent import AgentConfig, RetrievalConfig

    R = RetrievalConfig
    out: dict[object, object] = {w: AgentConfig(retrieval=R(use_neural=True, neural_weight=w)) for w in NEURAL_GRID}
    out["only"] = AgentConfig(retrieval=NEURAL_ONLY)
    return out


def surprise_summary(values: Sequence[float], threshold: float) -> str:
    """Quantiles of write-time surprise and the share below the write threshold."""
    a = np.asarray(values, dtype=float)
    q = np.percentile(a, [5, 25, 50, 75, 95])
    return (
        f"p5 {q[0]:.3f}, p25 {q[1]:.3f}, median {q[2]:.3f}, p75 {q[3]:.3f}, p95 {q[4]:.3f}; "
        f"below write_threshold {threshold}: {np.mean(a < threshold):.1%} of {len(a)} turns"
    )


def tuning_configs() -> dict[tuple[float, float, float], object]:
    """(lexical_weight, session_weight, neighbour_weight) -> config: the grid tuned
    leave-one-conversation-out (dense weight 1, score fusion)."""
    from titans_agent import AgentConfig, RetrievalConfig

    return {
        (lw, sw, nw): AgentConfig(retrieval=RetrievalConfig(lexical_weight=lw, session_weight=sw, neighbour_weight=nw))
        for lw in AGENT_LEXICAL_GRID
        for sw in AGENT_SESSION_GRID
        for nw in AGENT_NEIGHBOUR_GRID
    }


def loco_select(grid: dict[object, Scores], groups: Sequence[str]) -> tuple[Scores, dict[str, object]]:
    """Leave-one-conversation-out: for each conversation, the grid point with the best mean R@10 on
    the others; returns the held-out rows of those choices and the choice per conversation."""
    out, chosen = Scores(), {}
    for g in groups:
        best = max(grid, key=lambda key, g=g: grid[key].subset(lambda x, g=g: x != g).r10().mean())
        chosen[g] = best
        held = grid[best].subset(lambda x, g=g: x == g)
        out.rows.extend(held.rows)
        out.groups.extend(held.groups)
        out.tolerant.extend(held.tolerant)
    return out, chosen


def paired_bootstrap(
    a: Scores, b: Scores, n: int = 10_000, seed: int = 0, metric: str = "r10"
) -> tuple[float, float, float]:
    """Mean of R@10(a) - R@10(b) (or of the reciprocal ranks, ``metric="mrr"``) over the same
    questions and its 95% percentile bootstrap interval."""
    d = a.r10() - b.r10() if metric == "r10" else a.mrrs() - b.mrrs()
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(n, len(d)))].mean(axis=1)
    return float(d.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def neighbour_expand(scores: np.ndarray, sessions: Sequence[str], weight: float) -> np.ndarray:
    """``s'(i) = s(i) + weight * max(s(i-1), s(i+1))`` over adjacent turns of the same session."""
    prev = np.r_[0.0, scores[:-1]] * np.r_[False, np.array(sessions[1:]) == np.array(sessions[:-1])]
    nxt = np.r_[scores[1:], 0.0] * np.r_[np.array(sessions[:-1]) == np.array(sessions[1:]), False]
    return scores + weight * np.maximum(np.maximum(prev, nxt), 0.0)


def run_baselines(convs: list[Conversation], embedder, depth: int) -> dict[str, Scores]:
    """BM25, MiniLM cosine, their RRF, and the strongest non-neural pipeline (RRF with neighbour
    expansion, weights tuned leave-one-conversation-out), each question against its own turns."""
    from rank_bm25 import BM25Okapi

    names = ("BM25 (rank-bm25)", "all-MiniLM-L6-v2 cosine", "RRF of BM25 + MiniLM (k=60)")
    out = {n: Scores() for n in names}
    grid: dict[tuple[float, float], Scores] = {(nw, lw): Scores() for nw in NEIGHBOUR_GRID for lw in LEXICAL_GRID}
    fusion: dict[float, Scores] = {w: Scores() for w in FUSION_GRID}
    for conv in convs:
        ids = [t.dia_id for t in conv.turns]
        sessions = [t.session for t in conv.turns]
        texts = [t.baseline_text for t in conv.turns]
        bm25 = BM25Okapi([tokenize(x) for x in texts])
        doc_emb = embedder.embed(texts)
        q_emb = embedder.embed([q.question for q in conv.questions])
        for q, qe in zip(conv.questions, q_emb):
            lex_scores, den_scores = bm25.get_scores(tokenize(q.question)), doc_emb @ qe
            lex_order = np.argsort(-lex_scores, kind="stable")
            den_order = np.argsort(-den_scores, kind="stable")
            for w in FUSION_GRID:
                fused = w * standardise(lex_scores) + standardise(den_scores)
                ranking = [ids[i] for i in np.argsort(-fused, kind="stable")[:depth]]
                fusion[w].add(q.category, ranking, q.evidence, conv.sample_id)
            lex, den = [ids[i] for i in lex_order], [ids[i] for i in den_order]
            for name, ranking in zip(names, (lex, den, rrf([lex, den]))):
                out[name].add(q.category, ranking[:depth], q.evidence, conv.sample_id)
            lex_rank, den_rank = np.empty(len(ids)), np.empty(len(ids))
            lex_rank[lex_order], den_rank[den_order] = np.arange(1, len(ids) + 1), np.arange(1, len(ids) + 1)
            for nw, lw in grid:
                fused = neighbour_expand(lw / (RRF_K + lex_rank) + 1.0 / (RRF_K + den_rank), sessions, nw)
                ranking = [ids[i] for i in np.argsort(-fused, kind="stable")[:depth]]
                grid[(nw, lw)].add(q.category, ranking, q.evidence, conv.sample_id)
    tuned, chosen = loco_select(grid, [c.sample_id for c in convs])
    out[RRF_ROW] = tuned
    print(f"  RRF baseline, LOCO choices (neighbour weight, BM25 weight): {chosen}", flush=True)
    out[FUSION_ROW], chosen = loco_select(fusion, [c.sample_id for c in convs])
    print(f"  score-fusion baseline, LOCO choices (BM25 weight): {chosen}", flush=True)
    return out


def standardise(x: np.ndarray) -> np.ndarray:
    """``(x - mean) / std`` over a conversation's turns (0 where all are equal)."""
    sd = float(x.std())
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x, dtype=float)


def ingest(
    convs: list[Conversation], db: Path, embedder, config=None, surprises: list[float] | None = None
) -> tuple[dict[str, dict[int, list[str]]], float, int, int]:
    """Write every conversation into its own namespace; returns record id -> dia_ids per namespace,
    the seconds, and how many evidence turns were lost at write time (merged into a record of
    other words, or no record) out of how many. Each turn's write-time surprise is appended to
    ``surprises`` when given."""
    from sqlalchemy import func, select

    from titans_agent import MemoryAgent
    from titans_agent.store import Supersession

    owners: dict[str, dict[int, list[str]]] = {}
    lost = n_evidence = 0
    t0 = time.perf_counter()
    with MemoryAgent.open(db, config, embedder=embedder) as agent:
        for conv in convs:
            turns = [
                {
                    "session_id": t.session,
                    "role": t.speaker,
                    "content": t.text,
                    "timestamp": t.timestamp,
                    "metadata": {"dia_id": t.dia_id},
                }
                for t in conv.turns
            ]
            results = agent.add_turns(turns, namespace=conv.sample_id)
            if surprises is not None:
                surprises.extend(r.surprise for r in results)
            own: dict[int, list[str]] = {}
            for t, r in zip(conv.turns, results):
                own.setdefault(r.record_id, []).append(t.dia_id)
            owners[conv.sample_id] = own
            evidence = {e for q in conv.questions for e in q.evidence}
            n_evidence += len(evidence)
            lost += sum(
                t.dia_id in evidence and (r.record_id < 0 or r.decision == "merged")
                for t, r in zip(conv.turns, results)
            )
            print(f"  ingested {conv.sample_id}: {len(turns)} turns, {len(own)} records", flush=True)
        with agent.store.session() as s:
            links = s.execute(select(func.count()).select_from(Supersession)).scalar_one()
        print(f"  supersession links made at write time: {links}", flush=True)
    return owners, time.perf_counter() - t0, lost, n_evidence


def run_agent(convs, db, embedder, config, owners, depth: int) -> Scores:
    """Rank with ``recall`` under ``config`` (database reopened, nothing re-ingested)."""
    from titans_agent import MemoryAgent

    scores = Scores()
    with MemoryAgent.open(db, config, embedder=embedder) as agent:
        for conv in convs:
            own = owners[conv.sample_id]
            for q in conv.questions:
                hits = agent.recall(q.question, k=depth, namespace=conv.sample_id)
                ranked: list[str] = []
                for h in hits:
                    ranked.extend(own.get(h.id) or [])
                    if h.metadata.get("dia_id"):  # a later chunk of a long turn carries its turn's dia_id
                        ranked.append(h.metadata["dia_id"])
                scores.add(q.category, dedupe(ranked), q.evidence, conv.sample_id)
    return scores


# ------------------------------------------------------------------------------------- output
def table(results: dict[str, Scores]) -> str:
    head = (
        "| retriever | R@5 | R@10 | MRR | R@10 +-1 | "
        + " | ".join(f"R@10 c{c} {n}" for c, n in CATEGORIES.items())
        + " | n |"
    )
    lines = [head, "|" + "---|" * (6 + len(CATEGORIES))]
    for name, sc in results.items():
        s = sc.summary()
        cats = " | ".join(f"{sc.summary(c)['r10']:.3f}" for c in CATEGORIES)
        lines.append(
            f"| {name} | {s['r5']:.3f} | {s['r10']:.3f} | {s['mrr']:.3f} | {s['r10_tol']:.3f} | {cats} | {s['n']} |"
        )
    counts = " | ".join(str(next(iter(results.values())).summary(c)["n"]) for c in CATEGORIES)
    lines.append(f"| *questions per category* | | | | | {counts} | |")
    return "\n".join(lines)


def category_table(results: dict[str, Scores]) -> str:
    """R@5 / R@10 / MRR of every retriever in every category."""
    head = "| retriever | " + " | ".join(f"c{c} {n}" for c, n in CATEGORIES.items()) + " |"
    lines = [head, "|" + "---|" * (1 + len(CATEGORIES))]
    for name, sc in results.items():
        cells = []
        for c in CATEGORIES:
            m = sc.summary(c)
            cells.append(f"{m['r5']:.3f} / {m['r10']:.3f} / {m['mrr']:.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def chart(results: dict[str, Scores], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    vals = [results[n].summary()["r10"] for n in names]
    colors = ["#999999" if not n.startswith("titans-agent") else "#1f77b4" for n in names]
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(names) + 1.5))
    y = np.arange(len(names))[::-1]
    ax.barh(y, vals, color=colors)
    for yi, v in zip(y, vals):
        ax.text(v + 0.005, yi, f"{v:.3f}", va="center", fontsize=8)
    bm25 = results["BM25 (rank-bm25)"].summary()["r10"]
    ax.axvline(bm25, color="red", linestyle="--", linewidth=1, label=f"BM25 baseline ({bm25:.3f})")
    ax.set_yticks(y, names, fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("R@10 of evidence turns (categories 1-4)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=None, help="first N conversations (default all)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--db-dir", type=Path, default=None, help="folder of the temporary database")
    parser.add_argument("--depth", type=int, default=100, help="ranks scored for MRR (default 100)")
    parser.add_argument("--no-tuning", action="store_true", help="skip the leave-one-conversation-out grid")
    args = parser.parse_args(argv)
    if not Path(args.data).is_file():
        parser.error(f"no LoCoMo data at {args.data} (it lives in the project's shared/data/locomo folder)")

    import torch

    from titans_agent.config import DEFAULT_EMBEDDER
    from titans_agent.embeddings import load_embedder

    t_start = time.perf_counter()
    convs = load_conversations(args.data, args.conversations)
    n_q = sum(len(c.questions) for c in convs)
    skipped = [(c.sample_id, q, why) for c in convs for q, why in c.skipped]
    dropped = [(c.sample_id, q, d) for c in convs for q, d in c.dropped_ids]
    print(f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, {n_q} questions (categories 1-4)")
    for sid, q, why in skipped:
        print(f"  skipped ({why}) {sid}: {q}")
    for sid, q, d in dropped:
        print(f"  dropped evidence id {d!r} ({sid}: {q})")

    embedder = CachedEmbedder(load_embedder(DEFAULT_EMBEDDER))
    results: dict[str, Scores] = {}
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    results.update(run_baselines(convs, embedder, args.depth))
    timings["baselines"] = time.perf_counter() - t0
    print(f"  baselines: {timings['baselines']:.0f} s", flush=True)

    from titans_agent import AgentConfig, MemoryConfig

    groups = [c.sample_id for c in convs]
    surprise: dict[str, list[float]] = {"random": [], "meta-learned": []}
    neural_md: list[str] = []
    ci_extra: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(dir=args.db_dir) as tmp:
        db = Path(tmp) / "locomo.db"
        owners, timings["ingest"], lost, n_evidence = ingest(convs, db, embedder, surprises=surprise["random"])
        embedder.save()
        print(f"  ingest: {timings['ingest']:.0f} s; evidence turns lost at write time: {lost} of {n_evidence}")
        for name, cfg in agent_configs().items():
            t0 = time.perf_counter()
            results[name] = run_agent(convs, db, embedder, cfg, owners, args.depth)
            timings[name] = time.perf_counter() - t0
            print(f"  {name}: R@10 {results[name].summary()['r10']:.3f} ({timings[name]:.0f} s)", flush=True)
        embedder.save()
        grid: dict[object, Scores] = {}
        t0 = time.perf_counter()
        if not args.no_tuning:
            for key, cfg in tuning_configs().items():
                grid[key] = run_agent(convs, db, embedder, cfg, owners, args.depth)
                print(
                    f"  grid (lexical, session, neighbour weight) {key}: R@10 {grid[key].summary()['r10']:.3f}",
                    flush=True,
                )
            results[TUNED_ROW], chosen = loco_select(grid, groups)
            choices_md = "- titans-agent LOCO choices (lexical, session, neighbour weight): " + ", ".join(
                f"{g} {c}" for g, c in chosen.items()
            )
            print(choices_md)
        timings["tuning grid"] = time.perf_counter() - t0
        # The neural signal: untrained (this database) and meta-learned (a second one, ingested with
        # init="meta-learned"), its weight chosen leave-one-conversation-out.
        t0 = time.perf_counter()
        db_meta = Path(tmp) / "locomo-meta.db"
        meta_cfg = AgentConfig(memory=MemoryConfig(init="meta-learned"))
        owners_meta, t_ingest_meta, lost_meta, _ = ingest(convs, db_meta, embedder, meta_cfg, surprise["meta-learned"])
        print(f"  ingest (meta-learned): {t_ingest_meta:.0f} s; evidence turns lost: {lost_meta} of {n_evidence}")
        results["titans-agent default, meta-learned memory (neural off)"] = run_agent(
            convs, db_meta, embedder, AgentConfig(), owners_meta, args.depth
        )
        for label, path, own in (("untrained", db, owners), ("meta-learned", db_meta, owners_meta)):
            ngrid: dict[object, Scores] = {}
            for key, cfg in neural_configs().items():
                ngrid[key] = run_agent(convs, path, embedder, cfg, own, args.depth)
                print(f"  neural ({label}) {key}: R@10 {ngrid[key].summary()['r10']:.3f}", flush=True)
            only = ngrid.pop("only")
            if label == "meta-learned":
                results["titans-agent + neural (meta-learned, w 0.25)"] = ngrid[0.25]
            tuned, chosen = loco_select(ngrid, groups)
            results[f"titans-agent + neural ({label}, w LOCO)"] = tuned
            if label == "meta-learned":
                results["titans-agent neural only (meta-learned)"] = only
            elif only.summary()["r10"] != results["titans-agent neural only (untrained)"].summary()["r10"]:
                raise RuntimeError("the untrained neural-only row is not reproducible")
            neural_md.append(
                f"- neural weight ({label}), chosen leave-one-conversation-out from {NEURAL_GRID}: "
                + ", ".join(f"{g} {w}" for g, w in chosen.items())
                + "; R@10 on all 5 per weight: "
                + ", ".join(f"{w}: {sc.summary()['r10']:.3f}" for w, sc in ngrid.items())
            )
            print(neural_md[-1], flush=True)
        timings["neural rows"] = time.perf_counter() - t0
        ci_extra = [
            (DEFAULT_ROW, "titans-agent without dense"),
            (DEFAULT_ROW, "titans-agent without session locality"),
            ("titans-agent + neural (meta-learned, w LOCO)", DEFAULT_ROW),
            ("titans-agent + neural (untrained, w LOCO)", DEFAULT_ROW),
            ("titans-agent + neural (meta-learned, w LOCO)", "titans-agent + neural (untrained, w LOCO)"),
            ("titans-agent neural only (meta-learned)", "titans-agent neural only (untrained)"),
            ("titans-agent default, meta-learned memory (neural off)", DEFAULT_ROW),
        ]
    wall = time.perf_counter() - t_start

    ci_rows = []
    pairs = [
        (name, ref)
        for name in (TUNED_ROW, DEFAULT_ROW)
        if name in results
        for ref in ("BM25 (rank-bm25)", FUSION_ROW, RRF_ROW, "titans-agent rank fusion (the previous default)")
    ]
    for name, ref_name in pairs + ci_extra:
        r = paired_bootstrap(results[name], results[ref_name])
        m = paired_bootstrap(results[name], results[ref_name], metric="mrr")
        cells = f"{r[0]:+.3f} | [{r[1]:+.3f}, {r[2]:+.3f}] | {m[0]:+.3f} | [{m[1]:+.3f}, {m[2]:+.3f}]"
        ci_rows.append(f"| {name} - {ref_name} | {cells} |")
    ci_md = "\n".join(
        [
            "| difference (paired bootstrap over questions, 10,000 resamples) | R@10 | 95% CI | MRR | 95% CI |",
            "|---|---:|---:|---:|---:|",
            *ci_rows,
        ]
    )
    grid_md = "\n".join(
        [
            "| lexical weight | session weight | neighbour weight | R@10 (all 5, in-fold) | MRR |",
            "|---:|---:|---:|---:|---:|",
        ]
        + [
            f"| {lw} | {sw} | {nw} | {sc.summary()['r10']:.3f} | {sc.summary()['mrr']:.3f} |"
            for (lw, sw, nw), sc in grid.items()
        ]
    )
    md = table(results)
    cat_md = category_table(results)
    print()
    print(md)
    print()
    print(cat_md)
    print()
    print(ci_md)
    print(f"\nevidence turns lost at write time (default settings): {lost} of {n_evidence}")
    thr = AgentConfig().write_threshold
    surprise_md = [f"- write-time surprise, {k} memory: {surprise_summary(v, thr)}" for k, v in surprise.items() if v]
    print("\n".join(surprise_md + neural_md))
    header = [
        "# LoCoMo evidence retrieval",
        "",
        "Generated by `python benchmarks/locomo.py`; do not edit by hand.",
        "",
        f"- data: `{args.data.name}` (LoCoMo development split, CC BY-NC 4.0, evaluation only): "
        f"{len(convs)} conversations ({', '.join(c.sample_id for c in convs)}), "
        f"{sum(len(c.turns) for c in convs)} turns, {n_q} questions of categories 1-4 scored",
        f"- skipped questions (no evidence left): {len(skipped)}"
        + "".join(f"\n  - {sid} ({why}): {q}" for sid, q, why in skipped),
        f"- dropped evidence ids (not a turn of the conversation; strings split on ';'): {len(dropped)}"
        + "".join(f"\n  - `{d}` ({sid}: {q})" for sid, q, d in dropped),
        "- R@k: fraction of a question's evidence turns in the top k, averaged over questions; "
        f"MRR: 1/rank of the first evidence turn (0 beyond rank {args.depth}); R@10 cN: R@10 in category N",
        "- baselines rank each question against all of its conversation's turns, written "
        '"[session date] speaker: text" (image turns end with "[image: caption]")',
        "- titans-agent: one database, each conversation in its own namespace via `add_turns` "
        "(timestamp = session date, role = speaker), ingested once; each row reopens it with another "
        "`RetrievalConfig` and ranks with `recall`. The neural memory is untrained (default parameters) "
        "except in the meta-learned rows, which use a second database ingested with "
        '`MemoryConfig(init="meta-learned")` (parameters meta-learned on Python docstrings by '
        "`benchmarks/train_memory.py`, never on LoCoMo)",
        f"- machine: {platform.machine()}, {platform.processor() or platform.platform()}, "
        f"{os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, Python {sys.version.split()[0]}, "
        f"torch {torch.__version__}",
        f"- wall time: {wall:.0f} s in all (baselines {timings['baselines']:.0f} s, ingest {timings['ingest']:.0f} s, "
        + ", ".join(f"{n} {t:.0f} s" for n, t in timings.items() if n.startswith("titans"))
        + ")",
        f"- evidence turns lost at write time with the default settings (merged into a record of other "
        f"words, or not stored): {lost} of {n_evidence}",
        "- out of fold: the LOCO rows choose their settings on four conversations and score the fifth, "
        "in turn; the default row's settings were chosen by looking at all five (in-fold), so only the "
        "LOCO row is an out-of-sample number. R@10 +-1: an evidence turn also counts when the turn "
        "next to it is ranked (LoCoMo's citations are sometimes one turn off); the exact R@10 is the headline",
        *([choices_md] if grid else []),
        *surprise_md,
        *neural_md,
        "",
        md,
        "",
        "Per category (R@5 / R@10 / MRR):",
        "",
        cat_md,
        "",
        ci_md,
        "",
        "Tuning grid of titans-agent (recall's lexical_weight, session_weight and neighbour_weight; dense "
        "weight 1). The LOCO row picks, for each conversation, the grid point best on the other four:",
        "",
        grid_md,
        "",
        "![R@10 per retriever](locomo.png)",
        "",
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "locomo.md").write_text("\n".join(header), encoding="utf-8")
    chart(results, args.out / "locomo.png", f"LoCoMo dev ({len(convs)} conversations, {n_q} questions): R@10")
    print(f"\nwall time {wall:.0f} s; wrote {args.out / 'locomo.md'} and {args.out / 'locomo.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
