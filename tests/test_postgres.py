"""The store on PostgreSQL: the same MemoryAgent through a ``postgresql+psycopg://`` URL,
against a real server (see conftest: a database per test run, a schema per test).

Tests marked ``backends("postgresql")`` are about what only PostgreSQL has (its lexical ranking, bytea,
the server itself); the others run on both backends. The API tests of test_agent.py run on both
backends too (through the ``agent`` fixture); the ingest cases here are the ones test_ingest.py
checks on SQLite files.
"""

from __future__ import annotations

import datetime as dt
import time

import pytest
from conftest import FakeEmbedder, digest, query

from titans_agent import AgentConfig, MemoryAgent, RetrievalConfig, StoreError
from titans_agent.store import SCHEMA_VERSION

LEXICAL_ONLY = AgentConfig(retrieval=RetrievalConfig(use_dense=False, use_lexical=True, use_neural=False))


@pytest.mark.backends("postgresql")
def test_postgresql_round_trip_restores_records_times_metadata_and_state_bit_for_bit(db_url):
    meta = {"team": "ops", "tags": ["a", "ü", "漢字"], "nested": {"depth": {"n": 1.5, "ok": True}}}
    when = dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    with MemoryAgent.open(db_url, embedder=FakeEmbedder()) as agent:
        assert agent.store.is_postgres
        agent.ingest("Payment terms: invoices are due within 30 days.\n\nLate fees: 2% a month.", source="t.txt")
        note = agent.remember("The staging server listens on port 8443.", metadata=meta)
        agent.add_turn("chat", "user", "Please call me Dana.", timestamp=when)
        before = [(h.id, h.score) for h in agent.recall("what port does staging use", k=5)]
        state = digest(agent.memory_state("default"))
    with MemoryAgent.open(db_url, embedder=FakeEmbedder()) as agent:
        assert [(h.id, h.score) for h in agent.recall("what port does staging use", k=5)] == before
        assert digest(agent.memory_state("default")) == state
        hit = next(h for h in agent.recall("staging server port", k=5) if h.id == note.record_id)
        assert hit.metadata == meta
        turn = agent.turns("chat")[0]
        assert turn["timestamp"] == when and turn["timestamp"].tzinfo is not None
        assert turn["timestamp"].utcoffset() == dt.timedelta(0)
        types = dict(
            query(
                agent,
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name IN ('memory_checkpoints', 'memory_parameters')",
            )
        )
        assert types["state"] == types["params"] == "bytea"


@pytest.mark.backends("postgresql")
def test_postgresql_lexical_search_ranks_stemmed_terms_with_sql_syntax_literal(db_url):
    with MemoryAgent.open(db_url, LEXICAL_ONLY, embedder=FakeEmbedder()) as agent:
        escrow = agent.remember("The escrow release date is 2031-03-14, as agreed by both parties.").record_id
        agent.remember("Payment terms: invoices are due within 30 days of receipt.")
        agent.remember("The parties agreed on a date for the kick-off meeting.")
        # stemmed ("releasing" finds "release"), stopwords left out, the best match first
        assert agent.recall("When is the escrow releasing?", k=3)[0].id == escrow
        # an OR of the terms: one matching term is enough
        assert [h.id for h in agent.recall("escrow unicorns", k=3)] == [escrow]
        # tsquery and SQL syntax in a query is literal text, never an error
        for q in ["escrow & | ! ( ) : * <-> '", "escrow%' OR 1=1 --", "\\ release"]:
            assert agent.recall(q, k=3)[0].id == escrow
        assert agent.recall("zebra", k=3) == []


@pytest.mark.backends("postgresql")
def test_postgresql_text_outranks_context_and_namespaces_stay_apart(db_url):
    with MemoryAgent.open(db_url, LEXICAL_ONLY, embedder=FakeEmbedder()) as agent:
        in_text = agent.ingest("Alder invoices are sent monthly.", source="billing.md").stored
        agent.ingest("Invoices are sent monthly to every customer.", source="alder/notes.md")
        agent.remember("Project Alder invoice total is 1,200 EUR", namespace="tenant_a")
        assert in_text == 1
        hits = agent.recall("alder", k=5)
        assert [h.source for h in hits] == ["billing.md", "alder/notes.md"]  # text (A) above context (B)
        assert all(h.source != "tenant_a" for h in hits)
        assert [h.text for h in agent.recall("alder invoice", k=50, namespace="tenant_a")] == [
            "Project Alder invoice total is 1,200 EUR"
        ]


