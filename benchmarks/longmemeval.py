"""LongMemEval-S turn retrieval: titans-agent's recall against BM25, MiniLM cosine and their fusion.

Data: the LongMemEval-S development sample (``../shared/data/longmemeval/dev.json.gz``, 80
questions, MIT licence: evaluation only; nothing of it is written into the package). Each item is
one user's history (about 48 sessions of user-assistant chat, most of them filler with long
assistant replies) and one question; the turns flagged ``has_answer`` are the evidence:

- R@k: the fraction of the question's evidence turns in the top k turns, averaged over questions;
- MRR: 1 / rank of the first evidence turn (0 when none is in the top ``--depth``, default 100).

Questions are taken in a fixed stratified order (round robin over the question types), so
``--questions N`` is a stratified sample, and split into ``FOLDS`` folds by position in that order.
Every tuned row is OUT OF FOLD: its setting is chosen on the other folds (by mean R@10 + MRR) and
scores the held-out one, in turn; the in-fold best of the grid is printed beside it, labelled.

Turns that hold nothing visible (only whitespace or format characters such as a zero-width space)
are left out of every retriever's input and counted: ``add_turns`` refuses a batch holding one.

Retrievers, all in the same run over the same turns:

- baselines, each question ranked against its own item's turns written "role: text": BM25
  (``rank_bm25.BM25Okapi`` over lowercased ``\\w+`` tokens without stopwords, as
  ``benchmarks/locomo.py``), all-MiniLM-L6-v2 cosine of the turn truncated to its first piece (the
  agent's first chunk of at most 200 tokens: MiniLM reads 256, so a long turn is truncated either
  way), MiniLM cosine of the turn's best piece, the RRF (k = 60) of BM25 and truncated MiniLM, and
  that fusion with neighbour expansion (a turn adds a share of its best adjacent turn's fused
  score in the same session; the share and BM25's weight chosen out of fold);
- titans-agent: every item's history written once into its own namespace of ONE database with
  ``MemoryAgent.add_turns`` (session = LongMemEval session, role, timestamp = the session's date,
  the turn's id in the metadata); the database is reopened with each ``RetrievalConfig`` and
  ``recall(question, as_of=question date)`` ranks the records. A turn longer than the embedder's
  window is stored as several records (its pieces); a hit counts as its turn (the metadata), a
  record holding several turns (an exact repeat is stored once) as all of them, and the ranking
  of turns keeps each turn's first place. Rows: the default, each signal off in turn, and a grid
  over ``lexical_weight`` x ``session_weight`` x ``neighbour_weight`` chosen out of fold.

Also reported: a paired bootstrap 95% interval of the R@10 and MRR differences against BM25, each
retriever per question type, and how the default's top 10 hits are filled (distinct turns,
assistant turns). Embeddings are cached under ``/tmp/titans-agent-longmemeval-cache`` (``--cache``;
never in the repository), so a rerun embeds nothing again.

Prints markdown tables and writes ``<out>/longmemeval.md``.

    python benchmarks/longmemeval.py [--data PATH] [--questions N] [--skip N] [--out DIR] [--db-dir DIR] [--cache DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import platform
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from locomo import (  # noqa: E402
    CachedEmbedder,
    dedupe,
    mrr,
    neighbour_expand,
    paired_bootstrap,
    recall_at_k,
    rrf,
    tokenize,
)

DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "longmemeval" / "dev.json.gz"
CACHE_DIR = Path(tempfile.gettempdir()) / "titans-agent-longmemeval-cache"
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"  # "2023/05/20 (Sat) 02:21"
TYPES = (
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
)
FOLDS = 5
RRF_K = 60
NEIGHBOUR_GRID = (0.0, 0.25, 0.5)  # the RRF baseline's grid
LEXICAL_GRID = (1.0, 1.5, 2.0)
# titans-agent's grid (score fusion, dense weight 1): lexical x session x neighbour weight
AGENT_LEXICAL_GRID = (0.45, 0.7, 1.0)
AGENT_SESSION_GRID = (0.0, 0.2, 0.4)
AGENT_NEIGHBOUR_GRID = (0.0, 0.2)

BM25_ROW = "BM25 (rank-bm25)"
DENSE_ROW = "MiniLM cosine (turn truncated)"
DENSE_MAX_ROW = "MiniLM cosine (best piece of the turn)"
RRF_ROW = "RRF of BM25 + MiniLM (k=60)"
RRF_NB_ROW = "BM25 + MiniLM RRF + neighbours (out of fold)"
DEFAULT_ROW = "titans-agent default"
TUNED_ROW = "titans-agent grid (out of fold)"


# ---------------------------------------------------------------------------------------- data
@dataclass
class Turn:
    """One stored turn of an item's history."""

    tid: str  # "D<session index>:<turn index>" (indices in the data, blank turns counted)
    session: str
    role: str
    text: str
    timestamp: dt.datetime | None

    @property
    def baseline_text(self) -> str:
        """The text the baselines rank: "role: text"."""
        return f"{self.role}: {self.text}"


