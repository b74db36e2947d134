"""One namespace's live state: the :class:`Runtime` that :class:`titans_agent.runtime.Runtimes`
loads, caches and keeps at the database's revision.

A runtime holds what recall and the gated write need in memory for a namespace (the memory module,
the dense index, the test-time state once materialised, recall's indexes) and is the one owner of
its consistency: every field is private; pipelines read it through properties and tell it what
happened through its methods (:meth:`Runtime.follow_commit`, :meth:`Runtime.mark_stale`, ...). Its
underscore methods are for :class:`~titans_agent.runtime.Runtimes` only (they reload, materialise
and replace it). The helpers here make its tensors: :func:`unit_rows`, :func:`value_projections`,
and :func:`replay_log` continues a state through logged writes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

from titans_agent import indexes
from titans_agent.bm25 import BM25Index
from titans_agent.core.memory import MemoryState, NeuralMemory, state_from_bytes
from titans_agent.errors import StoreError
from titans_agent.retrieval import DocumentIndex
from titans_agent.rows import CheckpointHead
from titans_agent.store import checkpoints, erasure, repository
from titans_agent.store.erasure import WriteGroup
from titans_agent.text import content_words

__all__ = ["Runtime", "replay_log", "unit_rows", "value_projections"]


class Runtime:
    """A namespace's live state, kept by :class:`Runtimes` at the namespace row's revision.

    Pipelines read it through its read-only properties and change it only through the methods that
    name what happened: :meth:`follow_commit` after a write's commit, :meth:`mark_stale` when a
    transaction that read an uncommitted view failed, :meth:`follow_chunking` after the chunking was
    recorded, :meth:`learn_content_words`, :meth:`lexical_index` and :meth:`document_index` as
    recall meets records; :meth:`Runtimes.bring_to`, :meth:`Runtimes.state_in`,
    :meth:`Runtimes.follow_checkpoint` and :meth:`Runtimes.follow_erasure` do the rest.

    Args:
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
        created_at: when the namespace row was made.
        incarnation: the namespace row's random token: with ``ns_id``, what the cache and every
            write transaction check (:meth:`Runtime.revision_in`, :meth:`Runtimes.claim`), so that
            a namespace dropped and made again, or another that got its id (SQLite reuses the
            highest id), is loaded anew, never continued from this runtime or written through it.

    Besides, it keeps (privately): the content words of the records' texts (texts never change;
    filled as recall meets records); the float16 copy of ``emb`` recall scans in a large namespace
    (:meth:`half_emb`; stale once ``emb`` is another tensor); recall's BM25 index of the records
    (:meth:`lexical_index`; None: not built yet, or records were deleted) and its document index
    (:meth:`document_index`, rebuilt when the revision moves); and the test-time state as
    materialised by :meth:`Runtimes.state_in` (None: not yet), current when its revision is the
    runtime's; it has applied the namespace's occurrences up to id ``position`` and descends from
    the checkpoint ``checkpoint`` (None: from M_0).
    """

    def __init__(
        self,
        ns_id: int,
        name: str,
        memory: NeuralMemory,
        ids: np.ndarray,
        emb: torch.Tensor,
        values: torch.Tensor,
        revision: int = 0,
        chunking: dict[str, Any] | None = None,
        *,
        created_at: dt.datetime | None = None,
        incarnation: str | None = None,
    ) -> None:
        self._ns_id = ns_id
        self._name = name
        self._memory = memory
        self._ids = ids
        self._emb = emb
        self._values = values
        self._revision = revision
        self._chunking = chunking
        self._created_at = created_at
        self._incarnation = incarnation
        self._content_words: dict[int, int] = {}
        self._document_index: tuple[int, DocumentIndex] | None = None
        self._lexical: BM25Index | None = None
        self._half: tuple[torch.Tensor, torch.Tensor] | None = None
        # ``emb``, ``values`` and the float16 copy are views of the first rows of buffers with room
        # to grow: a write appends its rows in place instead of copying the whole index (amortised
        # O(rows written), not O(namespace)). Rows below a view's length never change.
        self._bufs: dict[str, torch.Tensor] = {}
        self._loaded_state: MemoryState | None = None
        self._state_revision = -1
        self._position = 0
        self._checkpoint: CheckpointHead | None = None

    # ------------------------------------------------------------------ what pipelines read
    @property
    def ns_id(self) -> int:
        """The namespace row's id."""
        return self._ns_id

    @property
    def name(self) -> str:
        """The namespace's name."""
        return self._name

    @property
    def memory(self) -> NeuralMemory:
        """The shared memory module (never modify it)."""
        return self._memory

    @property
    def ids(self) -> np.ndarray:
        """``(n,)`` int64 record ids, ascending."""
        return self._ids

    @property
    def emb(self) -> torch.Tensor:
        """``(n, d)`` float32 unit-norm embeddings of :attr:`ids`."""
        return self._emb

    @property
    def values(self) -> torch.Tensor:
        """``(n, d)`` unit-norm value projections ``W_V x`` of :attr:`ids`."""
        return self._values

    @property
    def revision(self) -> int:
        """The namespace row's revision this runtime reflects (-1: stale, reloaded at its next use)."""
        return self._revision

    @property
    def chunking(self) -> dict[str, Any] | None:
        """The chunking configuration the namespace's documents were cut with (None: not recorded)."""
        return self._chunking

    @property
    def created_at(self) -> dt.datetime | None:
        """When the namespace row was made."""
        return self._created_at

    @property
    def incarnation(self) -> str | None:
        """The namespace row's random token (see the class docstring)."""
        return self._incarnation

    @property
    def checkpoint(self) -> CheckpointHead | None:
        """The checkpoint the materialised state descends from (None: M_0, or not materialised)."""
        return self._checkpoint

    @property
    def content_words(self) -> Mapping[int, int]:
        """Record id -> content words of its text, for the records recall met (read-only)."""
        return MappingProxyType(self._content_words)

    @property
    def lexical(self) -> BM25Index | None:
        """Recall's BM25 index as last built (None: not yet, or records were deleted)."""
        return self._lexical

    @property
    def half(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(emb, its float16 copy)`` as last made by :meth:`half_emb` (None: not made)."""
        return self._half

    @property
    def nbytes(self) -> int:
        """Bytes it holds: the state when materialised, the dense index, the value projections and
        the lexical index (what evicting it frees; the shared memory module is not counted)."""
        held = {"emb": self._emb, "values": self._values}
        if self._half is not None and self._half[0] is self._emb:
            held["half"] = self._half[1]
        tensors = [self._bufs.get(k, t) for k, t in held.items()]  # the buffers, room to grow included
        if self._loaded_state is not None:
            st = self._loaded_state
            tensors += [*st.weights, *st.momentum, st.pending]
        lexical = self._lexical.nbytes if self._lexical is not None else 0
        return sum(t.numel() * t.element_size() for t in tensors) + self._ids.nbytes + lexical

    def half_emb(self) -> torch.Tensor:
        """``emb`` as float16 ``(n, d)``, made once per version of ``emb`` (a write or a reload
        replaces the tensor) and counted in :attr:`nbytes`: what recall's dense scan reads in a
        large namespace (:data:`titans_agent.recall.HALF_SCAN_ROWS`)."""
        if self._half is None or self._half[0] is not self._emb:
            self._half = (self._emb, self._emb.to(torch.float16))
            self._bufs.pop("half", None)
        return self._half[1]

    def revision_in(self, s: Any) -> int | None:
        """The namespace row's revision in session ``s``, or None when this runtime's namespace is
        gone: dropped, and maybe made again under its name or its id given to another namespace
        (SQLite reuses the highest id), which the row's incarnation tells apart."""
        return repository.namespace_revision(s, self._ns_id, self._incarnation)

    def lexical_index(self, s: Any) -> BM25Index:
        """Recall's BM25 index of the records at this runtime's revision, read in the snapshot ``s``
        (kept; brought up to date by :func:`titans_agent.indexes.lexical_index`)."""
        self._lexical = indexes.lexical_index(s, self._ns_id, self._lexical, self._revision)
        return self._lexical

    def document_index(self, s: Any) -> DocumentIndex:
        """Recall's document index at this runtime's revision, read in the snapshot ``s`` (built
        once per revision by :func:`titans_agent.indexes.document_index`)."""
        if self._document_index is None or self._document_index[0] != self._revision:
            self._document_index = (self._revision, indexes.document_index(s, self._ns_id))
        return self._document_index[1]

    # ------------------------------------------------------------------ what happened to it
    def learn_content_words(self, texts: Mapping[int, str]) -> None:
        """Keep the content words of the texts ``texts`` (record id -> text) of records not known yet."""
        known = self._content_words
        known.update((rid, content_words(t)) for rid, t in texts.items() if rid not in known)

    def follow_commit(
        self,
        *,
        state: MemoryState,
        revision: int,
        ids: Sequence[int],
        emb: torch.Tensor,
        position: int,
        checkpoint: CheckpointHead | None,
    ) -> None:
        """After a write's commit: take its state (which has applied the occurrences up to id
        ``position`` and descends from ``checkpoint``) and revision, and append its new records
        ``ids`` with their embeddings ``emb`` ``(len(ids), d)`` to the index (the lexical index
        catches up at the next recall, :meth:`lexical_index`)."""
        self._loaded_state, self._state_revision = state, revision
        self._position, self._checkpoint = position, checkpoint
        self._revision = revision
        if len(ids):
            self._ids = np.concatenate([self._ids, np.asarray(ids, dtype=np.int64)])
            add = unit_rows(emb.float())
            self._emb = self._grown_emb(add)
            self._values = self._appended("values", self._values, value_projections(self._memory, add))

    def mark_stale(self) -> None:
        """A transaction that read this runtime from its uncommitted view failed: its next use
        reloads it from what was committed (:meth:`Runtimes.get`, :meth:`Runtimes.bring_to`)."""
        self._revision = -1

    def follow_chunking(self, chunking: Mapping[str, Any]) -> None:
        """After the commit that recorded the namespace's chunking configuration ``chunking``."""
        self._chunking = dict(chunking)

    # ------------------------------------------------------------------ for Runtimes only
    def _current_state(self) -> MemoryState | None:
        """The materialised state when it is at this runtime's revision, else None."""
        if self._loaded_state is not None and self._state_revision == self._revision:
            return self._loaded_state
        return None

    def _materialise(self, s: Any, device: torch.device) -> MemoryState:
        """Materialise the state at this runtime's revision from the session ``s`` (which shows it),
        as :meth:`Runtimes.state_in` describes: continued from the state it holds by the writes after
        its position, unless the checkpoint changed (then from that checkpoint, or M_0), on
        ``device``; kept.

        Raises:
            StoreError: a replayed state is not finite (a damaged log: nothing is changed).
            CorruptBlobError: the checkpoint's bytes are damaged.
        """
        head = checkpoints.checkpoint_head(s, self._ns_id)
        if self._loaded_state is None or head != self._checkpoint:
            loaded = checkpoints.checkpoint_state(s, self._ns_id)
            if loaded is None:
                state, position, head = self._memory.init_state(), 0, None
            else:
                head, blob = loaded
                state, position = state_from_bytes(blob, device=device), head.position
        else:
            state, position = self._loaded_state, self._position
        groups = erasure.write_groups(s, self._ns_id, position)
        state, position = replay_log(self._memory, state, position, groups)
        if not state.is_finite():
            raise StoreError(f"the replayed memory state of namespace {self._name!r} is not finite")
        self._loaded_state, self._state_revision = state, self._revision
        self._position, self._checkpoint = position, head
        return state

    def _take_index(
        self, ids: np.ndarray, emb: torch.Tensor, values: torch.Tensor, revision: int, *, appended: bool
    ) -> None:
        """Stand at ``revision`` with the records ``ids`` (their embeddings ``emb`` and value
        projections ``values``): appended to those held when ``appended`` (no record held was
        deleted), else instead of them, and then nothing derived from the records held stays (the
        content words, recall's indexes, the float16 copy) and the state is read again from the
        checkpoint (or M_0) and the log, never continued (their ids may come back with other texts)."""
        if appended:
            ids = np.concatenate([self._ids, ids])
            emb, values = self._grown_emb(emb), self._appended("values", self._values, values)
        else:
            self._content_words.clear()
            self._drop_derived()
            self._bufs.clear()
            self._loaded_state, self._state_revision, self._position, self._checkpoint = None, -1, 0, None
        self._ids, self._emb, self._values, self._revision = ids, emb, values, revision

    def _grown_emb(self, added: torch.Tensor) -> torch.Tensor:
        """``emb`` with the rows ``added`` ``(m, d)`` appended, the float16 copy (when there is one)
        carried over to it, so a write to a large namespace converts only its own rows."""
        grown = self._appended("emb", self._emb, added)
        if self._half is not None and self._half[0] is self._emb:
            self._half = (grown, self._appended("half", self._half[1], added.to(torch.float16)))
        else:
            self._bufs.pop("half", None)
        return grown

    def _appended(self, key: str, held: torch.Tensor, added: torch.Tensor) -> torch.Tensor:
        """``held`` ``(n, d)`` with ``added`` ``(m, d)`` appended, as a view of the buffer ``key``,
        written in place when the buffer still holds ``held`` and has room (else a new buffer of
        1.5 times the rows, ``held`` copied once). The views handed out before keep their rows."""
        n, need = held.shape[0], held.shape[0] + added.shape[0]
        buf = self._bufs.get(key)
        if (
            buf is None
            or buf.shape[0] < need
            or buf.dtype != added.dtype
            or buf.device != added.device
            or held.shape[1:] != buf.shape[1:]
            or held.data_ptr() != buf.data_ptr()  # not the view of this buffer handed out last
        ):
            buf = torch.empty((max(need + need // 2, 64), *added.shape[1:]), dtype=added.dtype, device=added.device)
            buf[:n] = held
            self._bufs[key] = buf
        buf[n:need] = added
        return buf[:need]

    def _become(self, fresh: Runtime) -> None:
        """Take every field of ``fresh`` (in place: the caller and the cache hold this object)."""
        vars(self).update(vars(fresh))

    def _drop_state(self) -> None:
        """Forget the materialised state: loaded again from the checkpoint when next needed."""
        self._loaded_state = None

    def _drop_derived(self) -> None:
        """Forget the lexical index, the float16 copy and the document index."""
        self._lexical = self._half = self._document_index = None
        self._bufs.pop("half", None)


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