@pytest.mark.backends("postgresql")
def test_postgresql_ingest_resumes_skips_unchanged_and_replaces_changed_files(db_url, tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "a.md").write_text("First file about apples.", encoding="utf-8")
    (folder / "b.md").write_text("Second file about bananas.", encoding="utf-8")
    with MemoryAgent.open(db_url, embedder=FakeEmbedder()) as agent:
        first, again = agent.ingest(folder), agent.ingest(folder)
        assert (first.files, first.stored) == (2, 2)
        assert (again.files, again.unchanged, again.stored) == (0, 2, 0)
        (folder / "b.md").write_text("Second file, now about cherries.", encoding="utf-8")
        third = agent.ingest(folder)
        assert (third.files, third.unchanged, third.stored) == (1, 1, 1)
        assert sorted(t for (t,) in query(agent, "SELECT text FROM records")) == [
            "First file about apples.",
            "Second file, now about cherries.",
        ]
        assert query(agent, "SELECT count(*) FROM documents WHERE complete") == [(2,)]
        assert agent.recall("cherries", k=1)[0].source == str(folder / "b.md")


@pytest.mark.backends("postgresql")
def test_postgresql_c5_long_document_keeps_every_word(db_url, tmp_path):
    words = [f"clause{i % 97} term{i % 13} provision" for i in range(2000)]
    paragraphs = [" ".join(words[i : i + 60]) + "." for i in range(0, 2000, 60)]
    paragraphs.append("The escrow release date: 2031-03-14, as agreed by both parties.")
    doc = tmp_path / "contract.txt"
    doc.write_text("\n\n".join(paragraphs), encoding="utf-8")
    with MemoryAgent.open(db_url, embedder=FakeEmbedder()) as agent:
        assert agent.ingest(doc).chunks > 10
        assert "2031-03-14" in agent.recall("When is the escrow release date?", k=3)[0].text
        sql = "SELECT r.text FROM records r JOIN occurrences o ON o.record_id = r.id ORDER BY o.chunk_index"
        assert " ".join(t for (t,) in query(agent, sql)).split() == doc.read_text().split()


@pytest.mark.backends()
def test_a_database_with_a_newer_schema_refuses_to_open(db_url):
    MemoryAgent.open(db_url, embedder=FakeEmbedder()).close()
    with MemoryAgent.open(db_url, embedder=FakeEmbedder()) as agent:
        with agent.store.engine.begin() as conn:
            conn.exec_driver_sql(f"UPDATE meta SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1} is newer"):
        MemoryAgent.open(db_url, embedder=FakeEmbedder())


@pytest.mark.backends()
def test_two_agents_writing_a_new_namespace_share_one_memory(db_url):
    a = MemoryAgent.open(db_url, embedder=FakeEmbedder())
    b = MemoryAgent.open(db_url, embedder=FakeEmbedder())
    try:
        a.remember("written by a", namespace="fresh")
        b.remember("written by b", namespace="fresh")
        assert query(a, "SELECT count(*) FROM namespaces WHERE name = 'fresh'") == [(1,)]
        assert a.stats("fresh").memory_step == b.stats("fresh").memory_step == 2
        assert digest(a.memory_state("fresh")) == digest(b.memory_state("fresh"))
    finally:
        a.close()
        b.close()


def test_an_unreachable_postgresql_server_is_a_store_error():
    t0 = time.perf_counter()
    with pytest.raises(StoreError, match="cannot open database"):
        MemoryAgent.open("postgresql+psycopg://postgres@127.0.0.1:1/none", embedder=FakeEmbedder())
    assert time.perf_counter() - t0 < 30
