"""MemoryAgent behaviour with a deterministic embedder and a real SQLite file.

Cases from docs/failure-cases.md are named in the test names (c1 ... c12).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import FakeEmbedder, digest

from titans_agent import (
    DEFAULT_NAMESPACE,
    AgentConfig,
    EmbedderMismatchError,
    EmptyInputError,
    InvalidInputError,
    MemoryAgent,
    NamespaceNotFoundError,
    RecordNotFoundError,
    RetrievalConfig,
    StoreError,
)
from titans_agent.core.memory import state_from_bytes

TESTS = Path(__file__).parent


def count_records(db: Path, namespace: str | None = None) -> int:
    con = sqlite3.connect(db)
    try:
        if namespace is None:
            return con.execute("SELECT count(*) FROM records").fetchone()[0]
        return con.execute(
            "SELECT count(*) FROM records r JOIN namespaces n ON n.id = r.namespace_id WHERE n.name = ?",
            (namespace,),
        ).fetchone()[0]
    finally:
        con.close()


# ---------------------------------------------------------------------- C1 repeats
def test_c1_repeated_input_is_stored_once_and_reported_known(agent, tmp_path):
    first = agent.remember("The staging server listens on port 8443.", namespace="u1")
    second = agent.remember("The staging server listens on port 8443.", namespace="u1")
    third = agent.remember("  the staging   server listens on port 8443.  ", namespace="u1")
    assert first.decision == "new" and first.stored
    assert second.decision == "repeat" and not second.stored
    assert third.decision == "repeat"
    assert second.record_id == third.record_id == first.record_id
    assert count_records(tmp_path / "memory.db", "u1") == 1
    hits = agent.recall("staging server port", namespace="u1")
    assert hits[0].id == first.record_id
    assert hits[0].hits == 3


@pytest.mark.backends()
def test_repeat_within_one_batch_is_stored_once(agent):
    # two paragraphs too long to share a chunk, identical: one batch, two chunks, one record
    text = "\n\n".join(["unique paragraph " + " ".join(["word"] * 150)] * 2)
    report = agent.ingest(text, source="dup.txt")
    assert report.chunks == 2 and report.stored == 1 and report.repeats == 1
    assert agent.stats().records == 1 and agent.stats().notes == 0 and agent.stats().chunks == 2


@pytest.mark.backends()
def test_clauses_differing_in_a_number_or_name_stay_two_records(agent):
    a = agent.remember("The tenant shall pay a deposit of 1,200 EUR before the start of the lease.")
    b = agent.remember("The tenant shall pay a deposit of 1,500 EUR before the start of the lease.")
    c = agent.remember("The landlord shall pay a deposit of 1,200 EUR before the start of the lease.")
    assert {a.decision, b.decision, c.decision} <= {"new", "known"}
    assert len({a.record_id, b.record_id, c.record_id}) == 3


def test_near_duplicate_with_low_surprise_is_merged(tmp_path, fake_embedder):
    cfg = AgentConfig(write_threshold=10.0)  # everything counts as known: only similarity decides
    with MemoryAgent.open(tmp_path / "m.db", cfg, embedder=fake_embedder) as agent:
        a = agent.remember("Deploys happen on Tuesday, the release manager is Priya.")
        b = agent.remember("deploys happen on tuesday; the release manager is priya!")
        c = agent.remember("Deploys happen on Friday, the release manager is Priya.")
    assert a.stored
    assert b.decision in ("merged", "repeat") and b.record_id == a.record_id
    assert c.stored and c.record_id != a.record_id


def test_each_record_keeps_its_surprise_and_decision(agent, tmp_path):
    agent.remember("Our VPN gateway is vpn.example.org.")
    con = sqlite3.connect(tmp_path / "memory.db")
    surprise, decision = con.execute("SELECT surprise, decision FROM records").fetchone()
    con.close()
    assert surprise is not None and surprise > 0
    assert decision in ("new", "known")


@pytest.mark.backends()
def test_surprise_of_a_unit_falls_after_it_is_written(agent):
    text = "The quarterly board meeting moved to the Lisbon office."
    first = agent.remember(text)
    again = agent.remember(text)
    assert again.surprise < first.surprise


# ---------------------------------------------------------------------- C2 / C3 isolation
@pytest.mark.backends()
def test_c2_tenant_isolation(agent):
    agent.remember("Project Alder invoice total is 1,200 EUR", namespace="tenant_a")
    agent.remember("Project Birch invoice total is 900 EUR", namespace="tenant_b")
    hits = agent.recall("invoice total", namespace="tenant_b", k=50)
    assert [h.text for h in hits] == ["Project Birch invoice total is 900 EUR"]
    assert agent.recall("Alder", namespace="tenant_b", k=50)[0].text.startswith("Project Birch")


@pytest.mark.parametrize(
    "pair",
    [("org/lumen", "org/lumen-labs"), ("user1", "user10"), ("a%", "ab"), ("a_", "ab"), ("s1", "s1_old")],
)
@pytest.mark.backends()
def test_c3_look_alike_namespaces_never_leak(agent, pair):
    mine, sibling = pair
    agent.remember(f"secret of {sibling} is swordfish", namespace=sibling)
    agent.remember(f"note of {mine} about lunch", namespace=mine)
    hits = agent.recall("secret swordfish note lunch", namespace=mine, k=50)
    assert hits and all("swordfish" not in h.text for h in hits)
    assert agent.stats(mine).records == 1
    with pytest.raises(NamespaceNotFoundError):
        agent.recall("secret", namespace="a")  # a prefix is not a namespace


@pytest.mark.backends()
def test_c3_sessions_with_look_alike_ids_stay_apart(agent):
    agent.add_turn("s1", "user", "I like green tea")
    agent.add_turn("s1_old", "user", "I like black coffee")
    assert [t["content"] for t in agent.turns("s1")] == ["I like green tea"]
    hits = agent.recall("what do I like", session_id="s1", k=10)
    assert [h.text for h in hits] == ["I like green tea"]


@pytest.mark.backends()
@pytest.mark.parametrize("bad", ["", "   ", None, 5, "x\x00y\x01"])
def test_bad_namespace_names_raise(agent, bad):
    with pytest.raises(InvalidInputError):
        agent.remember("hello", namespace=bad)


# ---------------------------------------------------------------------- C6 empty input
@pytest.mark.backends()
@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_c6_blank_query_raises_value_error(agent, query):
    agent.remember("something")
    with pytest.raises(ValueError):
        agent.recall(query)
    with pytest.raises(EmptyInputError):
        agent.recall(query)


def test_c6_empty_writes_store_nothing_and_leave_memory_untouched(agent, tmp_path):
    agent.remember("a first note so the namespace exists")
    db = tmp_path / "memory.db"
    state = agent.memory_state()
    con = sqlite3.connect(db)
    before = con.execute("SELECT step, revision FROM namespaces").fetchone()
    checkpoints_before = con.execute("SELECT * FROM memory_checkpoints").fetchall()
    con.close()
    for bad in ["", "  \n", "\t"]:
        with pytest.raises(ValueError):
            agent.add_turn("s", "user", bad)
        with pytest.raises(ValueError):
            agent.remember(bad)
        with pytest.raises(ValueError):
            agent.ingest(bad, source="empty.txt")
    con = sqlite3.connect(db)
    after = con.execute("SELECT step, revision FROM namespaces").fetchone()
    assert con.execute("SELECT * FROM memory_checkpoints").fetchall() == checkpoints_before
    con.close()
    assert before == after
    again = agent.memory_state()
    assert all(torch.equal(a, b) for a, b in zip((*state.weights, *state.momentum), (*again.weights, *again.momentum)))
    assert count_records(db) == 1
    assert agent.turns("s") == []


@pytest.mark.backends()
def test_recall_rejects_bad_k(agent):
    agent.remember("x marks the spot")
    for k in (0, -1, 1.5, True):
        with pytest.raises(InvalidInputError):
            agent.recall("spot", k=k)


@pytest.mark.backends()
def test_reads_in_a_namespace_that_does_not_exist_say_so(agent):
    """A misspelled namespace is an error on every inspection read (as the CLI says), never a
    silent empty answer; ``missing_ok=True`` reads it as empty (a chatbot's new user); nothing is
    created either way."""
    agent.remember("Alice keeps a cat named Tom", namespace="alice")
    agent.add_turn("s", "user", "hello", namespace="alice")
    reads = {
        "recall": lambda **kw: agent.recall("cat", namespace="alise", **kw),
        "stats": lambda **kw: agent.stats("alise", **kw),
        "records": lambda **kw: agent.records(namespace="alise", **kw),
        "turns": lambda **kw: agent.turns("s", namespace="alise", **kw),
        "memory_state": lambda **kw: agent.memory_state("alise", **kw),
        "forget": lambda **kw: agent.forget(source="crm", namespace="alise", **kw),
        "update_metadata": lambda **kw: agent.update_metadata({"a": 1}, source="crm", namespace="alise", **kw),
    }
    for name, read in reads.items():
        with pytest.raises(NamespaceNotFoundError, match="no namespace 'alise'") as caught:
            read()
        assert isinstance(caught.value, KeyError) and str(caught.value).startswith("no namespace"), name
    assert agent.recall("cat", namespace="never-written", missing_ok=True) == []
    assert agent.records(namespace="never-written", missing_ok=True) == []
    assert agent.turns("s", namespace="never-written", missing_ok=True) == []
    assert agent.memory_state("never-written", missing_ok=True) is None
    assert agent.stats("never-written", missing_ok=True).records == 0
    assert agent.forget(source="crm", namespace="never-written", missing_ok=True) == 0
    assert agent.update_metadata({"a": 1}, source="crm", namespace="never-written", missing_ok=True) == 0
    with pytest.raises(RecordNotFoundError):
        agent.forget(record_id=1, namespace="never-written", missing_ok=True)
    assert agent.namespaces() == ["alice"]
    assert agent.recall("cat", namespace="alice")[0].text == "Alice keeps a cat named Tom"


@pytest.mark.backends()
def test_the_default_namespace_exists_in_any_database(db_url, fake_embedder):
    """A fresh database's first recall (and every other read) in the default namespace answers
    empty, never NamespaceNotFoundError."""
    with MemoryAgent.open(db_url, embedder=fake_embedder) as agent:
        assert agent.recall("anything") == []
        assert agent.recall("anything", namespace=DEFAULT_NAMESPACE) == []
        assert (agent.records(), agent.turns("s"), agent.memory_state()) == ([], [], None)
        assert agent.stats().records == 0 and agent.stats().namespace == DEFAULT_NAMESPACE
        assert agent.forget(source="crm") == 0 and agent.update_metadata({"a": 1}, source="crm") == 0
        with pytest.raises(RecordNotFoundError):
            agent.forget(record_id=1)
        assert agent.namespaces() == []


# ---------------------------------------------------------------------- C10 non-finite
@pytest.mark.slow
def test_c10_pathological_writes_keep_the_memory_finite(agent, tmp_path):
    """5,000 writes: "a" x 10,000, a 50 KB line of one emoji, random code points, one turn x 500."""
    import random

    rng = random.Random(0)
    turns = [("s", "user", "a" * 10_000), ("s", "user", "😀" * 12_500)]
    turns += [
        ("s", "user", "".join(chr(rng.randint(0x20, 0x2FFF)) for _ in range(rng.randint(1, 60))) + f" {i}")
        for i in range(4_498)
    ]
    turns += [("loop", "user", "same turn again")] * 500
    results = agent.add_turns(turns)
    assert len(results) == 5_000
    db = tmp_path / "memory.db"
    con = sqlite3.connect(db)
    (blob,) = con.execute("SELECT state FROM memory_checkpoints").fetchone()  # 5,000 units: checkpointed
    bad = con.execute("SELECT count(*) FROM records WHERE surprise IS NULL OR surprise != surprise").fetchone()[0]
    con.close()
    assert state_from_bytes(blob).is_finite()  # raises if damaged
    state = agent.memory_state()
    assert all(torch.isfinite(w).all() for w in (*state.weights, *state.momentum))
    assert bad == 0
    assert len(agent.turns("loop")) == 500
    assert {r.decision for r in results[-499:]} == {"repeat"}
    assert agent.recall("same turn again")[0].text == "same turn again"
    assert agent.stats().memory_step >= 5_000


@pytest.mark.backends()
def test_add_turns_batches_and_keeps_order(agent):
    results = agent.add_turns(
        [
            ("a", "user", "hello there"),
            {"session_id": "b", "role": "user", "content": "other session"},
            ("a", "assistant", "hi, how can I help?", "2024-01-01T10:00:00Z"),
            ("a", "user", "hello there"),
        ]
    )
    assert [r.turn_seq for r in results] == [1, 1, 2, 3]
    assert results[3].decision == "repeat" and results[3].record_id == results[0].record_id
    assert [t["content"] for t in agent.turns("a")] == ["hello there", "hi, how can I help?", "hello there"]
    with pytest.raises(InvalidInputError, match="turn 1"):
        agent.add_turns([("a", "user", "fine"), ("a", "user", "hello", "not a time")])
    assert len(agent.turns("a")) == 3  # nothing of the rejected call was written


@pytest.mark.backends()
def test_a_long_turn_keeps_its_whole_text_in_the_transcript(agent):
    long = " ".join(f"sentence {i} of a very long message." for i in range(200))
    r = agent.add_turn("s", "user", long)
    assert r.stored
    assert agent.turns("s")[0]["content"] == long
    assert agent.stats().turns > 1  # written as several chunks, each within the embedder's window


@pytest.mark.backends()
def test_record_ids_do_not_cross_namespaces(agent):
    mine = agent.remember("private note of tenant a", namespace="a")
    with pytest.raises(NamespaceNotFoundError):
        agent.forget(record_id=mine.record_id, namespace="b")
    agent.remember("note of tenant b", namespace="b")
    with pytest.raises(RecordNotFoundError):
        agent.forget(record_id=mine.record_id, namespace="b")
    assert agent.stats("a").records == 1


def test_non_finite_update_is_rejected_and_last_good_state_kept(agent, tmp_path):
    """An embedder gone wrong (vectors of norm 1e20) makes the memory step overflow: the step is
    rejected, the last good state kept and persisted, and the record is still stored."""
    agent.remember("first good note")
    good = agent.memory_state().weights
    real = agent.embedder

    class Huge:
        name, dim, max_tokens, tokenizer = real.name, real.dim, real.max_tokens, real.tokenizer

        def embed(self, texts):
            return real.embed(texts) * 1e20

    agent.embedder = Huge()
    try:
        res = agent.remember("an overflowing note")
    finally:
        agent.embedder = real
    assert res.stored
    assert all(torch.equal(a, b) for a, b in zip(good, agent.memory_state().weights))
    con = sqlite3.connect(tmp_path / "memory.db")
    blobs = con.execute("SELECT state FROM memory_checkpoints").fetchall()
    con.close()
    assert all(state_from_bytes(b).is_finite() for (b,) in blobs)
    assert agent.memory_state().is_finite()  # the state replayed from the log
    assert agent.stats().records == 2
    assert agent.recall("first good note")[0].text == "first good note"


@pytest.mark.backends()
def test_non_finite_embeddings_are_refused_before_any_write(agent):
    real = agent.embedder

    class Broken:
        name, dim, max_tokens, tokenizer = real.name, real.dim, real.max_tokens, real.tokenizer

        def embed(self, texts):
            out = real.embed(texts)
            out[:, 0] = float("nan")
            return out

    agent.embedder = Broken()
    try:
        with pytest.raises(StoreError):
            agent.remember("poisoned")
    finally:
        agent.embedder = real
    assert agent.stats().records == 0


# ---------------------------------------------------------------------- C11 / C12 restart
def test_c11_short_inputs_survive_reload(tmp_path, fake_embedder):
    db = tmp_path / "m.db"
    with MemoryAgent.open(db, embedder=fake_embedder) as agent:
        for t in ["ok", "Yes.", "Please call me Dana."]:
            agent.add_turn("s", "user", t)
        step = agent.stats().memory_step
    assert step == 3
    with MemoryAgent.open(db, embedder=fake_embedder) as agent:
        hits = agent.recall("What should you call me?")
        assert "Dana" in hits[0].text
        assert agent.stats().memory_step == 3


_CHILD = """
import json, sys
sys.path.insert(0, {tests!r})
from conftest import FakeEmbedder, digest
from titans_agent import MemoryAgent
with MemoryAgent.open({db!r}, embedder=FakeEmbedder()) as agent:
    out = {{q: [[h.id, h.score] for h in agent.recall(q, k=8)] for q in {queries!r}}}
    out["turns"] = [t["content"] for t in agent.turns("chat")]
    out["state"] = digest(agent.memory_state("default"))
print(json.dumps(out))
"""


@pytest.mark.slow
def test_c12_restart_in_a_new_process_gives_identical_recall(tmp_path, fake_embedder):
    db = tmp_path / "m.db"
    queries = ["invoice payment terms", "who likes hiking", "server port"]
    with MemoryAgent.open(db, embedder=fake_embedder) as agent:
        agent.ingest(
            "Payment terms: invoices are due within 30 days.\n\nLate payment accrues 2% interest.", source="terms.txt"
        )
        agent.ingest("The staging server listens on port 8443.\n\nProduction uses port 443.", source="ops.md")
        agent.ingest("Alice likes hiking in the Alps. Bob prefers sailing.", source="people.txt")
        for i, t in enumerate(["hi", "I went hiking last weekend", "where?", "In the Alps", "nice"]):
            agent.add_turn("chat", "user" if i % 2 == 0 else "assistant", t)
        before = {q: [[h.id, h.score] for h in agent.recall(q, k=8)] for q in queries}
        state_before = digest(agent.memory_state("default"))
    code = _CHILD.format(tests=str(TESTS), db=str(db), queries=queries)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONHASHSEED": "123"},
    )
    assert proc.returncode == 0, proc.stderr
    after = json.loads(proc.stdout.strip().splitlines()[-1])
    for q in queries:
        assert [i for i, _ in after[q]] == [i for i, _ in before[q]]
        for (_, s1), (_, s2) in zip(after[q], before[q]):
            assert abs(s1 - s2) < 1e-6
    assert after["state"] == state_before  # weights, momentum, pending and step, bit for bit
    assert after["turns"] == ["hi", "I went hiking last weekend", "where?", "In the Alps", "nice"]


def test_opening_with_another_embedder_fails_clearly(tmp_path, fake_embedder):
    db = tmp_path / "m.db"
    with MemoryAgent.open(db, embedder=fake_embedder) as agent:
        agent.remember("hello")

    class Other(type(fake_embedder)):
        name = "another-model"

    with pytest.raises(EmbedderMismatchError, match="another-model"):
        MemoryAgent.open(db, embedder=Other())


def test_opening_a_foreign_sqlite_file_fails_clearly(tmp_path, fake_embedder):
    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE customers (id INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="not a titans-agent database"):
        MemoryAgent.open(db, embedder=fake_embedder)


def test_reopen_uses_the_stored_memory_config(tmp_path, fake_embedder):
    from titans_agent import MemoryConfig

    db = tmp_path / "m.db"
    with MemoryAgent.open(db, AgentConfig(memory=MemoryConfig(depth=3)), embedder=fake_embedder) as agent:
        agent.remember("deep memory")
    with MemoryAgent.open(db, embedder=fake_embedder) as agent:
        assert agent.stats().memory["depth"] == 3


# ---------------------------------------------------------------------- recall and housekeeping
def test_recall_hits_carry_provenance(agent, tmp_path):
    f = tmp_path / "notes.md"
    f.write_text("# Ops\n\nThe backup job runs at 02:00 UTC every night.\n", encoding="utf-8")
    agent.ingest(f)
    hit = agent.recall("when does the backup job run")[0]
    assert hit.source == str(f.resolve())
    assert hit.start_line == 1 and hit.end_line == 3 and hit.location == "1-3"
    assert hit.kind == "chunk" and hit.surprise is not None
    assert hit.created_at.tzinfo is not None
    assert set(hit.signals) <= {"lexical", "dense", "neural", "document"} and hit.signals


@pytest.mark.parametrize("off", ["use_lexical", "use_dense", "use_neural"])
def test_each_signal_can_be_switched_off(tmp_path, fake_embedder, off):
    cfg = AgentConfig(retrieval=RetrievalConfig(**{off: False}))
    with MemoryAgent.open(tmp_path / "m.db", cfg, embedder=fake_embedder) as agent:
        agent.remember("The cat sat on the mat.")
        agent.remember("Dogs chase cars in the street.")
        hits = agent.recall("cat mat")
    name = off.removeprefix("use_")
    assert all(name not in h.signals for h in hits)
    assert hits[0].text == "The cat sat on the mat."


@pytest.mark.backends()
def test_recall_filters_by_kind_and_source(agent):
    agent.remember("the tea is green")
    agent.add_turn("s", "user", "the tea is black")
    agent.ingest("the tea is oolong", source="tea.txt")
    assert [h.kind for h in agent.recall("tea", kinds=["turn"], k=10)] == ["turn"]
    assert [h.text for h in agent.recall("tea", source="tea.txt", k=10)] == ["the tea is oolong"]
    with pytest.raises(InvalidInputError):
        agent.recall("tea", kinds=["bogus"])


@pytest.mark.backends()
def test_forget_by_source_and_by_id(agent):
    agent.ingest("Clause 1. The supplier delivers monthly.", source="contract-a")
    agent.ingest("Clause 1. The buyer pays quarterly.", source="contract-b")
    r = agent.remember("an unrelated note")
    assert agent.forget(source="contract-a") == 1
    assert all(h.source != "contract-a" for h in agent.recall("supplier delivers", k=10))
    assert agent.forget(record_id=r.record_id) == 1
    with pytest.raises(RecordNotFoundError):
        agent.forget(record_id=r.record_id)
    with pytest.raises(InvalidInputError):
        agent.forget()
    # the source can be ingested again after being forgotten
    assert agent.ingest("Clause 1. The supplier delivers monthly.", source="contract-a").stored == 1


@pytest.mark.backends()
def test_stats_counts(agent):
    agent.remember("note one")
    agent.add_turn("s", "user", "turn one")
    agent.ingest("chunk one", source="doc")
    st = agent.stats()
    assert (st.records, st.notes, st.turns, st.chunks, st.documents, st.sessions) == (3, 1, 1, 1, 1, 1)
    assert st.memory_step == 3 and st.mean_surprise is not None
    assert agent.namespaces() == ["default"]


@pytest.mark.backends()
def test_changed_document_replaces_its_records(agent):
    agent.ingest("version one of the policy: 10 days of leave", source="policy")
    r = agent.ingest("version two of the policy: 25 days of leave", source="policy")
    assert r.stored == 1
    texts = [h.text for h in agent.recall("policy leave days", k=10)]
    assert texts == ["version two of the policy: 25 days of leave"]


def test_closed_agent_refuses_work(tmp_path, fake_embedder):
    agent = MemoryAgent.open(tmp_path / "m.db", embedder=fake_embedder)
    agent.close()
    agent.close()
    with pytest.raises(StoreError):
        agent.recall("x")


@pytest.mark.backends()
def test_timestamps_are_utc(agent):
    import datetime as dt

    agent.add_turn("s", "user", "a dated turn", timestamp="2023-05-08T13:56:00+02:00")
    t = agent.turns("s")[0]["timestamp"]
    assert t == dt.datetime(2023, 5, 8, 11, 56, tzinfo=dt.timezone.utc)
    with pytest.raises(InvalidInputError):
        agent.add_turn("s", "user", "bad time", timestamp="yesterday")


def test_filters_apply_to_every_signal(tmp_path, fake_embedder):
    """A filtered recall still ranks by dense and neural similarity, not only by keywords."""
    cfg = AgentConfig(retrieval=RetrievalConfig(use_neural=True))
    with MemoryAgent.open(tmp_path / "m.db", cfg, embedder=fake_embedder) as agent:
        agent.add_turn("s", "user", "I adore green tea in the morning")
        agent.remember("green tea note")
        hits = agent.recall("green tea", kinds=["turn"], k=5)
    assert [h.kind for h in hits] == ["turn"]
    assert {"lexical", "dense", "neural"} <= set(hits[0].signals)


def test_lexical_query_leaves_stopwords_out():
    from titans_agent.recall import lexical_terms

    assert lexical_terms("What food must the pet avoid?") == ["food", "pet", "avoid"]
    assert lexical_terms("the") == ["the"]  # only stopwords: keep them rather than match nothing
    assert lexical_terms('a "quoted" NEAR(x*) text:col ^start') == ["quot", "near", "x", "text", "col", "start"]
    # split, stemmed, distinct; the identifier also whole
    assert lexical_terms("render_progress Renders") == ["render", "progress", "render_progress"]
    assert lexical_terms("!!! ...") == []


def test_turns_are_embedded_with_their_speaker(tmp_path):
    calls = []

    class Recording(FakeEmbedder):
        def embed(self, texts):
            calls.extend(texts)
            return super().embed(texts)

    with MemoryAgent.open(tmp_path / "m.db", embedder=Recording()) as agent:
        agent.add_turn("s", "Caroline", "I went to a support group yesterday.")
        assert agent.turns("s")[0]["content"] == "I went to a support group yesterday."
    assert "Caroline: I went to a support group yesterday." in calls


def test_two_agents_on_one_file_see_each_others_writes(tmp_path, fake_embedder):
    """Two processes taking turns (here two agents on one file): each reloads what the other
    wrote, so the memory state continues instead of one writer's update replacing the other's."""
    db = tmp_path / "shared.db"
    a = MemoryAgent.open(db, embedder=fake_embedder)
    b = MemoryAgent.open(db, embedder=FakeEmbedder())
    try:
        a.remember("first note from the app server")
        b.remember("second note from the command line")
        a.remember("third note from the app server")
        assert a.stats().memory_step == 3 and b.stats().memory_step == 3
        assert b.recall("third note app server", k=1)[0].text == "third note from the app server"
        b.forget(source=None, record_id=a.recall("first note", k=1)[0].id)
        assert all("first note" not in h.text for h in a.recall("first note", k=5))
        assert digest(a.memory_state("default")) == digest(b.memory_state("default"))
    finally:
        a.close()
        b.close()


@pytest.mark.backends()
def test_notes_can_name_their_source_and_be_listed(agent):
    agent.remember("Dana prefers email over phone calls.", {"team": "sales"}, source="crm")
    agent.remember("Priya is on call this week.", source="rota")
    agent.add_turn("s", "user", "hello")
    listed = agent.records(source="crm")
    assert [(h.text, h.source, h.kind, h.metadata) for h in listed] == [
        ("Dana prefers email over phone calls.", "crm", "note", {"team": "sales"})
    ]
    assert [h.kind for h in agent.records()] == ["note", "note", "turn"]
    assert [h.text for h in agent.records(kinds=["note"], limit=1, offset=1)] == ["Priya is on call this week."]
    assert agent.recall("who prefers email", source="crm", k=5)[0].source == "crm"
    assert agent.forget(source="rota") == 1 and agent.records(source="rota") == []
    assert agent.records(namespace="never-written", missing_ok=True) == []
    with pytest.raises(InvalidInputError):
        agent.records(limit=-1)
    for page in ({"limit": 2**70}, {"offset": 2**63}):  # past the databases' integers: said, not raised by the driver
        with pytest.raises(InvalidInputError, match="at most"):
            agent.records(**page)


@pytest.mark.backends()
def test_update_metadata_changes_occurrences_not_the_memory(agent):
    agent.remember("The build server is named hopper.", {"team": "infra"}, source="wiki")
    step = agent.stats().memory_step
    assert agent.update_metadata({"reviewed": True}, source="wiki") == 1
    assert agent.records(source="wiki")[0].metadata == {"team": "infra", "reviewed": True}
    assert agent.update_metadata({"only": 1}, source="wiki", merge=False) == 1
    assert agent.records(source="wiki")[0].metadata == {"only": 1}
    assert agent.update_metadata({"x": 1}, source="nope") == 0
    assert agent.stats().memory_step == step


@pytest.mark.backends()
def test_a_role_longer_than_the_column_is_refused_on_every_backend(agent):
    # found by a reviewer: PostgreSQL raised a raw DataError for a 100-character role, SQLite stored it
    with pytest.raises(InvalidInputError, match="at most 64"):
        agent.add_turn("s1", "R" * 100, "hello")
    assert agent.turns("s1") == [] and agent.stats().memory_step == 0
    assert agent.add_turn("s1", "R" * 64, "hello").stored


@pytest.mark.backends()
def test_a_name_past_the_index_limit_is_refused_and_a_long_path_skipped(agent, tmp_path):
    # found by an attacker: PostgreSQL raised ProgramLimitExceeded (a raw SQL error) for a
    # 3,000-character session id or file path, and the whole folder's ingest stored nothing
    from titans_agent.validation import MAX_NAME_BYTES

    for call in (
        lambda: agent.add_turn("s" * 3000, "user", "hi"),
        lambda: agent.remember("hi", source="n" * 3000),
        lambda: agent.ingest("hi", source="\u00e9" * 1100),  # 2,200 bytes in UTF-8
    ):
        with pytest.raises(InvalidInputError, match=r"at most 2,0[0-9]{2} bytes"):
            call()
    deep = tmp_path / "docs"
    for _ in range(9):
        deep = deep / ("d" * 250)
    deep.mkdir(parents=True)
    (deep / "far.md").write_text("A note far down the tree.\n")
    (tmp_path / "docs" / "near.md").write_text("A note near the top.\n")
    assert len(str((deep / "far.md").resolve()).encode()) > MAX_NAME_BYTES
    report = agent.ingest(tmp_path / "docs")
    assert report.files == 1 and [s.reason for s in report.skipped] == ["path too long to store (over 2,048 bytes)"]
    assert agent.recall("note near the top")[0].text == "A note near the top."
    assert agent.add_turn("s" * 2000, "user", "a long but storable session id").record_id
    assert agent.forget(source="session:" + "s" * 2000) == 1  # a lookup takes any name that was stored
    assert agent.records(source="x" * 5000) == []


def test_a_note_or_named_text_cannot_take_a_conversations_source(agent):
    # found by an attacker: a note under "session:s1" sat beside session s1's turns, and forgetting
    # the session forgot the note too
    agent.add_turn("s1", "user", "My name is Ada.")
    for write in (
        lambda: agent.remember("a note", source="session:s1"),
        lambda: agent.ingest("a text", source="session:s1"),
    ):
        with pytest.raises(InvalidInputError, match="'session:' are a conversation's"):
            write()
    assert agent.remember("a note", source="sessions/notes").record_id
    assert agent.forget(source="session:s1") == 1 and [h.text for h in agent.recall("a note")] == ["a note"]


def test_a_file_path_is_one_file_whatever_its_characters(tmp_path, fake_embedder):
    """A "?" or "%2F" in a database file name is part of the name, never a URL's query or escape."""
    folder = tmp_path / "dbs"
    with MemoryAgent.open(folder / "alice?cache=shared.db", embedder=fake_embedder) as agent:
        agent.remember("alice's secret diagnosis is flu")
    with MemoryAgent.open(folder / "alice?mode=rwc.db", embedder=fake_embedder) as other:
        assert other.recall("secret diagnosis") == []
    with MemoryAgent.open(str(folder / "%2E%2E%2Fescaped.db"), embedder=fake_embedder) as escaped:
        escaped.remember("written where the name says")
        assert escaped.store.url.endswith("escaped.db") and "/dbs/" in escaped.store.url
    assert sorted(p.name for p in folder.iterdir() if p.suffix == ".db") == [
        "%2E%2E%2Fescaped.db",
        "alice?cache=shared.db",
        "alice?mode=rwc.db",
    ]
    assert not (tmp_path / "escaped.db").exists()
    with MemoryAgent.open(folder / "alice?cache=shared.db", embedder=fake_embedder, read_only=True) as reader:
        assert [h.text for h in reader.recall("secret diagnosis")] == ["alice's secret diagnosis is flu"]


def test_a_home_folder_that_cannot_be_found_is_a_store_error(fake_embedder):
    from titans_agent.errors import StoreError

    with pytest.raises(StoreError, match="home directory"):
        MemoryAgent.open("~no-such-user-titans/memory.db", embedder=fake_embedder)
