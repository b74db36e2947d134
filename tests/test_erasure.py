"""Erasure a regulator would accept: dropping a namespace leaves no row of it anywhere (virtual
and shadow tables included), and unlearning rebuilds the neural memory so that it equals, bit for bit,
the memory of a namespace that never saw the forgotten units (titans_agent/erase.py).

Real databases (SQLite files, the PostgreSQL server of conftest); only the embedder is fake.
"""

from __future__ import annotations

import json
import logging

import pytest
import torch
from click.testing import CliRunner
from conftest import FakeEmbedder, digest, query

from titans_agent import AgentConfig, MemoryAgent, NamespaceNotFoundError, NonFiniteStateError
from titans_agent.core.memory import MemoryState, NeuralMemory
from titans_agent.erase import cut_line
from titans_agent.transfer import export_jsonl, import_jsonl

TOKEN = "zanzibarquokka"  # in the forgotten or dropped text only
T0 = "2024-05-01T10:00:00Z"


def same_state(a: MemoryState | None, b: MemoryState | None) -> bool:
    """Bit-identical weights, momentum, pending chunk and step."""
    assert a is not None and b is not None
    tensors = zip((*a.weights, *a.momentum, a.pending), (*b.weights, *b.momentum, b.pending))
    return a.step == b.step and all(torch.equal(x, y) for x, y in tensors)


def tables(agent: MemoryAgent) -> list[str]:
    """Every table of the database (virtual and shadow tables too, on SQLite)."""
    if agent.store.is_sqlite:
        return [r[0] for r in query(agent, "SELECT name FROM sqlite_master WHERE type = 'table'")]
    sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    return [r[0] for r in query(agent, sql)]


def tables_holding(agent: MemoryAgent, token: str) -> set[str]:
    """The tables with a value (text or bytes, SQLite; any column of a row as text, PostgreSQL)
    holding ``token``."""
    found = set()
    for t in tables(agent):
        if agent.store.is_sqlite:
            for row in query(agent, f'SELECT * FROM "{t}"'):
                for v in row:
                    if (isinstance(v, str) and token in v.casefold()) or (isinstance(v, bytes) and token.encode() in v):
                        found.add(t)
        elif query(agent, f'SELECT count(*) FROM "{t}" x WHERE CAST(x AS text) ILIKE :p', p=f"%{token}%")[0][0]:
            found.add(t)
    return found


def rows_of(agent: MemoryAgent, ns_id: int) -> dict[str, int]:
    """Rows that name namespace ``ns_id``, by table: every table with a ``namespace_id`` column,
    the namespace row, and the turns of its sessions."""
    counts = {"namespaces": query(agent, "SELECT count(*) FROM namespaces WHERE id = :n", n=ns_id)[0][0]}
    for t in tables(agent):
        if agent.store.is_sqlite:
            columns = [r[1] for r in query(agent, f'PRAGMA table_info("{t}")')]
        else:
            sql = "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND "
            columns = [r[0] for r in query(agent, sql + "table_name = :t", t=t)]
        if "namespace_id" in columns:
            counts[t] = query(agent, f'SELECT count(*) FROM "{t}" WHERE namespace_id = :n', n=ns_id)[0][0]
    sessions = "SELECT id FROM sessions WHERE namespace_id = :n"
    counts["turns"] = query(agent, f"SELECT count(*) FROM turns WHERE session_pk IN ({sessions})", n=ns_id)[0][0]
    return counts


def ns_id(agent: MemoryAgent, name: str) -> int:
    return query(agent, "SELECT id FROM namespaces WHERE name = :n", n=name)[0][0]


def fill(agent: MemoryAgent, ns: str, *, secret: bool) -> None:
    """The same writes into ``ns``, with (``secret``) or without the units later forgotten: a
    whole write of its own (source "secret"), a unit inside a batch of turns (session "secret" in
    the same add_turns call), the record a later repeat by another speaker (its own embedding)
    and a later merged near duplicate hold."""
    agent.remember("The staging server listens on port 8443.", {"team": "ops"}, namespace=ns)
    if secret:
        agent.ingest(f"My bank PIN is 4921 and my pet is a {TOKEN}.", source=f"{TOKEN}-notes", namespace=ns)
    turns = [("s1", "user", f"Turn {i} is about the weather in Lisbon.", T0) for i in range(20)]
    if secret:
        turns[2:2] = [
            ("secret", "user", "ok", T0),
            ("secret", "assistant", "Dana prefers tea.", T0),
            ("secret", "user", f"I secretly keep a {TOKEN}.", T0),
        ]
    agent.add_turns(turns, namespace=ns)
    agent.add_turns([("s1", "assistant", "ok", T0), ("s1", "assistant", "Dana prefers tea!", T0)], namespace=ns)
    handbook = "\n\n".join(f"Paragraph {i}: the handbook's rule {i} on leave." for i in range(30))
    agent.ingest(handbook, source="hb", namespace=ns)
    agent.remember("Backups run at 02:00 UTC.", namespace=ns)


