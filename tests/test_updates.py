"""Knowledge updates: a newer statement supersedes an older one (kept, linked, demoted, time-aware).

Real SQLite files under tmp_path; only the embedder is fake (tests/conftest.py)."""

from __future__ import annotations

import datetime as dt
import sqlite3

import numpy as np
import pytest

from titans_agent import AgentConfig, MemoryAgent, RetrievalConfig
from titans_agent.store import Supersession
from titans_agent.store.context import supersession_links
from titans_agent.updates import (
    FreshRecord,
    about_user,
    content_differs,
    find_supersessions,
    is_update,
    link_change,
    speaks_for_user,
    third_parties,
)

T0 = dt.datetime(2024, 5, 1, 9, 0)
OLD, NEW = "My code editor is Vim.", "My code editor is Helix now."


def _day(n: int) -> dt.datetime:
    return T0 + dt.timedelta(days=n)


def _links(agent: MemoryAgent, as_of: dt.datetime | None = None) -> dict[int, list[int]]:
    with agent.store.session() as s:
        ids = [h.id for h in agent.records()]
        return supersession_links(s, ids, as_of)[0]


def _links_in(agent: MemoryAgent, namespace: str) -> dict[int, list[int]]:
    with agent.store.session() as s:
        return supersession_links(s, [h.id for h in agent.records(namespace=namespace)], None)[0]


def _write_update(agent: MemoryAgent, **kw) -> tuple[int, int]:
    old = agent.add_turn("s1", "user", OLD, _day(0), **kw).record_id
    agent.add_turn("s1", "assistant", "Nice, a classic.", _day(0), **kw)
    agent.add_turn("s2", "user", "I went hiking in the mountains.", _day(3), **kw)
    new = agent.add_turn("s3", "user", NEW, _day(10), **kw).record_id
    return old, new


def test_content_differs_needs_a_replaced_word():
    assert content_differs("My rent is 1200 dollars a month.", "My rent is now 1350 dollars a month.")
    assert content_differs(OLD, NEW)
    assert not content_differs("I love hiking.", "Hiking is what I love!")  # a paraphrase
    assert not content_differs(OLD, "My code editor is Vim, now.")  # adds a word, replaces none


def test_is_update_needs_a_change_about_the_same_people():
    assert is_update("I live at 12 Oak Street.", "We just moved house, my new address is 48 Pine Road.")
    assert not is_update("I live at 12 Oak Street.", "I live at 48 Pine Road and love it.")  # no change announced
    assert not is_update("I live at 12 Oak Street.", "My sister now lives at 4 Elm Street.")  # someone else
    assert not is_update("My manager is Priya.", "My partner's manager is now Marcus.")
    assert third_parties("My friend Sam's car is new.") == {"friend", "sam"}
    # a conversation turn must state the speaker's own fact: no question, first person
    assert not is_update("Do you use Vim?", "My code editor is Helix now.")
    assert not is_update("Vim is great.", "Helix is the new editor everyone likes.")
    assert is_update("Vim is great.", "Helix is the new editor everyone likes.", conversational=False)


@pytest.mark.backends()
def test_a_newer_statement_supersedes_and_ranks_first(agent):
    old, new = _write_update(agent)
    assert _links(agent) == {old: [new]}
    hits = agent.recall("which code editor do I use", k=5)
    assert hits[0].id == new
    assert old in [h.id for h in hits]  # kept, only demoted
    assert old not in [h.id for h in agent.recall("which code editor do I use", k=5, include_superseded=False)]
    assert len(agent.records()) == 4  # nothing was deleted


@pytest.mark.backends()
def test_hits_name_their_links(agent):
    old, new = _write_update(agent)
    by_id = {h.id: h for h in agent.recall("which code editor do I use", k=5)}
    assert by_id[old].superseded_by == [new] and by_id[new].supersedes == [old]


def test_demotion_is_a_setting(tmp_path, fake_embedder):
    cfg = AgentConfig(retrieval=RetrievalConfig(superseded_weight=1.0))
    with MemoryAgent.open(tmp_path / "m.db", cfg, embedder=fake_embedder) as agent:
        old, new = _write_update(agent)
        scores = {h.id: h.score for h in agent.recall("My code editor is Vim", k=5)}
        assert scores[old] > scores[new]  # no demotion: the exact wording wins


