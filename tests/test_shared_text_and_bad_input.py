"""Text shared by several sources or sessions, and bad input that must be a clear error.

1. An exact repeat is stored once, but it belongs to every place it was written: recall filters,
   forget and the replacement of a changed file work per place (file, session, kind), so forgetting
   or editing one file never removes what another file holds.
2. Bad input is an InvalidInputError (one "Error:" line in the CLI), never a raw exception: an ISO
   timestamp that overflows in UTC, a JSON line nested too deeply, a lone surrogate, text with
   nothing visible.
"""

from __future__ import annotations

import json
import os

import pytest
import torch
from click.testing import CliRunner
from titans_agent.cli import app as cli_main

from titans_agent import AgentConfig, MemoryAgent
from titans_agent.errors import EmptyInputError, InvalidInputError

# Every test here that takes the agent holds on any database (the others do not use one).
pytestmark = pytest.mark.backends()

TEXT = "The escrow release date for project Zephyr is 2031-03-14 according to the signed contract."


def test_same_text_under_two_sources_is_found_by_the_second_source(agent):
    agent.ingest(TEXT, source="A.md")
    agent.ingest(TEXT, source="B.md")
    hits = agent.recall("escrow release date", source="B.md", k=5)
    assert hits, "B.md holds the escrow sentence, but recall(source='B.md') returns nothing"


def test_forgetting_one_source_keeps_the_other_sources_content(agent):
    agent.ingest(TEXT, source="A.md")
    agent.ingest(TEXT, source="B.md")
    agent.forget(source="A.md")
    hits = agent.recall("escrow release date Zephyr", k=5)
    assert any("2031-03-14" in h.text for h in hits), "forget(source='A.md') deleted B.md's content"
    # and re-ingesting B must bring it back at the latest
    agent.ingest(TEXT, source="B.md")
    assert any("2031-03-14" in h.text for h in agent.recall("escrow release date Zephyr", k=5))


def test_changing_one_file_keeps_an_identical_chunk_of_another_file(tmp_path, fake_embedder):
    a = MemoryAgent.open(tmp_path / "m.db", AgentConfig(device="cpu"), embedder=fake_embedder)
    try:
        proj = tmp_path / "p"
        proj.mkdir()
        header = "\n".join(
            f"# Licence line {i}: Licensed under the Apache License Version 2.0 by Example Corp." for i in range(12)
        )

        def body(n: str) -> str:
            return "\n\n".join(
                f"def f{n}_{i}():\n    "
                + "\n    ".join(f"x{j} = compute_value_{n}_{i}_{j}(argument_number_{j})" for j in range(10))
                + "\n    return x0"
                for i in range(4)
            )

        (proj / "a.py").write_text(header + "\n\n" + body("a"))
        (proj / "b.py").write_text(header + "\n\n" + body("b"))
        a.ingest(proj)
        (proj / "a.py").write_text(body("a"))  # a.py loses its licence header; b.py is untouched
        report = a.ingest(proj)
        assert report.unchanged == 1  # b.py is not re-read...
        hits = a.recall("Licensed under the Apache License", k=10)
        # ...so its licence header must still be in memory
        assert any("Licence line" in h.text for h in hits), "editing a.py deleted b.py's licence chunks"
        b_hits = a.recall("Licensed under the Apache License", source=os.path.realpath(proj / "b.py"), k=10)
        assert any("Licence line" in h.text for h in b_hits)
    finally:
        a.close()


def test_repeated_turn_in_another_session_is_found_with_that_session_filter(agent):
    agent.add_turn("s1", "user", "I live in Lisbon and my cat is called Miso.")
    agent.add_turn("s2", "user", "I live in Lisbon and my cat is called Miso.")
    hits = agent.recall("cat Miso", session_id="s2", k=5)
    assert hits, "the turn said in s2 is not found by recall(session_id='s2')"


def test_turn_first_written_as_note_is_found_as_a_turn(agent):
    agent.remember("Dana's favourite colour is teal.")
    agent.add_turn("s3", "user", "Dana's favourite colour is teal.")
    hits = agent.recall("favourite colour teal", kinds=["turn"], k=5)
    assert any("teal" in h.text for h in hits), "a turn is invisible to kinds=['turn'] when a note said it first"
    hits = agent.recall("favourite colour teal", session_id="s3", k=5)
    assert any("teal" in h.text for h in hits)


def test_add_turn_with_out_of_range_timestamp_is_invalid_input(agent):
    with pytest.raises(InvalidInputError):
        agent.add_turn("s1", "user", "hello", "9999-12-31T23:59:59-05:00")


def test_lone_surrogate_is_stored_with_a_replacement_character(agent):
    r = agent.remember("x\ud800y is the code")
    assert r.stored
    assert agent.recall("code", k=1)[0].text == "x\ufffdy is the code"


@pytest.mark.parametrize("invisible", ["\u200b\u200b", "\ufeff", " \u2060 \n", "\x00\x01"])
def test_text_with_nothing_visible_is_empty_input(agent, invisible):
    with pytest.raises(EmptyInputError):
        agent.remember(invisible)
    with pytest.raises(EmptyInputError):
        agent.recall(invisible)
    assert agent.stats().records == 0


