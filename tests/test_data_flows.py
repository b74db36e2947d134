"""What came with the rooms by data flow: the write projects once, a recall reads one snapshot, a
namespace keeps its chunking, other backends are refused, writes retry locks, and the library
leaves the process's environment and logging alone."""

from __future__ import annotations

import logging
import os
import threading

import numpy as np
import pytest
import torch
from conftest import FakeEmbedder, query
from sqlalchemy import event

from titans_agent import (
    AgentConfig,
    ChunkingMismatchError,
    InvalidInputError,
    MemoryAgent,
    MemoryConfig,
    StoreError,
)
from titans_agent.core.memory import NeuralMemory
from titans_agent.rows import BatchRecord
from titans_agent.write import decide

DOC = "\n\n".join(
    f"Paragraph {i}: the contract's clause {i} sets the notice period to {i + 2} weeks for the supplier."
    for i in range(30)
)


def test_write_projects_once_and_equals_surprise_then_update() -> None:
    torch.manual_seed(0)
    mem = NeuralMemory(MemoryConfig(dim=16, depth=2, chunk_size=4, dtype="float64"))
    x = torch.randn(11, 16, dtype=torch.float64)
    state = mem.update(mem.init_state(), torch.randn(6, 16, dtype=torch.float64)).state  # 2 pending
    surprise, res = mem.write(state, x)
    assert torch.allclose(surprise, mem.surprise(state, x), atol=1e-12, rtol=0)
    ref = mem.update(state, x)
    assert res.state.step == ref.state.step == 17
    for a, b in zip(
        (*res.state.weights, *res.state.momentum, res.state.pending),
        (*ref.state.weights, *ref.state.momentum, ref.state.pending),
    ):
        assert torch.allclose(a, b, atol=1e-12, rtol=0)


def test_decide_is_pure_and_names_each_outcome() -> None:
    words = [frozenset({"a"}), frozenset({"b"}), frozenset({"a"}), frozenset({"c"}), frozenset({"d"})]
    hashes = ["ha", "hb", "ha", "hc", "hd"]
    surprise = np.array([0.9, 0.1, 0.9, 0.1, float("nan")])
    out = decide(
        hashes,
        words,
        surprise,
        existing={"hb": 7},
        nearest=[None, (7, 0.99), None, (8, 0.99), (8, 0.99)],
        nearest_words={8: frozenset({"c"})},
        threshold=0.5,
        duplicate_similarity=0.97,
    )
    assert [(d.decision, d.target) for d in out] == [
        ("new", None),  # unseen
        ("repeat", 7),  # its text is record 7's
        ("repeat", BatchRecord(0)),  # the batch's first unit has the same text
        ("merged", 8),  # predicted, cosine >= 0.97 and the same words
        ("new", None),  # a non-finite surprise is never "known" nor merged
    ]
    assert out[4].surprise is None


@pytest.mark.backends()
def test_a_recall_reads_the_database_through_one_connection_checkout(agent) -> None:
    agent.add_turns([("s1", "user", f"I keep {n} plants on my balcony in Lyon.") for n in range(5)])
    agent.remember("The staging server listens on port 8443.")
    agent.recall("balcony plants")  # the runtime is loaded
    checkouts: list[int] = []
    listener = lambda *_: checkouts.append(1)  # noqa: E731
    event.listen(agent.store.engine, "checkout", listener)
    try:
        hits = agent.recall("How many plants are on the balcony?", k=3, session_id="s1")
    finally:
        event.remove(agent.store.engine, "checkout", listener)
    assert hits and all(h.session_id == "s1" for h in hits)
    assert len(checkouts) == 1


@pytest.mark.backends()
def test_a_namespace_keeps_the_chunking_its_documents_were_cut_with(db_url, fake_embedder) -> None:
    with MemoryAgent.open(db_url, AgentConfig(chunk_tokens=64), embedder=fake_embedder) as a:
        first = a.ingest(DOC, source="contract")
        assert first.chunks > 1
    with MemoryAgent.open(db_url, AgentConfig(chunk_tokens=32), embedder=fake_embedder) as b:
        with pytest.raises(ChunkingMismatchError, match="chunk_tokens=64") as err:
            b.ingest(DOC, source="contract")
        assert isinstance(err.value, ValueError) and "chunk_tokens=32" in str(err.value)
        assert b.stats().chunks == first.chunks  # nothing was cut again or replaced
        assert b.recall("notice period of clause 7", k=1)  # reading is unaffected
        b.remember("A note is not chunked anew.")  # nor are notes and turns
        assert b.ingest(DOC, source="contract", namespace="other").chunks > first.chunks
    with MemoryAgent.open(db_url, AgentConfig(chunk_tokens=64), embedder=fake_embedder) as c:
        assert c.ingest(DOC, source="contract").unchanged == 1


def test_a_namespace_made_before_chunking_was_recorded_records_it(tmp_path, fake_embedder) -> None:
    db = tmp_path / "old.db"
    with MemoryAgent.open(db, AgentConfig(chunk_tokens=64), embedder=fake_embedder) as a:
        a.ingest(DOC, source="contract")
        with a.store.engine.begin() as conn:
            conn.exec_driver_sql("UPDATE namespaces SET chunking = NULL")
    with MemoryAgent.open(db, AgentConfig(chunk_tokens=64), embedder=fake_embedder) as b:
        assert b.ingest(DOC, source="contract").unchanged == 1
        (stored,) = query(b, "SELECT chunking FROM namespaces")[0]
        assert "64" in str(stored)


@pytest.mark.parametrize("url", ["mysql+pymysql://root@127.0.0.1:3306/test", "oracle://u:secret@db/x"])
def test_a_backend_other_than_sqlite_or_postgresql_is_refused_at_open(url, fake_embedder) -> None:
    with pytest.raises(StoreError, match="SQLite or PostgreSQL") as err:
        MemoryAgent.open(url, embedder=fake_embedder)
    assert "secret" not in str(err.value)


def test_replace_needs_a_source(agent) -> None:
    with pytest.raises(InvalidInputError, match="source"):
        agent.remember("x", replace=True)


def test_update_metadata_waits_for_and_retries_a_held_write_lock(tmp_path) -> None:
    db = tmp_path / "m.db"
    with MemoryAgent.open(db, embedder=FakeEmbedder()) as a, MemoryAgent.open(db, embedder=FakeEmbedder()) as b:
        a.ingest("Clause 1: payment within 30 days.", source="contract")
        errors: list[BaseException] = []

        def write_turns() -> None:
            try:
                for i in range(15):
                    b.add_turn("s", "user", f"turn number {i} about the payment clause")
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        t = threading.Thread(target=write_turns)
        t.start()
        n = [a.update_metadata({"round": i}, source="contract") for i in range(15)]
        t.join()
        assert not errors and n == [1] * 15
        assert a.records(source="contract")[0].metadata == {"round": 14}


@pytest.mark.integration
def test_loading_the_real_embedder_leaves_environment_and_logging_alone() -> None:
    import sentence_transformers  # noqa: F401 - its import sets variables of its own (KMP_*, ...)

    from titans_agent.embeddings import SentenceTransformerEmbedder

    names = ("transformers", "sentence_transformers", "huggingface_hub")
    levels = {n: logging.getLogger(n).level for n in names}
    env = dict(os.environ)
    emb = SentenceTransformerEmbedder()
    assert emb.embed(["hello"]).shape == (1, emb.dim)
    assert dict(os.environ) == env
    assert {n: logging.getLogger(n).level for n in names} == levels
