"""TitansMemoryMiddleware with create_agent, and the remember / recall tools."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from titans_agent.adapters.langchain import TitansMemoryMiddleware, memory_tools


class ModelInputs(BaseCallbackHandler):
    """Records the messages every chat-model call receives."""

    def __init__(self) -> None:
        self.calls: list[list[BaseMessage]] = []

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], **kwargs: Any) -> None:
        self.calls.extend(messages)


def _model(*answers: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=itertools.cycle([AIMessage(a) for a in answers]))


@pytest.mark.backends()
def test_turns_written_once_per_thread(agent):
    graph = create_agent(
        _model("Hello Ada!", "You are Ada."),
        tools=[],
        middleware=[TitansMemoryMiddleware(agent)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"messages": [HumanMessage("Hi, I am Ada.")]}, config)
    graph.invoke({"messages": [HumanMessage("Who am I?")]}, config)
    turns = agent.turns("t1")
    assert [(t["role"], t["content"]) for t in turns] == [
        ("user", "Hi, I am Ada."),
        ("assistant", "Hello Ada!"),
        ("user", "Who am I?"),
        ("assistant", "You are Ada."),
    ]
    assert agent.turns("default") == []


@pytest.mark.backends()
def test_later_call_sees_recalled_memory(agent):
    agent.remember("The staging server listens on port 8443.")
    inputs = ModelInputs()
    graph = create_agent(
        _model("Noted."),
        tools=[],
        system_prompt="You are a helpful assistant.",
        middleware=[TitansMemoryMiddleware(agent, k=3)],
    )
    graph.invoke(
        {"messages": [HumanMessage("Remember that my favourite colour is teal.")]},
        {"configurable": {"thread_id": "a"}, "callbacks": [inputs]},
    )
    graph.invoke(
        {"messages": [HumanMessage("Which port does the staging server use, and my favourite colour?")]},
        {"configurable": {"thread_id": "b"}, "callbacks": [inputs]},
    )
    system = inputs.calls[-1][0]
    assert isinstance(system, SystemMessage)
    assert system.text.startswith("You are a helpful assistant.")
    assert "Relevant memories:" in system.text
    assert "port 8443" in system.text
    assert "favourite colour is teal" in system.text  # a turn written by the first run (thread a)
    # the conversation itself is unchanged: system, then the human message only
    assert [type(m) for m in inputs.calls[-1]] == [SystemMessage, HumanMessage]


@pytest.mark.backends()
def test_user_id_selects_namespace(agent):
    agent.remember("Project Alder invoice total is 1,200 EUR", namespace="tenant_a")
    agent.remember("Project Birch invoice total is 900 EUR", namespace="tenant_b")
    inputs = ModelInputs()
    graph = create_agent(_model("ok"), tools=[], middleware=[TitansMemoryMiddleware(agent, k=50)])
    graph.invoke(
        {"messages": [HumanMessage("What is the invoice total?")]},
        {"configurable": {"thread_id": "t", "user_id": "tenant_b"}, "callbacks": [inputs]},
    )
    system = inputs.calls[-1][0].text
    assert "Birch" in system and "Alder" not in system
    assert [t["content"] for t in agent.turns("t", namespace="tenant_b")] == ["What is the invoice total?", "ok"]
    assert agent.turns("t", namespace="tenant_a") == []


@pytest.mark.backends()
@pytest.mark.asyncio
async def test_async_agent(agent):
    agent.remember("The backup runs every night at 02:00.")
    inputs = ModelInputs()
    graph = create_agent(_model("At 02:00."), tools=[], middleware=[TitansMemoryMiddleware(agent)])
    await graph.ainvoke(
        {"messages": [HumanMessage("When does the backup run?")]},
        {"configurable": {"thread_id": "t"}, "callbacks": [inputs]},
    )
    assert "every night at 02:00" in inputs.calls[-1][0].text
    assert [t["content"] for t in agent.turns("t")] == ["When does the backup run?", "At 02:00."]


@pytest.mark.backends()
def test_memory_tools_round_trip(agent):
    remember, recall = memory_tools(agent, namespace="u1")
    assert remember.name == "remember" and recall.name == "recall"
    assert "long-term memory" in remember.description
    first = remember.invoke({"text": "Alice's laptop is a ThinkPad X1."})
    assert first.startswith("new")
    assert remember.invoke({"text": "Alice's laptop is a ThinkPad X1."}).startswith("repeat")
    assert "ThinkPad X1" in recall.invoke({"query": "Alice laptop"})
    assert agent.recall("Alice laptop", namespace="default") == []
    assert recall.invoke({"query": "  "}).startswith("No memories")


@pytest.mark.backends()
def test_memory_tools_follow_the_user_of_the_run(agent):
    # found by a reviewer: the tools wrote every user's facts to one namespace, so Bob's recall
    # returned Alice's PIN when the middleware kept their conversations apart
    remember, recall = memory_tools(agent)
    alice, bob = ({"configurable": {"user_id": u}} for u in ("alice", "bob"))
    remember.invoke({"text": "Alice's bank PIN is 4321."}, config=alice)
    assert "4321" in recall.invoke({"query": "bank PIN"}, config=alice)
    assert "4321" not in recall.invoke({"query": "bank PIN"}, config=bob)
    assert agent.recall("bank PIN", namespace="default") == []
    assert [h.text for h in agent.recall("bank PIN", namespace="alice")] == ["Alice's bank PIN is 4321."]


@pytest.mark.backends()
def test_a_reply_of_only_a_zero_width_space_does_not_lose_the_run(agent, caplog):
    # the model's reply holds nothing visible: the user's message is stored, the reply skipped and reported
    graph = create_agent(_model("\u200b"), tools=[], middleware=[TitansMemoryMiddleware(agent)])
    with caplog.at_level("WARNING"):
        graph.invoke({"messages": [HumanMessage("I moved to Seattle.")]}, {"configurable": {"thread_id": "z"}})
    assert [(t["role"], t["content"]) for t in agent.turns("z")] == [("user", "I moved to Seattle.")]
    reports = [r.getMessage() for r in caplog.records if r.name == "titans_agent.adapters.langchain.history"]
    assert len(reports) == 1 and reports[0].startswith("session 'z': 1 of 2 messages not stored")


def test_a_user_id_cannot_name_a_store_namespace_or_be_blank(agent):
    from types import SimpleNamespace

    from titans_agent.adapters.langchain import TitansStore

    from titans_agent import InvalidInputError

    TitansStore(agent).put(("memories", "bob"), "pin", {"text": "Bob's bank PIN is 4821"})
    middleware = TitansMemoryMiddleware(agent)
    for user, error in (("lg:memories/bob", "prefix of TitansStore"), ("  ", "blank")):
        with pytest.raises(InvalidInputError, match=error):
            middleware.resolve_namespace(SimpleNamespace(context={"user_id": user}, execution_info=None))
    assert middleware.resolve_namespace(SimpleNamespace(context={"user_id": "bob"}, execution_info=None)) == "bob"
    assert middleware.resolve_namespace(SimpleNamespace(context={}, execution_info=None)) == "default"