@dataclass
class Item:
    """One question and its history."""

    qid: str
    qtype: str
    question: str
    date: dt.datetime | None
    turns: list[Turn]
    evidence: list[str]  # tids of the has_answer turns that were stored
    fold: int = 0
    blank: int = 0  # turns left out: nothing visible
    blank_evidence: int = 0  # of which flagged has_answer


def parse_date(text: str | None) -> dt.datetime | None:
    """A LongMemEval date ("2023/05/20 (Sat) 02:21") as a naive datetime (UTC), None if it does not parse."""
    try:
        return dt.datetime.strptime((text or "").strip(), DATE_FORMAT)
    except ValueError:
        return None


def visible(text: str) -> bool:
    """Whether ``text`` holds a character other than whitespace, control or format characters
    (what ``add_turns`` accepts; a zero-width space alone is not)."""
    return any(not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf") for c in text)


def stratified(raw: Sequence[dict]) -> list[dict]:
    """The items in round-robin order over :data:`TYPES` (then any other type), each type in file order."""
    kinds = list(TYPES) + sorted({x["question_type"] for x in raw} - set(TYPES))
    by = {k: [x for x in raw if x["question_type"] == k] for k in kinds}
    out: list[dict] = []
    for i in range(max((len(v) for v in by.values()), default=0)):
        out.extend(by[k][i] for k in kinds if i < len(by[k]))
    return out


def load_items(path: str | Path, limit: int | None = None, skip: int = 0) -> list[Item]:
    """Read LongMemEval's JSON (gzipped or not): ``limit`` items (None: all) of the stratified
    order, after its first ``skip``."""
    raw = Path(path).read_bytes()
    data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    items = []
    order = stratified(data)[skip:]
    for n, x in enumerate(order[:limit] if limit else order):
        turns, evidence, blank, blank_ev = [], [], 0, 0
        for si, (sid, date, sess) in enumerate(
            zip(x["haystack_session_ids"], x["haystack_dates"], x["haystack_sessions"])
        ):
            ts = parse_date(date)
            for ti, t in enumerate(sess):
                tid = f"D{si}:{ti}"
                if not visible(t["content"]):
                    blank += 1
                    blank_ev += bool(t.get("has_answer"))
                    continue
                turns.append(Turn(tid, str(sid), t["role"], t["content"], ts))
                if t.get("has_answer"):
                    evidence.append(tid)
        items.append(
            Item(x["question_id"], x["question_type"], x["question"], parse_date(x.get("question_date")),
                 turns, evidence, n % FOLDS, blank, blank_ev)
        )  # fmt: skip
    return items


# ------------------------------------------------------------------------------------- metrics
@dataclass
class Scores:
    """Per-question metrics of one retriever: (type, R@1, R@5, R@10, MRR) and each question's fold."""

    rows: list[tuple[str, float, float, float, float]] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)
    tops: list[list[str]] = field(default_factory=list)  # each question's first 30 turns (for --dump)

    def add(self, qtype: str, ranked: Sequence[str], evidence: Sequence[str], group: int) -> None:
        ks = (recall_at_k(ranked, evidence, k) for k in (1, 5, 10))
        self.rows.append((qtype, *ks, mrr(ranked, evidence)))  # type: ignore[arg-type]
        self.groups.append(group)
        self.tops.append(list(ranked[:30]))

    def r10(self) -> np.ndarray:
        return np.array([r[3] for r in self.rows])

    def mrrs(self) -> np.ndarray:
        return np.array([r[4] for r in self.rows])

    def subset(self, keep: Callable[[int], bool]) -> Scores:
        out = Scores()
        for row, g in zip(self.rows, self.groups):
            if keep(g):
                out.rows.append(row)
                out.groups.append(g)
        return out

    def summary(self, qtype: str | None = None) -> dict[str, float]:
        rows = [r[1:] for r in self.rows if qtype is None or r[0] == qtype]
        if not rows:
            return {"n": 0, "r1": float("nan"), "r5": float("nan"), "r10": float("nan"), "mrr": float("nan")}
        a = np.array(rows)
        return {
            "n": len(rows),
            "r1": a[:, 0].mean(),
            "r5": a[:, 1].mean(),
            "r10": a[:, 2].mean(),
            "mrr": a[:, 3].mean(),
        }

    def objective(self) -> float:
        """What the out-of-fold choice maximises: mean R@10 + mean MRR."""
        return float(self.r10().mean() + self.mrrs().mean()) if self.rows else float("-inf")


