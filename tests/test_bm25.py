"""The in-memory BM25 index (titans_agent.bm25): the formula, held to SQLite FTS5's bm25() as an
oracle on the same rows; appends, context updates, filters, ties; and recall keeping it current."""

from __future__ import annotations

import math
import random
import sqlite3
import unicodedata

import numpy as np
import pytest
from conftest import digest

from titans_agent.bm25 import K1, B, BM25Index, idf, idf_nonnegative, term_score
from titans_agent.text import index_terms, query_terms

WORDS = (
    "patent licence terminate contributor lawsuit litigation warranty decoder json column line error "
    "staging server port deploy memory surprise momentum namespace recall chunk session vegetarian "
    "boston seattle nurse engineer running runs runner connection connected"
).split()


def _corpus(n: int, seed: int = 0) -> list[tuple[int, str, str]]:
    rng = random.Random(seed)
    rows = []
    for i in range(1, n + 1):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 30)))
        context = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6)))
        rows.append((i, text, context))
    return rows


def _fts5(rows: list[tuple[int, str, str]], terms: list[str], limit: int) -> list[tuple[int, float]]:
    """SQLite FTS5 bm25 with the tokenizer the index replaced, text 1.0 and context 0.5."""
    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(text, context, tokenize='porter unicode61 remove_diacritics 2')")
    con.executemany("INSERT INTO t(rowid, text, context) VALUES (?, ?, ?)", rows)
    match = " OR ".join('"' + w + '"' for w in terms)
    got = con.execute(
        "SELECT rowid, bm25(t, 1.0, 0.5) AS s FROM t WHERE t MATCH ? ORDER BY s, rowid LIMIT ?", (match, limit)
    ).fetchall()
    return [(int(r), -float(s)) for r, s in got]


@pytest.mark.parametrize("query", ["patent lawsuit", "running connection", "json decoder error column", "boston"])
def test_scores_equal_fts5_bm25_on_the_same_rows(query):
    rows = _corpus(400)
    index = BM25Index()
    index.add(rows)
    words = query_terms(query)
    ours = index.search([t for w in words for t in index_terms(w)], 50)
    oracle = _fts5(rows, words, 50)
    assert [r for r, _ in ours] == [r for r, _ in oracle]
    for (_, a), (_, b) in zip(ours, oracle):
        assert a == pytest.approx(b, rel=1e-6)


def test_the_shared_scoring_core_by_hand():
    # the term score the lexical index and the document signal share: floats and arrays alike, exactly
    assert term_score(2.0, 1.0, 10.0, 5.0) == 2.0 * 1.0 * (K1 + 1.0) / (1.0 + K1 * (1.0 - B + B * 10.0 / 5.0))
    assert term_score(1.0, 3.0, 4.0, 4.0, k1=2.0, b=0.0) == 3.0 * 3.0 / (3.0 + 2.0)
    tf, lengths = np.array([0.5, 1.0, 1.5, 7.0]), np.array([3.0, 9.0, 1.0, 30.0])
    arr = term_score(0.7, tf, lengths, 6.5)
    assert arr.tolist() == [term_score(0.7, float(t), float(n), 6.5) for t, n in zip(tf, lengths)]
    assert idf(10, 2) == math.log(8.5 / 2.5)
    assert idf(10, 9) == 1e-6  # more than half the items: floored, still counts
    assert idf_nonnegative(10, 2) == math.log(1.0 + 8.5 / 2.5)
    assert 0 < idf_nonnegative(10, 10) < idf_nonnegative(10, 1)


def test_one_record_by_hand():
    index = BM25Index()
    index.add([(7, "patent patent licence", "patent"), (8, "memory", ""), (9, "port", "ops")])
    ((rid, score),) = index.search(["patent"], 5)
    n, n_t, avgdl, tf, length = 3, 1, (4 + 1 + 2) / 3, 2.5, 4
    idf = math.log((n - n_t + 0.5) / (n_t + 0.5))
    assert rid == 7
    assert score == pytest.approx(idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl)))


