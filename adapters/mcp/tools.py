"""The MCP server's tools as plain functions: :class:`MemoryTools` over one MemoryAgent and one
namespace, each method taking JSON values and returning a JSON-able dict.

Nothing here imports the ``mcp`` SDK (:mod:`titans_agent.adapters.mcp.server` registers these
methods as tools), so the tools can be called and tested in-process. Bad input raises
:class:`~titans_agent.InvalidInputError` or :class:`~titans_agent.EmptyInputError` (both
``ValueError``) with a message meant for the calling model, like the agent's own checks.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from titans_agent.adapters.memory_format import memory_date

from titans_agent import DEFAULT_NAMESPACE, InvalidInputError

if TYPE_CHECKING:
    from titans_agent import Hit, MemoryAgent

__all__ = ["MemoryTools", "hit_dict"]

_OPTIONAL_HIT_FIELDS = ("location", "session_id", "role", "timestamp", "superseded_by", "supersedes", "stale_clauses")


def hit_dict(hit: Hit) -> dict[str, Any]:
    """One recall hit as JSON: id, score, text, kind, source, metadata, created_at, ``date`` (a
    turn's date, else the write date: ``"2024-03-01"``, UTC) and ``superseded`` (whether a later
    record replaced this one, as a whole or in part) always; the line range (``location``), where
    in its document (``doc_location``: page, headings, section, citation), the session, role and
    timestamp of a turn and the supersession links (``superseded_by``, ``supersedes``, and
    ``stale_clauses`` when later records replaced only part of it) only when set."""
    full = hit.model_dump(mode="json")
    out = {key: full[key] for key in ("id", "score", "text", "kind", "source", "metadata", "created_at")}
    out |= {"date": memory_date(hit).isoformat(), "superseded": bool(hit.superseded_by)}
    for key in _OPTIONAL_HIT_FIELDS:
        if full.get(key) not in (None, [], {}):
            out[key] = full[key]
    if hit.doc_location is not None and (where := hit.doc_location.to_dict()):
        out["doc_location"] = where
    return out


class MemoryTools:
    """The tools of ``titans-agent mcp``: remember, recall, add_turn, ingest, forget, all on one
    namespace.

    Args:
        agent: an open :class:`~titans_agent.MemoryAgent`, or a function returning one, called on
            every tool call (e.g. one that waits for an agent still being opened in the background;
            it raises why the agent could not be opened). The caller keeps it and closes it.
        namespace: the namespace every tool reads and writes.
    """

    def __init__(self, agent: MemoryAgent | Callable[[], MemoryAgent], namespace: str = DEFAULT_NAMESPACE) -> None:
        self._agent = agent
        self.namespace = namespace

    @property
    def agent(self) -> MemoryAgent:
        """The agent (waits for it when a function was given)."""
        agent = self._agent
        return agent() if callable(agent) else agent

    # ------------------------------------------------------------------ writes
    def remember(self, text: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write one note; its record id, the gate's decision and surprise."""
        result = self.agent.remember(text, metadata, namespace=self.namespace)
        return {"namespace": self.namespace, **result.model_dump(mode="json", exclude_none=True)}

    def add_turn(self, session_id: str, role: str, content: str) -> dict[str, Any]:
        """Append a conversation turn to a session; also its 1-based ``turn_seq``."""
        result = self.agent.add_turn(session_id, role, content, namespace=self.namespace)
        return {"namespace": self.namespace, "session_id": session_id, **result.model_dump(mode="json")}

    def ingest(
        self,
        path: str | None = None,
        text: str | None = None,
        source: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Ingest a file or folder (``path``), or a text named ``source``; the ingest report.

        Raises:
            InvalidInputError: both or neither of path and text; a text without a source (or a path
                with one); a path that does not exist.
        """
        if (path is None) == (text is None):
            raise InvalidInputError("give exactly one of path (a file or folder) or text (with source)")
        if text is not None:
            if source is None:
                raise InvalidInputError("text needs a source: the name it is stored, recalled and forgotten by")
            report = self.agent.ingest(text, source=source, namespace=self.namespace, metadata=metadata)
        else:
            if source is not None:
                raise InvalidInputError("source names a text; a file is stored under its own path")
            if not isinstance(path, str) or not path.strip():
                raise InvalidInputError("path must be a non-empty string")
            target = Path(path).expanduser()
            if not target.exists():
                raise InvalidInputError(f"no such file or folder: {path} (relative paths start at {os.getcwd()})")
            report = self.agent.ingest(target, namespace=self.namespace, metadata=metadata)
        return {"namespace": self.namespace, **report.model_dump(mode="json")}

    def forget(self, source: str | None = None, record_id: int | None = None, unlearn: bool = False) -> dict[str, Any]:
        """Forget every record of a source (a file by any path to it, a named text, ``session:<id>``) or one record;
        how many items (chunks, notes, turns) went. With ``unlearn``, the memory's weights are
        rebuilt without them too (:meth:`MemoryAgent.forget`).

        Raises:
            InvalidInputError: both or neither of source and record_id; a blank source.
            RecordNotFoundError: no record with that id.
        """
        if (source is None) == (record_id is None):
            raise InvalidInputError("give exactly one of source or record_id")
        agent = self.agent
        unlearn = bool(unlearn)
        if record_id is not None:
            n = agent.forget(record_id=record_id, namespace=self.namespace, unlearn=unlearn, missing_ok=True)
            return {"namespace": self.namespace, "deleted": n}
        if not isinstance(source, str) or not source.strip():
            raise InvalidInputError("source must be a non-blank string: a file, a named text or session:<id>")
        # a file by any path to it (relative to the server's directory): the library finds how it was stored
        n = agent.forget(source=source, namespace=self.namespace, unlearn=unlearn, missing_ok=True)
        return {"namespace": self.namespace, "deleted": n}

    # ------------------------------------------------------------------ reads
    def recall(
        self,
        query: str,
        k: int = 5,
        filter: dict[str, Any] | None = None,
        kinds: list[str] | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """The ``k`` records that best answer ``query``, best first, as ``{"hits": [...]}`` (see
        :func:`hit_dict`). ``filter`` goes to :meth:`MemoryAgent.recall`'s ``filter=`` unchanged."""
        hits = self.agent.recall(
            query, k, namespace=self.namespace, kinds=kinds, session_id=session_id, filter=filter, missing_ok=True
        )
        return {"namespace": self.namespace, "hits": [hit_dict(h) for h in hits]}