@pytest.mark.backends()
def test_another_speaker_or_a_paraphrase_never_supersedes(agent):
    agent.add_turn("s1", "user", OLD, _day(0))
    agent.add_turn("s1", "assistant", NEW, _day(1))  # the assistant's words are not the user's fact
    agent.add_turn("s1", "user", "My code editor is Vim, truly.", _day(2))  # adds, replaces nothing
    assert _links(agent) == {}


@pytest.mark.backends()
def test_as_of_sees_what_was_known_then(agent):
    old, new = _write_update(agent)
    before = agent.recall("which code editor do I use", k=5, as_of=_day(5))
    assert new not in [h.id for h in before]  # not said yet
    assert before[0].id == old  # current again: its successor came later
    assert _links(agent, as_of=_day(5)) == {}
    assert _links(agent, as_of=_day(10)) == {old: [new]}
    later = agent.recall("which code editor do I use", k=5, as_of=_day(11))
    assert later[0].id == new


def test_updates_within_one_batch_and_across_reopen(tmp_path, fake_embedder):
    db = tmp_path / "m.db"
    with MemoryAgent.open(db, embedder=fake_embedder) as agent:
        res = agent.add_turns(
            [
                ("s1", "user", "My rent is 1200 dollars a month.", _day(0)),
                ("s1", "assistant", "Noted.", _day(0)),
                ("s2", "user", "My rent is now 1350 dollars a month.", _day(30)),
            ]
        )
    with MemoryAgent.open(db, embedder=fake_embedder) as agent:
        assert _links(agent) == {res[0].record_id: [res[2].record_id]}
        assert agent.recall("how much is my rent", k=1)[0].id == res[2].record_id
        agent.forget(record_id=res[2].record_id)  # the link goes with either record
        assert _links(agent) == {}
        assert agent.recall("how much is my rent", k=1)[0].id == res[0].record_id


def test_notes_supersede_by_default(tmp_path, fake_embedder):
    assert RetrievalConfig().update_kinds == ("turn", "note")
    with MemoryAgent.open(tmp_path / "a.db", embedder=fake_embedder) as agent:
        a = agent.remember("I live in Boston.").record_id
        b = agent.remember("I now live in Seattle.").record_id
        c = agent.remember("The staging server listens on port 8443.").record_id
        d = agent.remember("The staging server now listens on port 9443.").record_id
        assert _links(agent) == {a: [b], c: [d]}
        assert agent.recall("staging server port", k=1)[0].id == d
        assert agent.recall("where do I live", k=1)[0].id == b


def test_notes_that_are_distinct_facts_in_the_same_words_are_not_linked(tmp_path, fake_embedder):
    # an application's notes: alike in words, none a newer version of another
    with MemoryAgent.open(tmp_path / "a.db", embedder=fake_embedder) as agent:
        for n in ("first", "second", "third", "fourth"):
            agent.remember(f"{n} note from the app server")
        agent.remember("second note from the command line")
        assert _links(agent) == {}
        assert agent.recall("third note app server", k=1)[0].text == "third note from the app server"


def test_update_kinds_turn_leaves_notes_out(tmp_path, fake_embedder):
    cfg = AgentConfig(retrieval=RetrievalConfig(update_kinds=("turn",)))
    with MemoryAgent.open(tmp_path / "a.db", cfg, embedder=fake_embedder) as agent:
        agent.remember("I live in Boston.")
        agent.remember("The staging server listens on port 8443.")
        agent.remember("I now live in Seattle.")
        agent.remember("The staging server now listens on port 9443.")
        assert _links(agent) == {}
        old, new = _write_update(agent)  # turns still take part
        assert _links(agent) == {old: [new]}


