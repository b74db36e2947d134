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

from typing import TYPE_CHECKING, Any

from titans_agent import TitansAgentError


class AdapterImportError(TitansAgentError, ImportError):
    """The LangChain extra is not installed (the message names the pip line)."""


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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'titans_agent.adapters.langchain' has no attribute {name!r}")
    import importlib

    try:
        mod = importlib.import_module(f"titans_agent.adapters.langchain.{module}")
    except ImportError as exc:
        if exc.name and exc.name.split(".")[0] in {"langchain", "langchain_core", "langgraph"}:
            raise AdapterImportError(INSTALL_HINT) from exc
        raise
    return getattr(mod, name)