def fold_select(grid: dict[object, Scores]) -> tuple[Scores, dict[int, object]]:
    """Out of fold: for each fold, the grid point with the best :meth:`Scores.objective` on the other
    folds; returns the held-out rows of those choices (in question order) and the choice per fold."""
    first = next(iter(grid.values()))
    chosen: dict[int, object] = {}
    for g in sorted(set(first.groups)):
        chosen[g] = max(grid, key=lambda key, g=g: grid[key].subset(lambda x, g=g: x != g).objective())
    out = Scores()
    for i, g in enumerate(first.groups):
        out.rows.append(grid[chosen[g]].rows[i])
        out.groups.append(g)
    return out, chosen


# ------------------------------------------------------------------------------------- running
def pieces_of(chunker, text: str) -> list[str]:
    """A turn as the agent writes it: itself, or its chunks when longer than the embedder's window."""
    if chunker.count_tokens(text) <= chunker.max_tokens:
        return [text.strip()]
    return [c.text for c in chunker.split(text)]


def run_baselines(items: list[Item], embedder, chunker, depth: int) -> dict[str, Scores]:
    """BM25, MiniLM cosine (truncated turn; best piece), their RRF, and RRF with neighbour
    expansion (its two weights chosen out of fold), each question against its own item's turns."""
    from rank_bm25 import BM25Okapi

    names = (BM25_ROW, DENSE_ROW, DENSE_MAX_ROW, RRF_ROW)
    out = {n: Scores() for n in names}
    grid: dict[tuple[float, float], Scores] = {(nw, lw): Scores() for nw in NEIGHBOUR_GRID for lw in LEXICAL_GRID}
    for it in items:
        ids = [t.tid for t in it.turns]
        sessions = [t.session for t in it.turns]
        bm25 = BM25Okapi([tokenize(t.baseline_text) or ["\u2205"] for t in it.turns])
        texts, owner = [], []
        for i, t in enumerate(it.turns):
            for p in pieces_of(chunker, t.text):
                texts.append(f"{t.role[:40]}: {p}")  # what the agent embeds
                owner.append(i)
        emb = embedder.embed(texts)
        qe = embedder.embed([it.question])[0]
        sims = emb @ qe
        owner_a = np.array(owner)
        first = np.r_[True, owner_a[1:] != owner_a[:-1]]
        dense = sims[first]  # the turn's first piece: the turn as a truncating encoder reads it
        dense_max = np.full(len(ids), -np.inf)
        np.maximum.at(dense_max, owner_a, sims)
        lex = bm25.get_scores(tokenize(it.question))
        orders = [np.argsort(-s, kind="stable") for s in (lex, dense, dense_max)]
        rankings = [[ids[i] for i in o] for o in orders]
        for name, ranking in zip(names, (*rankings, rrf(rankings[:2]))):
            out[name].add(it.qtype, ranking[:depth], it.evidence, it.fold)
        lex_rank, den_rank = np.empty(len(ids)), np.empty(len(ids))
        lex_rank[orders[0]] = np.arange(1, len(ids) + 1)
        den_rank[orders[1]] = np.arange(1, len(ids) + 1)
        for nw, lw in grid:
            fused = neighbour_expand(lw / (RRF_K + lex_rank) + 1.0 / (RRF_K + den_rank), sessions, nw)
            ranking = [ids[i] for i in np.argsort(-fused, kind="stable")[:depth]]
            grid[(nw, lw)].add(it.qtype, ranking, it.evidence, it.fold)
    out[RRF_NB_ROW], chosen = fold_select(grid)
    print(f"  RRF + neighbours, choices per fold (neighbour weight, BM25 weight): {chosen}", flush=True)
    return out