@pytest.mark.integration
def test_a_note_of_a_move_supersedes_the_old_address_with_the_real_embedder(tmp_path):
    with MemoryAgent.open(tmp_path / "a.db") as agent:
        a = agent.remember("I live in Boston.").record_id
        b = agent.remember("I now live in Seattle.").record_id
        for n in ("first", "second", "third"):
            agent.remember(f"{n} note from the app server")
        assert _links(agent) == {a: [b]}
        assert [h.id for h in agent.recall("Where do I live now?", k=2)] == [b, a]


@pytest.mark.integration
def test_i_moved_to_seattle_supersedes_i_live_in_boston(tmp_path):
    """MiniLM's cosine of the two notes is 0.483, under update_similarity 0.5: the clause rule
    (same relation, a change announced) links them."""
    with MemoryAgent.open(tmp_path / "a.db") as agent:
        a = agent.remember("I live in Boston.").record_id
        b = agent.remember("I moved to Seattle.").record_id
        assert _links(agent) == {a: [b]}


@pytest.mark.integration
def test_notes_about_a_named_subject_supersede_like_the_speakers_own(tmp_path):
    # found by a new user: notes as a model or LangGraph's store writes them ("The user lives in
    # Paris.") were never updated, so the old fact ranked first for "Where does the user live?"
    pairs = [
        ("The user lives in Paris.", "The user moved to Berlin.", "Where does the user live?"),
        ("User lives in Paris.", "User moved to Berlin.", "Where does the user live?"),
        ("Alice works as a nurse.", "Alice now works as a software developer.", "What is Alice's job?"),
    ]
    with MemoryAgent.open(tmp_path / "a.db") as agent:
        for i, (old, new, question) in enumerate(pairs):
            a = agent.remember(old, namespace=f"u{i}").record_id
            b = agent.remember(new, namespace=f"u{i}").record_id
            assert _links_in(agent, f"u{i}") == {a: [b]}, (old, new)
            assert agent.recall(question, namespace=f"u{i}", k=1)[0].id == b
        # another subject, a possessed one's, a first-person note: no link
        for i, (old, new) in enumerate(
            [
                ("Alice lives in Paris.", "Bob moved to Berlin."),
                ("Alice lives in Paris.", "Alice's sister moved to Berlin."),
                ("I live in Paris.", "The user moved to Berlin."),
                ("Acme renewed its contract in March.", "Acme moved its headquarters to Berlin."),
                ("The user lives in Paris.", "The user's company moved to Berlin."),  # about the company
            ]
        ):
            agent.remember(old, namespace=f"v{i}")
            agent.remember(new, namespace=f"v{i}")
            assert _links_in(agent, f"v{i}") == {}, (old, new)


def test_detection_can_be_switched_off(tmp_path, fake_embedder):
    cfg = AgentConfig(retrieval=RetrievalConfig(detect_updates=False))
    with MemoryAgent.open(tmp_path / "m.db", cfg, embedder=fake_embedder) as agent:
        _write_update(agent)
        assert _links(agent) == {}


def test_a_database_made_before_the_table_gets_it(tmp_path, fake_embedder):
    db = tmp_path / "m.db"
    with MemoryAgent.open(db, embedder=fake_embedder) as agent:
        agent.add_turn("s1", "user", OLD, _day(0))
    con = sqlite3.connect(db)
    con.execute(f"DROP TABLE {Supersession.__tablename__}")
    con.execute("DROP TABLE alembic_version")  # as schema version 1 made it
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with MemoryAgent.open(db, embedder=fake_embedder) as agent:
        new = agent.add_turn("s1", "user", NEW, _day(1)).record_id
        assert agent.recall("which code editor", k=1)[0].id == new
        assert list(_links(agent).values()) == [[new]]


def test_an_update_may_repeat_every_word_of_the_old_fact():
    # found by a first-time user: "moved from X to Y" repeats X, and short old facts lost every word
    assert is_update("My code editor is Vim.", "I moved from Vim to Helix, it's my editor now.")
    assert is_update("I live in Berlin.", "I now live in Lisbon, I moved from Berlin last month.")
    assert not is_update("I love hiking.", "Now I also love swimming.")  # adds a fact, replaces none
    assert not is_update("My code editor is Vim.", "My code editor is Vim, now.")
    assert third_parties("It's my editor now, that's what I use.") == frozenset()


