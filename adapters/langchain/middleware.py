"""Agent middleware and tools that give a ``langchain.agents.create_agent`` agent a MemoryAgent.

:class:`TitansMemoryMiddleware` recalls before each model call and writes the conversation after
the agent ends; :func:`memory_tools` lets the model remember and recall on its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool, tool
from titans_agent.adapters.langchain.history import TitansChatMessageHistory, message_text
from titans_agent.adapters.langchain.store import NAMESPACE_PREFIX
from titans_agent.adapters.memory_format import memory_line

from titans_agent import DEFAULT_NAMESPACE, Hit, InvalidInputError, MemoryAgent

__all__ = ["TitansMemoryMiddleware", "memory_tools"]

log = logging.getLogger(__name__)

MEMORY_HEADER = "Relevant memories:"


def _lookup(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def _config() -> dict[str, Any]:
    try:
        from langgraph.config import get_config

        return dict(get_config())
    except RuntimeError:  # called outside a graph run
        return {}


def _runtime_context() -> Any:
    """The LangGraph runtime's context inside a graph run (None outside one)."""
    try:
        from langgraph.runtime import get_runtime

        return _lookup(get_runtime(), "context")
    except (ImportError, RuntimeError, LookupError):
        return None


def user_namespace(context: Any, user_key: str | None, default: str) -> str:
    """The namespace of a run: the value of ``user_key`` in the runtime ``context``, else in
    ``config["configurable"]`` of the current run, else ``default``.

    Raises:
        InvalidInputError: the user id is given but blank (a run with no user would otherwise
            read and write ``default``, which other users share), or begins with ``"lg:"``, the
            prefix of :class:`TitansStore`'s namespaces (a user named ``"lg:memories/bob"`` would
            read the store's items of ``("memories", "bob")``).
    """
    if user_key:
        user = _lookup(context, user_key)
        if user is None:
            user = _lookup(_config().get("configurable"), user_key)
        if user is not None:
            name = str(user)
            if not name.strip():
                raise InvalidInputError(f"the run's {user_key!r} is blank: give the user's id, or leave it out")
            if name.startswith(NAMESPACE_PREFIX):
                raise InvalidInputError(
                    f"user id {name[:80]!r} begins with {NAMESPACE_PREFIX!r}, the prefix of TitansStore's "
                    "namespaces; a user's memory cannot be one of them"
                )
            return name
    return default


def format_memories(hits: list[Hit]) -> str:
    """The system-message block for recalled hits, each dated and marked when superseded.

    Args:
        hits: recalled records, best first (recall ranks a record's successor above it).

    Returns:
        ``"Relevant memories:"`` followed by one line per hit, in the given order:
        ``- [2024-03-01] I moved to Seattle.``, ``- [2024-01-01, superseded] I live in Boston.``,
        ``- [2024-02-10] Leave is 16 weeks. (handbook.txt lines 3-4)``: the date is a turn's (when
        it was said), else when the record was written (UTC); see
        :func:`~titans_agent.adapters.memory_format.memory_line`.
    """
    return "\n".join([MEMORY_HEADER, *(f"- {memory_line(h)}" for h in hits)])


