"""A LangChain ``BaseRetriever`` over :meth:`MemoryAgent.recall <titans_agent.MemoryAgent.recall>`."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict
from titans_agent.adapters.memory_format import memory_date

from titans_agent import DEFAULT_NAMESPACE, Hit, MemoryAgent

__all__ = ["TitansRetriever", "hit_to_document"]

#: Keys the retriever sets in ``Document.metadata``; the hit's own metadata never overwrites them.
DOCUMENT_KEYS = (
    "source",
    "location",
    "start_line",
    "end_line",
    "score",
    "surprise",
    "record_id",
    "kind",
    "session_id",
    "role",
    "namespace",
    "memory_date",
    "superseded_by",
    "stale_clauses",
)


def hit_to_document(hit: Hit, namespace: str) -> Document:
    """Turn a recalled :class:`~titans_agent.Hit` into a LangChain ``Document``.

    Args:
        hit: the recalled record.
        namespace: the namespace it was recalled from (kept in the metadata).

    Returns:
        A Document whose ``page_content`` is the record's text, ``id`` its record id (as a string)
        and ``metadata`` the keys of :data:`DOCUMENT_KEYS` plus the caller's metadata under its own
        keys (a caller key that collides with one of :data:`DOCUMENT_KEYS` is dropped). Among them
        ``memory_date`` (``"2024-03-01"``: a turn's date, else the write date, UTC) and
        ``superseded_by`` (ids of later records that replace this one; empty while it is
        current) and ``stale_clauses`` (the clauses later records replaced, when they replaced
        only part of it), for a prompt to show beside the text (``[2024-01-01, superseded] ...``, as
        :func:`~titans_agent.adapters.memory_format.memory_line` writes a hit).
    """
    own = {
        "source": hit.source,
        "location": hit.location,
        "start_line": hit.start_line,
        "end_line": hit.end_line,
        "score": hit.score,
        "surprise": hit.surprise,
        "record_id": hit.id,
        "kind": hit.kind,
        "session_id": hit.session_id,
        "role": hit.role,
        "namespace": namespace,
        "memory_date": memory_date(hit).isoformat(),
        "superseded_by": list(hit.superseded_by),
        "stale_clauses": list(hit.stale_clauses),
    }
    extra = {k: v for k, v in hit.metadata.items() if k not in own}
    return Document(id=str(hit.id), page_content=hit.text, metadata={**extra, **own})


class TitansRetriever(BaseRetriever):
    """Retrieve the records a :class:`~titans_agent.MemoryAgent` recalls for a query.

    Every field can also be given per call as a keyword of ``invoke`` / ``ainvoke``
    (``retriever.invoke("query", k=10, namespace="tenant_b")``).

    Attributes:
        agent: the open memory (thread-safe; the async path runs recall in a worker thread).
        k: how many documents at most (>= 1).
        namespace: the namespace searched; no other namespace is ever returned.
        kinds: only these record kinds ("chunk", "note", "turn"); None: all.
        source: only records of this source (exact match).
        session_id: only turns of this session.
        filter: only records whose metadata passes this filter (``{"court": "NY"}``, operators
            ``$eq $ne $gt $gte $lt $lte $in $nin $exists``, dotted paths: see
            :meth:`MemoryAgent.recall <titans_agent.MemoryAgent.recall>`); None: all.

    Example:
        >>> retriever = TitansRetriever(agent=agent, k=3)
        >>> docs = retriever.invoke("how is a JSON string decoded?")
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    agent: MemoryAgent
    k: int = 4
    namespace: str = DEFAULT_NAMESPACE
    kinds: list[str] | None = None
    source: str | None = None
    session_id: str | None = None
    filter: dict[str, Any] | None = None

    def _recall(
        self,
        query: str,
        k: int | None,
        namespace: str | None,
        kinds: list[str] | None,
        source: str | None,
        session_id: str | None,
        filter: dict[str, Any] | None = None,
    ) -> list[Document]:
        if not isinstance(query, str) or not query.strip():
            return []  # a blank question retrieves nothing rather than failing the chain
        ns = namespace if namespace is not None else self.namespace
        hits = self.agent.recall(
            query,
            self.k if k is None else k,
            namespace=ns,
            kinds=self.kinds if kinds is None else kinds,
            source=self.source if source is None else source,
            session_id=self.session_id if session_id is None else session_id,
            filter=self.filter if filter is None else filter,
            missing_ok=True,  # a namespace not written yet retrieves nothing
        )
        return [hit_to_document(h, ns) for h in hits]

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        namespace: str | None = None,
        kinds: list[str] | None = None,
        source: str | None = None,
        session_id: str | None = None,
        filter: dict[str, Any] | None = None,
    ) -> list[Document]:
        """Recall the documents for ``query``.

        Args:
            query: what to look for; a blank query returns no documents.
            run_manager: LangChain's callback manager.
            k, namespace, kinds, source, session_id, filter: per-call overrides of the fields.

        Returns:
            At most ``k`` Documents, best first.

        Raises:
            InvalidInputError: k < 1, unknown kinds, a bad namespace, or a malformed filter.
            StoreError: the agent is closed.
        """
        return self._recall(query, k, namespace, kinds, source, session_id, filter)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        namespace: str | None = None,
        kinds: list[str] | None = None,
        source: str | None = None,
        session_id: str | None = None,
        filter: dict[str, Any] | None = None,
    ) -> list[Document]:
        """Async :meth:`_get_relevant_documents`: recall runs in a worker thread.

        Args:
            query: what to look for; a blank query returns no documents.
            run_manager: LangChain's async callback manager.
            k, namespace, kinds, source, session_id, filter: per-call overrides of the fields.

        Returns:
            At most ``k`` Documents, best first.

        Raises:
            InvalidInputError: k < 1, unknown kinds, a bad namespace, or a malformed filter.
            StoreError: the agent is closed.
        """
        return await asyncio.to_thread(self._recall, query, k, namespace, kinds, source, session_id, filter)

    def __repr_args__(self) -> Any:  # keep the agent object out of reprs and traces
        return [(k, v) for k, v in super().__repr_args__() if k != "agent"]
