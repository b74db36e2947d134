"""benchmarks/legal.py end to end on a tiny LegalBench-RAG-shaped data set (offline, fake embedder)."""

from __future__ import annotations

import json

from conftest import load_benchmark

NDA = (
    "MUTUAL NON-DISCLOSURE AGREEMENT\n"
    "between {party} and its counterparty\n\n"
    "1. The Receiving Party shall not disclose Confidential Information to third parties.\n\n"
    "2. These obligations survive termination of this Agreement for {years} years.\n"
)


def _dataset(root):
    (root / "corpus" / "contractnli").mkdir(parents=True)
    (root / "benchmarks").mkdir()
    tests = []
    for party, years in (("Acme", 2), ("Globex", 5), ("Initech", 7)):
        text = NDA.format(party=party, years=years)
        (root / "corpus" / "contractnli" / f"{party}%20NDA.txt").write_text(text, encoding="utf-8")
        clause = text.index("2. These")
        tests.append(
            {
                "query": f"Consider {party}'s Non-Disclosure Agreement; do the obligations survive termination?",
                "snippets": [
                    {"file_path": f"contractnli/{party}%20NDA.txt", "span": [clause, clause + 40], "answer": ""}
                ],
            }
        )
    (root / "benchmarks" / "contractnli.json").write_text(json.dumps({"tests": tests}), encoding="utf-8")


def test_legal_benchmark_tiny_slice(tmp_path, fake_embedder):
    legal = load_benchmark("legal")
    _dataset(tmp_path / "data")
    out = tmp_path / "out"
    results = legal.main(
        ["--data", str(tmp_path / "data"), "--corpora", "contractnli", "--out", str(out), "--db-dir", str(tmp_path)],
        embedder=fake_embedder,
    )
    rows = results["contractnli"]
    baselines = {legal.BM25, legal.BM25_NAMED, "MiniLM cosine (same chunks)"}
    assert set(rows) == {legal.PRODUCT, *legal.ABLATIONS} | baselines
    product = rows[legal.PRODUCT]
    assert len(product.mrr) == 3 and product.mean(product.doc1) == 1.0  # each query names its NDA
    assert product.mean(product.recall[64]) == 1.0 and 0 < product.mean(product.mrr) <= 1
    for s in rows.values():
        for k in legal.KS:
            assert all(0.0 <= v <= 1.0 for v in s.recall[k] + s.char_p[k] + s.char_r[k])
    md = (out / "legal.md").read_text(encoding="utf-8")
    assert "| **titans-agent (default)** |" in md and "without the document signal" in md and "vs 16.45" in md
    assert (out / "legal.png").stat().st_size > 0


def test_scoring_counts_overlaps_and_characters():
    legal = load_benchmark("legal")
    q = legal.Query("q", (("a.txt", 10, 20), ("a.txt", 100, 110)))
    s = legal.Scores()
    # rank 1: wrong file; rank 2: overlaps the first span by 5 characters (of 20 retrieved)
    legal.score_query(q, [[("b.txt", 0, 50)], [("a.txt", 15, 35)]], s)
    assert s.mrr == [0.5] and s.doc1 == [0.0]
    assert s.recall[1] == [0.0] and s.recall[4] == [0.5]
    assert s.char_p[4] == [5 / 70] and s.char_r[4] == [5 / 20]
