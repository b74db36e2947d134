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

from titans_agent.agent import DEFAULT_NAMESPACE, IngestProgress, MemoryAgent
from titans_agent.config import AgentConfig, MemoryConfig, RetrievalConfig
from titans_agent.errors import (
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

__version__ = "0.1.0"

__all__ = [
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