def test_negations_and_questions_never_supersede():
    # found by a reviewer (real embedder): each of these dropped the older fact
    assert not is_update("My code editor is Vim.", "I have not switched my editor to Helix, I never will.")
    assert not is_update("My rent is 1200 euros a month.", "Should my rent now be 1500 euros a month. I wonder")
    assert is_update("I live in Paris.", "I don't live in Paris anymore, I moved to Berlin.")
    assert is_update("I live in Paris.", "I no longer live in Paris; my new home is Berlin.")


def test_a_note_about_the_user_and_the_users_turns_supersede_each_other():
    t0 = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)
    later = t0 + dt.timedelta(days=3)
    note, turn = "The user lives in Boston.", "I moved to Seattle last month."
    assert about_user(note) and not about_user(turn) and not about_user("The user's dog is Pixel.")
    assert speaks_for_user(note, turn) and speaks_for_user(turn, "The user moved to Porto.")
    assert not speaks_for_user("The user lives in Boston.", "The user moved to Seattle.")  # both notes
    assert link_change(note, turn).relations == frozenset()  # the whole note is stale
    partial = link_change("I live in Lisbon and I work as an architect.", "The user moved to Porto.")
    assert partial.relations == {"residence"} and partial.stale == ("I live in Lisbon",)

    def links(fresh_kind, fresh_role, fresh_text, old_kind, old_role, old_text, cross=True):
        ids = np.array([1, 2], dtype=np.int64)
        sims = np.array([[0.33, 1.0]], dtype=np.float32)  # below update_similarity: the clause rule
        fresh = [FreshRecord(2, fresh_text, fresh_kind, fresh_role, later)]
        places = {1: [(old_kind, old_role, t0)]}
        return find_supersessions(fresh, ids, sims, {1: old_text, 2: fresh_text}, places, 0.5, cross_kind=cross)

    assert [link[:2] for link in links("turn", "user", turn, "note", None, note)] == [(1, 2)]
    assert [
        link[:2] for link in links("note", None, "The user moved to Seattle.", "turn", "user", "I live in Boston.")
    ] == [(1, 2)]
    assert [link[:2] for link in links("turn", "user", turn, "note", None, "I live in Boston.")] == [(1, 2)]
    # not: the assistant's words, a note about someone else, update_kinds without notes
    assert links("turn", "assistant", "You moved to Seattle last month.", "note", None, note) == []
    assert links("turn", "user", turn, "note", None, "Alice lives in Boston.") == []
    assert links("turn", "user", turn, "note", None, note, cross=False) == []


def test_a_whole_record_link_per_kind_replaces_the_note_and_the_turn():
    t0 = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)
    ids = np.array([1, 2, 3], dtype=np.int64)
    sims = np.array([[0.34, 0.33, 1.0]], dtype=np.float32)
    texts = {
        1: "Hi, I'm Dana and I live in Boston.",
        2: "The user lives in Boston.",
        3: "I moved to Seattle last month.",
    }
    places = {1: [("turn", "user", t0)], 2: [("note", None, t0)]}
    fresh = [FreshRecord(3, texts[3], "turn", "user", t0 + dt.timedelta(days=1))]
    assert sorted(link[0] for link in find_supersessions(fresh, ids, sims, texts, places, 0.5)) == [1, 2]


@pytest.mark.integration
def test_the_remember_tools_note_is_superseded_by_the_users_move(tmp_path):
    """What an agent's remember tool writes about the user and what the user says later, with the real
    embedder: the note is marked superseded and the move ranks first."""
    with MemoryAgent.open(tmp_path / "a.db") as agent:
        dana = agent.user("dana")
        first = dana.add_turn("t1", "user", "Hi, I'm Dana and I live in Boston.").record_id
        note = dana.remember("The user lives in Boston.").record_id
        move = dana.add_turn("t2", "user", "I moved to Seattle last month.").record_id
        hits = {h.id: h for h in dana.recall("where does the user live", k=3)}
        assert hits[note].superseded_by == [move] and hits[first].superseded_by == [move]
        assert dana.recall("Where do I live now?", k=1)[0].id == move
