"""Dump or compare the hits of a fixed set of recall queries on a database (a speed change's check).

A change meant to make recall faster must not change what it returns. Run this once with the code
before the change (``--dump before.json``) and once after (``--compare before.json``): every
query's hits must have the same record ids in the same order, with scores equal within 1e-6.

    python benchmarks/recall_hits.py DB --queries 200 --dump before.json [--namespace default]
    python benchmarks/recall_hits.py DB --queries 200 --compare before.json

The queries are those of benchmarks/recall_latency.py (its cached corpus); the records' embeddings
are whatever the database holds; the query is embedded by the real all-MiniLM-L6-v2. Exit status 1
when a comparison differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_latency import load_corpus  # noqa: E402

from titans_agent import MemoryAgent  # noqa: E402
from titans_agent.embeddings import load_embedder  # noqa: E402

TOLERANCE = 1e-6


def hits_of(db: str, queries: list[str], k: int, namespace: str) -> list[list[tuple[int, float]]]:
    """Per query, its hits' ``(record id, score)`` in order."""
    real = load_embedder("all-MiniLM-L6-v2", device="cpu")
    with MemoryAgent.open(db, embedder=real) as agent:
        return [[(h.id, h.score) for h in agent.recall(q, k=k, namespace=namespace)] for q in queries]


def compare(before: list, after: list) -> list[str]:
    """The differences, one line each (empty: identical)."""
    out = []
    for i, (a, b) in enumerate(zip(before, after)):
        ids_a, ids_b = [r for r, _ in a], [r for r, _ in b]
        if ids_a != ids_b:
            out.append(f"query {i}: ids {ids_a} != {ids_b}")
            continue
        worst = max((abs(x - y) for (_, x), (_, y) in zip(a, b)), default=0.0)
        if worst > TOLERANCE:
            out.append(f"query {i}: score difference {worst:.3g}")
    if len(before) != len(after):
        out.append(f"{len(before)} queries before, {len(after)} after")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--dump", type=Path)
    parser.add_argument("--compare", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    _, queries, _ = load_corpus(0, args.queries)
    hits = hits_of(args.db, queries, args.k, args.namespace)
    if args.dump:
        args.dump.write_text(json.dumps({"queries": queries, "hits": hits}))
    if args.compare:
        before = json.loads(args.compare.read_text())
        diffs = compare(before["hits"], hits)
        n = sum(len(h) for h in hits)
        print(f"{len(hits)} queries, {n} hits: " + ("identical" if not diffs else f"{len(diffs)} differ"))
        print("\n".join(diffs[:20]))
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
