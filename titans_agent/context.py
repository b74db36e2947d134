"""What every pipeline works with: one frozen :class:`PipelineContext`, built once by the facade.

:class:`~titans_agent.agent.MemoryAgent` makes it when it opens and hands it, as the first argument,
to each pipeline (:mod:`titans_agent.write`, :mod:`titans_agent.recall`, :mod:`titans_agent.erase`,
:mod:`titans_agent.ingest.pipeline`, :mod:`titans_agent.transfer`); their other arguments are
keyword-only. No pipeline reaches into the agent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from titans_agent.config import AgentConfig
from titans_agent.embeddings import Embedder
from titans_agent.locking import AgentLocks
from titans_agent.store import Store

if TYPE_CHECKING:  # the runtimes import torch: imported where used
    from titans_agent.runtime import Runtimes

__all__ = ["HasContext", "PipelineContext"]


@dataclass(frozen=True)
class PipelineContext:
    """One agent's database, embedder, configuration, locks and live memories.

    Attributes:
        store: the database.
        embedder: the embedder.
        config: the agent's configuration.
        locks: the agent's locks (:class:`~titans_agent.locking.AgentLocks`): export holds the
            shared side, import the agent-wide one.
        make_runtimes: gives the agent's :class:`~titans_agent.runtime.Runtimes`, made at their first
            use (they need the embedder's dimension, and torch): read :attr:`runtimes`.
        check_open: raises ``StoreError`` when the agent is closed.
    """

    store: Store
    embedder: Embedder
    config: AgentConfig
    locks: AgentLocks
    make_runtimes: Callable[[], Runtimes]
    check_open: Callable[[], None]

    @property
    def runtimes(self) -> Runtimes:
        """Every namespace's live memory (:class:`~titans_agent.runtime.Runtimes`)."""
        return self.make_runtimes()


class HasContext(Protocol):
    """What :func:`~titans_agent.transfer.export_jsonl` and :func:`~titans_agent.transfer.import_jsonl`
    take: an open :class:`~titans_agent.MemoryAgent` (its :attr:`context`)."""

    @property
    def context(self) -> PipelineContext: ...