def ingest(items: list[Item], db: Path, embedder, config=None) -> tuple[dict[str, dict[int, list[str]]], float, int]:
    """Write every item's history into its own namespace; returns record id -> turn ids per
    namespace (from each turn's first piece), the seconds, and how many evidence turns were merged
    into a record of other words at write time."""
    from titans_agent import MemoryAgent

    owners: dict[str, dict[int, list[str]]] = {}
    lost = 0
    t0 = time.perf_counter()
    with MemoryAgent.open(db, config, embedder=embedder) as agent:
        for n, it in enumerate(items):
            turns = [
                {"session_id": t.session, "role": t.role, "content": t.text, "timestamp": t.timestamp,
                 "metadata": {"turn": t.tid}}
                for t in it.turns
            ]  # fmt: skip
            results = agent.add_turns(turns, namespace=it.qid)
            own: dict[int, list[str]] = {}
            for t, r in zip(it.turns, results):
                own.setdefault(r.record_id, []).append(t.tid)
            owners[it.qid] = own
            ev = set(it.evidence)
            lost += sum(t.tid in ev and (r.record_id < 0 or r.decision == "merged") for t, r in zip(it.turns, results))
            if n % 10 == 9:
                print(f"  ingested {n + 1} of {len(items)} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return owners, time.perf_counter() - t0, lost


@dataclass
class Fill:
    """How the top 10 hits of a retriever are filled, summed over questions."""

    questions: int = 0
    distinct_turns: int = 0  # distinct turns among the top 10 hits
    assistant_hits: int = 0  # hits of assistant turns among the top 10
    hits: int = 0

    def line(self) -> str:
        q = max(self.questions, 1)
        return (
            f"distinct turns in the top 10 hits: {self.distinct_turns / q:.2f} on average; "
            f"assistant hits: {self.assistant_hits / max(self.hits, 1):.0%} of them"
        )


def run_agent(
    items: list[Item], db: Path, embedder, config, owners, depth: int, fill: Fill | None = None, as_of: bool = True
) -> Scores:
    """Rank with ``recall`` under ``config`` (database reopened, nothing re-ingested)."""
    from titans_agent import MemoryAgent

    scores = Scores()
    with MemoryAgent.open(db, config, embedder=embedder) as agent:
        for it in items:
            own = owners[it.qid]
            when = it.date if as_of and it.date is not None else None
            hits = agent.recall(it.question, k=depth, namespace=it.qid, as_of=when)
            ranked: list[str] = []
            for h in hits:
                ranked.extend(own.get(h.id) or [])
                if h.metadata.get("turn"):  # a later piece of a long turn carries its turn's id
                    ranked.append(h.metadata["turn"])
            if fill is not None:
                top = hits[:10]
                fill.questions += 1
                fill.hits += len(top)
                fill.distinct_turns += len({h.metadata.get("turn", h.id) for h in top})
                fill.assistant_hits += sum(h.role == "assistant" for h in top)
            scores.add(it.qtype, dedupe(ranked), it.evidence, it.fold)
    return scores


def agent_configs() -> dict[str, object]:
    """titans-agent's rows: the default and each part off in turn, by label."""
    from titans_agent import AgentConfig, RetrievalConfig

    R = RetrievalConfig
    return {
        DEFAULT_ROW: AgentConfig(),
        "titans-agent without lexical": AgentConfig(retrieval=R(use_lexical=False)),
        "titans-agent without dense": AgentConfig(retrieval=R(use_dense=False)),
        "titans-agent without session locality": AgentConfig(retrieval=R(session_weight=0.0)),
        "titans-agent without locality": AgentConfig(retrieval=R(neighbour_weight=0.0, session_weight=0.0)),
        "titans-agent without update demotion": AgentConfig(retrieval=R(superseded_weight=1.0)),
        "titans-agent without other-person demotion": AgentConfig(retrieval=R(other_person_weight=1.0)),
        "titans-agent rank fusion (lexical 1.5, neighbours .25)": AgentConfig(
            retrieval=R(fusion="rank", lexical_weight=1.5, neighbour_weight=0.25, session_weight=0.0)
        ),
    }


def tuning_configs() -> dict[tuple[float, float, float], object]:
    """(lexical_weight, session_weight, neighbour_weight) -> config (score fusion, dense weight 1)."""
    from titans_agent import AgentConfig, RetrievalConfig

    return {
        (lw, sw, nw): AgentConfig(retrieval=RetrievalConfig(lexical_weight=lw, session_weight=sw, neighbour_weight=nw))
        for lw in AGENT_LEXICAL_GRID
        for sw in AGENT_SESSION_GRID
        for nw in AGENT_NEIGHBOUR_GRID
    }


# ------------------------------------------------------------------------------------- output
def table(results: dict[str, Scores]) -> str:
    lines = ["| retriever | R@1 | R@5 | R@10 | MRR | n |", "|---|---:|---:|---:|---:|---:|"]
    for name, sc in results.items():
        s = sc.summary()
        lines.append(f"| {name} | {s['r1']:.3f} | {s['r5']:.3f} | {s['r10']:.3f} | {s['mrr']:.3f} | {s['n']} |")
    return "\n".join(lines)


def type_table(results: dict[str, Scores]) -> str:
    """R@10 / MRR of every retriever in every question type."""
    ref = next(iter(results.values()))
    kinds = [k for k in TYPES if ref.summary(k)["n"]]
    head = "| retriever | " + " | ".join(f"{k} ({ref.summary(k)['n']})" for k in kinds) + " |"
    lines = [head, "|" + "---|" * (1 + len(kinds))]
    for name, sc in results.items():
        cells = [f"{sc.summary(k)['r10']:.3f} / {sc.summary(k)['mrr']:.3f}" for k in kinds]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ci_table(results: dict[str, Scores], pairs: Sequence[tuple[str, str]]) -> str:
    lines = [
        "| difference (paired bootstrap over questions, 10,000 resamples) | R@10 | 95% CI | MRR | 95% CI |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, ref in pairs:
        r = paired_bootstrap(results[name], results[ref])
        m = paired_bootstrap(results[name], results[ref], metric="mrr")
        lines.append(
            f"| {name} - {ref} | {r[0]:+.3f} | [{r[1]:+.3f}, {r[2]:+.3f}] | {m[0]:+.3f} | [{m[1]:+.3f}, {m[2]:+.3f}] |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None, embedder=None) -> dict[str, Scores]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--questions", type=int, default=None, help="first N of the stratified order (default all)")
    parser.add_argument(
        "--skip",
        type=int,
        default=0,
        help="leave out the first N of the stratified order: --skip 30 scores the questions that no rule "
        "was written on (the recorded run is the first 30); writes longmemeval_skip<N>.md",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--db-dir", type=Path, default=None, help="folder of the temporary database")
    parser.add_argument("--cache", type=Path, default=CACHE_DIR, help="embedding cache (outside the repository)")
    parser.add_argument("--depth", type=int, default=100, help="ranks scored for MRR (default 100)")
    parser.add_argument("--no-tuning", action="store_true", help="skip titans-agent's grid")
    parser.add_argument(
        "--dump", type=Path, default=None, help="write each row's top 30 turns per question here (JSON)"
    )
    args = parser.parse_args(argv)
    if not Path(args.data).is_file():
        parser.error(f"no LongMemEval data at {args.data} (it lives in the project's shared/data/longmemeval folder)")

    from titans_agent import AgentConfig, MemoryAgent
    from titans_agent.embeddings import load_embedder

    t_start = time.perf_counter()
    if args.skip < 0:
        parser.error("--skip must be >= 0")
    items = load_items(args.data, args.questions, args.skip)
    n_turns = sum(len(it.turns) for it in items)
    blank = sum(it.blank for it in items)
    blank_ev = sum(it.blank_evidence for it in items)
    no_ev = [it.qid for it in items if not it.evidence]
    print(
        f"{len(items)} questions, {n_turns} turns stored, {blank} blank turns left out ({blank_ev} flagged has_answer)"
    )
    items = [it for it in items if it.evidence]
    late = {  # (question, turn) of evidence dated after its question
        (it.qid, t.tid)
        for it in items
        for t in it.turns
        if t.tid in it.evidence and it.date is not None and t.timestamp is not None and t.timestamp > it.date
    }
    if embedder is None:
        embedder = CachedEmbedder(load_embedder(AgentConfig().embedder), args.cache, tag="longmemeval", save_every=2000)

    results: dict[str, Scores] = {}
    timings: dict[str, float] = {}
    fills: dict[str, Fill] = {}
    with tempfile.TemporaryDirectory(dir=args.db_dir) as tmp:
        db = Path(tmp) / "longmemeval.db"
        owners, timings["ingest"], lost = ingest(items, db, embedder)
        if hasattr(embedder, "save"):
            embedder.save()
        print(f"  ingest: {timings['ingest']:.0f} s; evidence turns merged into other records: {lost}", flush=True)
        with MemoryAgent.open(db, embedder=embedder) as agent:
            chunker = agent.chunker
        t0 = time.perf_counter()
        results.update(run_baselines(items, embedder, chunker, args.depth))
        timings["baselines"] = time.perf_counter() - t0
        for name, cfg in agent_configs().items():
            t0 = time.perf_counter()
            fills[name] = Fill()
            results[name] = run_agent(items, db, embedder, cfg, owners, args.depth, fills[name])
            timings[name] = time.perf_counter() - t0
            s = results[name].summary()
            print(f"  {name}: R@10 {s['r10']:.3f} MRR {s['mrr']:.3f} ({timings[name]:.0f} s)", flush=True)
        results["titans-agent default, no as_of"] = run_agent(
            items, db, embedder, AgentConfig(), owners, args.depth, as_of=False
        )
        grid: dict[object, Scores] = {}
        chosen: dict[int, object] = {}
        if not args.no_tuning:
            t0 = time.perf_counter()
            for key, cfg in tuning_configs().items():
                grid[key] = run_agent(items, db, embedder, cfg, owners, args.depth)
                s = grid[key].summary()
                print(f"  grid (lexical, session, neighbour) {key}: R@10 {s['r10']:.3f} MRR {s['mrr']:.3f}", flush=True)
            results[TUNED_ROW], chosen = fold_select(grid)
            best = max(grid, key=lambda key: grid[key].objective())
            results[f"titans-agent grid best {best} (IN-FOLD, chosen on all)"] = grid[best]
            timings["grid"] = time.perf_counter() - t0
        if hasattr(embedder, "save"):
            embedder.save()
    wall = time.perf_counter() - t_start

    if args.dump is not None:
        turns = {it.qid: {t.tid: [t.role, t.session, len(t.text)] for t in it.turns} for it in items}
        rows = {name: sc.tops for name, sc in results.items() if sc.tops}
        questions = [[it.qid, it.qtype, it.question, it.evidence] for it in items]
        args.dump.write_text(json.dumps({"questions": questions, "turns": turns, "rows": rows}), encoding="utf-8")
    pairs = [(n, BM25_ROW) for n in results if n != BM25_ROW]
    md, types_md, ci_md = table(results), type_table(results), ci_table(results, pairs)
    fill_md = "\n".join(f"- {name}: {f.line()}" for name, f in fills.items())
    grid_md = "\n".join(
        ["| lexical | session | neighbour | R@10 (all, in-fold) | MRR |", "|---:|---:|---:|---:|---:|"]
        + [f"| {k[0]} | {k[1]} | {k[2]} | {sc.summary()['r10']:.3f} | {sc.summary()['mrr']:.3f} |"
           for k, sc in grid.items() if isinstance(k, tuple)]
    )  # fmt: skip
    print(f"\n{md}\n\n{types_md}\n\n{ci_md}\n\n{fill_md}")
    counts = ", ".join(f"{k} {sum(it.qtype == k for it in items)}" for k in TYPES)
    header = [
        "# LongMemEval-S turn retrieval",
        "",
        "Generated by `python benchmarks/longmemeval.py`; do not edit by hand.",
        "",
        f"- data: `{args.data.name}` (LongMemEval-S development sample, MIT, evaluation only): {len(items)} "
        f"questions of the stratified order{f' after its first {args.skip}' if args.skip else ''} ({counts}), "
        f"{n_turns} turns stored",
        f"- blank turns left out of every retriever's input (only whitespace or format characters, e.g. a "
        f"zero-width space; `add_turns` refuses a batch holding one): {blank}, of which flagged has_answer: {blank_ev}",
        f"- questions without evidence left (skipped): {len(no_ev)}",
        f"- evidence turns dated after their question (the data's same-day sessions; `as_of` leaves them out, "
        f"the baselines and the no-as_of row see them): {len(late)} of {sum(len(it.evidence) for it in items)}, "
        f"in {len({qid for qid, _ in late})} questions",
        f"- evidence turns merged into a record of other words at write time: {lost}",
        "- R@k: fraction of a question's has_answer turns in the top k turns; MRR: 1/rank of the first "
        f"(0 beyond rank {args.depth}); a record holding several turns counts as all of them, a piece of a "
        "long turn as its turn",
        f"- out of fold: {FOLDS} folds over questions (position in the stratified order mod {FOLDS}); a tuned "
        "row's setting is chosen on four folds by mean R@10 + MRR and scores the fifth, in turn. The "
        "IN-FOLD row is the grid point best on all questions: not an out-of-sample number",
        *([f"- titans-agent grid, choice per fold (lexical, session, neighbour weight): {chosen}"] if chosen else []),
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; "
        f"wall time {wall:.0f} s (ingest {timings['ingest']:.0f} s, baselines {timings['baselines']:.0f} s)",
        "",
        md,
        "",
        "Per question type (R@10 / MRR):",
        "",
        types_md,
        "",
        ci_md,
        "",
        "How the top 10 hits are filled (a long turn is several records):",
        "",
        fill_md,
        "",
        *(["titans-agent grid (all questions, in-fold):", "", grid_md, ""] if grid else []),
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"longmemeval_skip{args.skip}.md" if args.skip else "longmemeval.md"
    (args.out / name).write_text("\n".join(header), encoding="utf-8")
    print(f"\nwall time {wall:.0f} s; wrote {args.out / name}")
    return results


if __name__ == "__main__":
    main()
