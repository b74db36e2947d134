"""Contracts and privacy policies: LegalBench-RAG's ContractNLI and PrivacyQA through the public API.

Data: ``../shared/data/legalbench-rag/`` (its README): 977 ContractNLI queries over 95 NDAs and 194
PrivacyQA queries over 7 privacy policies, each with exact gold character spans (Python offsets
after universal-newline reading). Evaluation only: nothing of it is written into the package.

Each corpus is ingested with :meth:`MemoryAgent.ingest` (the product's own chunking, legal section
detection and document context) into a fresh SQLite database of its own, and every
query is recalled with ``k = 64``. A returned chunk is placed in its file by its exact text from
its first line on (a chunk's text is an exact slice of its document); a chunk stored once for
several files (the same boilerplate in two NDAs) counts in each of them.

Scored per query, then averaged:

- span R@k (k = 1, 4, 16, 64): the fraction of the query's gold spans that a top-k chunk overlaps;
- MRR: 1 / rank of the first chunk that overlaps a gold span (0 when none in the top 64);
- doc@1: whether the top chunk comes from the file the query is about;
- LegalBench-RAG's character-level precision@k and recall@k: the characters of the top-k chunks
  that fall inside gold spans over all the top-k chunks' characters, and over all gold characters.

Baselines, in the same run over the very chunks the product made (one per stored occurrence):
BM25 (``rank_bm25.BM25Okapi`` over lowercased ``\\w+`` tokens, the product's stopwords removed),
the same BM25 over each chunk with its file's name words in front (a contextual-header baseline:
the query names its document by words of the file name), and all-MiniLM-L6-v2 cosine (the
product's own embedder). Paired bootstrap 95% intervals (10,000
resamples over queries) give titans-agent minus each baseline on R@16 and MRR.

Nothing is tuned here: the product runs its defaults; ablation rows change one setting each.

Embeddings are cached under the system temp folder (``titans-agent-legal-cache``), so a rerun
embeds nothing again. Prints the table and writes ``<out>/legal.md`` and ``<out>/legal.png``.

    python benchmarks/legal.py [--data DIR] [--corpora contractnli privacy_qa] [--limit N] [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from locomo import CachedEmbedder  # noqa: E402

from titans_agent import AgentConfig, MemoryAgent, RetrievalConfig  # noqa: E402

DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "legalbench-rag"
CORPORA = ("contractnli", "privacy_qa")
KS = (1, 4, 16, 64)  # R@k and the character-level P/R@k
DEPTH = 64
CACHE_DIR = Path(tempfile.gettempdir()) / "titans-agent-legal-cache"
BM25, BM25_NAMED = "BM25 (same chunks)", "BM25 (file name + chunk)"


@dataclass(frozen=True)
class Query:
    text: str
    spans: tuple[tuple[str, int, int], ...]  # (file name, start, end)

    @property
    def files(self) -> set[str]:
        return {f for f, _, _ in self.spans}


@dataclass
class Scores:
    """Per-query metrics of one retriever (lists aligned with the queries)."""

    recall: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in KS})
    mrr: list[float] = field(default_factory=list)
    doc1: list[float] = field(default_factory=list)
    char_p: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in KS})
    char_r: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in KS})
    seconds: float = 0.0

    def mean(self, values: list[float]) -> float:
        return float(np.mean(values)) if values else float("nan")


def load_corpus(data: Path, corpus: str, limit: int | None) -> tuple[dict[str, str], list[Query]]:
    """The corpus's texts by file name (read as the gold offsets were: universal newlines) and its
    queries (the first ``limit`` when given)."""
    tests = json.loads((data / "benchmarks" / f"{corpus}.json").read_text(encoding="utf-8"))["tests"]
    queries = []
    for t in tests[:limit] if limit else tests:
        spans = tuple(
            (Path(s["file_path"]).name.replace(":", "_").replace("|", "_"), int(s["span"][0]), int(s["span"][1]))
            for s in t["snippets"]
        )
        queries.append(Query(t["query"], spans))
    folder = data / "corpus" / corpus
    wanted = {f for q in queries for f in q.files} if limit else None
    texts = {}
    for p in sorted(folder.iterdir()):
        if p.suffix == ".txt" and (wanted is None or p.name in wanted):
            with open(p, encoding="utf-8", newline=None) as fh:
                texts[p.name] = fh.read()
    return texts, queries


class Placer:
    """Finds a chunk's character range in its file: the exact text, searched from its first line."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = texts
        self.line_starts = {name: [0] + [m.end() for m in re.finditer("\n", t)] for name, t in texts.items()}

    def place(self, name: str, text: str, start_line: int | None) -> tuple[int, int] | None:
        body = self.texts.get(name)
        if body is None:
            return None
        starts = self.line_starts[name]
        frm = starts[min(max((start_line or 1) - 1, 0), len(starts) - 1)]
        i = body.find(text, frm)
        if i < 0:
            i = body.find(text)
        return None if i < 0 else (i, i + len(text))


