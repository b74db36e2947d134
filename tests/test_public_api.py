"""The public surface is pinned: ``titans_agent.__all__`` changes only on purpose, every name in it
resolves, and ``import titans_agent`` stays light (no torch, no SQLAlchemy, no LangChain)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import titans_agent

PUBLIC = [
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

MEMORY_AGENT_METHODS = {
    "add_turn",
    "add_turns",
    "close",
    "drop_namespace",
    "forget",
    "ingest",
    "memory_state",
    "namespaces",
    "open",
    "rebuild_memory",
    "recall",
    "records",
    "remember",
    "stats",
    "turns",
    "update_metadata",
    "user",
}


def test_all_is_pinned() -> None:
    assert sorted(titans_agent.__all__) == sorted(PUBLIC)
    assert len(set(titans_agent.__all__)) == len(titans_agent.__all__)


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(titans_agent, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'agent_internals'"):
        titans_agent.agent_internals  # noqa: B018


def test_memory_agent_methods_are_pinned() -> None:
    methods = {n for n, v in inspect.getmembers(titans_agent.MemoryAgent) if not n.startswith("_") and callable(v)}
    assert methods == MEMORY_AGENT_METHODS


def test_errors_derive_from_the_one_base_and_the_builtins() -> None:
    for name in PUBLIC:
        obj = getattr(titans_agent, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, titans_agent.TitansAgentError), name
    assert issubclass(titans_agent.ChunkingMismatchError, ValueError)
    assert issubclass(titans_agent.InvalidInputError, ValueError)
    assert issubclass(titans_agent.RecordNotFoundError, KeyError)
    assert issubclass(titans_agent.NamespaceNotFoundError, KeyError)


@pytest.mark.slow
def test_import_is_light() -> None:
    heavy = ("torch", "sqlalchemy", "langchain_core", "sentence_transformers")
    code = f"import sys, titans_agent; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
