"""UserMemory: one namespace of a MemoryAgent, bound once, so a chatbot never passes ``namespace=``.

``agent.user("alice")`` returns a :class:`UserMemory` whose methods are those of
:class:`~titans_agent.MemoryAgent` that take ``namespace``, without it (as mem0's ``user_id=`` or a
LangGraph store's per-user namespace, given once instead of at every call). It holds no state of
its own: every call goes to the agent, which owns the database, the locks and the lifecycle.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from titans_agent.validation import check_namespace

if TYPE_CHECKING:
    from titans_agent.agent import MemoryAgent
    from titans_agent.core.memory import MemoryState
    from titans_agent.ingest.pipeline import IngestProgress
    from titans_agent.transfer import TransferReport
    from titans_agent.types import Hit, IngestReport, NamespaceStats, WriteResult

__all__ = ["UserMemory"]


class UserMemory:
    """The memory of one user (one namespace) of a :class:`~titans_agent.MemoryAgent`.

    Made by :meth:`MemoryAgent.user <titans_agent.MemoryAgent.user>`. Each method is the agent's
    method of the same name with ``namespace`` set to :attr:`namespace` (same arguments, returns
    and errors), with one difference: ``missing_ok`` defaults to True, so a user who has written
    nothing yet reads as empty (``recall`` gives ``[]``, ``stats`` zeros) instead of raising
    ``NamespaceNotFoundError``; pass ``missing_ok=False`` to get the error. The namespace itself is
    made at the user's first write. :meth:`export_jsonl` is :func:`titans_agent.export_jsonl` of
    this namespace alone.

    Thread-safe as the agent is; the handle is cheap (make one per request) and stays valid until
    the agent is closed (a later call then raises ``StoreError``).

    Example:
        >>> alice = agent.user("alice")
        >>> alice.add_turn("s1", "user", "I live in Boston.")
        >>> alice.recall("Where do I live?", k=3)
    """

    __slots__ = ("_agent", "_namespace")

    def __init__(self, agent: MemoryAgent, namespace: str) -> None:
        """Bind ``agent`` to ``namespace`` (nothing is read or written).

        Raises:
            InvalidInputError: a bad namespace name (not a string, blank, over 512 characters, or
                holding control characters), checked as every MemoryAgent call checks it.
        """
        self._agent = agent
        self._namespace = check_namespace(namespace)

    @property
    def agent(self) -> MemoryAgent:
        """The MemoryAgent every call goes to."""
        return self._agent

    @property
    def namespace(self) -> str:
        """The namespace (the user's name) every call reads and writes."""
        return self._namespace

    def __repr__(self) -> str:
        return f"UserMemory({self._namespace!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UserMemory):
            return NotImplemented
        return self._agent is other._agent and self._namespace == other._namespace

    def __hash__(self) -> int:
        return hash((id(self._agent), self._namespace))

    # ------------------------------------------------------------------ writes
    def remember(
        self,
        text: str,
        metadata: dict[str, Any] | None = None,
        *,
        source: str | None = None,
        replace: bool = False,
    ) -> WriteResult:
        """Write one note: :meth:`MemoryAgent.remember <titans_agent.MemoryAgent.remember>`."""
        return self._agent.remember(text, metadata, source=source, namespace=self._namespace, replace=replace)

    def add_turn(
        self,
        session_id: str,
        role: str,
        content: str,
        timestamp: dt.datetime | str | None = None,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> WriteResult:
        """Append one conversation turn: :meth:`MemoryAgent.add_turn <titans_agent.MemoryAgent.add_turn>`."""
        return self._agent.add_turn(session_id, role, content, timestamp, namespace=self._namespace, metadata=metadata)

    def add_turns(self, turns: Iterable[tuple[Any, ...] | dict[str, Any]]) -> list[WriteResult]:
        """Append many turns: :meth:`MemoryAgent.add_turns <titans_agent.MemoryAgent.add_turns>`."""
        return self._agent.add_turns(turns, namespace=self._namespace)

    def ingest(
        self,
        target: str | Path | Iterable[str | Path],
        *,
        source: str | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        metadata: dict[str, Any] | None = None,
        progress: Callable[[IngestProgress], None] | None = None,
        max_file_bytes: int | None = None,
    ) -> IngestReport:
        """Ingest files, folders or a text: :meth:`MemoryAgent.ingest <titans_agent.MemoryAgent.ingest>`."""
        return self._agent.ingest(
            target, source=source, namespace=self._namespace, include=include, exclude=exclude,
            metadata=metadata, progress=progress, max_file_bytes=max_file_bytes,
        )  # fmt: skip

    def update_metadata(
        self, metadata: dict[str, Any], *, source: str, merge: bool = True, missing_ok: bool = True
    ) -> int:
        """Change a source's metadata: :meth:`MemoryAgent.update_metadata
        <titans_agent.MemoryAgent.update_metadata>` (a user with no memories: 0)."""
        return self._agent.update_metadata(
            metadata, source=source, namespace=self._namespace, merge=merge, missing_ok=missing_ok
        )

    # ------------------------------------------------------------------ reads
    def recall(
        self,
        query: str,
        k: int = 5,
        *,
        kinds: Sequence[str] | None = None,
        source: str | None = None,
        session_id: str | None = None,
        as_of: dt.datetime | str | None = None,
        since: dt.datetime | str | None = None,
        until: dt.datetime | str | None = None,
        include_superseded: bool = True,
        filter: dict[str, Any] | None = None,
        missing_ok: bool = True,
    ) -> list[Hit]:
        """The ``k`` records that best answer ``query``: :meth:`MemoryAgent.recall
        <titans_agent.MemoryAgent.recall>` (a user with no memories: ``[]``)."""
        return self._agent.recall(
            query, k, namespace=self._namespace, kinds=kinds, source=source, session_id=session_id, as_of=as_of,
            since=since, until=until, include_superseded=include_superseded, filter=filter, missing_ok=missing_ok,
        )  # fmt: skip

    def records(
        self,
        *,
        source: str | None = None,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
        offset: int = 0,
        missing_ok: bool = True,
    ) -> list[Hit]:
        """What is stored, in the order written: :meth:`MemoryAgent.records <titans_agent.MemoryAgent.records>`."""
        return self._agent.records(
            namespace=self._namespace, source=source, kinds=kinds, limit=limit, offset=offset, missing_ok=missing_ok
        )

    def turns(self, session_id: str, *, missing_ok: bool = True) -> list[dict]:
        """A session's transcript: :meth:`MemoryAgent.turns <titans_agent.MemoryAgent.turns>`."""
        return self._agent.turns(session_id, namespace=self._namespace, missing_ok=missing_ok)

    def stats(self, *, missing_ok: bool = True) -> NamespaceStats:
        """Counts and memory state: :meth:`MemoryAgent.stats <titans_agent.MemoryAgent.stats>` (no memories: zeros)."""
        return self._agent.stats(self._namespace, missing_ok=missing_ok)

    def memory_state(self, *, missing_ok: bool = True) -> MemoryState | None:
        """The neural memory state: :meth:`MemoryAgent.memory_state <titans_agent.MemoryAgent.memory_state>`
        (None before the user's first write)."""
        return self._agent.memory_state(self._namespace, missing_ok=missing_ok)

    # ------------------------------------------------------------------ housekeeping
    def forget(
        self,
        *,
        source: str | None = None,
        record_id: int | None = None,
        unlearn: bool = False,
        missing_ok: bool = True,
    ) -> int:
        """Forget a source or a record: :meth:`MemoryAgent.forget <titans_agent.MemoryAgent.forget>`."""
        return self._agent.forget(
            source=source, record_id=record_id, namespace=self._namespace, unlearn=unlearn, missing_ok=missing_ok
        )

    def rebuild_memory(self) -> int:
        """Rebuild the neural memory without forgotten units: :meth:`MemoryAgent.rebuild_memory
        <titans_agent.MemoryAgent.rebuild_memory>`."""
        return self._agent.rebuild_memory(self._namespace)

    def drop_namespace(self) -> bool:
        """Delete everything of this user: :meth:`MemoryAgent.drop_namespace
        <titans_agent.MemoryAgent.drop_namespace>` (the handle stays usable: a later write starts
        an empty memory)."""
        return self._agent.drop_namespace(self._namespace)

    def export_jsonl(self, path: str | Path) -> TransferReport:
        """Write this user's namespace alone to a JSON Lines file: :func:`titans_agent.export_jsonl`
        with ``namespaces=[namespace]`` (``import_jsonl`` reads it into another database).

        Raises:
            NamespaceNotFoundError: the user has written nothing yet (the default namespace: an
                empty export).
            StoreError: the agent is closed.
            OSError: the file cannot be written.
        """
        from titans_agent.transfer import export_jsonl

        return export_jsonl(self._agent, path, [self._namespace])
