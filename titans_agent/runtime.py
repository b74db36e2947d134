"""One namespace's live memory, state and dense index, kept at the database's revision.

A :class:`Runtime` is what recall and the gated write need in memory for a namespace: the memory
module with its outer parameters (one module per parameter set, shared by every namespace that
uses it), the test-time state, and the dense index (record ids, their unit embeddings, their value
projections ``W_V x``). :class:`Runtimes` loads them from one snapshot of the database and keeps
them at the namespace row's revision: every commit that changes a namespace bumps its revision, and
a runtime whose revision differs is brought up to date before it is used (only the newer records
are read when no record it holds was deleted).

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

import datetime as dt
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import torch

from titans_agent.bm25 import BM25Index
from titans_agent.config import MemoryConfig
from titans_agent.core.memory import (
    MemoryState,
    NeuralMemory,
    params_from_bytes,
    params_to_bytes,
    state_from_bytes,
)
from titans_agent.errors import InvalidInputError, NamespaceNotFoundError, StoreError
from titans_agent.rows import CheckpointHead, NamespaceData
from titans_agent.store import Store, checkpoints, erasure, repository
from titans_agent.store.erasure import WriteGroup
from titans_agent.validation import check_namespace

__all__ = ["Runtime", "Runtimes", "replay_log"]


@dataclass
class Runtime:
    """A namespace's live state.

    Attributes:
        ns_id: the namespace row's id.
        name: the namespace's name.
        memory: the memory module (outer parameters; inference only), shared with every namespace
            of the same parameter set: never modify it.
        ids: ``(n,)`` int64 record ids, ascending.
        emb: ``(n, d)`` float32 unit-norm embeddings of those records.
        values: ``(n, d)`` unit-norm value projections ``W_V x`` of those records.
        revision: the namespace row's revision this runtime reflects.
        chunking: the chunking configuration the namespace's documents were cut with (None: not
            recorded yet).
        content_words: record id -> content words of its text (texts never change; filled as recall
            meets records).
        half: ``(emb, its float16 copy)``, the copy recall scans in a large namespace (see
            :meth:`half_emb`; stale once ``emb`` is another tensor).
        lexical: recall's BM25 index of the records (:class:`titans_agent.bm25.BM25Index`; None:
            not built yet, or records were deleted), brought to the revision by recall
            (:func:`titans_agent.recall.lexical_index`).
        documents: ``(revision, DocumentIndex)``: recall's document signal index
            (:class:`titans_agent.retrieval.DocumentIndex`), rebuilt when the revision moves.
        created_at: when the namespace row was made.
        incarnation: the namespace row's random token: with ``ns_id``, what the cache and every
            write transaction check (:meth:`Runtime.revision_in`, :meth:`Runtimes.claim`), so that
            a namespace dropped and made again, or another that got its id (SQLite reuses the
            highest id), is loaded anew, never continued from this runtime or written through it.
        loaded_state: the test-time state as materialised by :meth:`Runtimes.state_in` (None: not
            yet), current when ``state_revision == revision``; it has applied the namespace's
            occurrences up to id ``position`` and descends from the checkpoint ``checkpoint``
            (None: from M_0).
    """

    ns_id: int
    name: str
    memory: NeuralMemory
    ids: np.ndarray
    emb: torch.Tensor
    values: torch.Tensor
    revision: int = 0
    chunking: dict[str, Any] | None = None
    content_words: dict[int, int] = field(default_factory=dict)
    created_at: dt.datetime | None = None
    incarnation: str | None = None
    documents: tuple[int, Any] | None = None
    lexical: BM25Index | None = None
    half: tuple[torch.Tensor, torch.Tensor] | None = None
    loaded_state: MemoryState | None = None
    state_revision: int = -1
    position: int = 0
    checkpoint: CheckpointHead | None = None

    @property
    def nbytes(self) -> int:
        """Bytes it holds: the state when materialised, the dense index, the value projections and
        the lexical index (what evicting it frees; the shared memory module is not counted)."""
        tensors = [self.emb, self.values]
        if self.loaded_state is not None:
            st = self.loaded_state
            tensors += [*st.weights, *st.momentum, st.pending]
        if self.half is not None and self.half[0] is self.emb:
            tensors.append(self.half[1])
        lexical = self.lexical.nbytes if self.lexical is not None else 0
        return sum(t.numel() * t.element_size() for t in tensors) + self.ids.nbytes + lexical

    def grown_emb(self, added: torch.Tensor) -> torch.Tensor:
        """``emb`` with the rows ``added`` ``(m, d)`` appended, the float16 copy (when there is one)
        carried over to it, so a write to a large namespace converts only its own rows."""
        grown = torch.cat([self.emb, added])
        if self.half is not None and self.half[0] is self.emb:
            self.half = (grown, torch.cat([self.half[1], added.to(torch.float16)]))
        return grown

    def half_emb(self) -> torch.Tensor:
        """``emb`` as float16 ``(n, d)``, made once per version of ``emb`` (a write or a reload
        replaces the tensor) and counted in :attr:`nbytes`: what recall's dense scan reads in a
        large namespace (:data:`titans_agent.recall.HALF_SCAN_ROWS`)."""
        if self.half is None or self.half[0] is not self.emb:
            self.half = (self.emb, self.emb.to(torch.float16))
        return self.half[1]

    def revision_in(self, s: Any) -> int | None:
        """The namespace row's revision in session ``s``, or None when this runtime's namespace is
        gone: dropped, and maybe made again under its name or its id given to another namespace
        (SQLite reuses the highest id), which the row's incarnation tells apart."""
        return repository.namespace_revision(s, self.ns_id, self.incarnation)

    def follow(
        self,
        state: MemoryState,
        revision: int,
        ids: Sequence[int],
        emb: torch.Tensor,
        position: int,
        checkpoint: CheckpointHead | None,
    ) -> None:
        """After a commit: take its state (which has applied the occurrences up to id ``position``
        and descends from ``checkpoint``) and revision, and append its new records ``ids`` with
        their embeddings ``emb`` ``(len(ids), d)`` to the index (the lexical index catches up at the
        next recall, :func:`titans_agent.recall.lexical_index`)."""
        self.loaded_state, self.state_revision = state, revision
        self.position, self.checkpoint = position, checkpoint
        self.revision = revision
        if len(ids):
            self.ids = np.concatenate([self.ids, np.asarray(ids, dtype=np.int64)])
            add = unit_rows(emb.float())
            self.emb = self.grown_emb(add)
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


