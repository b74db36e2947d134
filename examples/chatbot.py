"""A LangChain agent whose long-term memory is titans-agent, over two sessions.

The agent (``langchain.agents.create_agent``) gets

- ``store=TitansStore(memory)``: LangGraph's long-term store; its tools ``save_fact`` and
  ``recall_facts`` write and search ``("users", <user_id>, "facts")`` through the runtime's store;
- ``TitansMemoryMiddleware(memory)``: before each model call it recalls from the user's past turns
  and adds them to the system message; after the run it writes the turns through the surprise gate.

Session 1 tells a fact; the database is closed; session 2 (another thread, a reopened database)
asks for it, and the script prints what was recalled. By default the chat model is an offline,
scripted fake (no network, no key): its tool calls are scripted, and its answers repeat what the
tools and the memory returned. Set ``TITANS_AGENT_CHAT_MODEL`` (e.g. ``openai:gpt-4o-mini``) to use
a real model through ``init_chat_model``. The embedder is the real default one (all-MiniLM-L6-v2,
shipped in a package, offline).

Run: ``python examples/chatbot.py [--db PATH]`` (default: a temporary database).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.store.base import BaseStore
from titans_agent.adapters.langchain import TitansMemoryMiddleware, TitansStore

from titans_agent import MemoryAgent

USER_ID = "dana"


def store_of(runtime: ToolRuntime) -> BaseStore:
    """The agent's long-term store (``create_agent(store=...)``)."""
    if runtime.store is None:
        raise RuntimeError("this agent was created without a store")
    return runtime.store


def facts_namespace(runtime: ToolRuntime) -> tuple[str, ...]:
    """The store namespace of the run's user (``config["configurable"]["user_id"]``)."""
    user = (runtime.config.get("configurable") or {}).get("user_id", "anonymous")
    return ("users", str(user), "facts")


@tool
def save_fact(fact: str, runtime: ToolRuntime) -> str:
    """Save a lasting fact about the user (a name, a preference, a date) to long-term memory."""
    key = hashlib.sha1(fact.encode("utf-8")).hexdigest()[:12]
    store_of(runtime).put(facts_namespace(runtime), key, {"text": fact})
    print(f"saved: {fact}")
    return f"Saved: {fact}"


@tool
def recall_facts(query: str, runtime: ToolRuntime) -> str:
    """Search long-term memory for facts about the user."""
    items = store_of(runtime).search(facts_namespace(runtime), query=query, limit=3)
    for item in items:
        print(f"recalled: {item.value['text']} (score {item.score:.4f})")
    return "\n".join(item.value["text"] for item in items) or "Nothing found."


class OfflineChatModel(GenericFakeChatModel):
    """LangChain's GenericFakeChatModel, scripted, that accepts tools and answers from their results.

    After a ``recall_facts`` tool result it answers with that result; otherwise it returns the next
    scripted message. It prints the memories the middleware put into its system message.
    """

    def bind_tools(self, tools: Any, **kwargs: Any) -> OfflineChatModel:  # the script holds the calls
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        system = next((m for m in messages if isinstance(m, SystemMessage)), None)
        if system is not None and "Relevant memories:" in system.text:
            block = system.text.split("Relevant memories:", 1)[1].strip()
            print("memories in the prompt:", " | ".join(line.strip() for line in block.splitlines()[:3]))
        last = messages[-1] if messages else None
        if isinstance(last, ToolMessage) and last.name == "recall_facts":
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=f"From memory: {last.text}"))])
        return super()._generate(messages, *args, **kwargs)


def make_model(script: list[AIMessage]) -> Any:
    """A real chat model when ``TITANS_AGENT_CHAT_MODEL`` is set, else the offline scripted one."""
    name = os.environ.get("TITANS_AGENT_CHAT_MODEL")
    if name:
        from langchain.chat_models import init_chat_model

        return init_chat_model(name)
    return OfflineChatModel(messages=iter(script))


def call(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


def chat(db: Path, thread_id: str, user_text: str, script: list[AIMessage]) -> str:
    """One session: open the database, run the agent on one user message, close the database."""
    with MemoryAgent.open(db) as memory:
        agent = create_agent(
            make_model(script),
            tools=[save_fact, recall_facts],
            system_prompt="You are a helpful assistant with long-term memory. Save lasting facts; "
            "search memory before answering questions about the user.",
            middleware=[TitansMemoryMiddleware(memory, k=3)],
            store=TitansStore(memory),
        )
        print(f"user: {user_text}")
        result = agent.invoke(
            {"messages": [{"role": "user", "content": user_text}]},
            {"configurable": {"thread_id": thread_id, "user_id": USER_ID}},
        )
        answer = result["messages"][-1].text
        print(f"assistant: {answer}")
        return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=None, help="database file (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "chatbot.db"
        print("== session 1")
        chat(
            db,
            "session-1",
            "Hi! My dog is called Pixel and I live in Leeds.",
            [
                call("save_fact", "c1", fact="The user's dog is called Pixel."),
                call("save_fact", "c2", fact="The user lives in Leeds."),
                AIMessage(content="Nice to meet you, and Pixel too! I'll remember that."),
            ],
        )
        print("== session 2 (new thread, database reopened)")
        chat(db, "session-2", "What is my dog called?", [call("recall_facts", "c3", query="the user's dog name")])


if __name__ == "__main__":
    main()