def test_a_term_in_most_records_still_counts_a_little():
    index = BM25Index()
    index.add([(1, "server", ""), (2, "server port", ""), (3, "port", "")])
    hits = dict(index.search(["server"], 5))  # in 2 of 3 records: idf <= 0, floored
    assert set(hits) == {1, 2} and all(0 < v < 1e-5 for v in hits.values())


def test_appends_and_context_updates_equal_a_fresh_build():
    rows = _corpus(200, seed=1)
    grown = {5: rows[4][2] + " | seattle nurse", 120: rows[119][2] + " | patent"}
    final = [(i, t, grown.get(i, c)) for i, t, c in rows]
    fresh = BM25Index()
    fresh.add(final)
    step = BM25Index()
    step.add(rows[:150])
    step.add([(i, t, grown[i]) for i, t, _ in rows if i in grown and i <= 150])  # indexed again
    step.add(rows[150:])
    step.add([(120, rows[119][1], grown[120])])  # again: the newest context wins
    assert len(step) == len(fresh) == 200 and step.dead == 3
    for query in (["seattl", "nurs"], ["patent"], ["json", "decod"]):
        a, b = step.search(query, 30), fresh.search(query, 30)
        assert [r for r, _ in a] == [r for r, _ in b]
        assert [s for _, s in a] == pytest.approx([s for _, s in b], rel=1e-12)


def test_within_keeps_the_best_allowed_however_many_score_higher():
    rows = [(i, "patent " * (1 + i % 5) + "x" * (i % 3 + 1), "") for i in range(1, 301)]
    index = BM25Index()
    index.add(rows)
    allowed = {3, 77, 150, 299}
    got = index.search(["patent"], 2, within=allowed)
    everything = index.search(["patent"], 300)
    assert [r for r, _ in got] == [r for r, _ in everything if r in allowed][:2]
    assert index.search(["patent"], 5, within=set()) == []


def test_ties_are_settled_by_ascending_id_at_the_limit():
    index = BM25Index()
    index.add([(i, "same words here", "") for i in (9, 3, 5, 1, 7)] + [(20, "other", "")])
    assert [r for r, _ in index.search(["word"], 3)] == [1, 3, 5]


def test_nothing_to_find():
    index = BM25Index()
    assert index.search(["anything"], 5) == []
    index.add([(1, "", ""), (2, "!!!", "")])
    assert index.search(["anything"], 5) == [] and index.search([], 5) == [] and index.search(["x"], 0) == []


def test_index_terms_follow_the_fts5_tokenizer_rules():
    assert index_terms("render_progress Running naïve CAFÉ x2 HTTPServer") == [
        "render",
        "progress",
        "render_progress",  # an identifier also whole, after its parts
        "run",
        "naiv",
        "cafe",
        "x2",
        "httpserver",
    ]
    assert index_terms("an ox") == ["an", "ox"]  # under 3 characters: not stemmed
    assert index_terms("__init__ _basic__auth_str_ Café_Crème") == [
        "init", "basic", "auth", "str", "basic_auth_str", "cafe", "creme", "cafe_creme",
    ]  # fmt: skip
    long = "a" * 70
    assert index_terms(long) == [long]
    decomposed = unicodedata.normalize("NFD", "naïve résumé from Zürich")  # combining accents
    assert index_terms(decomposed) == index_terms("naive resume from zurich") == ["naiv", "resum", "from", "zurich"]


def test_a_query_looks_up_at_most_max_query_terms_after_splitting():
    from titans_agent.recall import lexical_terms
    from titans_agent.text import MAX_QUERY_TERMS

    glued = "_".join(f"w{i}" for i in range(5000))  # one token, 5,000 index terms
    assert len(lexical_terms(glued)) == MAX_QUERY_TERMS


def _fresh(agent, namespace: str = "default") -> BM25Index:
    """The index built anew from the database's rows."""
    from titans_agent.store.context import lexical_rows

    rt = agent._runtimes.get(namespace, create=False)
    index = BM25Index()
    with agent.store.snapshot_session() as s:
        index.add(lexical_rows(s, rt.ns_id))
    return index


