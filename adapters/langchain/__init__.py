"""LangChain and LangGraph integration for titans-agent (``pip install "titans-agent[langchain]"``).

Three ways to plug a :class:`~titans_agent.MemoryAgent` in:

- :class:`TitansStore`: a LangGraph ``BaseStore`` (long-term memory of ``create_agent(store=...)``);
- :class:`TitansRetriever`: a ``BaseRetriever`` for LCEL chains;
- :class:`TitansMemoryMiddleware` and :func:`memory_tools`: agent middleware that recalls before the
  model call and writes the turns afterwards, and ``remember`` / ``recall`` tools;

plus :class:`TitansChatMessageHistory` for pipelines that still use ``BaseChatMessageHistory``.
``import titans_agent`` never imports LangChain; this package does, lazily, and raises an
ImportError naming the pip line when the extra is missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from titans_agent.adapters.extras import AdapterImportError, lazy_exports

INSTALL_HINT = 'titans-agent\'s LangChain adapter needs the extra: pip install "titans-agent[langchain]"'

_EXPORTS = {
    "TitansRetriever": "retriever",
    "TitansChatMessageHistory": "history",
    "TitansMemoryMiddleware": "middleware",
    "memory_tools": "middleware",
    "TitansStore": "store",
    "namespace_key": "store",
    "namespace_tuple": "store",
}

__all__ = [
    "INSTALL_HINT",
    "AdapterImportError",
    "TitansChatMessageHistory",
    "TitansMemoryMiddleware",
    "TitansRetriever",
    "TitansStore",
    "memory_tools",
    "namespace_key",
    "namespace_tuple",
]

if TYPE_CHECKING:
    from titans_agent.adapters.langchain.history import TitansChatMessageHistory
    from titans_agent.adapters.langchain.middleware import TitansMemoryMiddleware, memory_tools
    from titans_agent.adapters.langchain.retriever import TitansRetriever
    from titans_agent.adapters.langchain.store import TitansStore, namespace_key, namespace_tuple


__getattr__ = lazy_exports(__name__, _EXPORTS, {"langchain", "langchain_core", "langgraph"}, INSTALL_HINT)