# ---------------------------------------------------------------------- drop_namespace
@pytest.mark.backends()
def test_drop_namespace_leaves_no_row_of_it_and_keeps_the_others(backend, agent):
    agent.config = agent.config.model_copy(update={"checkpoint_units": 1})  # a checkpoint row too
    fill(agent, "kept", secret=False)
    fill(agent, "gone", secret=True)
    agent.add_turn("s3", "user", "My code editor is Vim.", T0, namespace="gone")
    agent.add_turn("s3", "user", "My code editor is Helix now.", "2024-06-01T10:00:00Z", namespace="gone")
    gone, kept = ns_id(agent, "gone"), ns_id(agent, "kept")
    assert all(rows_of(agent, gone).values())  # every table held rows of it, supersessions too
    expected = {"records", "occurrences", "documents", "turns"}
    assert tables_holding(agent, TOKEN) >= expected  # the check finds the token where it is
    before = (rows_of(agent, kept), agent.stats("kept").model_dump(), digest(agent.memory_state("kept")))
    hits = [h.text for h in agent.recall("weather in Lisbon", k=3, namespace="kept")]

    assert agent.drop_namespace("gone") is True
    assert set(rows_of(agent, gone).values()) == {0}
    assert tables_holding(agent, TOKEN) == set()  # no index of the words stays in the database
    assert agent.namespaces() == ["kept"] and agent.memory_state("gone", missing_ok=True) is None
    assert agent.stats("gone", missing_ok=True).records == 0
    assert agent.recall(TOKEN, namespace="gone", missing_ok=True) == []
    with pytest.raises(NamespaceNotFoundError):
        agent.recall(TOKEN, namespace="gone")
    assert (rows_of(agent, kept), agent.stats("kept").model_dump(), digest(agent.memory_state("kept"))) == before
    assert [h.text for h in agent.recall("weather in Lisbon", k=3, namespace="kept")] == hits
    assert agent.drop_namespace("gone") is False  # idempotent: nothing left to drop
    assert agent.drop_namespace("never-there") is False and agent.namespaces() == ["kept"]


@pytest.mark.backends()
def test_a_dropped_namespace_is_never_continued_from_a_stale_cache(backend, db_url, fake_embedder):
    with MemoryAgent.open(db_url, embedder=fake_embedder) as a, MemoryAgent.open(db_url, embedder=fake_embedder) as b:
        a.remember(f"The old secret is {TOKEN}.", namespace="n")
        old_id = ns_id(a, "n")
        assert b.recall("old secret", namespace="n")[0].text.endswith(f"{TOKEN}.")  # b caches n at revision 1
        assert a.drop_namespace("n")
        a.remember("A fresh start.", namespace="n")  # a new namespace "n", again at revision 1
        if backend == "sqlite":
            assert ns_id(a, "n") == old_id  # SQLite gave it the dropped one's id
        b.remember("Another note.", namespace="n")
        assert b.memory_state("n").step == 2 and b.stats("n").records == 2  # from the new state
        assert all(TOKEN not in h.text for h in b.recall("old secret", k=5, namespace="n"))
        a.remember("A fresh start.", namespace="ref")  # what "n" must hold: nothing of the old one
        a.remember("Another note.", namespace="ref")
        assert same_state(b.memory_state("n"), a.memory_state("ref"))


# ---------------------------------------------------------------------- unlearning
@pytest.mark.backends()
def test_unlearning_gives_the_memory_of_a_namespace_that_never_saw_the_units(db_url, fake_embedder):
    config = AgentConfig(write_threshold=100.0)  # every unit "known": near duplicates merge
    with MemoryAgent.open(db_url, config, embedder=fake_embedder) as agent:
        fill(agent, "never", secret=False)
        fill(agent, "forgot", secret=True)
        merged = "SELECT text, hits FROM records WHERE text LIKE 'Dana prefers tea%' ORDER BY id"
        assert query(agent, merged) == [("Dana prefers tea!", 1), ("Dana prefers tea.", 2)]  # "!" merged in "forgot"
        own = "SELECT count(*) FROM occurrences WHERE embedding IS NOT NULL AND namespace_id = :n"
        assert query(agent, own, n=ns_id(agent, "forgot"))[0][0] == 1  # "assistant: ok" repeats "user: ok"
        learned = agent.memory_state("forgot")

        assert agent.forget(source=f"{TOKEN}-notes", namespace="forgot") == 1  # plain: the weights keep it
        assert same_state(agent.memory_state("forgot"), learned)
        assert agent.forget(source="session:secret", namespace="forgot", unlearn=True) == 3
        assert same_state(agent.memory_state("forgot"), agent.memory_state("never"))  # bit for bit
        assert agent.stats("forgot").memory_step == agent.stats("never").memory_step == 26
        assert tables_holding(agent, TOKEN) == set()  # no index of the words stays in the database

        def books(ns: str) -> list[tuple]:
            sql = "SELECT r.surprise, r.hits FROM records r JOIN namespaces n ON n.id = r.namespace_id WHERE n.name = "
            return sorted(query(agent, sql + ":ns", ns=ns))

        # each record's surprise (its first remaining unit's, under the rebuilt memory) and hits
        # (its remaining occurrences: the merged "Dana prefers tea." and the repeated "ok" survive)
        assert books("forgot") == books("never")
        assert query(agent, merged) == [("Dana prefers tea!", 1), ("Dana prefers tea.", 1)]

    with MemoryAgent.open(db_url, config, embedder=FakeEmbedder()) as reopened:  # what was persisted
        assert same_state(reopened.memory_state("forgot"), reopened.memory_state("never"))