def score_query(q: Query, ranked: list[list[tuple[str, int, int]]], out: Scores) -> None:
    """Add one query's metrics; ``ranked``: per returned chunk (best first), its places
    ``(file, start, end)`` (several when one stored chunk stands in several files)."""
    gold = [(f, a, b) for f, a, b in q.spans]
    gold_chars = {f: _merge([(a, b) for g, a, b in gold if g == f]) for f in q.files}
    n_gold_chars = sum(b - a for iv in gold_chars.values() for a, b in iv)

    def hits_span(places, span) -> bool:
        f, a, b = span
        return any(pf == f and pa < b and a < pb for pf, pa, pb in places)

    first = next((i for i, places in enumerate(ranked) if any(hits_span(places, s) for s in gold)), None)
    out.mrr.append(0.0 if first is None else 1.0 / (first + 1))
    out.doc1.append(float(bool(ranked) and any(pf in q.files for pf, _, _ in ranked[0])))
    for k in KS:
        top = ranked[:k]
        found = sum(any(hits_span(places, s) for places in top) for s in gold)
        out.recall[k].append(found / len(gold))
        # character level: each retrieved chunk counts once, at its place in a gold file if it has one
        retrieved, inside = 0, 0
        covered: dict[str, list[tuple[int, int]]] = {}
        for places in top:
            f, a, b = next(((pf, pa, pb) for pf, pa, pb in places if pf in q.files), places[0])
            retrieved += b - a
            if f in gold_chars:
                inside += sum(max(0, min(b, gb) - max(a, ga)) for ga, gb in gold_chars[f])
                covered.setdefault(f, []).append((a, b))
        got = sum(_overlap(_merge(iv), gold_chars[f]) for f, iv in covered.items())
        out.char_p[k].append(inside / retrieved if retrieved else 0.0)
        out.char_r[k].append(got / n_gold_chars if n_gold_chars else 0.0)


def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _overlap(xs: list[tuple[int, int]], ys: list[tuple[int, int]]) -> int:
    return sum(max(0, min(b, d) - max(a, c)) for a, b in xs for c, d in ys)


# ------------------------------------------------------------------------------------ retrievers
def run_product(agent: MemoryAgent, corpus: str, queries: list[Query], placer: Placer) -> Scores:
    out = Scores()
    t0 = time.perf_counter()
    for q in queries:
        ranked = []
        for hit in agent.recall(q.text, k=DEPTH, namespace=corpus):
            places = []
            for src in [hit.source, *hit.sources]:
                if src is None:
                    continue
                name = Path(src).name
                at = placer.place(name, hit.text, hit.start_line if src == hit.source else None)
                if at is not None:
                    places.append((name, *at))
            if places:
                ranked.append(places)
        score_query(q, ranked, out)
    out.seconds = time.perf_counter() - t0
    return out


def stored_chunks(agent: MemoryAgent, corpus: str, placer: Placer) -> tuple[list[str], list[tuple[str, int, int]]]:
    """Every stored chunk occurrence of the namespace: its text and place."""
    texts, places = [], []
    for h in agent.records(namespace=corpus, kinds=["chunk"]):
        name = Path(h.source).name
        at = placer.place(name, h.text, h.start_line)
        if at is not None:
            texts.append(h.text)
            places.append((name, *at))
    return texts, places


