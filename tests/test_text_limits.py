"""The size limit of one note or turn (``AgentConfig.max_text_chars``), on every face.

Writing a note or a turn costs time linear in its length (every chunk of it is embedded; with the
real model about 0.2 s per 1,000 characters on a busy CPU core, so a 1 MB turn held its namespace
for minutes). A longer text is refused before anything is embedded or written, with a message that
names the limit and says to ingest it as a document; ``add_turns`` refuses its batch for it (an
empty turn, by contrast, is skipped and the rest stored: tests/test_shared_text_and_bad_input.py).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import FakeEmbedder
from titans_agent.cli import app as cli_app

from titans_agent import AgentConfig, InvalidInputError, MemoryAgent

LIMIT = 1_000


def words(n: int) -> str:
    """``n`` characters of words (the last one cut)."""
    return ("Marguerite keeps the ledger of the northern orchard. " * (n // 40 + 1))[:n]


@pytest.fixture
def small(db_url, fake_embedder):
    a = MemoryAgent.open(db_url, AgentConfig(max_text_chars=LIMIT), embedder=fake_embedder)
    yield a
    a.close()


@pytest.mark.backends()
def test_a_note_or_turn_over_the_limit_is_refused_before_any_work(small, fake_embedder):
    over = words(LIMIT + 1)
    with pytest.raises(InvalidInputError, match=r"text is 1,001 characters, over the limit of 1,000.*ingest"):
        small.remember(over)
    with pytest.raises(InvalidInputError, match="max_text_chars"):
        small.remember(over, source="crm:1", replace=True)
    with pytest.raises(InvalidInputError, match=r"^content is 1,001 characters"):
        small.add_turn("s1", "user", over)
    assert fake_embedder.calls == 0 and small.namespaces() == []  # nothing embedded, nothing created
    at_limit = words(LIMIT)
    assert small.remember(at_limit).decision == "new"
    assert small.add_turn("s1", "user", at_limit).turn_seq == 1


@pytest.mark.backends()
def test_add_turns_refuses_its_batch_for_one_long_turn(small):
    batch = [("s1", "user", "Hello there."), ("s1", "assistant", words(LIMIT + 1)), ("s1", "user", "   ")]
    with pytest.raises(InvalidInputError, match="turn 1: content is 1,001 characters"):
        small.add_turns(batch)  # the long turn refuses the batch; the empty one after it does not save it
    assert small.turns("s1") == [] and small.stats().records == 0


def test_the_default_limit_is_100_000_characters(agent):
    assert AgentConfig().max_text_chars == 100_000
    with pytest.raises(InvalidInputError, match="100,001 characters, over the limit of 100,000"):
        agent.remember(words(100_001))
    with pytest.raises(ValueError):
        AgentConfig(max_text_chars=0)


def test_the_cli_refuses_a_long_note_from_stdin_in_one_line(tmp_path, monkeypatch):
    embedder = FakeEmbedder()

    def open_agent(db, namespace, embedder_name, device, read_only=False, **kw):
        return MemoryAgent.open(db, AgentConfig(device="cpu"), embedder=embedder, read_only=read_only)

    monkeypatch.setattr(cli_app, "open_agent", open_agent)
    db = tmp_path / "memory.db"

    def run(*args: str, input: str | None = None):
        return CliRunner().invoke(cli_app.cli, ["--db", str(db), *args], input=input)

    for args in (("remember", "-"), ("add-turn", "s1", "user", "-")):
        result = run(*args, input=words(100_001))
        assert result.exit_code == 1, result.output
        assert "is 100,001 characters, over the limit of 100,000" in result.stderr.splitlines()[0]
        assert "ingest" in result.stderr and "Traceback" not in result.output
    assert embedder.calls == 0
    stats = json.loads(run("stats", "--json").stdout)
    assert stats["records"] == 0


def test_the_langchain_history_passes_through_the_same_check(small):
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage
    from titans_agent.adapters.langchain import TitansChatMessageHistory

    history = TitansChatMessageHistory(small, "s1")
    with pytest.raises(InvalidInputError, match="over the limit of 1,000"):
        history.add_messages([HumanMessage("Hi."), AIMessage(words(LIMIT + 1))])
    assert history.messages == []
