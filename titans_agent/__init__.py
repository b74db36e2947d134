"""titans-agent: long-term memory for AI applications, built on a Titans neural memory.

The public surface::

    from titans_agent import MemoryAgent, AgentConfig

    with MemoryAgent.open("memory.db") as agent:
        agent.ingest("docs/")
        agent.add_turn("s1", "user", "Please call me Dana.")
        for hit in agent.recall("What should I call the user?", k=3):
            print(hit.score, hit.source, hit.text)

Nothing here imports LangChain; the adapter lives in ``titans_agent.adapters``.
"""

from typing import TYPE_CHECKING, Any

from titans_agent.config import AgentConfig, MemoryConfig, RetrievalConfig
from titans_agent.errors import (
    CorruptBlobError,
    EmbedderLoadError,
    EmbedderMismatchError,
    EmptyInputError,
    InvalidInputError,
    NonFiniteStateError,
    RecordNotFoundError,
    StoreError,
    TitansAgentError,
)
from titans_agent.types import Hit, IngestReport, NamespaceStats, SkippedSource, WriteResult

if TYPE_CHECKING:
    from titans_agent.agent import DEFAULT_NAMESPACE, IngestProgress, MemoryAgent

_LAZY = {"MemoryAgent", "IngestProgress", "DEFAULT_NAMESPACE"}


def __getattr__(name: str) -> Any:
    # The agent imports torch and SQLAlchemy; load it on first use so that `import titans_agent`
    # (and `titans-agent --help`) stay fast.
    if name in _LAZY:
        from titans_agent import agent

        return getattr(agent, name)
    raise AttributeError(f"module 'titans_agent' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "CorruptBlobError",
    "DEFAULT_NAMESPACE",
    "AgentConfig",
    "EmbedderLoadError",
    "EmbedderMismatchError",
    "EmptyInputError",
    "Hit",
    "IngestProgress",
    "IngestReport",
    "InvalidInputError",
    "MemoryAgent",
    "MemoryConfig",
    "NamespaceStats",
    "NonFiniteStateError",
    "RecordNotFoundError",
    "RetrievalConfig",
    "SkippedSource",
    "StoreError",
    "TitansAgentError",
    "WriteResult",
    "__version__",
]
