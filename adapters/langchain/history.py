"""A LangChain ``BaseChatMessageHistory`` kept as a MemoryAgent session.

Each history is one session of one namespace; its transcript is ordered by the session's explicit
sequence numbers, and every message is also a memory record (``recall(session_id=...)`` finds it).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from titans_agent import DEFAULT_NAMESPACE, MemoryAgent

__all__ = ["TitansChatMessageHistory", "message_role", "message_text"]

log = logging.getLogger(__name__)

#: Turn metadata key that holds the LangChain message id.
MESSAGE_ID_KEY = "message_id"

_ROLE_OF_TYPE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def message_role(message: BaseMessage) -> str:
    """The turn role for a LangChain message: "user", "assistant", "system", "tool" or its own type.

    Args:
        message: any LangChain message.

    Returns:
        The role written to the session.
    """
    role = _ROLE_OF_TYPE.get(message.type)
    if role is None:  # ChatMessage carries its own role; other types keep their type name
        role = str(getattr(message, "role", None) or message.type)
    return role


def message_text(message: BaseMessage) -> str:
    """The text of a message (text blocks joined; other content blocks are left out).

    Args:
        message: any LangChain message.

    Returns:
        The text, possibly empty.
    """
    return message.text if isinstance(message.text, str) else str(message.text())


def _to_message(role: str, content: str, message_id: str, extra: dict[str, Any]) -> BaseMessage:
    if role == "user":
        return HumanMessage(content=content, id=message_id)
    if role == "assistant":
        return AIMessage(content=content, id=message_id)
    if role == "system":
        return SystemMessage(content=content, id=message_id)
    if role == "tool":
        return ToolMessage(content=content, id=message_id, tool_call_id=str(extra.get("tool_call_id") or ""))
    from langchain_core.messages import ChatMessage

    return ChatMessage(role=role, content=content, id=message_id)


class TitansChatMessageHistory(BaseChatMessageHistory):
    """Chat history stored as a session of a :class:`~titans_agent.MemoryAgent`.

    Messages come back in the session's sequence order (never insertion or recall order), with the
    ids they were stored with (a message without an id gets a uuid4). Adding messages that are
    already stored does nothing for them (docs/failure-cases.md, C13: a chain that passes the stored history back with
    a new message stores only the new one):

    - a message whose id is already in the session is skipped;
    - among messages without an id, the longest leading run of the batch that equals (role and
      text) a contiguous run of the stored transcript is skipped when that run is the transcript's
      tail or at least two messages long (a single repeated "yes" in the middle of a chat is new),
      and only when the batch goes on after it: a batch that is nothing but a repeat ("yes" said
      again, the same pair sent twice) is new conversation and is stored.

    Attributes:
        agent: the memory.
        session_id: the session (matched exactly: "s1" never sees "s1_old").
        namespace: the namespace of the session.
    """

    def __init__(self, agent: MemoryAgent, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> None:
        """Bind a history to a session.

        Args:
            agent: an open MemoryAgent.
            session_id: the session id; any non-blank string.
            namespace: the namespace that holds the session.

        Raises:
            InvalidInputError: the session id is blank (the MemoryAgent's own error, raised on write).
        """
        self.agent = agent
        self.session_id = session_id
        self.namespace = namespace

    @property
    def source(self) -> str:
        """The memory source of the session's turns ("session:<id>")."""
        return f"session:{self.session_id}"

    def _stored(self) -> list[tuple[str, str, str, dict[str, Any]]]:
        """(message id, role, content, metadata) per turn, in sequence order."""
        turns = self.agent.turns(self.session_id, namespace=self.namespace, missing_ok=True)
        metas: list[dict[str, Any]] = []
        seen: set[str] = set()
        for hit in self.agent.records(source=self.source, kinds=["turn"], namespace=self.namespace, missing_ok=True):
            mid = hit.metadata.get(MESSAGE_ID_KEY)
            if mid is None or mid not in seen:  # a long turn has one record per chunk
                metas.append(dict(hit.metadata))
                if mid is not None:
                    seen.add(mid)
        aligned = len(metas) == len(turns)
        out = []
        for i, t in enumerate(turns):
            meta = metas[i] if aligned else {}
            mid = meta.get(MESSAGE_ID_KEY) or f"{self.session_id}:{t['seq']}"
            out.append((str(mid), t["role"], t["content"], meta))
        return out

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages in sequence order, with their ids.

        Raises:
            StoreError: the agent is closed.
        """
        return [_to_message(role, content, mid, meta) for mid, role, content, meta in self._stored()]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages not already stored, as one :meth:`MemoryAgent.add_turns` batch.

        Args:
            messages: messages in conversation order; ids are kept (a uuid4 is set on a message
                without one, on the message object itself, so the caller sees the stored id).
                Messages with no text (e.g. an AI message that only calls tools) are skipped, and
                so are messages whose text has nothing visible (only a zero-width space, say):
                ``add_turns`` stores the rest, and a warning gives how many and their ids.

        Raises:
            InvalidInputError: a bad session id or namespace (nothing is written).
            StoreError: the agent is closed.
        """
        stored = self._stored()
        known_ids = {mid for mid, *_ in stored}
        batch = list(messages)
        batch = batch[self._repeated_prefix(batch, [(r, c) for _, r, c, _ in stored]) :]
        turns = []
        for m in batch:
            if m.id is not None and m.id in known_ids:
                continue
            text = message_text(m)
            if not text.strip():
                continue
            if m.id is None:
                m.id = str(uuid.uuid4())
            known_ids.add(m.id)
            meta: dict[str, Any] = {MESSAGE_ID_KEY: m.id}
            if isinstance(m, ToolMessage):
                meta["tool_call_id"] = m.tool_call_id
            turns.append((self.session_id, message_role(m), text, None, meta))
        if turns:
            results = self.agent.add_turns(turns, namespace=self.namespace)
            skipped = [t[4][MESSAGE_ID_KEY] for t, r in zip(turns, results) if r.decision == "skipped"]
            if skipped:
                log.warning(
                    "session %r: %d of %d messages not stored, their text has nothing visible (ids %s)",
                    self.session_id, len(skipped), len(turns), ", ".join(skipped),
                )  # fmt: skip

    @staticmethod
    def _repeated_prefix(batch: list[BaseMessage], stored: list[tuple[str, str]]) -> int:
        """How many leading id-less messages of ``batch`` repeat a run of ``stored`` (see class doc)."""
        keys = []
        for m in batch:
            if m.id is not None:
                break
            keys.append((message_role(m), message_text(m).strip()))
        stored_keys = [(r, c.strip()) for r, c in stored]
        best = 0
        for start in range(len(stored_keys)):
            n = 0
            while n < len(keys) and start + n < len(stored_keys) and stored_keys[start + n] == keys[n]:
                n += 1
            if n and n < len(batch) and (n >= 2 or start + n == len(stored_keys)):
                best = max(best, n)
        return best

    def clear(self) -> None:
        """Forget the session: its transcript and its turns' records (a record another source also
        holds stays for that source).

        Raises:
            StoreError: the agent is closed.
        """
        self.agent.forget(source=self.source, namespace=self.namespace, missing_ok=True)