def test_rebuild_memory_removes_what_plain_forget_left_and_is_exact(tmp_path, agent, fake_embedder, caplog):
    fill(agent, "never", secret=False)
    fill(agent, "forgot", secret=True)
    other = MemoryAgent.open(agent.store.engine.url.database, embedder=fake_embedder)  # another process' view
    assert other.memory_state("forgot").step == 30
    agent.forget(source=f"{TOKEN}-notes", namespace="forgot")
    agent.forget(source="session:secret", namespace="forgot")
    assert not same_state(agent.memory_state("forgot"), agent.memory_state("never"))  # plain forget left it
    assert agent.rebuild_memory("forgot") == 26
    assert same_state(agent.memory_state("forgot"), agent.memory_state("never"))
    assert same_state(other.memory_state("forgot"), agent.memory_state("never"))  # others reload it
    never = agent.memory_state("never")
    assert agent.rebuild_memory("never") == 26 and same_state(agent.memory_state("never"), never)  # a fixed point

    # Rows from before schema version 4: grouped by write time, replayed with their record's embedding.
    with agent.store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE occurrences SET write_revision = NULL, embedding = NULL")
    with caplog.at_level(logging.WARNING, logger="titans_agent.erase"):
        assert agent.rebuild_memory("never") == 26
        assert agent.rebuild_memory("forgot") == 26
    assert "26 unit(s) written before schema version 4" in caplog.text
    assert same_state(agent.memory_state("never"), never)  # its writes, told apart by their times
    legacy = agent.memory_state("forgot")  # "assistant: ok" replayed as its record's "user: ok"
    assert not same_state(legacy, never) and legacy.step == never.step and legacy.is_finite()

    assert agent.rebuild_memory("nope") == 0 and "nope" not in agent.namespaces()
    agent.remember("Only this.", source="x", namespace="empty")
    assert agent.forget(source="x", namespace="empty", unlearn=True) == 1
    assert same_state(agent.memory_state("empty"), agent._runtimes.get("empty").memory.init_state())  # M_0
    other.close()


def test_a_non_finite_rebuild_is_never_persisted(agent, monkeypatch):
    fill(agent, "n", secret=True)
    before = (digest(agent.memory_state("n")), agent.stats("n").model_dump())
    real = NeuralMemory.write

    def poisoned(self, state, x):
        surprise, res = real(self, state, x)
        st = res.state
        bad = MemoryState(tuple(w * float("nan") for w in st.weights), st.momentum, st.pending, st.step)
        return surprise, type(res)(bad, res.surprise, res.theta, res.eta, res.alpha, res.rejected_chunks)

    monkeypatch.setattr(NeuralMemory, "write", poisoned)
    with pytest.raises(NonFiniteStateError, match="not finite"):
        agent.forget(source="session:secret", namespace="n", unlearn=True)
    with pytest.raises(NonFiniteStateError):
        agent.rebuild_memory("n")
    monkeypatch.undo()
    assert (digest(agent.memory_state("n")), agent.stats("n").model_dump()) == before  # nothing was removed
    with MemoryAgent.open(agent.store.engine.url.database, embedder=FakeEmbedder()) as again:
        assert digest(again.memory_state("n")) == before[0]


def test_an_imported_namespace_rebuilds_to_the_state_it_was_exported_with(tmp_path, agent):
    fill(agent, "n", secret=True)
    state = agent.memory_state("n")
    export_jsonl(agent, tmp_path / "n.jsonl")
    with MemoryAgent.open(tmp_path / "copy.db", embedder=FakeEmbedder()) as copy:
        import_jsonl(copy, tmp_path / "n.jsonl")
        copy.remember("Written after the import.", namespace="n")  # its revision restarts at 1
        agent.remember("Written after the import.", namespace="n")
        assert copy.rebuild_memory("n") == 31
        assert same_state(copy.memory_state("n"), agent.memory_state("n"))
    assert state.step == 30


