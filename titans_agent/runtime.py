"""One namespace's live memory, state and dense index, kept at the database's revision.

A :class:`Runtime` is what recall and the gated write need in memory for a namespace: the memory
module with its outer parameters, the test-time state, and the dense index (record ids, their unit
embeddings, their value projections ``W_V x``). :class:`Runtimes` loads them from one snapshot of
the database and keeps them at the namespace row's revision: every commit that changes a
namespace bumps its revision, and a runtime whose revision differs is brought up to date before it
is used (only the newer records are read when no record it holds was deleted).
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from titans_agent.config import MemoryConfig
from titans_agent.core.memory import (
    MemoryState,
    NeuralMemory,
    params_from_bytes,
    params_to_bytes,
    state_from_bytes,
    state_to_bytes,
)
from titans_agent.errors import EmbedderMismatchError, InvalidInputError
from titans_agent.rows import NamespaceData
from titans_agent.store import Store, repository
from titans_agent.validation import check_namespace

__all__ = ["Runtime", "Runtimes"]


@dataclass
class Runtime:
    """A namespace's live state.

    Attributes:
        ns_id: the namespace row's id.
        name: the namespace's name.
        memory: the memory module (outer parameters; inference only).
        state: the test-time state as of ``revision``.
        ids: ``(n,)`` int64 record ids, ascending.
        emb: ``(n, d)`` float32 unit-norm embeddings of those records.
        values: ``(n, d)`` unit-norm value projections ``W_V x`` of those records.
        revision: the namespace row's revision this runtime reflects.
        chunking: the chunking configuration the namespace's documents were cut with (None: not
            recorded yet).
        content_words: record id -> content words of its text (texts never change; filled as recall
            meets records).
        documents: ``(revision, DocumentIndex)``: recall's document signal index
            (:class:`titans_agent.retrieval.DocumentIndex`), rebuilt when the revision moves.
        created_at: when the namespace row was made: with ``ns_id`` and ``name``, what the cache
            checks, so that a namespace dropped and made again (SQLite may give it the same id) is
            loaded anew, never continued from this runtime's state.
    """

    ns_id: int
    name: str
    memory: NeuralMemory
    state: MemoryState
    ids: np.ndarray
    emb: torch.Tensor
    values: torch.Tensor
    revision: int = 0
    chunking: dict[str, Any] | None = None
    content_words: dict[int, int] = field(default_factory=dict)
    created_at: dt.datetime | None = None
    documents: tuple[int, Any] | None = None

    @property
    def nbytes(self) -> int:
        """Bytes its tensors hold: the memory's parameters, the state, the dense index and the
        value projections (what evicting it frees)."""
        tensors = [*self.memory.parameters(), *self.state.weights, *self.state.momentum, self.state.pending]
        tensors += [self.emb, self.values]
        return sum(t.numel() * t.element_size() for t in tensors) + self.ids.nbytes

    def revision_in(self, s: Any) -> int | None:
        """The namespace row's revision in session ``s``, or None when this runtime's namespace is
        gone (dropped, or its id now belongs to another namespace)."""
        return repository.namespace_revision(s, self.ns_id, self.name, self.created_at)

    def follow(self, state: MemoryState, revision: int, ids: Sequence[int], emb: torch.Tensor) -> None:
        """After a commit: take its state and revision and append its new records ``ids`` with
        their embeddings ``emb`` ``(len(ids), d)`` to the index."""
        self.state = state
        self.revision = revision
        if len(ids):
            self.ids = np.concatenate([self.ids, np.asarray(ids, dtype=np.int64)])
            add = unit_rows(emb.float())
            self.emb = torch.cat([self.emb, add])
            self.values = torch.cat([self.values, value_projections(self.memory, add)])


def unit_rows(emb: torch.Tensor) -> torch.Tensor:
    """``emb`` ``(n, d)`` with every row of norm off 1 (by more than 1e-3) rescaled to norm 1 in
    float64, so dense scores are cosines even for an embedder that breaks the contract (rows of
    norm 1e20; zero rows stay zero). Rows already unit-norm are returned bit for bit."""
    if emb.shape[0] == 0:
        return emb
    norms = emb.double().norm(dim=1)
    off = (norms - 1.0).abs() > 1e-3
    if not bool(off.any()):
        return emb
    out = emb.clone()
    out[off] = (emb[off].double() / norms[off].clamp_min(1e-300)[:, None]).to(emb.dtype)
    return out


def value_projections(memory: NeuralMemory, emb: torch.Tensor) -> torch.Tensor:
    """Unit-norm ``W_V x`` ``(n, d)`` of embeddings ``(n, d)``: what a memory read is compared to."""
    if emb.shape[0] == 0:
        return emb.clone()
    with torch.no_grad():
        return torch.nn.functional.normalize(memory.values(emb).float(), dim=-1)


class Runtimes:
    """The runtimes of the namespaces an agent has touched, each at its database revision.

    Args:
        store: the database.
        dim: the embedder's dimension.
        embedder: the embedder's name (stored with a new namespace).
        device: where memories and indexes live.
        memory_config: the memory configuration of new namespaces (``dim`` is set to ``dim``).
        chunking: the chunking configuration recorded with a new namespace (None: not known yet;
            the agent sets it before its first write, which may create a namespace).
        budget_bytes: the most bytes the cached runtimes hold together (:attr:`Runtime.nbytes`);
            beyond it the least recently used are evicted (loaded again from the database when
            used; nothing is lost: every runtime reflects a committed revision). The runtime just
            used is never evicted, so one namespace larger than the budget still works.
    """

    def __init__(
        self,
        store: Store,
        *,
        dim: int,
        embedder: str,
        device: torch.device,
        memory_config: MemoryConfig,
        chunking: dict[str, Any] | None,
        budget_bytes: int = 1 << 30,
    ) -> None:
        self.store = store
        self.budget_bytes = budget_bytes
        self.dim = dim
        self.embedder = embedder
        self.device = device
        self.memory_config = memory_config.model_copy(update={"dim": dim})
        self.chunking = chunking
        self._cache: OrderedDict[str, Runtime] = OrderedDict()  # least recently used first
        self._sizes: dict[str, int] = {}  # bytes of each cached runtime, as of its last use
        self._total = 0
        self.evictions = 0

    def check_embedder(self) -> None:
        """Refuse a database whose namespaces were written with another embedder.

        Raises:
            EmbedderMismatchError: a namespace's embedder name or dimension differs (named).
        """
        with self.store.session() as s:
            rows = repository.namespace_embedders(s)
        for name, emb, dim in rows:
            if emb != self.embedder or dim != self.dim:
                raise EmbedderMismatchError(
                    f"namespace {name!r} of {self.store.url} was written with embedder {emb!r} (dim {dim}); "
                    f"the configured embedder is {self.embedder!r} (dim {self.dim}). "
                    "Open it with the same embedder, or use another database."
                )

    def clear(self) -> None:
        """Forget every cached runtime (they are loaded again when used)."""
        self._cache.clear()
        self._sizes.clear()
        self._total = 0

    def discard(self, namespace: str) -> None:
        """Forget the cached runtime of ``namespace`` (after it was dropped)."""
        self._forget(namespace)

    def get(self, namespace: str, create: bool = True) -> Runtime | None:
        """The namespace's runtime, up to date with the database: when another process or agent
        committed to the namespace since it was loaded (its revision changed), the state and index
        are reloaded from one snapshot first.

        Args:
            namespace: the namespace's name (checked).
            create: create the namespace (under its write lock) when it does not exist.

        Returns:
            The runtime, or None when the namespace does not exist and ``create`` is False.

        Raises:
            InvalidInputError: a bad namespace name, or a meta-learned memory for another embedder.
        """
        namespace = check_namespace(namespace)
        rt = self._cache.get(namespace)
        if rt is not None:
            with self.store.session() as s:
                revision = rt.revision_in(s)
            if revision is not None:
                if revision != rt.revision:
                    self.reload(rt)  # another writer committed: continue from its state
                self._used(namespace)
                return rt
            self._forget(namespace)  # the namespace was dropped (its id may be reused): load it again
        with self.store.snapshot_session() as s:
            row = repository.find_namespace(s, namespace)
            rt = None if row is None else self._load(s, row)
        if rt is None:
            if not create:
                return None
            self._create(namespace)
            return self.get(namespace, create=False)
        self._cache[namespace] = rt
        self._used(namespace)
        return rt

    def _used(self, namespace: str) -> None:
        """Mark ``namespace`` most recently used, then evict the least recently used runtimes
        while the cache holds more than the budget (never the one just used)."""
        self._cache.move_to_end(namespace)
        size = self._cache[namespace].nbytes
        self._total += size - self._sizes.get(namespace, 0)
        self._sizes[namespace] = size
        while self._total > self.budget_bytes and len(self._cache) > 1:
            self._forget(next(iter(self._cache)))
            self.evictions += 1

    def _forget(self, namespace: str) -> None:
        self._cache.pop(namespace, None)
        self._total -= self._sizes.pop(namespace, 0)

    def in_snapshot(self, s: Any, namespace: str) -> Runtime | None:
        """The namespace's runtime at the revision of the caller's snapshot session ``s`` (loaded or
        brought up to date from it), or None when the namespace does not exist in that snapshot.
        Recall reads everything through one snapshot this way: the dense index, the memory state
        and the rows it reads next all show the same commit."""
        namespace = check_namespace(namespace)
        rt = self._cache.get(namespace)
        if rt is not None:
            revision = rt.revision_in(s)
            if revision is not None:
                if revision != rt.revision:
                    self.reload(rt, s)
                self._used(namespace)
                return rt
            self._forget(namespace)
        row = repository.find_namespace(s, namespace)
        if row is None:
            return None
        rt = self._cache[namespace] = self._load(s, row)
        self._used(namespace)
        return rt

    def _load(self, s: Any, row: NamespaceData) -> Runtime:
        """Build a runtime from a namespace row and its records, read in the caller's snapshot."""
        memory = NeuralMemory(MemoryConfig.model_validate(row.memory_config), device=self.device, initialise=False)
        params_from_bytes(memory, row.params)  # every parameter: nothing random is drawn first
        memory.requires_grad_(False)  # inference only: the state must not hold a graph
        state = state_from_bytes(row.state, device=self.device)
        ids, blobs = repository.record_index(s, row.id)
        emb = self.embeddings(blobs)
        return Runtime(
            row.id,
            row.name,
            memory,
            state,
            np.array(ids, dtype=np.int64),
            emb,
            value_projections(memory, emb),
            row.revision,
            row.chunking,
            created_at=row.created_at,
        )

    def _create(self, namespace: str) -> None:
        """Insert a namespace row with a fresh memory (M_0, zero momentum, step 0), unless another
        process created it first: the check and the insert run under the name's write lock."""
        mcfg = self.memory_config
        if mcfg.init == "meta-learned":
            from titans_agent.data import meta_learned_metadata

            trained_for = meta_learned_metadata().get("embedder")
            if trained_for != self.embedder:
                raise InvalidInputError(
                    f"the meta-learned memory parameters were trained for the embedder {trained_for!r}, "
                    f"not {self.embedder!r}: use MemoryConfig(init='random') with this embedder"
                )
        memory = NeuralMemory(mcfg, device=self.device)
        memory.requires_grad_(False)
        params, state = params_to_bytes(memory), state_to_bytes(memory.init_state())
        for attempt in self.store.write_attempts():
            with attempt, self.store.write_session(name=namespace) as s:
                if repository.namespace_id(s, namespace) is None:
                    repository.insert_namespace(
                        s,
                        namespace,
                        embedder=self.embedder,
                        dim=self.dim,
                        memory_config=mcfg.model_dump(),
                        params=params,
                        state=state,
                        chunking=self.chunking,
                    )
                    s.commit()

    def embeddings(self, blobs: Sequence[bytes]) -> torch.Tensor:
        """``(n, d)`` float32 tensor of embedding blobs (float32 bytes each)."""
        if not blobs:
            return torch.zeros(0, self.dim, dtype=torch.float32, device=self.device)
        arr = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), self.dim)
        return unit_rows(torch.from_numpy(arr.copy()).to(self.device))

    def reload(self, rt: Runtime, s: Any = None) -> None:
        """Bring a runtime up to date with the database: memory state, revision and dense index.

        Everything is read in one snapshot (the caller's session ``s``, e.g. a locked write
        session, else a new :meth:`Store.snapshot_session`), so the state always matches the
        records. Records are only inserted under the namespace's write lock, in id order; when no
        record the runtime holds was deleted or replaced, only the newer ones are read (O(new)),
        otherwise the whole index is reloaded.
        """
        if s is None:
            with self.store.snapshot_session() as snap:
                self.reload(rt, snap)
            return
        state_blob, revision = repository.namespace_state(s, rt.ns_id)
        last = int(rt.ids[-1]) if rt.ids.shape[0] else 0
        unchanged = repository.count_records(s, rt.ns_id, up_to_id=last) == rt.ids.shape[0]
        if unchanged and last:  # an id reused after a delete would hold other content
            blob = repository.record_embedding(s, last)
            unchanged = blob is not None and np.array_equal(
                np.frombuffer(blob, dtype=np.float32), rt.emb[-1].cpu().numpy()
            )
        new_ids, blobs = repository.record_index(s, rt.ns_id, after_id=last if unchanged else 0)
        ids = np.array(new_ids, dtype=np.int64)
        emb = self.embeddings(blobs)
        values = value_projections(rt.memory, emb)
        if unchanged:
            ids, emb, values = np.concatenate([rt.ids, ids]), torch.cat([rt.emb, emb]), torch.cat([rt.values, values])
        else:  # records were deleted (their ids may come back with other texts)
            rt.content_words.clear()
        rt.state = state_from_bytes(state_blob, device=self.device)
        rt.ids, rt.emb, rt.values, rt.revision = ids, emb, values, revision
