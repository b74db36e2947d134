"""TitansChatMessageHistory: C13 of docs/failure-cases.md through RunnableWithMessageHistory, order, ids,
isolation, clear."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables.history import RunnableWithMessageHistory
from titans_agent.adapters.langchain import TitansChatMessageHistory


def _pairs(messages):
    return [(m.type, m.content) for m in messages]


@pytest.mark.backends()
@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")  # still in pipelines
@pytest.mark.parametrize("pass_back", ["stored_objects", "fresh_copies_without_ids"])
def test_history_passed_twice_c13(agent, pass_back):
    history = TitansChatMessageHistory(agent, "s1")
    history.add_messages([HumanMessage("My name is Ada."), AIMessage("Nice to meet you, Ada.")])
    assert len(history.messages) == 2
    if pass_back == "stored_objects":
        first_two = history.messages  # carry their stored ids
    else:
        first_two = [HumanMessage("My name is Ada."), AIMessage("Nice to meet you, Ada.")]

    model = FakeListChatModel(responses=["Answer one.", "Answer two.", "Answer three."])
    chain = RunnableWithMessageHistory(model, lambda session_id: TitansChatMessageHistory(agent, session_id))
    config = {"configurable": {"session_id": "s1"}}
    sizes = [len(history.messages)]
    for i, question in enumerate(["What is my name?", "Where do I live?", "What do I like?"]):
        answer = chain.invoke([*first_two, HumanMessage(question)], config)
        assert answer.content == ["Answer one.", "Answer two.", "Answer three."][i]
        sizes.append(len(history.messages))
    assert sizes == [2, 4, 6, 8]

    messages = history.messages
    assert _pairs(messages) == [
        ("human", "My name is Ada."),
        ("ai", "Nice to meet you, Ada."),
        ("human", "What is my name?"),
        ("ai", "Answer one."),
        ("human", "Where do I live?"),
        ("ai", "Answer two."),
        ("human", "What do I like?"),
        ("ai", "Answer three."),
    ]
    assert len({m.id for m in messages}) == 8
    # the order is the transcript's explicit sequence
    assert [t["content"] for t in agent.turns("s1")] == [m.content for m in messages]
    assert [t["seq"] for t in agent.turns("s1")] == list(range(1, 9))


@pytest.mark.backends()
def test_ids_roles_and_order_preserved(agent):
    history = TitansChatMessageHistory(agent, "s1", namespace="u1")
    sent = [
        SystemMessage("You are terse.", id="sys-1"),
        HumanMessage("ping", id="h-1"),
        AIMessage("pong", id="a-1"),
        ToolMessage("42", tool_call_id="call-7", id="t-1"),
        HumanMessage("no id here"),
    ]
    history.add_messages(sent)
    assert sent[-1].id is not None  # a generated id is set on the caller's message
    got = history.messages
    assert [type(m) for m in got] == [SystemMessage, HumanMessage, AIMessage, ToolMessage, HumanMessage]
    assert [m.id for m in got] == ["sys-1", "h-1", "a-1", "t-1", sent[-1].id]
    assert got[3].tool_call_id == "call-7"
    # adding the very same messages again stores nothing
    history.add_messages(got)
    history.add_messages([HumanMessage("ping", id="h-1")])
    assert len(history.messages) == 5
    # a new message whose text repeats an older one is still new
    history.add_messages([HumanMessage("ping"), AIMessage("pong again")])
    assert _pairs(history.messages)[-2:] == [("human", "ping"), ("ai", "pong again")]


@pytest.mark.backends()
def test_sessions_are_isolated_c3(agent):
    s1 = TitansChatMessageHistory(agent, "s1")
    s1_old = TitansChatMessageHistory(agent, "s1_old")
    other_ns = TitansChatMessageHistory(agent, "s1", namespace="tenant_b")
    s1.add_messages([HumanMessage("current chat about invoices")])
    s1_old.add_messages([HumanMessage("old chat about holidays"), AIMessage("sounds fun")])
    assert _pairs(s1.messages) == [("human", "current chat about invoices")]
    assert len(s1_old.messages) == 2
    assert other_ns.messages == []
    s1.clear()
    assert s1.messages == []
    assert len(s1_old.messages) == 2
    assert agent.recall("invoices", k=10, session_id="s1") == []


@pytest.mark.backends()
def test_every_turn_is_recallable(agent):
    history = TitansChatMessageHistory(agent, "s1")
    history.add_messages([HumanMessage("My staging server listens on port 8443."), AIMessage("Noted: port 8443.")])
    hits = agent.recall("staging server port", k=10, session_id="s1")
    texts = {h.text for h in hits}
    assert {"My staging server listens on port 8443.", "Noted: port 8443."} <= texts
    assert all(h.kind == "turn" and h.session_id == "s1" for h in hits)


@pytest.mark.backends()
@pytest.mark.asyncio
async def test_async_methods(agent):
    history = TitansChatMessageHistory(agent, "s1")
    await history.aadd_messages([HumanMessage("hello"), AIMessage("hi")])
    assert _pairs(await history.aget_messages()) == [("human", "hello"), ("ai", "hi")]
    await history.aclear()
    assert await history.aget_messages() == []


@pytest.mark.backends()
def test_a_message_said_again_is_stored_again(agent):
    # found by a reviewer: "yes" twice in a row, or the same id-less pair sent twice, was stored once
    h = TitansChatMessageHistory(agent, "s-repeat")
    h.add_user_message("yes")
    h.add_user_message("yes")
    h.add_messages([HumanMessage("ping"), AIMessage("pong")])
    h.add_messages([HumanMessage("ping"), AIMessage("pong")])
    assert [m.content for m in h.messages] == ["yes", "yes", "ping", "pong", "ping", "pong"]