# ---------------------------------------------------------------------- the command line
def test_cli_forget_unlearn_rebuild_memory_and_drop_namespace(tmp_path, monkeypatch):
    from titans_agent.cli import app as cli_app

    embedder = FakeEmbedder()

    def open_agent(db: str, ns: str, emb: str, dev: str, read_only: bool = False, create: bool = True, **kw):
        return MemoryAgent.open(db, embedder=embedder, read_only=read_only, create=create)

    monkeypatch.setattr(cli_app, "open_agent", open_agent)
    db = str(tmp_path / "m.db")

    def run(*args: str, input: str | None = None):
        return CliRunner().invoke(cli_app.cli, ["--db", db, *args], input=input, catch_exceptions=False)

    assert run("drop-namespace", "alice", "--yes").exit_code == 1  # no database yet: nothing created
    assert not (tmp_path / "m.db").exists()
    for ns in ("alice", "bob"):
        assert run("-n", ns, "remember", "The staging server listens on port 8443.").exit_code == 0
    note = json.loads(run("-n", "alice", "remember", f"Forget {TOKEN}.", "--json").stdout)
    res = run("-n", "alice", "forget", "--id", str(note["record_id"]), "--unlearn", "--yes", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout) == {"deleted": 1}
    res = run("-n", "alice", "rebuild-memory", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["units"] == 1
    with MemoryAgent.open(db, embedder=embedder) as a:
        assert same_state(a.memory_state("alice"), a.memory_state("bob"))
    assert "no namespace 'carol'" in run("-n", "carol", "rebuild-memory").stderr

    declined = run("drop-namespace", "alice", input="n\n")
    assert declined.exit_code == 1 and "Aborted" in declined.output
    res = run("drop-namespace", "alice", input="y\n")
    assert res.exit_code == 0 and "Dropped namespace 'alice'." in res.stdout
    again = run("drop-namespace", "alice", "--yes")
    assert again.exit_code == 1 and again.stderr.strip() == f"Error: no namespace 'alice' in {db}"
    with MemoryAgent.open(db, embedder=embedder) as a:
        assert a.namespaces() == ["bob"]


@pytest.mark.backends()
def test_forgetting_every_turn_of_a_session_removes_the_session(agent):
    agent.add_turns([("s1", "user", "I live in Lyon.", T0), ("s2", "user", "I keep a ferret.", T0)])
    assert agent.stats().sessions == 2
    assert agent.forget(source="session:s2", unlearn=True) == 1
    assert agent.stats().sessions == 1 and agent.turns("s2") == []
    assert query(agent, "SELECT session_id FROM sessions") == [("s1",)]
    assert agent.add_turn("s2", "user", "A new start.").turn_seq == 1  # the id can be used again


# ---------------------------------------------------------------------- what was derived from forgotten text
PET = "petravonk"  # a second distinctive word of the forgotten turn
TITLE = "quillfeatherton"  # in a document's title (its first chunk) only


def chat(secret: bool) -> list[tuple[str, str, str, str]]:
    """Conversation turns; with ``secret``, also the turn later forgotten (the second of s1) and
    session s3, forgotten whole."""
    turns = [
        ("s1", "user", "Where did you travel last spring?", T0),
        ("s1", "assistant", f"I flew to {TOKEN} island with my cousin {PET}.", T0),
        ("s1", "user", "That sounds lovely, what did you eat there?", T0),
        ("s1", "assistant", "ok", T0),
        ("s1", "user", "Mostly grilled fish and mangoes, right?", T0),
        ("s2", "user", "Remind me to water the ferns tomorrow.", T0),
        ("s3", "user", f"My locker code mentions {TOKEN} twice.", T0),
        ("s3", "assistant", "Understood, I will keep that private.", T0),
        ("s3", "user", "Thanks a lot for keeping it.", T0),
    ]
    return turns if secret else [t for t in turns if TOKEN not in t[2] and t[0] != "s3"]


def record_of(agent: MemoryAgent, ns: str, text: str) -> int:
    sql = "SELECT r.id FROM records r JOIN namespaces n ON n.id = r.namespace_id WHERE n.name = :ns AND r.text = :t"
    return query(agent, sql, ns=ns, t=text)[0][0]


def contexts(agent: MemoryAgent, ns: str) -> list[tuple[str, str]]:
    """``(text, context)`` of the namespace's records, sorted."""
    sql = "SELECT r.text, r.context FROM records r JOIN namespaces n ON n.id = r.namespace_id WHERE n.name = :ns"
    return sorted(query(agent, sql, ns=ns))


def lexical_hits(agent: MemoryAgent, word: str, ns: str) -> list[str]:
    """The texts of the hits that recall's BM25 index ranked for ``word``."""
    return [h.text for h in agent.recall(word, k=20, namespace=ns) if "lexical" in h.signals]


def assert_gone(agent: MemoryAgent, other: MemoryAgent, ns: str, words: list[str], export_to) -> None:
    """No table holds ``words``; neither ``agent`` nor ``other`` (another process's caches) finds
    them through BM25; an export made now does not hold them."""
    for w in words:
        assert tables_holding(agent, w) == set(), w
        assert lexical_hits(agent, w, ns) == [], w
        assert lexical_hits(other, w, ns) == [], w
    export_jsonl(agent, export_to)
    dumped = export_to.read_text(encoding="utf-8").casefold()
    assert [w for w in words if w in dumped] == []


@pytest.mark.backends()
@pytest.mark.parametrize("unlearn", [False, True])
def test_forgetting_a_turn_rewrites_the_next_turns_context_as_if_never_written(
    db_url, fake_embedder, tmp_path, unlearn
):
    """The turn after a forgotten one was indexed with the forgotten turn's words (its lexical
    context: speaker, date and the turn before it). Forgetting a turn, by record or by source,
    rewrites that context from the turn that now precedes it, exactly as a namespace written
    without the forgotten turns holds it, in the forgetting transaction: no column, BM25 index
    (this process's or another's) or export keeps a word of it."""
    with (
        MemoryAgent.open(db_url, embedder=fake_embedder) as agent,
        MemoryAgent.open(db_url, embedder=fake_embedder) as other,
    ):
        agent.add_turns(chat(secret=False), namespace="never")
        agent.add_turns(chat(secret=True), namespace="forgot")
        said = f"I flew to {TOKEN} island with my cousin {PET}."
        nxt = [c for t, c in contexts(agent, "forgot") if t.startswith("That sounds lovely")]
        assert nxt and PET in nxt[0].casefold()  # the reply was indexed with the forgotten turn's words
        assert lexical_hits(other, PET, "forgot") == [said, "That sounds lovely, what did you eat there?"]

        assert agent.forget(record_id=record_of(agent, "forgot", said), namespace="forgot", unlearn=unlearn) == 1
        assert agent.forget(source="session:s3", namespace="forgot", unlearn=unlearn) == 3
        assert contexts(agent, "forgot") == contexts(agent, "never")
        assert_gone(agent, other, "forgot", [TOKEN, PET], tmp_path / "after.jsonl")
        assert agent.recall("what did you eat", k=1, namespace="forgot")[0].text.startswith("That sounds lovely")

        # the first turn of a session goes: the next one has no turn before it any more
        first = record_of(agent, "forgot", "Where did you travel last spring?")
        assert agent.forget(record_id=first, namespace="forgot", unlearn=unlearn) == 1
        agent.forget(record_id=record_of(agent, "never", "Where did you travel last spring?"), namespace="never")
        assert contexts(agent, "forgot") == contexts(agent, "never")
        assert [c for t, c in contexts(agent, "forgot") if t.startswith("That sounds")] == ["user 01 May 2024"]


@pytest.mark.backends()
def test_forgetting_a_session_cleans_the_context_of_a_record_it_repeats(db_url, fake_embedder, tmp_path):
    """A turn that repeats a record of another session adds its own context (the forgotten turn
    before it) to that record, which stays: forgetting the session takes that part away again."""
    kept = [("s0", "user", "Hello there.", T0), ("s0", "assistant", "Noted, I will remember that.", T0)]
    gone = [
        ("s1", "user", f"My {TOKEN} password is {PET}.", T0),
        ("s1", "assistant", "Noted, I will remember that.", T0),  # a repeat: its record stays
    ]
    with (
        MemoryAgent.open(db_url, embedder=fake_embedder) as agent,
        MemoryAgent.open(db_url, embedder=fake_embedder) as other,
    ):
        agent.add_turns(kept, namespace="never")
        agent.add_turns(kept, namespace="forgot")
        agent.add_turns(gone, namespace="forgot")
        assert lexical_hits(other, PET, "forgot") == [f"My {TOKEN} password is {PET}.", "Noted, I will remember that."]
        assert agent.forget(source="session:s1", namespace="forgot") == 2
        assert contexts(agent, "forgot") == contexts(agent, "never")
        assert_gone(agent, other, "forgot", [TOKEN, PET], tmp_path / "after.jsonl")


def handbook() -> str:
    rules = "\n\n".join(
        f"Rule {i}: staff accrue {i + 2} days of annual leave after {i} years, approved by the line manager."
        for i in range(60)
    )
    return f"{TITLE.title()} Employee Handbook\nRevision 3, Lisbon office\n\n{rules}"


def chunk_rows(agent: MemoryAgent, source: str) -> list[tuple[int, int, str, str]]:
    """``(chunk index, record id, text, context)`` of a source's chunks, in order."""
    sql = (
        "SELECT o.chunk_index, r.id, r.text, r.context FROM occurrences o JOIN records r ON r.id = o.record_id "
        "WHERE o.source = :s ORDER BY o.chunk_index"
    )
    return query(agent, sql, s=source)


@pytest.mark.backends()
def test_forgetting_a_documents_first_chunk_takes_its_title_from_every_chunk(db_url, fake_embedder, tmp_path):
    """What of a document's header is derived from a chunk's text: every chunk of a document is
    indexed with its header, the source's name words and the document's title, which is the title
    lines of its opening paragraph (``titans_agent.ingest.headers.title_lines``): text of its first
    chunk (chunk index 0), and of no other chunk. So erasing that chunk's record (the record is
    deleted: no other occurrence keeps its text) takes the title out of the context of every
    record that held the document's header, the document's other chunks and a record of another
    source that one of its chunks repeated; the name words stay (the source name is the caller's
    label, kept in ``occurrences.source``). As recall's document signal, which reads a document's
    header from its chunk 0 and has none for a document without it. Erasing any other chunk
    leaves the title: nothing of it came from that chunk."""
    with (
        MemoryAgent.open(db_url, embedder=fake_embedder) as agent,
        MemoryAgent.open(db_url, embedder=fake_embedder) as other,
    ):
        agent.ingest(handbook(), source="hb", namespace="n")
        rows = chunk_rows(agent, "hb")
        assert len(rows) >= 3 and rows[0][2].startswith(TITLE.title())
        assert all(TITLE in ctx.casefold() for *_, ctx in rows)  # every chunk carries the title
        assert len(lexical_hits(other, TITLE, "n")) == len(rows)
        agent.forget(record_id=rows[2][1], namespace="n")  # not the first chunk: the title stays
        assert all(ctx == rows[1][3] for *_, ctx in chunk_rows(agent, "hb"))

        assert agent.forget(record_id=rows[0][1], namespace="n", unlearn=True) == 1
        assert [ctx for *_, ctx in chunk_rows(agent, "hb")] == ["hb"] * (len(rows) - 2)
        assert_gone(agent, other, "n", [TITLE], tmp_path / "after.jsonl")
        assert agent.recall("annual leave", k=1, namespace="n")[0].text.startswith("Rule")


@pytest.mark.backends()
def test_forgetting_a_document_takes_its_title_from_a_record_it_repeated(db_url, fake_embedder, tmp_path):
    with (
        MemoryAgent.open(db_url, embedder=fake_embedder) as agent,
        MemoryAgent.open(db_url, embedder=fake_embedder) as other,
    ):
        agent.ingest(handbook(), source="hb", namespace="n")
        _, rid, text, _ = chunk_rows(agent, "hb")[2]
        agent.ingest(text, source="copy", namespace="n")  # its one chunk repeats chunk 2 of hb
        assert chunk_rows(agent, "copy")[0][1] == rid
        assert lexical_hits(other, TITLE, "n")
        n = len(chunk_rows(agent, "hb"))
        assert agent.forget(source="hb", namespace="n") == n > 2
        assert [(r, t) for _, r, t, _ in chunk_rows(agent, "copy")] == [(rid, text)]  # the record stays
        assert_gone(agent, other, "n", [TITLE], tmp_path / "after.jsonl")


@pytest.mark.backends()
def test_every_piece_of_a_long_turn_after_a_forgotten_one_gets_its_new_context(agent):
    """A turn longer than the embedder's window is written as several records, each indexed with
    the turn's context: every one of them gets the context of the turn now before it."""
    long = " ".join(f"Day {i} we walked along the harbour of Porto and counted {i} boats." for i in range(60))
    turns = [
        ("s1", "user", "How was the trip?", T0),
        ("s1", "user", f"Before that, {TOKEN} happened.", T0),
        ("s1", "assistant", long, T0),
        ("s1", "user", "Thanks for the long story.", T0),
    ]
    agent.add_turns([t for t in turns if TOKEN not in t[2]], namespace="never")
    agent.add_turns(turns, namespace="forgot")
    pieces = [c for t, c in contexts(agent, "forgot") if t.startswith("Day")]
    assert len(pieces) > 1 and all(TOKEN in c for c in pieces)
    assert agent.forget(record_id=record_of(agent, "forgot", turns[1][2]), namespace="forgot") == 1
    assert contexts(agent, "forgot") == contexts(agent, "never")
    assert tables_holding(agent, TOKEN) == set() and lexical_hits(agent, TOKEN, "forgot") == []


# ---------------------------------------------------------------------- a piece of a long turn
def day_word(i: int) -> str:
    """A distinctive word of sentence ``i`` (no one is a substring of another)."""
    return "qux" + chr(97 + i // 26) + chr(97 + i % 26) + "vel"


@pytest.mark.backends()
@pytest.mark.parametrize("overlap", [0, 16])
def test_forgetting_a_piece_of_a_long_turn_cuts_its_text_out_of_the_transcript_line(
    db_url, fake_embedder, tmp_path, overlap
):
    """A turn longer than the embedder's window is written as several records (its pieces; with
    ``chunk_overlap_tokens``, each starts with the end of the one before) and one transcript line
    holding the whole text, which the next turn's context also quotes. Forgetting one piece's
    record cuts the text that only that piece held out of the line, keeps the rest of the turn
    (the words other pieces also hold stay), and derives the next turn's context again from the
    shortened line: no column, BM25 index or export keeps a word of that piece. The first piece
    goes the same way (the line stays, with the rest); the line goes with its last piece."""
    long = " ".join(f"Day {i} we met the {day_word(i)} near the harbour and counted boats." for i in range(70))
    turns = [
        ("s1", "user", "Tell me about the trip.", T0),
        ("s1", "assistant", long, T0),
        ("s1", "user", "Thanks for the long story.", T0),
    ]
    config = AgentConfig(chunk_overlap_tokens=overlap)
    with (
        MemoryAgent.open(db_url, config, embedder=fake_embedder) as agent,
        MemoryAgent.open(db_url, config, embedder=fake_embedder) as other,
    ):
        agent.add_turns(turns)
        sql = "SELECT id, text FROM records WHERE text LIKE 'Day %' OR text LIKE '%qux%' ORDER BY id"
        pieces = query(agent, sql)
        assert len(pieces) >= 4 and pieces[0][1].startswith("Day 0 ") and day_word(69) in pieces[-1][1]

        def own_words(k: int) -> list[str]:
            """The sentence words that piece ``k`` holds and no other piece does."""
            others = " ".join(t for j, (_, t) in enumerate(pieces) if j != k)
            return [day_word(i) for i in range(70) if day_word(i) in pieces[k][1] and day_word(i) not in others]

        middle, first = own_words(1), own_words(0)
        assert len(middle) >= 5 and len(first) >= 5
        nxt = "Thanks for the long story."
        assert middle[0] in query(agent, "SELECT context FROM records WHERE text = :t", t=nxt)[0][0]
        assert lexical_hits(other, middle[0], "default")

        assert agent.forget(record_id=pieces[1][0]) == 1
        assert_gone(agent, other, "default", middle, tmp_path / "piece.jsonl")
        line = agent.turns("s1")[1]["content"]
        assert all(t in line for _, t in pieces[:1] + pieces[2:])  # the rest of the turn stays, verbatim
        if not overlap:
            assert line == " ".join(t for _, t in pieces[:1] + pieces[2:])
        context = query(agent, "SELECT context FROM records WHERE text = :t", t=nxt)[0][0]
        assert context == f"user 01 May 2024 {line[:1000]}"  # derived again from the shortened line

        assert agent.forget(record_id=pieces[0][0], unlearn=True) == 1  # the first piece: the line stays
        assert_gone(agent, other, "default", first, tmp_path / "first.jsonl")
        line = agent.turns("s1")[1]["content"]
        assert [t["content"] for t in agent.turns("s1")] == [turns[0][2], line, nxt]
        assert line.startswith(pieces[2][1]) and line.endswith(pieces[-1][1])
        assert agent.turns("s1")[1]["record_id"] == pieces[2][0]
        context = query(agent, "SELECT context FROM records WHERE text = :t", t=nxt)[0][0]
        assert context == f"user 01 May 2024 {line[:1000]}"

        for rid, _ in pieces[2:]:
            agent.forget(record_id=rid)
        assert [t["content"] for t in agent.turns("s1")] == [turns[0][2], nxt]  # the line went with its last piece
        assert tables_holding(agent, "qux") == set()
        assert query(agent, "SELECT context FROM records WHERE text = :t", t=nxt)[0][0] == (
            f"user 01 May 2024 {turns[0][2]}"
        )


def test_a_piece_that_cannot_be_placed_takes_the_text_no_placed_piece_holds():
    """How a line is cut when its pieces are not all exact slices of it: a repeat's record keeps
    the text it repeats (another case or spacing: placed all the same); a piece merged into a near
    duplicate keeps that record's text (not placed): the characters no placed piece holds go with
    it, so that nothing of it stays."""
    line = "Alpha beta.  Gamma delta. Epsilon zeta."
    assert cut_line(line, [("Alpha beta.", False), ("gamma   DELTA.", True), ("Epsilon zeta.", False)]) == (
        "Alpha beta.  Epsilon zeta."
    )
    assert cut_line(line, [("Alpha beta.", False), ("delta, gamma", True), ("Epsilon zeta.", False)]) == (
        "Alpha beta.  Epsilon zeta."
    )
    assert cut_line(line, [("Alpha beta.", True), ("Gamma delta.", False), ("Epsilon zeta.", False)]) == (
        "Gamma delta. Epsilon zeta."
    )
    assert cut_line(line, [("Alpha beta.", True), ("Gamma delta. Epsilon zeta.", True)]) is None
    assert cut_line(line, [("Alpha beta.", False), ("Zeta epsilon", False), ("Gamma delta.", True)]) == (
        "Alpha beta.  Epsilon zeta."
    )  # a remaining piece that cannot be placed: only what the forgotten piece held goes


# ---------------------------------------------------------------------- the enclosing names of code chunks
def ledger_source() -> str:
    """A Python file: class ``Brambleworth`` (its ``class`` line in chunk 0 only) with short methods
    (a chunk each) and ``glimmerstaff``, whose body spans several chunks after its ``def`` line."""

    def method(name: str, doc: str, n: int) -> str:
        rows = [f"        total_{k} = self.ledger_step({k}) + {k}  # accumulate the ledger row {k}" for k in range(n)]
        return "\n".join([f"    def {name}(self, value):", f'        """{doc}"""', *rows, "        return value"])

    methods = [method(f"method_{m}", f"Book entry {m}.", 4) for m in range(6)] + [method("glimmerstaff", "Long.", 40)]
    return 'import os\n\n\nclass Brambleworth:\n    """Keeps the ledger."""\n\n' + "\n\n".join(methods) + "\n"


@pytest.mark.backends()
def test_forgetting_a_code_chunk_takes_the_names_it_defined_from_the_other_chunks(db_url, fake_embedder, tmp_path):
    """A chunk of Python source is indexed with the names of the classes and functions enclosing
    it (``titans_agent.ingest.headers.enclosing_scopes``), read from ``class``/``def`` lines that
    may lie in another chunk. Forgetting the chunk that held such a line takes the name out of the
    context of every other chunk of the file; a name whose line is in a chunk that stays, stays."""
    with (
        MemoryAgent.open(db_url, embedder=fake_embedder) as agent,
        MemoryAgent.open(db_url, embedder=fake_embedder) as other,
    ):
        agent.ingest(ledger_source(), source="ledger/vault.py", namespace="n")
        rows = chunk_rows(agent, "ledger/vault.py")
        header = "ledger vault py"
        assert "class Brambleworth" in rows[0][2] and rows[1][3] == f"{header} Brambleworth"
        glimmer = [i for i, (_, _, text, _) in enumerate(rows) if "def glimmerstaff" in text]
        assert len(glimmer) == 1 and len(rows) - glimmer[0] >= 3
        inside = rows[glimmer[0] + 1 :]  # chunks of the body of glimmerstaff, after its def line
        assert all(ctx == f"{header} Brambleworth glimmerstaff" for *_, ctx in inside)
        assert lexical_hits(other, "brambleworth", "n")

        assert agent.forget(record_id=rows[0][1], namespace="n") == 1
        assert_gone(agent, other, "n", ["brambleworth"], tmp_path / "class.jsonl")
        after = {index: ctx for index, _, _, ctx in chunk_rows(agent, "ledger/vault.py")}
        assert after == {
            index: f"{header} glimmerstaff" if index > glimmer[0] else header for index, *_ in rows[1:]
        }  # the def line of glimmerstaff stays: so does its name

        assert agent.forget(record_id=rows[glimmer[0]][1], namespace="n", unlearn=True) == 1
        assert_gone(agent, other, "n", ["glimmerstaff"], tmp_path / "def.jsonl")
        assert {ctx for *_, ctx in chunk_rows(agent, "ledger/vault.py")} == {header}


# ---------------------------------------------------------------------- derived data: the rule of words
def guide_md() -> str:
    """A Markdown file: a bare ``#`` heading chunk (chunk 0), a section of several chunks under
    it, then a bare ``##`` heading chunk and its section's chunks, then a second ``##`` section."""

    def para(tag: str, n: int) -> str:
        return " ".join(f"{tag}word{i} filler text about ordinary things." for i in range(n))

    return f"# {H1}\n\n{para('alpha', 40)}\n\n## {H2}\n\n{para('beta', 40)}\n\n## Marmosetpart\n\n{para('gamma', 20)}\n"


H1 = "Zanzibarheading Quokkatitle"
H2 = "Xylophonesection"


def locations(agent: MemoryAgent, source: str) -> list[tuple[int, str, dict | None]]:
    """``(chunk index, text, location)`` of a source's chunk occurrences, in order."""
    sql = (
        "SELECT o.chunk_index, r.text, o.location FROM occurrences o JOIN records r ON r.id = o.record_id "
        "WHERE o.source = :s ORDER BY o.chunk_index"
    )
    return [(i, text, json.loads(loc) if isinstance(loc, str) else loc) for i, text, loc in query(agent, sql, s=source)]


def assert_nowhere(agent: MemoryAgent, words: list[str], export_to, query_text: str, **recall_args) -> None:
    """No table, no recall hit's doc_location, no record's and no export holds ``words``."""
    for w in words:
        assert tables_holding(agent, w) == set(), w
    cited = [str(h.doc_location) for h in agent.recall(query_text, k=50, **recall_args)]
    cited += [str(h.doc_location) + (h.text or "") for h in agent.records(**recall_args)]
    assert cited and [w for w in words for c in cited if w in c.casefold()] == []
    export_jsonl(agent, export_to)
    dumped = export_to.read_text(encoding="utf-8").casefold()
    assert [w for w in words if w in dumped] == []


def ingest_guide(agent: MemoryAgent, folder) -> tuple[str, dict[str, int]]:
    """Ingest :func:`guide_md` as ``folder/guide.md``; ``(its source, chunk text -> record id)``."""
    (folder / "guide.md").write_text(guide_md(), encoding="utf-8")
    agent.ingest(folder / "guide.md")
    source = str(folder / "guide.md")
    rows = locations(agent, source)
    assert rows[0][1] == f"# {H1}" and all(loc["headings"][0] == H1 for _, _, loc in rows[1:])
    assert [text for _, text, _ in rows].count(f"## {H2}") == 1  # the ## heading alone is a chunk
    under = [loc for _, _, loc in rows if loc.get("headings") == [H1, H2]]
    assert len(under) >= 2 and all(loc["citation"] == f"{H1} > {H2}" for loc in under)
    return source, {h.text: h.id for h in agent.records()}


@pytest.mark.backends()
def test_forgetting_a_documents_heading_chunk_takes_the_heading_from_every_location(db_url, fake_embedder, tmp_path):
    """A chunk's location holds the heading path in force at it (and a citation made of it): the
    heading lines lie in other chunks. Forgetting (and unlearning) the chunk that held the
    document's ``#`` heading line takes the heading out of every remaining chunk's location and
    citation, so no recall hit, record, row or export shows it."""
    with MemoryAgent.open(db_url, AgentConfig(chunk_tokens=120), embedder=fake_embedder) as agent:
        source, ids = ingest_guide(agent, tmp_path)
        assert agent.forget(record_id=ids[f"# {H1}"], unlearn=True) == 1
        assert_nowhere(agent, ["zanzibarheading", "quokkatitle"], tmp_path / "h1.jsonl", "ordinary things")
        after = [loc for _, _, loc in locations(agent, source)]
        assert {loc.get("citation") for loc in after} == {None, H2, "Marmosetpart"}
        assert all("citation" not in loc for loc in after if not loc.get("headings"))


@pytest.mark.backends()
def test_forgetting_a_section_heading_chunk_keeps_the_heading_a_remaining_chunk_holds(db_url, fake_embedder, tmp_path):
    """Forgetting a chunk that is only a ``##`` heading takes that heading out of every location
    (and citation); the ``#`` heading above it, whose line is in a chunk that stays, stays in the
    locations of every chunk under it."""
    with MemoryAgent.open(db_url, AgentConfig(chunk_tokens=120), embedder=fake_embedder) as agent:
        source, ids = ingest_guide(agent, tmp_path)
        assert agent.forget(record_id=ids[f"## {H2}"]) == 1
        assert_nowhere(agent, [H2.casefold()], tmp_path / "h2.jsonl", "ordinary things")
        after = [loc for _, _, loc in locations(agent, source)]
        assert all(loc["headings"][0] == H1 for loc in after[1:])  # its line stays: so does the heading
        assert {loc["citation"] for loc in after[1:]} == {H1, f"{H1} > Marmosetpart"}
        assert [h.doc_location.headings[0] for h in agent.recall("betaword3 ordinary", k=3)] == [H1] * 3


def test_the_rule_of_words_keeps_a_heading_the_remaining_text_holds():
    """A heading or section label stays when every word of it (case-folded) is in the remaining
    text, else it goes and the location is cited again; a heading cut at 200 characters may end
    with the start of a word."""
    from titans_agent.erase_words import held_words, kept_context, kept_location

    held = held_words(["Payment terms apply.", "See Section 4.2 for the fee schedule"])
    loc = {"headings": ["Payment Terms", "Fee Zanzibar"], "section": "4.2", "citation": "section 4.2"}
    assert kept_location(loc, held) == {"headings": ["Payment Terms"], "section": "4.2", "citation": "section 4.2"}
    assert kept_location({"headings": ["Payment Terms"], "citation": "Payment Terms"}, held) is None
    gone = kept_location({"headings": ["Quokka"], "section": "7.1", "page": 3, "citation": "section 7.1, page 3"}, held)
    assert gone == {"page": 3, "citation": "page 3"}
    cut = ("Payment " * 24 + "the schedule")[:200]  # ends with "sche": the start of a held word
    assert len(cut) == 200 and kept_location({"headings": [cut]}, held) is None
    assert kept_location({"headings": [cut[8:]]}, held) == {}  # not cut: "sche" is no word of the text
    ctx = "docs guide md Payment Zanzibar | note words Zanzibar"
    assert kept_context(ctx, "/home/x/docs/guide.md", held) == "docs guide md Payment | note words Zanzibar"


@pytest.mark.backends()
def test_a_class_line_cut_in_two_by_the_chunker_leaves_no_name(db_url, fake_embedder, tmp_path):
    """A ``class`` line longer than a chunk is cut in two, so the names of the enclosing class
    and method cannot be found again from their lines; forgetting every chunk that holds the
    names still takes them out of every other chunk's context (the rule of words), the file's
    name words stay."""
    body = "\n".join(f"        value_{i} = compute_{i}(arg_{i}) + offset_{i}" for i in range(40))
    bases = ", ".join(f"MixinNumber{i}" for i in range(60))
    code = (
        f'"""Module docstring."""\n\nclass HippogriffVault({bases}):\n    """Vault."""\n\n'
        f"    def unlock_manticore(self, arg):\n{body}\n        return value_1\n"
    )
    with (
        MemoryAgent.open(db_url, AgentConfig(chunk_tokens=60), embedder=fake_embedder) as agent,
        MemoryAgent.open(db_url, embedder=fake_embedder) as other,
    ):
        agent.ingest(code, source="vault/vault.py", namespace="n")
        rows = chunk_rows(agent, "vault/vault.py")
        assert [i for i, (_, _, text, _) in enumerate(rows) if "MixinNumber" in text][1:]  # the line is cut
        assert sum("HippogriffVault" in ctx for *_, ctx in rows) >= 3
        for _, rid, text, _ in rows:
            if "HippogriffVault" in text or "unlock_manticore" in text:
                agent.forget(record_id=rid, namespace="n", unlearn=True)
        left = chunk_rows(agent, "vault/vault.py")
        assert left and all(ctx.startswith("vault vault py") for *_, ctx in left)
        assert_gone(agent, other, "n", ["hippogriffvault", "unlock_manticore"], tmp_path / "vault.jsonl")