def _same(agent, query: str, namespace: str = "default") -> None:
    """The live agent's index (brought current by a recall) ranks as a fresh build does."""
    from titans_agent.recall import lexical_terms

    agent.recall(query, k=3, namespace=namespace)
    live = agent._runtimes.get(namespace, create=False).lexical
    fresh = _fresh(agent, namespace)
    terms = lexical_terms(query)
    assert live is not None and len(live) == len(fresh)
    a, b = live.search(terms, 50), fresh.search(terms, 50)
    assert [r for r, _ in a] == [r for r, _ in b] and [s for _, s in a] == pytest.approx([s for _, s in b])


def _lexical_first(agent, query: str, namespace: str = "default") -> str:
    return next(h.text for h in agent.recall(query, k=5, namespace=namespace) if h.signals.get("lexical") == 1)


@pytest.mark.backends
def test_recall_keeps_the_index_current_through_writes_merges_other_agents_and_deletes(db_url, fake_embedder):
    from titans_agent import MemoryAgent

    header = "Licensed under the Apache License, Version 2.0; see the patent grant."
    with MemoryAgent.open(db_url, embedder=fake_embedder) as a, MemoryAgent.open(db_url, embedder=fake_embedder) as b:
        a.add_turn("s1", "user", "The staging server listens on port 8443.")
        _same(a, "staging port")
        a.ingest(header, source="alpha.py")
        _same(a, "apache licence")
        a.ingest(header, source="omega_gadget.py")  # the same text: a merge grows the record's context
        _same(a, "omega gadget")
        assert _lexical_first(a, "omega gadget") == header
        b.ingest(header, source="zeta_widget.py")  # another agent merges: found by the context lengths
        b.add_turn("s2", "user", "I moved to Seattle last spring.")
        _same(a, "zeta widget seattle")
        assert _lexical_first(a, "zeta widget") == header
        a.add_turn("s1", "user", "Deploys go out every Tuesday.")
        b.forget(source="session:s2")  # records deleted elsewhere: the index is built again
        _same(a, "seattle tuesday deploys")
        assert all("Seattle" not in h.text for h in a.recall("seattle", k=5))


def test_a_reused_record_id_with_the_same_embedding_is_indexed_again(tmp_path, fake_embedder):
    """SQLite reuses a deleted record's id: the same text under another source has the same
    embedding (the dense index is rightly kept) but another context, which the other agent's
    lexical index must take."""
    from titans_agent import MemoryAgent

    db = tmp_path / "m.db"
    with MemoryAgent.open(db, embedder=fake_embedder) as a, MemoryAgent.open(db, embedder=fake_embedder) as b:
        for i in range(6):
            b.remember(f"unrelated note {i} about sailing boats and harbour {i}")
        text = "Quarterly revenue grew in the northern region."
        b.ingest(text, source="alpha.md")
        _same(a, "alpha revenue")
        b.forget(source="alpha.md")
        b.ingest(text, source="gamma.md")  # the same length of context, the same id again
        _same(a, "gamma alpha")
        assert _lexical_first(a, "gamma") == text
        assert all(h.signals.get("lexical") is None for h in a.recall("alpha", k=5))


def test_repeats_do_not_grow_the_index(agent):
    agent.remember("background note about the harbour")

    def repeat(times: int) -> tuple[int, int]:
        for _ in range(times):
            agent.add_turn("s", "user", "What is the capital of France?", timestamp="2024-01-01T00:00:00Z")
            agent.recall("capital", k=2)
        live = agent._runtimes.get("default", create=False).lexical
        return len(live), live.dead

    settled = repeat(3)  # the second turn's context takes the turn before it: indexed again once
    assert settled[0] == 2 and repeat(30) == settled  # then a repeat adds no context: not indexed again


def test_the_lexical_index_counts_against_the_runtime_budget(agent):
    for text in ("The staging server listens on port 8443.", "Deploys go out every Tuesday.", "Alice runs ops."):
        agent.remember(text)
    rt = agent._runtimes.get("default", create=False)
    assert rt.lexical is None  # writes alone never build it
    before = rt.nbytes
    agent.recall("staging port", k=2)
    assert rt.lexical is not None and rt.lexical.nbytes > 0 and rt.nbytes == before + rt.lexical.nbytes
    assert agent._runtimes._sizes["default"] == rt.nbytes