class TitansMemoryMiddleware(AgentMiddleware):
    """Long-term memory for ``create_agent``: recall before the model, write turns after the agent.

    Before every model call the memories recalled for the latest human message are appended to the
    system message as a ``Relevant memories:`` block (the conversation state is not changed), one
    line each, dated and marked when a later memory superseded it (:func:`format_memories`). After
    the agent ends, the human messages and the AI messages with text are written as turns of the
    thread's session through the surprise gate, in one :meth:`MemoryAgent.add_turns` batch; a message
    already written (same message id, as a checkpointed thread passes its whole history back) is
    not written again.

    The session id is the run's ``thread_id`` (``config={"configurable": {"thread_id": ...}}``), else
    ``session_id``. The namespace is ``namespace``, unless ``user_key`` names a value in the runtime
    context or in ``config["configurable"]`` (by default ``user_id``): then that value is the
    namespace, so each user has their own memory.

    Example:
        >>> agent = create_agent(model, tools=memory_tools(memory), middleware=[TitansMemoryMiddleware(memory)])
        >>> agent.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})
    """

    def __init__(
        self,
        agent: MemoryAgent,
        *,
        k: int = 4,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str = "default",
        user_key: str | None = "user_id",
        kinds: list[str] | None = None,
        write_turns: bool = True,
    ) -> None:
        """Configure the middleware.

        Args:
            agent: an open MemoryAgent (thread-safe; async hooks run it in a worker thread).
            k: how many memories to inject (>= 1).
            namespace: the namespace used when no user id is found.
            session_id: the session written when the run has no ``thread_id``.
            user_key: the runtime-context / configurable key whose value selects the namespace;
                None: always ``namespace``.
            kinds: recall only these record kinds ("chunk", "note", "turn"); None: all.
            write_turns: write the conversation after the agent ends.

        Raises:
            ValueError: k < 1.
        """
        super().__init__()
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        self.agent = agent
        self.k = k
        self.namespace = namespace
        self.session_id = session_id
        self.user_key = user_key
        self.kinds = kinds
        self.write_turns = write_turns

    # ------------------------------------------------------------------ where
    def resolve_namespace(self, runtime: Any) -> str:
        """The namespace of this run: the user id from the runtime context or config, else ``namespace``.

        Args:
            runtime: the LangGraph runtime (may be None).

        Returns:
            The namespace name.
        """
        return user_namespace(_lookup(runtime, "context"), self.user_key, self.namespace)

    def resolve_session(self, runtime: Any) -> str:
        """The session of this run: its ``thread_id``, else the constructor's ``session_id``.

        Args:
            runtime: the LangGraph runtime (may be None).

        Returns:
            The session id.
        """
        thread = _lookup(_lookup(runtime, "execution_info"), "thread_id")
        if thread is None:
            thread = _lookup(_config().get("configurable"), "thread_id")
        return str(thread) if thread is not None else self.session_id

    # ------------------------------------------------------------------ before the model
    def _with_memories(self, request: ModelRequest) -> ModelRequest:
        human = next((m for m in reversed(request.messages) if isinstance(m, HumanMessage)), None)
        query = message_text(human) if human is not None else ""
        if not query.strip():
            return request
        ns = self.resolve_namespace(request.runtime)  # a new user's namespace does not exist yet
        in_context = {message_text(m).strip() for m in request.messages}
        # asked for more than k: a memory already in the conversation is left out, and k remain
        hits = self.agent.recall(query, self.k + len(in_context), namespace=ns, kinds=self.kinds, missing_ok=True)
        hits = [h for h in hits if h.text.strip() not in in_context][: self.k]
        if not hits:
            return request
        block = format_memories(hits)
        base = request.system_message.text if request.system_message is not None else ""
        text = f"{base}\n\n{block}" if base else block
        return request.override(system_message=SystemMessage(content=text))

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | AIMessage:
        """Call the model with the recalled memories added to the system message.

        Args:
            request: the model request.
            handler: calls the model.

        Returns:
            The model's response.

        Raises:
            InvalidInputError: a bad namespace (from the MemoryAgent).
        """
        return handler(self._with_memories(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | AIMessage:
        """Async :meth:`wrap_model_call` (recall runs in a worker thread).

        Args:
            request: the model request.
            handler: calls the model.

        Returns:
            The model's response.
        """
        return await handler(await asyncio.to_thread(self._with_memories, request))

    # ------------------------------------------------------------------ after the agent
    def _write(self, state: AgentState, runtime: Any) -> None:
        if not self.write_turns:
            return
        msgs: list[BaseMessage] = [
            m for m in state.get("messages", []) if isinstance(m, (HumanMessage, AIMessage)) and message_text(m).strip()
        ]
        if not msgs:
            return
        history = TitansChatMessageHistory(
            self.agent, self.resolve_session(runtime), namespace=self.resolve_namespace(runtime)
        )
        history.add_messages(msgs)

    def after_agent(self, state: AgentState, runtime: Any) -> dict[str, Any] | None:
        """Write the run's new human and AI messages as turns of the thread's session.

        Args:
            state: the agent state (its ``messages``).
            runtime: the LangGraph runtime.

        Returns:
            None (the state is not changed).

        Raises:
            InvalidInputError: a bad session id or namespace (from the MemoryAgent).
        """
        self._write(state, runtime)
        return None

    async def aafter_agent(self, state: AgentState, runtime: Any) -> dict[str, Any] | None:
        """Async :meth:`after_agent` (the write runs in a worker thread).

        Args:
            state: the agent state.
            runtime: the LangGraph runtime.

        Returns:
            None.
        """
        await asyncio.to_thread(self._write, state, runtime)
        return None


def memory_tools(
    agent: MemoryAgent, namespace: str = DEFAULT_NAMESPACE, *, k: int = 5, user_key: str | None = "user_id"
) -> list[BaseTool]:
    """``remember`` and ``recall`` tools over a MemoryAgent, for ``create_agent(tools=...)``.

    The tools pick their namespace per run, as :class:`TitansMemoryMiddleware` does: the user id
    (``user_key``) from the runtime context or ``config["configurable"]``, else ``namespace``. So
    with the middleware and these tools in one agent, one user's tool calls never read or write
    another user's memory.

    Args:
        agent: an open MemoryAgent.
        namespace: the namespace used when a run names no user.
        k: how many memories ``recall`` returns at most.
        user_key: the runtime-context / configurable key whose value selects the namespace;
            None: always ``namespace``.

    Returns:
        ``[remember, recall]``; ``recall`` answers one line per memory, best first, dated and
        marked when superseded (as :func:`format_memories`: ``- [2024-01-01, superseded] I live
        in Boston.``).
    """

    @tool
    def remember(text: str) -> str:
        """Store a fact in long-term memory so it can be recalled in later conversations.

        Use it for durable facts about the user, their projects or preferences (one fact per call,
        as a self-contained sentence). Facts the memory already knows are not stored twice.

        Args:
            text: the fact, e.g. "The staging server listens on port 8443."
        """
        result = agent.remember(text, namespace=user_namespace(_runtime_context(), user_key, namespace))
        return f"{result.decision}: record {result.record_id}"

    @tool
    def recall(query: str) -> str:
        """Search long-term memory for facts relevant to a question, best match first.

        Each memory comes with its date; one marked "superseded" was replaced by a later memory
        (trust the later one for what is true now).

        Args:
            query: what to look for, e.g. "staging server port".
        """
        if not query.strip():
            return "No memories: the query is empty."
        ns = user_namespace(_runtime_context(), user_key, namespace)
        hits = agent.recall(query, k, namespace=ns, missing_ok=True)  # a new user has no namespace yet
        if not hits:
            return "No memories found."
        return "\n".join(f"- {memory_line(h)}" for h in hits)

    return [remember, recall]
