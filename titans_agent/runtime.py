"""One namespace's live memory, state and dense index, kept at the database's revision.

A :class:`Runtime` (:mod:`titans_agent.live`, which owns its fields) is what recall and the gated
write need in memory for a namespace: the memory module with its outer parameters (one module per
parameter set, shared by every namespace that uses it), the test-time state, and the dense index
(record ids, their unit embeddings, their value projections ``W_V x``). :class:`Runtimes` loads them
from one snapshot of the database and keeps them at the namespace row's revision: every commit that
changes a namespace bumps its revision, and a runtime whose revision differs is brought up to date
before it is used (only the newer records are read when no record it holds was deleted).

The state is persisted as a checkpoint plus a log (:mod:`titans_agent.store.checkpoints`): the
namespace's occurrences after the checkpoint's position, in their writes, are the units written
since. :meth:`Runtimes.state_in` materialises it only when something needs it (a write, a neural
read, :meth:`MemoryAgent.memory_state`): from the runtime's own state when it is already at the
checkpoint, else from the checkpoint (or M_0), replaying each later write exactly as the gated
write made it (one :meth:`NeuralMemory.write` per write, the same embeddings, the same grouping),
so the replayed state equals the writer's bit for bit on the same kind of device and torch build.
Recall with the default signals never needs the state, so it never replays.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from titans_agent.config import AgentConfig, MemoryConfig
from titans_agent.core.memory import (
    MemoryState,
    NeuralMemory,
    params_from_bytes,
    params_to_bytes,
)
from titans_agent.errors import InvalidInputError, NamespaceNotFoundError, StoreError
from titans_agent.live import Runtime, replay_log, unit_rows, value_projections
from titans_agent.rows import NamespaceData
from titans_agent.store import Store, checkpoints, repository
from titans_agent.validation import check_namespace

__all__ = ["Runtime", "Runtimes", "replay_log", "unit_rows", "value_projections"]


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
            used is never evicted, so one namespace larger than the budget still works. The memory
            modules (one per parameter set in use, about 4 MB with the default configuration) are
            kept apart from it.

    Thread-safe: the cache is guarded by a lock; a runtime itself is used by one thread at a time
    (the agent holds the namespace's lock while it uses one).
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
        self._chunking = chunking
        self._cache: OrderedDict[str, Runtime] = OrderedDict()  # least recently used first
        self._sizes: dict[str, int] = {}  # bytes of each cached runtime, as of its last use
        self._total = 0
        self.evictions = 0
        self._lock = threading.RLock()
        self._memories: dict[int, NeuralMemory] = {}  # parameter set id -> its (shared) module
        self._new: tuple[NeuralMemory, bytes, str] | None = None  # a new namespace's memory, params, key

    @classmethod
    def of_agent(cls, store: Store, config: AgentConfig, *, dim: int, embedder: str, device: torch.device) -> Runtimes:
        """The runtimes of an agent configured by ``config`` (its ``memory`` configuration and its
        ``runtime_budget_mb``), after its thread policy (``config.threads``, process-wide) is applied."""
        if config.threads is not None:
            torch.set_num_threads(config.threads)
        budget = int(config.runtime_budget_mb * 2**20)
        return cls(
            store, dim=dim, embedder=embedder, device=device, memory_config=config.memory, chunking=None,
            budget_bytes=budget,
        )  # fmt: skip

    @property
    def chunking(self) -> dict[str, Any] | None:
        """The chunking configuration recorded with a new namespace (None: not known yet)."""
        return self._chunking

    def use_chunking(self, chunking: dict[str, Any]) -> None:
        """Record ``chunking`` with the namespaces made from now on (the agent sets it before its
        first write, which may create a namespace: it needs the tokenizer)."""
        self._chunking = chunking

    def clear(self) -> None:
        """Forget every cached runtime (they are loaded again when used)."""
        with self._lock:
            self._cache.clear()
            self._sizes.clear()
            self._total = 0
            self._memories.clear()

    def discard(self, namespace: str) -> None:
        """Forget the cached runtime of ``namespace`` (after it was dropped)."""
        with self._lock:
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
        with self._lock:
            rt = self._cache.get(namespace)
        if rt is not None:
            with self.store.session() as s:
                revision = rt.revision_in(s)
            if revision is not None:
                if revision != rt.revision:
                    self.reload(rt)  # another writer committed: continue from its state
                with self._lock:
                    self._used(namespace, rt)
                return rt
            with self._lock:  # the namespace was dropped (its id may be reused): load it again
                self._forget(namespace)
        with self.store.snapshot_session() as s:
            row = repository.find_namespace(s, namespace)
            rt = None if row is None else self._load(s, row)
        if rt is None:
            if not create:
                return None
            rt = self._create(namespace)  # loaded in the creating transaction: no one dropped it meanwhile
        with self._lock:
            self._used(namespace, rt)
        return rt

    def get_or_create(self, namespace: str) -> Runtime:
        """The namespace's runtime (:meth:`get`), the namespace made (under its write lock) when new.

        Raises:
            InvalidInputError: as :meth:`get`.
        """
        rt = self.get(namespace, create=True)
        if rt is None:  # pragma: no cover - get(create=True) always returns one
            raise StoreError(f"namespace {namespace!r} could not be created")
        return rt

    def _used(self, namespace: str, rt: Runtime) -> None:
        """(Under the lock.) Cache ``rt`` as ``namespace``'s runtime, most recently used, then
        evict the least recently used runtimes while the cache holds more than the budget (never
        the one just used)."""
        self._cache[namespace] = rt
        self._cache.move_to_end(namespace)
        size = rt.nbytes
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
        with self._lock:
            rt = self._cache.get(namespace)
        if rt is not None:
            revision = rt.revision_in(s)
            if revision is not None:
                if revision != rt.revision:
                    self.reload(rt, s)
                with self._lock:
                    self._used(namespace, rt)
                return rt
            with self._lock:
                self._forget(namespace)
        row = repository.find_namespace(s, namespace)
        if row is None:
            return None
        rt = self._load(s, row)
        with self._lock:
            self._used(namespace, rt)
        return rt

    def note_size(self, rt: Runtime) -> None:
        """Account for a runtime whose state was just materialised (it may evict others)."""
        with self._lock:
            if self._cache.get(rt.name) is rt:
                self._used(rt.name, rt)

    def _load(self, s: Any, row: NamespaceData, memory: NeuralMemory | None = None) -> Runtime:
        """Build a runtime from a namespace row and its records, read in the caller's snapshot (the
        state is materialised later, by :meth:`state_in`, when something needs it). ``memory``: its
        module when the caller has it (a namespace this transaction created), else the shared one."""
        if row.parameters_id is None:
            raise StoreError(f"namespace {row.name!r} has no memory parameters (a damaged database)")
        if memory is None:
            memory = self._memory(s, row.parameters_id, row.memory_config)
        ids, blobs = repository.record_index(s, row.id)
        emb = self.embeddings(blobs)
        return Runtime(
            row.id,
            row.name,
            memory,
            np.array(ids, dtype=np.int64),
            emb,
            value_projections(memory, emb),
            row.revision,
            row.chunking,
            created_at=row.created_at,
            incarnation=row.incarnation,
        )

    def _memory(self, s: Any, pid: int, memory_config: dict[str, Any]) -> NeuralMemory:
        """The shared memory module of parameter set ``pid`` (read once per process)."""
        with self._lock:
            memory = self._memories.get(pid)
        if memory is None:
            memory = NeuralMemory(MemoryConfig.model_validate(memory_config), device=self.device, initialise=False)
            params_from_bytes(memory, checkpoints.parameters_blob(s, pid))  # nothing random is drawn first
            memory.requires_grad_(False)  # inference only: the state must not hold a graph
            with self._lock:
                memory = self._memories.setdefault(pid, memory)
        return memory

    def _new_memory(self) -> tuple[NeuralMemory, bytes, str]:
        """A new namespace's memory module (``memory_config``), its parameter bytes and their key
        (:func:`titans_agent.store.checkpoints.parameters_key`), made once per process: every
        namespace of this configuration shares them."""
        if self._new is None:
            mcfg = self.memory_config
            if mcfg.init == "meta-learned":
                from titans_agent.data import meta_learned_metadata

                trained_for = meta_learned_metadata().get("embedder")
                if trained_for != self.embedder:
                    raise InvalidInputError(
                        f"the meta-learned memory parameters were trained for the embedder {trained_for!r}, "
                        f"not {self.embedder!r}: use MemoryConfig(init='random') with this embedder"
                    )
            params = params_to_bytes(NeuralMemory(mcfg, device=self.device))
            # The module every process uses is the one loaded from the bytes: a freshly initialised
            # one holds equal values in other memory layouts (a transposed orthogonal matrix), which
            # round differently, and a replay elsewhere must match the writer bit for bit.
            memory = NeuralMemory(mcfg, device=self.device, initialise=False)
            params_from_bytes(memory, params)
            memory.requires_grad_(False)
            self._new = (memory, params, checkpoints.parameters_key(params))
        return self._new

    def _create(self, namespace: str) -> Runtime:
        """The runtime of a new namespace ``namespace``, loaded in the transaction that inserts it
        (:meth:`_insert`), or of the one another process created first: the check, the insert and
        the load run under the name's write lock."""
        for attempt in self.store.write_attempts():
            with attempt, self.store.write_session(name=namespace) as s:
                row = repository.find_namespace(s, namespace)
                rt, pid = (self._load(s, row), None) if row is not None else self._insert(s, namespace)
                s.commit()
        if pid is not None:
            with self._lock:  # its parameters' row is committed now: the module may be shared
                self._memories.setdefault(pid, rt.memory)
        return rt

    def _insert(self, s: Any, namespace: str) -> tuple[Runtime, int]:
        """Insert, in the write session ``s`` (which holds the name's write lock; the caller
        commits), a namespace row that starts from M_0 (no checkpoint: zero momentum, step 0),
        referencing the database's row of its outer parameters (inserted with the first namespace
        of that parameter set); its runtime and the id of that row."""
        mcfg = self.memory_config
        memory, params, sha = self._new_memory()
        pid = checkpoints.parameters_id(s, params, mcfg.model_dump(), sha)
        repository.insert_namespace(
            s,
            namespace,
            embedder=self.embedder,
            dim=self.dim,
            memory_config=mcfg.model_dump(),
            parameters_id=pid,
            chunking=self._chunking,
        )
        row = repository.find_namespace(s, namespace)
        if row is None:  # pragma: no cover - inserted just above, in this transaction
            raise StoreError(f"namespace {namespace!r} could not be created")
        return self._load(s, row, memory), pid

    def claim(self, rt: Runtime, s: Any, *, create: bool, pinned: bool = False) -> int | None:
        """In the write session ``s``, which holds the write lock of ``rt.name``
        (:meth:`Store.write_session` with ``rt.ns_id`` and ``name=rt.name``): the revision of the
        namespace ``rt`` stands for, checked there, before anything is written.

        When the namespace ``rt`` was loaded from is gone (dropped since the caller looked it up,
        and maybe made again, or its id now another namespace's), ``rt`` is loaded anew, in place,
        from the namespace now called ``rt.name`` in ``s``, which is first made (as a first write
        makes it, in this transaction) when there is none and ``create``. Nothing is ever written
        through an id the caller looked up before the lock.

        Args:
            create: make the namespace when there is none (the writes that create their namespace).
            pinned: the caller holds rows of ``rt``'s namespace from an earlier transaction (a
                document opened there): a namespace gone since is an error, never replaced.

        Returns:
            The revision, or None when no namespace ``rt.name`` exists (``create`` False).

        Raises:
            NamespaceNotFoundError: ``pinned`` and the namespace was dropped since the earlier
                transaction (nothing is written).
        """
        revision = rt.revision_in(s)
        if revision is not None:
            return revision
        if pinned:
            raise NamespaceNotFoundError(
                f"namespace {rt.name!r} was dropped (by another agent or process) while this call wrote to it; "
                "what the call had committed went with it, and nothing more was written"
            )
        row = repository.find_namespace(s, rt.name)
        if row is None and not create:
            return None
        rt._become(self._load(s, row) if row is not None else self._insert(s, rt.name)[0])
        self.note_size(rt)
        return rt.revision

    def state_in(self, rt: Runtime, s: Any) -> MemoryState:
        """The namespace's memory state at the runtime's revision, read in the caller's session
        ``s`` (which must show that revision: a snapshot or the write session).

        Kept on the runtime once materialised. When the runtime is behind (another writer
        committed), it continues from its own state by replaying the writes after its position,
        unless the checkpoint changed (a forget or rebuild deleted occurrences, or another writer
        checkpointed): then it starts from the new checkpoint. A namespace without a checkpoint
        starts from M_0. Each write is replayed as :func:`titans_agent.write.write_units` made it.

        Raises:
            StoreError: a replayed state is not finite (a damaged log: nothing is changed).
            CorruptBlobError: the checkpoint's bytes are damaged.
        """
        state = rt._current_state()
        if state is None:
            state = rt._materialise(s, self.device)
            self.note_size(rt)
        return state

    def embeddings(self, blobs: Sequence[bytes]) -> torch.Tensor:
        """``(n, d)`` float32 tensor of embedding blobs (float32 bytes each)."""
        if not blobs:
            return torch.zeros(0, self.dim, dtype=torch.float32, device=self.device)
        arr = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), self.dim)
        return unit_rows(torch.from_numpy(arr.copy()).to(self.device))

    def reload(self, rt: Runtime, s: Any = None) -> None:
        """Bring a runtime up to date with the database: revision and dense index (the memory state
        follows when :meth:`state_in` next needs it).

        Everything is read in one snapshot (the caller's session ``s``, e.g. a locked write
        session, else a new :meth:`Store.snapshot_session`), so the state always matches the
        records. A namespace gone in that snapshot (dropped, its id maybe another's) leaves ``rt``
        as it is: its next look-up (:meth:`get`) or write transaction (:meth:`claim`) loads it anew.
        Records are only inserted under the namespace's write lock, in id order; when no
        record the runtime holds was deleted or replaced, only the newer ones are read (O(new)),
        otherwise the whole index is reloaded.
        """
        if s is None:
            with self.store.snapshot_session() as snap:
                self.reload(rt, snap)
            return
        revision = rt.revision_in(s)
        if revision is None:  # dropped since: the next look-up or write transaction loads it anew
            return
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
        # the state is brought up to date by state_in, when something needs it
        rt._take_index(ids, emb, values, revision, appended=unchanged)

    def bring_to(self, rt: Runtime, s: Any, revision: int) -> None:
        """Bring ``rt`` to the revision ``revision`` that the caller's session ``s`` shows (what
        :meth:`claim` returned there): reloaded from ``s`` (:meth:`reload`) unless it stands there."""
        if revision != rt.revision:
            self.reload(rt, s)

    def follow_checkpoint(self, rt: Runtime) -> None:
        """After the commit of a transaction that wrote a checkpoint the runtime's state does not
        continue into (a rebuild, a replaced document whose occurrences went): the state is read
        again from that checkpoint when next needed, and the index reloaded (:meth:`reload`)."""
        rt._drop_state()
        self.reload(rt)

    def follow_erasure(self, rt: Runtime) -> None:
        """After the commit of a forget: as :meth:`follow_checkpoint`, and nothing derived from what
        went (the lexical index, the float16 copy, the document index) stays in memory."""
        rt._drop_state()
        rt._drop_derived()
        self.reload(rt)