def replay_log(
    memory: NeuralMemory, state: MemoryState, position: int, groups: Iterable[WriteGroup]
) -> tuple[MemoryState, int]:
    """Continue ``state`` (which stands at occurrence id ``position``) through the logged writes
    ``groups`` (:func:`titans_agent.store.erasure.write_groups` after ``position``): one
    :meth:`NeuralMemory.write` per write, with the embeddings it was written with, as the gated write
    made it. Returns the new state and the last occurrence id applied."""
    dim = memory.config.dim
    for g in groups:
        arr = np.frombuffer(b"".join(g.embeddings), dtype=np.float32).reshape(len(g.embeddings), dim)
        x = torch.from_numpy(arr.copy()).to(memory.device)
        with torch.no_grad():
            _, res = memory.write(state, x.to(memory.dtype))
        state, position = res.state, g.last_id
    return state, position


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
        self.chunking = chunking
        self._cache: OrderedDict[str, Runtime] = OrderedDict()  # least recently used first
        self._sizes: dict[str, int] = {}  # bytes of each cached runtime, as of its last use
        self._total = 0
        self.evictions = 0
        self._lock = threading.RLock()
        self._memories: dict[int, NeuralMemory] = {}  # parameter set id -> its (shared) module
        self._new: tuple[NeuralMemory, bytes, str] | None = None  # a new namespace's memory, params, key

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
            chunking=self.chunking,
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
        fresh = self._load(s, row) if row is not None else self._insert(s, rt.name)[0]
        for f in fields(Runtime):  # in place: the caller (and the cache) hold this object
            setattr(rt, f.name, getattr(fresh, f.name))
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
        if rt.loaded_state is not None and rt.state_revision == rt.revision:
            return rt.loaded_state
        head = checkpoints.checkpoint_head(s, rt.ns_id)
        if rt.loaded_state is None or head != rt.checkpoint:
            loaded = checkpoints.checkpoint_state(s, rt.ns_id)
            if loaded is None:
                state, position, head = rt.memory.init_state(), 0, None
            else:
                head, blob = loaded
                state, position = state_from_bytes(blob, device=self.device), head.position
        else:
            state, position = rt.loaded_state, rt.position
        state, position = replay_log(rt.memory, state, position, erasure.write_groups(s, rt.ns_id, position))
        if not state.is_finite():
            raise StoreError(f"the replayed memory state of namespace {rt.name!r} is not finite")
        rt.loaded_state, rt.state_revision, rt.position, rt.checkpoint = state, rt.revision, position, head
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
        if unchanged:
            ids, emb, values = np.concatenate([rt.ids, ids]), rt.grown_emb(emb), torch.cat([rt.values, values])
        else:  # records were deleted (their ids may come back with other texts)
            rt.content_words.clear()
            rt.lexical = rt.half = rt.documents = None  # nothing of a deleted record stays in memory
            # and the state is read again from the checkpoint (or M_0) and the log, never continued
            rt.loaded_state, rt.state_revision, rt.position, rt.checkpoint = None, -1, 0, None
        # the state is brought up to date by state_in, when something needs it
        rt.ids, rt.emb, rt.values, rt.revision = ids, emb, values, revision