def test_a_large_namespace_scans_a_float16_copy_kept_in_step_with_writes(agent, monkeypatch):
    import torch

    from titans_agent import recall as recall_module

    monkeypatch.setattr(recall_module, "HALF_SCAN_ROWS", 4)
    for i in range(5):
        agent.remember(f"note {i}: the harbour crane number {i} was serviced.")
    agent.recall("harbour crane serviced", k=5)
    rt = agent._runtimes.get("default", create=False)
    assert rt.half is not None and rt.half[0] is rt.emb and rt.half[1].dtype == torch.float16
    agent.remember("note 5: the harbour crane number 5 was serviced.")  # appended to the copy, not made anew
    assert rt.half[0] is rt.emb and rt.half[1].shape[0] == rt.emb.shape[0] == 6
    assert torch.equal(rt.half[1], rt.emb.to(torch.float16))
    assert rt.nbytes >= rt.emb.numel() * 6  # float32 + float16 copy counted
    monkeypatch.setattr(recall_module, "HALF_SCAN_ROWS", 10**9)
    exact = [h.id for h in agent.recall("harbour crane serviced", k=6)]
    monkeypatch.setattr(recall_module, "HALF_SCAN_ROWS", 4)
    assert [h.id for h in agent.recall("harbour crane serviced", k=6)] == exact  # the same ranking


def test_a_namespace_dropped_and_imported_again_is_not_continued_by_another_agent(tmp_path, fake_embedder):
    """The import keeps the exported created_at and SQLite reuses the namespace's id, so only the
    revision (restarting at 0) tells the other agent that its cached runtime is another namespace's."""
    from titans_agent import MemoryAgent
    from titans_agent.transfer import export_jsonl, import_jsonl

    db, backup = tmp_path / "x.db", tmp_path / "backup.jsonl"
    with MemoryAgent.open(db, embedder=fake_embedder) as a, MemoryAgent.open(db, embedder=fake_embedder) as b:
        for i in range(4):
            a.add_turn("s1", "user", f"Turn {i}: the locker {i} holds box {i * 7}.", namespace="x")
        export_jsonl(a, backup)
        exported = digest(a.memory_state("x"))
        a.add_turn("s1", "user", "A turn the backup does not hold.", namespace="x")
        b.recall("locker", namespace="x")  # b's runtime: its index and state at revision 5
        assert b.memory_state("x").step == 5
        a.drop_namespace("x")
        import_jsonl(a, backup)  # the same name and created_at, revision 0
        assert digest(b.memory_state("x")) == exported  # not b's old state continued
        a.add_turn("s1", "user", "The zebra quokka password is marmalade.", namespace="x")
        _same(b, "zebra quokka marmalade", namespace="x")
        assert _lexical_first(b, "zebra quokka", namespace="x") == "The zebra quokka password is marmalade."


def test_the_float16_scan_ranks_as_float32_whatever_the_embedders_scale(agent, monkeypatch):
    """An embedder may return rows far from unit length: the float16 scan takes the unit query."""
    from titans_agent import recall as recall_module

    for i in range(12):
        agent.remember(f"note {i}: the harbour crane number {i} was serviced on day {i * 3}.")
    agent.recall("crane", k=1)
    for scale in (1e6, 1e-9):
        real = agent.embedder.embed
        monkeypatch.setattr(agent.embedder, "embed", lambda texts, real=real, scale=scale: real(texts) * scale)
        monkeypatch.setattr(recall_module, "HALF_SCAN_ROWS", 10**9)
        exact = [(h.id, h.signals.get("dense")) for h in agent.recall("crane serviced day", k=6)]
        monkeypatch.setattr(recall_module, "HALF_SCAN_ROWS", 2)
        assert [(h.id, h.signals.get("dense")) for h in agent.recall("crane serviced day", k=6)] == exact
        monkeypatch.setattr(agent.embedder, "embed", real)