def run_baselines(
    chunk_texts: list[str], places: list[tuple[str, int, int]], queries: list[Query], embedder
) -> dict[str, Scores]:
    from rank_bm25 import BM25Okapi

    from titans_agent.text import STOPWORDS, name_words

    def toks(s: str) -> list[str]:
        return [w for w in re.findall(r"\w+", s.lower()) if w not in STOPWORDS]

    bm25 = BM25Okapi([toks(t) for t in chunk_texts])
    # the same chunks with their file's name words in front: a contextual-header BM25
    named = BM25Okapi([toks(f"{name_words(f)} {t}") for t, (f, _, _) in zip(chunk_texts, places)])
    emb = embedder.embed(chunk_texts)
    q_emb = embedder.embed([q.text for q in queries])
    out = {n: Scores() for n in (BM25, BM25_NAMED, "MiniLM cosine (same chunks)")}
    for i, q in enumerate(queries):
        q_toks = toks(q.text)
        for name, scores in (
            (BM25, bm25.get_scores(q_toks)),
            (BM25_NAMED, named.get_scores(q_toks)),
            ("MiniLM cosine (same chunks)", emb @ q_emb[i]),
        ):
            order = np.lexsort((np.arange(len(scores)), -np.asarray(scores)))[:DEPTH]
            score_query(q, [[places[j]] for j in order], out[name])
    return out


