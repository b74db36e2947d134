"""titans-agent: long-term memory for AI applications, built on a Titans neural memory.

The public surface::

    from titans_agent import MemoryAgent, AgentConfig

    with MemoryAgent.open("memory.db") as agent:
        agent.ingest("docs/")
        agent.add_turn("s1", "user", "Please call me Dana.")
        for hit in agent.recall("What should I call the user?", k=3):
            print(hit.score, hit.source, hit.text)

``agent.user("alice")`` is a :class:`UserMemory`: the agent's methods bound to one user's namespace,
so a chatbot never passes ``namespace=``.

Also public, for applications built on the agent (the ``titans-agent`` command line uses only
these): :func:`export_jsonl` / :func:`import_jsonl` (backups, a :class:`TransferReport`),
:func:`read_chat` (a JSON Lines chat file, its turns ready for ``add_turns``), :func:`display_url`
(a database path or URL as it may be shown, without its password), :func:`check_name` (a session
id, role or source), :func:`matches_filter` (one metadata dict against a recall filter, by recall's
rules), and the constants :data:`DEFAULT_EMBEDDER`, :data:`DEFAULT_NAMESPACE` and :data:`KINDS`.

Nothing here imports LangChain; the adapter lives in ``titans_agent.adapters``.
"""

from typing import TYPE_CHECKING, Any

from titans_agent.config import DEFAULT_EMBEDDER, DEFAULT_NAMESPACE, AgentConfig, MemoryConfig, RetrievalConfig
from titans_agent.errors import (
    ChunkingMismatchError,
    CorruptBlobError,
    DatabaseNotFoundError,
    EmbedderLoadError,
    EmbedderMismatchError,
    EmptyInputError,
    InvalidInputError,
    NamespaceNotFoundError,
    NonFiniteStateError,
    ReadOnlyError,
    RecordNotFoundError,
    SchemaOutdatedError,
    StoreError,
    TitansAgentError,
)
from titans_agent.filters import matches_filter
from titans_agent.types import Hit, IngestReport, Location, NamespaceStats, SkippedSource, WriteResult

if TYPE_CHECKING:
    from titans_agent.agent import MemoryAgent
    from titans_agent.core.memory import MemoryState
    from titans_agent.ingest.chat import read_chat
    from titans_agent.ingest.pipeline import IngestProgress
    from titans_agent.store.engine import display_url
    from titans_agent.transfer import TransferReport, export_jsonl, import_jsonl
    from titans_agent.user import UserMemory
    from titans_agent.validation import KINDS, check_name

# name -> the module that defines it, imported on first use: the agent, the store and the transfer
# format import torch or SQLAlchemy, so `import titans_agent` (and `titans-agent --help`) stay fast.
_LAZY = {
    "MemoryAgent": "titans_agent.agent",
    "UserMemory": "titans_agent.user",
    "IngestProgress": "titans_agent.ingest.pipeline",
    "MemoryState": "titans_agent.core.memory",
    "read_chat": "titans_agent.ingest.chat",
    "display_url": "titans_agent.store.engine",
    "TransferReport": "titans_agent.transfer",
    "export_jsonl": "titans_agent.transfer",
    "import_jsonl": "titans_agent.transfer",
    "KINDS": "titans_agent.validation",
    "check_name": "titans_agent.validation",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'titans_agent' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__version__ = "0.1.0"

__all__ = [
    "ChunkingMismatchError",
    "DEFAULT_EMBEDDER",
    "DEFAULT_NAMESPACE",
    "KINDS",
    "AgentConfig",
    "CorruptBlobError",
    "DatabaseNotFoundError",
    "EmbedderLoadError",
    "EmbedderMismatchError",
    "EmptyInputError",
    "Hit",
    "IngestProgress",
    "IngestReport",
    "InvalidInputError",
    "Location",
    "MemoryAgent",
    "MemoryConfig",
    "MemoryState",
    "NamespaceNotFoundError",
    "NamespaceStats",
    "NonFiniteStateError",
    "ReadOnlyError",
    "SchemaOutdatedError",
    "RecordNotFoundError",
    "RetrievalConfig",
    "SkippedSource",
    "StoreError",
    "TitansAgentError",
    "TransferReport",
    "UserMemory",
    "WriteResult",
    "__version__",
    "check_name",
    "display_url",
    "export_jsonl",
    "import_jsonl",
    "matches_filter",
    "read_chat",
]
