"""Memories put into a model's context carry their dates and superseded marks: the LangChain
middleware and recall tool, the retriever's documents, the MCP server's recall.

A model that sees "I live in Boston." and "I now live in Seattle." undated cannot tell which is
current; each face shows ``[2024-03-01] ...`` and ``[2024-01-01, superseded] ...`` instead, in
recall's order (the successor above the record it supersedes)."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from titans_agent.adapters.langchain import TitansMemoryMiddleware, TitansRetriever, memory_tools
from titans_agent.adapters.mcp import MemoryTools
from titans_agent.adapters.memory_format import memory_date, memory_label, memory_line

from titans_agent import MemoryAgent

OLD = ("s1", "user", "My rent is 1200 dollars a month.", "2024-01-01T10:00:00Z")
NEW = ("s2", "user", "My rent is now 1350 dollars a month.", "2024-03-01T23:30:00-05:00")  # 04:30 UTC on 03-02
QUESTION = "How much is my rent?"


class ModelInputs(BaseCallbackHandler):
    """Records the messages every chat-model call receives."""

    def __init__(self) -> None:
        self.calls: list[list[BaseMessage]] = []

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], **kwargs: Any) -> None:
        self.calls.extend(messages)


def _supersession(agent: MemoryAgent, namespace: str = "dana") -> tuple[int, int]:
    old, new = agent.add_turns([OLD, NEW], namespace=namespace)
    assert agent.recall(QUESTION, k=2, namespace=namespace)[1].superseded_by == [new.record_id]  # a real link
    return old.record_id, new.record_id


def _injected(agent: MemoryAgent, question: str, user: str = "dana", k: int = 2) -> list[str]:
    """The memory lines the middleware puts into the model's system message for ``question``."""
    inputs = ModelInputs()
    model = GenericFakeChatModel(messages=itertools.cycle([AIMessage("ok")]))
    graph = create_agent(model, tools=[], middleware=[TitansMemoryMiddleware(agent, k=k, write_turns=False)])
    graph.invoke(
        {"messages": [HumanMessage(question)]},
        {"configurable": {"thread_id": "q", "user_id": user}, "callbacks": [inputs]},
    )
    block = inputs.calls[-1][0].text.split("Relevant memories:\n", 1)[1]
    return block.splitlines()


@pytest.mark.backends()
def test_the_middleware_dates_each_memory_and_marks_the_superseded_one(agent):
    _supersession(agent)
    assert _injected(agent, QUESTION) == [
        "- [2024-03-02] My rent is now 1350 dollars a month.",  # the date in UTC
        "- [2024-01-01, superseded] My rent is 1200 dollars a month.",
    ]


@pytest.mark.backends()
def test_the_recall_tool_answers_the_same_lines(agent):
    _supersession(agent, namespace="u1")
    _, recall = memory_tools(agent, namespace="u1", k=2)
    assert recall.invoke({"query": QUESTION}).splitlines() == [
        "- [2024-03-02] My rent is now 1350 dollars a month.",
        "- [2024-01-01, superseded] My rent is 1200 dollars a month.",
    ]
    assert "superseded" in recall.description  # the model is told what the mark means


@pytest.mark.backends()
def test_retriever_documents_carry_the_date_and_the_successor(agent):
    old, new = _supersession(agent, namespace="docs")
    docs = TitansRetriever(agent=agent, k=2, namespace="docs").invoke(QUESTION)
    assert [d.page_content for d in docs] == [NEW[2], OLD[2]]  # the text itself is unchanged
    assert [(d.metadata["memory_date"], d.metadata["superseded_by"]) for d in docs] == [
        ("2024-03-02", []),
        ("2024-01-01", [new]),
    ]


@pytest.mark.backends()
def test_mcp_recall_hits_carry_the_date_and_the_mark(agent):
    old, new = _supersession(agent, namespace="mcp")
    hits = MemoryTools(agent, namespace="mcp").recall(QUESTION, k=2)["hits"]
    assert [(h["id"], h["date"], h["superseded"]) for h in hits] == [
        (new, "2024-03-02", False),
        (old, "2024-01-01", True),
    ]
    assert hits[1]["superseded_by"] == [new] and "superseded_by" not in hits[0]


def test_a_note_or_chunk_is_dated_by_its_write_and_shows_its_source(agent):
    before = dt.datetime.now(dt.timezone.utc).date()
    agent.remember("The staging server listens on port 8443.")
    agent.ingest("Parental leave is 16 weeks at full pay.", source="handbook.txt")
    after = dt.datetime.now(dt.timezone.utc).date()
    note, chunk = agent.records()
    assert note.timestamp is None and before <= memory_date(note) <= after
    assert memory_label(note) == f"[{memory_date(note).isoformat()}]"
    assert memory_line(chunk) == f"[{memory_date(chunk).isoformat()}] {chunk.text} (handbook.txt lines 1-1)"
    agent.add_turn("s9", "user", "Hi there.", "2023-07-04T12:00:00Z")
    (turn,) = agent.records(kinds=["turn"])
    assert memory_line(turn) == "[2023-07-04] Hi there."  # dated when said; no "(session:s9)"


@pytest.mark.integration
def test_the_middleware_shows_a_real_change_of_address(tmp_path):
    # the real embedder: two turns of a user, the second a change, then the question a chatbot gets
    with MemoryAgent.open(tmp_path / "m.db") as agent:
        agent.user("dana").add_turns(
            [
                ("s1", "user", "I live in Boston.", "2024-01-01T10:00:00Z"),
                ("s1", "assistant", "Nice, Boston is lovely.", "2024-01-01T10:00:05Z"),
                ("s2", "user", "I now live in Seattle.", "2024-03-01T10:00:00Z"),
            ]
        )
        lines = _injected(agent, "Where do I live?", k=3)
    assert lines[:2] == ["- [2024-03-01] I now live in Seattle.", "- [2024-01-01, superseded] I live in Boston."]