# ---------------------------------------------------------------------------------------- report
def paired_bootstrap(a: list[float], b: list[float], n: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``a - b`` over queries and its 95% percentile bootstrap interval."""
    d = np.asarray(a) - np.asarray(b)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.shape[0], size=(n, d.shape[0]))].mean(axis=1)
    return float(d.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def table(corpus: str, n_docs: int, n_chunks: int, results: dict[str, Scores], product: str) -> list[str]:
    lines = [
        f"### {corpus}: {len(results[product].mrr)} queries, {n_docs} documents, {n_chunks} chunks",
        "",
        "| retriever | R@1 | R@4 | R@16 | R@64 | MRR | doc@1 | char P@1 | char R@16 | char R@64 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in results.items():
        m = s.mean
        bold = "**" if name == product else ""
        lines.append(
            f"| {bold}{name}{bold} | "
            + " | ".join(f"{m(s.recall[k]):.3f}" for k in KS)
            + f" | {m(s.mrr):.3f} | {m(s.doc1):.3f} | {m(s.char_p[1]):.3f}"
            + f" | {m(s.char_r[16]):.3f} | {m(s.char_r[64]):.3f} |"
        )
    lines += ["", "| titans-agent minus | R@16 | 95% CI | MRR | 95% CI |", "|---|---:|---|---:|---|"]
    for name, s in results.items():
        if name == product:
            continue
        r = paired_bootstrap(results[product].recall[16], s.recall[16])
        m = paired_bootstrap(results[product].mrr, s.mrr)
        lines.append(
            f"| {name} | {r[0]:+.3f} | [{r[1]:+.3f}, {r[2]:+.3f}] | {m[0]:+.3f} | [{m[1]:+.3f}, {m[2]:+.3f}] |"
        )
    return lines + [""]


def chart(all_results: dict[str, dict[str, Scores]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(all_results), figsize=(6 * len(all_results), 3.6), squeeze=False)
    for ax, (corpus, results) in zip(axes[0], all_results.items()):
        names = list(results)
        metrics = (
            ("R@16", lambda s: s.mean(s.recall[16])),
            ("MRR", lambda s: s.mean(s.mrr)),
            ("doc@1", lambda s: s.mean(s.doc1)),
        )
        y = np.arange(len(names))
        for j, (label, f) in enumerate(metrics):
            vals = [f(results[n]) for n in names]
            bars = ax.barh(y + (j - 1) * 0.27, vals, height=0.27, label=label)
            ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=2)
        ax.set_yticks(y, names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, 1.1)
        ax.set_title(corpus, fontsize=10)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# the rows: the product's defaults, then one change each (same database, same run)
ABLATIONS: dict[str, dict] = {
    "without the document signal": {"document_weight": 0.0},
    "without dense": {"use_dense": False},
    "without lexical": {"use_lexical": False},
    "+ chunk locality": {"neighbour_kinds": ("turn", "chunk")},
}
PRODUCT = "titans-agent (default)"

# LegalBench-RAG (Pipitone and Houir Alami 2024), best configuration per dataset at the same k,
# character-level precision/recall in %, text-embedding-3-large, 500-character chunks, on the
# paper's 194-query sample of each dataset. Transcribed by third parties (see the results page).
PUBLISHED = {
    "contractnli": ("Naive chunking, no reranker", {"P@1": 16.45, "R@1": 11.32, "R@64": 86.57}),
    "privacy_qa": ("RCTS chunking, no reranker", {"P@1": 14.38, "R@1": 8.85, "R@16": 55.1, "R@64": 84.19}),
}


def main(argv: list[str] | None = None, embedder=None) -> dict[str, dict[str, Scores]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--corpora", nargs="+", choices=CORPORA, default=list(CORPORA))
    ap.add_argument("--limit", type=int, default=None, help="the first N queries of each corpus (and their files)")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--db-dir", type=Path, default=None, help="where the database goes (default: a temp folder)")
    ap.add_argument("--no-ablations", action="store_true", help="the default row and the baselines only")
    args = ap.parse_args(argv)
    if not (args.data / "benchmarks").is_dir():
        ap.error(f"no LegalBench-RAG data at {args.data} (see ../shared/data/legalbench-rag/README.md)")
    if embedder is None:
        from titans_agent.embeddings import load_embedder

        embedder = CachedEmbedder(load_embedder(AgentConfig().embedder), CACHE_DIR, tag="legal")
    tmp = tempfile.TemporaryDirectory(prefix="titans-legal-")
    rows = {PRODUCT: {}} | ({} if args.no_ablations else ABLATIONS)
    all_results: dict[str, dict[str, Scores]] = {}
    md = [
        "# Contracts and privacy policies (LegalBench-RAG: ContractNLI and PrivacyQA)",
        "",
        f"`python benchmarks/legal.py {' '.join(argv if argv is not None else sys.argv[1:])}` on "
        f"{dt.date.today().isoformat()}, {platform.machine()}, Python {platform.python_version()}; "
        "k = 64, the product's defaults (nothing tuned on these queries). R@k: gold spans overlapped by a top-k "
        "chunk; MRR: the first overlapping chunk; doc@1: the top chunk is from the file the query is about; "
        "char P/R@k: LegalBench-RAG's character-level precision and recall. Rows below the first change one "
        "setting each over the same database.",
        "",
    ]
    for corpus in args.corpora:
        texts, queries = load_corpus(args.data, corpus, args.limit)
        # a database per corpus: FTS5's BM25 statistics span every namespace of a database
        db = (args.db_dir or Path(tmp.name)) / f"legal-{corpus}.db"
        db.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        placer = Placer(texts)
        folder = args.data / "corpus" / corpus
        t0 = time.perf_counter()
        with MemoryAgent.open(db, embedder=embedder) as agent:
            report = agent.ingest([folder / name for name in texts], namespace=corpus)
            t_ingest = time.perf_counter() - t0
            chunk_texts, places = stored_chunks(agent, corpus, placer)
        results: dict[str, Scores] = {}
        for name, change in rows.items():
            config = AgentConfig(retrieval=RetrievalConfig(**change))
            with MemoryAgent.open(db, config, embedder=embedder) as agent:
                results[name] = run_product(agent, corpus, queries, placer)
        results.update(run_baselines(chunk_texts, places, queries, embedder))
        if hasattr(embedder, "save"):
            embedder.save()
        all_results[corpus] = results
        md += table(corpus, len(texts), report.chunks, results, PRODUCT)
        if corpus in PUBLISHED:
            label, numbers = PUBLISHED[corpus]
            ours = results[PRODUCT]
            mine = {
                "P@1": 100 * ours.mean(ours.char_p[1]),
                "R@1": 100 * ours.mean(ours.char_r[1]),
                "R@16": 100 * ours.mean(ours.char_r[16]),
                "R@64": 100 * ours.mean(ours.char_r[64]),
            }
            md.append(
                f"Character level, in % (LegalBench-RAG's metric), next to the paper's best configuration on {corpus} "
                f"({label}; unverified third-party transcriptions of its tables, see the README): "
                + "; ".join(f"{k} {mine[k]:.1f} vs {v:.2f}" for k, v in numbers.items())
                + "."
            )
        md.append(
            f"Ingest: {report.files} files, {report.chunks} chunks ({report.stored} stored) in {t_ingest:.0f} s "
            f"(embeddings cached); recall: {1000 * results[PRODUCT].seconds / max(len(queries), 1):.0f} ms per query "
            f"(query embedding included), {len(report.skipped)} files skipped."
        )
        md.append("")
        print("\n".join(md[-(len(results) + 14) :]), flush=True)
    tmp.cleanup()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "legal.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    chart(all_results, args.out / "legal.png")
    return all_results


if __name__ == "__main__":
    main()