def test_forgetting_a_session_removes_its_transcript_but_not_text_another_session_holds(agent):
    agent.add_turn("s1", "user", "My locker code is 4711.")
    agent.add_turn("s1", "user", "ok")
    agent.add_turn("s2", "user", "ok")
    assert agent.forget(source="session:s1") == 2
    assert agent.turns("s1") == []
    assert [t["content"] for t in agent.turns("s2")] == ["ok"]
    assert all("4711" not in h.text for h in agent.recall("locker code", k=10))
    assert agent.recall("ok", session_id="s2", k=1)[0].text == "ok"


def test_forgetting_a_record_removes_its_transcript_lines(agent):
    r = agent.add_turn("s1", "user", "Delete this sentence please.")
    agent.add_turn("s1", "assistant", "Understood.")
    agent.forget(record_id=r.record_id)
    assert [t["content"] for t in agent.turns("s1")] == ["Understood."]


def test_a_hit_names_every_source_that_holds_it(agent):
    agent.ingest(TEXT, source="A.md")
    agent.ingest(TEXT, source="B.md")
    hit = agent.recall("escrow release date", k=1)[0]
    assert (hit.source, hit.sources, hit.occurrences) == ("A.md", ["B.md"], 2)
    assert agent.recall("escrow release date", source="B.md", k=1)[0].source == "B.md"


@pytest.fixture
def cli_runner(tmp_path, monkeypatch, fake_embedder):
    agents: list[MemoryAgent] = []

    def open_agent(db, namespace, embedder, device, **kw):
        agents.append(MemoryAgent.open(db, AgentConfig(device="cpu"), embedder=fake_embedder))
        return agents[-1]

    monkeypatch.setattr(cli_main, "open_agent", open_agent)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield lambda *args, input=None: CliRunner().invoke(
            cli_main.cli, ["--db", str(tmp_path / "m.db"), *args], input=input, catch_exceptions=False
        )
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize(
    "bad_line",
    [
        json.dumps({"session_id": "s1", "role": "user", "content": "x", "timestamp": "9999-12-31T23:59:59-05:00"}),
        "[" * 100_000 + "]" * 100_000,
    ],
    ids=["timestamp-overflow", "deep-json"],
)
def test_import_chat_skips_a_bad_line_and_imports_the_rest(cli_runner, tmp_path, bad_line):
    good = json.dumps({"session_id": "s1", "role": "user", "content": "Please call me Dana."})
    f = tmp_path / "chat.jsonl"
    f.write_text(bad_line + "\n" + good + "\n")
    result = cli_runner("import-chat", str(f), "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["turns"] == 1
    assert [s["line"] for s in out["skipped"]] == [1]


INVISIBLE_TURNS = ["\u200b", "   ", "", "\ufeff\u2060\n", "\x00"]


@pytest.mark.parametrize("invisible", INVISIBLE_TURNS)
def test_a_turn_with_nothing_visible_is_skipped_and_the_batch_stored(agent, invisible, caplog):
    # a chat export holding one turn of only a zero-width space used to refuse the whole batch
    batch = [
        ("s1", "user", "I live in Boston."),
        ("s1", "assistant", invisible),
        {"session_id": "s1", "role": "user", "content": "I work as a nurse."},
        ("s2", "user", invisible, "2024-05-01T10:00:00Z", {"k": 1}),
    ]
    with caplog.at_level("WARNING", logger="titans_agent.write"):
        results = agent.add_turns(batch)
    assert [r.decision for r in results] == ["new", "skipped", "new", "skipped"]  # aligned with the batch
    assert results[1].reason == "content is empty or only whitespace" and results[3].reason == results[1].reason
    assert (results[1].record_id, results[1].surprise, results[1].stored) == (None, None, False)
    assert [r.turn_seq for r in results] == [1, None, 2, None]  # a skipped turn takes no place in its session
    assert [t["content"] for t in agent.turns("s1")] == ["I live in Boston.", "I work as a nurse."]
    assert agent.turns("s2") == [] and agent.stats().turns == 2
    assert [r.getMessage() for r in caplog.records] == [
        "add_turns: turn 1 skipped: content is empty or only whitespace",
        "add_turns: turn 3 skipped: content is empty or only whitespace",
    ]


def test_a_batch_of_nothing_visible_writes_nothing_and_makes_no_namespace(agent):
    results = agent.add_turns([("s1", "user", "\u200b"), ("s1", "user", " ")], namespace="new-user")
    assert [r.decision for r in results] == ["skipped", "skipped"]
    assert agent.namespaces() == [] and agent.add_turns([], namespace="new-user") == []
    with pytest.raises(InvalidInputError, match="namespace"):
        agent.add_turns([("s1", "user", "\u200b")], namespace=" ")


def test_an_empty_turn_is_still_refused_alone_or_when_otherwise_invalid(agent):
    with pytest.raises(EmptyInputError, match="^content is empty"):
        agent.add_turn("s1", "user", "\u200b")
    with pytest.raises(InvalidInputError, match="turn 1: role"):  # skipped only when the rest is valid
        agent.add_turns([("s1", "user", "Hello."), ("s1", "", "\u200b")])
    with pytest.raises(InvalidInputError, match="turn 0: content must be a string"):
        agent.add_turns([("s1", "user", None), ("s1", "user", "Hello.")])
    assert agent.namespaces() == [] and agent.stats().turns == 0
