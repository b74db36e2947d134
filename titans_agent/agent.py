"""MemoryAgent: the public object. Ingest, remember, converse, recall, forget.

Every write goes through the Titans memory's surprise gate (Behrouz et al. 2024, eq. 12-14): the
unit is embedded, its surprise ``||M(k) - v||^2 / ||v||^2`` is measured under the current memory
(before the update), and the memory is updated through its gates (theta, eta, alpha). Then:

- an exact repeat (same normalised text as a record of the namespace) is never stored again: the
  record's hit count and last-seen time are updated ("repeat");
- a unit whose surprise is below ``write_threshold`` AND which nearly duplicates a record (embedding
  cosine >= ``duplicate_similarity`` and the same words and numbers) is merged into it ("merged");
- every other unit is stored, flagged "known" when its surprise was low, "new" otherwise. Nothing
  new is ever dropped.

Recall fuses BM25 (SQLite FTS5), dense cosine similarity and the memory's read-out M*(q) (eq. 15)
by reciprocal-rank fusion; see :class:`~titans_agent.config.RetrievalConfig`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sqlalchemy import delete, func, select, update

from titans_agent.ingest.chunking import Chunker
from titans_agent.config import DEFAULT_NAMESPACE, AgentConfig, MemoryConfig
from titans_agent.embeddings import Embedder, load_embedder
from titans_agent.errors import (
    EmbedderMismatchError,
    InvalidInputError,
    RecordNotFoundError,
    StoreError,
)
from titans_agent.ingest.files import SkippedFile, SourceFile, discover
from titans_agent.core.memory import (
    MemoryState,
    NeuralMemory,
    params_from_bytes,
    params_to_bytes,
    resolve_device,
    state_from_bytes,
    state_to_bytes,
)
from titans_agent.retrieval import (
    Ranks,
    about_oneself,
    build_hits,
    content_words,
    demote_other_people,
    demote_superseded,
    expand_neighbours,
    fuse_scores,
    neighbour_map,
    neighbour_shares,
    rank_by_similarity,
    rank_ids,
    top_k,
)
from titans_agent.store import Document, NamespaceRow, Occurrence, Record, SessionRow, Store, Turn, utcnow
from titans_agent.types import Hit, IngestReport, NamespaceStats, SkippedSource, WriteResult
from titans_agent.updates import link_updates, links_for
from titans_agent.validation import (
    as_utc,
    check_kinds,
    check_metadata,
    check_name,
    check_namespace,
    check_patterns,
    check_record_id,
    check_text,

)
from titans_agent.text import text_hash, word_set

__all__ = ["DEFAULT_NAMESPACE", "IngestProgress", "MemoryAgent"]

MAX_ROLE_CHARS = 64  # the turns.role column: String(64), enforced by PostgreSQL, not by SQLite

log = logging.getLogger(__name__)

_MAX_CONTEXT_CHARS = 2000  # lexical context of a record: its sources, roles and dates


@dataclass
class IngestProgress:
    """Passed to the ``progress`` callback of :meth:`MemoryAgent.ingest` after every file and batch."""

    files: int = 0
    chunks: int = 0
    stored: int = 0
    current: str = ""


@dataclass
class _Unit:
    text: str
    kind: str
    context: str = ""
    source: str | None = None
    document_id: int | None = None
    chunk_index: int | None = None
    start_line: int | None = None
    end_line: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    role: str | None = None
    timestamp: dt.datetime | None = None
    turn_of: tuple[int, str] | None = None  # (session row id, the turn's whole content)
    embed_prefix: str = ""  # embedded before the text (e.g. "Caroline: "), not stored in it


@dataclass
class _Runtime:
    """A namespace's live state: the memory module, its state, and the dense index cache."""

    ns_id: int
    memory: NeuralMemory
    state: MemoryState
    ids: np.ndarray  # (n,) int64 record ids, ascending
    emb: torch.Tensor  # (n, d) float32 unit-norm embeddings
    values: torch.Tensor  # (n, d) unit-norm value projections W_V x
    revision: int = 0  # the namespace row's revision this cache reflects
    # record id -> content words of its text (texts never change; filled as recall meets records)
    content_words: dict[int, int] = field(default_factory=dict)


class MemoryAgent:
    """Long-term memory for an AI application: a Titans neural memory kept in a database.

    Open one with :meth:`open`; use it as a context manager or call :meth:`close`. Every method
    takes ``namespace`` (default "default"); namespaces share nothing: each has its own neural
    state, records, documents and sessions, and names match exactly (no wildcards, no prefixes).
    The object is thread-safe (one lock); see the README for the multi-process model.
    """

    def __init__(self, store: Store, config: AgentConfig, embedder: Embedder) -> None:
        self.store = store
        self.config = config
        self.embedder = embedder
        self.device = resolve_device(config.device)
        self.chunker = Chunker(
            embedder.tokenizer,
            max_tokens=min(config.chunk_tokens, embedder.max_tokens),
            overlap_tokens=config.chunk_overlap_tokens,
        )
        self._lock = threading.RLock()
        self._runtimes: dict[str, _Runtime] = {}
        self._closed = False
        self._check_embedder()

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(
        cls,
        path_or_url: str | Path,
        config: AgentConfig | None = None,
        *,
        embedder: Embedder | None = None,
    ) -> MemoryAgent:
        """Open (or create) a memory database.

        Args:
            path_or_url: a SQLite file path (created with its folders) or a SQLAlchemy URL.
            config: agent configuration; default :class:`AgentConfig()`.
            embedder: an embedder object to use instead of loading ``config.embedder``.

        Raises:
            StoreError: the database cannot be opened or is not a titans-agent database.
            EmbedderMismatchError: the database was made with another embedder (name or dimension).
            EmbedderLoadError: the embedding model cannot be loaded from local files.
        """
        config = config or AgentConfig()
        new_file = None
        if "://" not in str(path_or_url) and not Path(path_or_url).expanduser().exists():
            new_file = Path(path_or_url).expanduser()
        store = Store(path_or_url)
        try:
            if embedder is None:
                embedder = load_embedder(config.embedder, device=str(resolve_device(config.device)))
            return cls(store, config, embedder)
        except BaseException:
            store.close()
            if new_file is not None:  # a failed open leaves no empty database behind
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{new_file}{suffix}").unlink(missing_ok=True)
            raise

    def __enter__(self) -> MemoryAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the database. Every write was already committed; closing twice is harmless."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._runtimes.clear()
                self.store.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("this MemoryAgent is closed")

    def _check_embedder(self) -> None:
        with self.store.session() as s:
            rows = s.execute(select(NamespaceRow.name, NamespaceRow.embedder, NamespaceRow.dim)).all()
        for name, emb, dim in rows:
            if emb != self.embedder.name or dim != self.embedder.dim:
                raise EmbedderMismatchError(
                    f"namespace {name!r} of {self.store.url} was written with embedder {emb!r} (dim {dim}); "
                    f"the configured embedder is {self.embedder.name!r} (dim {self.embedder.dim}). "
                    "Open it with the same embedder, or use another database."
                )

    # ------------------------------------------------------------------ namespaces
    def _runtime(self, namespace: str, create: bool = True) -> _Runtime | None:
        """The namespace's live runtime (memory module, state, dense index), up to date with the
        database: when another process or agent committed to the namespace since it was loaded
        (its revision changed), the state and index are reloaded from one snapshot first.

        Args:
            namespace: the namespace's name (checked).
            create: create the namespace (under its write lock) when it does not exist.

        Returns:
            The runtime, or None when the namespace does not exist and ``create`` is False.
        """
        namespace = check_namespace(namespace)
        rt = self._runtimes.get(namespace)
        if rt is not None:
            with self.store.session() as s:
                revision = s.execute(select(NamespaceRow.revision).where(NamespaceRow.id == rt.ns_id)).scalar()
            if revision is not None:
                if revision != rt.revision:
                    self._reload_index(rt)  # another writer committed: continue from its state
                return rt
            del self._runtimes[namespace]  # the namespace row went away: load it again
        with self.store.snapshot_session() as s:
            row = s.execute(select(NamespaceRow).where(NamespaceRow.name == namespace)).scalar_one_or_none()
            rt = None if row is None else self._load_runtime(s, row)
        if rt is None:
            if not create:
                return None
            self._create_namespace(namespace)
            return self._runtime(namespace, create=False)
        self._runtimes[namespace] = rt
        return rt

    def _load_runtime(self, s: Any, row: NamespaceRow) -> _Runtime:
        """Build a runtime from a namespace row and its records, read in the caller's snapshot."""
        mcfg = MemoryConfig.model_validate(row.memory_config)
        memory = NeuralMemory(mcfg, device=self.device)
        params_from_bytes(memory, row.params)
        memory.requires_grad_(False)  # inference only: the state must not hold a graph
        state = state_from_bytes(row.state, device=self.device)
        rows = s.execute(
            select(Record.id, Record.embedding).where(Record.namespace_id == row.id).order_by(Record.id)
        ).all()
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        emb = self._emb_tensor([r[1] for r in rows])
        return _Runtime(row.id, memory, state, ids, emb, self._values(memory, emb), row.revision)

    def _create_namespace(self, namespace: str) -> None:
        """Insert a namespace row with a fresh memory (M_0, zero momentum, step 0), unless another
        process created it first: the check and the insert run under the name's write lock."""
        mcfg = self.config.memory.model_copy(update={"dim": self.embedder.dim})
        if mcfg.init == "meta-learned":
            from titans_agent.data import meta_learned_metadata

            trained_for = meta_learned_metadata().get("embedder")
            if trained_for != self.embedder.name:
                raise InvalidInputError(
                    f"the meta-learned memory parameters were trained for the embedder {trained_for!r}, "
                    f"not {self.embedder.name!r}: use MemoryConfig(init='random') with this embedder"
                )
        memory = NeuralMemory(mcfg, device=self.device)
        memory.requires_grad_(False)
        params, state = params_to_bytes(memory), state_to_bytes(memory.init_state())
        for attempt in self.store.write_attempts():
            with attempt, self.store.write_session(name=namespace) as s:
                if s.execute(select(NamespaceRow.id).where(NamespaceRow.name == namespace)).scalar() is None:
                    s.add(
                        NamespaceRow(
                            name=namespace,
                            embedder=self.embedder.name,
                            dim=self.embedder.dim,
                            memory_config=mcfg.model_dump(),
                            params=params,
                            state=state,
                            step=0,
                        )
                    )
                    s.commit()

    def _emb_tensor(self, blobs: Sequence[bytes]) -> torch.Tensor:
        d = self.embedder.dim
        if not blobs:
            return torch.zeros(0, d, dtype=torch.float32, device=self.device)
        arr = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), d)
        return torch.from_numpy(arr.copy()).to(self.device)

    @staticmethod
    def _values(memory: NeuralMemory, emb: torch.Tensor) -> torch.Tensor:
        if emb.shape[0] == 0:
            return emb.clone()
        with torch.no_grad():
            return torch.nn.functional.normalize(memory.values(emb).float(), dim=-1)

    def memory_state(self, namespace: str = DEFAULT_NAMESPACE) -> MemoryState | None:
        """The namespace's neural memory state as of the database's latest commit, or None when the
        namespace does not exist (nothing is created).

        The state holds ``weights`` and ``momentum`` (tuples of float32 tensors, one per memory
        layer: ``(d_out, d_in)``), ``pending`` (``(p, d)`` inputs of an unfinished chunk) and
        ``step`` (tokens written). It is a copy: changing it changes nothing stored.

        Raises:
            InvalidInputError: a bad namespace name.
            StoreError: the agent is closed.
        """
        with self._lock:
            self._check_open()
            rt = self._runtime(namespace, create=False)
            return None if rt is None else rt.state.clone()

    def namespaces(self) -> list[str]:
        """Names of the namespaces in the database, sorted."""
        with self._lock:
            self._check_open()
            with self.store.session() as s:
                return sorted(s.execute(select(NamespaceRow.name)).scalars())

    # ------------------------------------------------------------------ the gated write
    def _write(
        self,
        rt: _Runtime,
        units: list[_Unit],
        doc_progress: dict[int, tuple[int, bool]] | None = None,
    ) -> list[WriteResult]:
        """Embed, gate, update the memory and commit ``units`` in one transaction.

        The embedding runs first, outside any database lock. Then one transaction holds the
        namespace's write lock (:meth:`Store.write_session`: SQLite ``BEGIN IMMEDIATE``, PostgreSQL
        ``SELECT ... FOR UPDATE``) from start to commit: it reads the namespace's revision and, when
        another process or agent committed since this runtime was loaded, reloads the memory state
        and record index first; it computes the surprise, the decisions and the memory update from
        that state; it writes records, occurrences, turns, document progress and the new state
        (revision + 1) and commits. A lock conflict rolls back and retries the whole transaction
        (:meth:`Store.write_attempts`), so two writers never lose each other's update. The
        in-memory runtime follows only after the commit.

        Raises:
            StoreError: the embedder returned malformed embeddings, or the namespace stayed locked
                beyond the retry budget (nothing was written).
        """
        emb_np = self.embedder.embed([u.embed_prefix + u.text for u in units])
        if emb_np.shape != (len(units), self.embedder.dim) or not np.isfinite(emb_np).all():
            raise StoreError("the embedder returned embeddings of the wrong shape or non-finite values")
        x = torch.from_numpy(emb_np).to(self.device)
        mem = rt.memory
        hashes = [text_hash(u.text) for u in units]
        thr, dup_sim = self.config.write_threshold, self.config.duplicate_similarity
        for attempt in self.store.write_attempts():
            with attempt, self.store.write_session(rt.ns_id) as s:
                revision = s.execute(select(NamespaceRow.revision).where(NamespaceRow.id == rt.ns_id)).scalar_one()
                if revision != rt.revision:  # another writer committed: continue from its state
                    self._reload_index(rt, s)
                with torch.no_grad():
                    xm = x.to(mem.dtype)
                    surprise = mem.surprise(rt.state, xm).float().cpu().numpy()
                    res = mem.update(rt.state, xm)
                if res.rejected_chunks:
                    log.warning(
                        "rejected %d memory update chunk(s) that would have made the state non-finite; "
                        "the last good state is kept",
                        res.rejected_chunks,
                    )
                new_state = res.state
                now = utcnow()
                results: list[WriteResult] = []
                new_rows: list[tuple[int, Record]] = []
                existing = dict(
                    s.execute(
                        select(Record.text_hash, func.min(Record.id))
                        .where(Record.namespace_id == rt.ns_id, Record.text_hash.in_(set(hashes)))
                        .group_by(Record.text_hash)
                    ).all()
                )
                sims = (x @ rt.emb.T).cpu().numpy() if rt.emb.shape[0] else None
                batch_first: dict[str, Record] = {}
                for i, (u, h) in enumerate(zip(units, hashes)):
                    sur = float(surprise[i]) if np.isfinite(surprise[i]) else None
                    target: int | Record | None = existing.get(h) or batch_first.get(h)
                    decision = "repeat" if target is not None else None
                    if target is None and sur is not None and sur < thr and sims is not None:
                        j = int(np.argmax(sims[i]))
                        if sims[i, j] >= dup_sim:
                            cand = s.get(Record, int(rt.ids[j]))
                            if cand is not None and word_set(cand.text) == word_set(u.text):
                                target, decision = cand.id, "merged"
                    if target is not None:
                        rec = target if isinstance(target, Record) else s.get(Record, target)
                        if rec is None:
                            raise StoreError(f"record {target} vanished during a write")
                        rec.hits += 1
                        rec.last_seen_at = now
                        if u.context and u.context not in rec.context and len(rec.context) < _MAX_CONTEXT_CHARS:
                            rec.context = f"{rec.context} | {u.context}" if rec.context else u.context
                        results.append(WriteResult(record_id=-1, decision=decision, surprise=sur or 0.0))
                        new_rows.append((i, rec))
                        continue
                    rec = Record(
                        namespace_id=rt.ns_id,
                        text=u.text,
                        context=u.context,
                        text_hash=h,
                        embedding=emb_np[i].tobytes(),
                        surprise=sur,
                        decision="known" if sur is not None and sur < thr else "new",
                        hits=1,
                        created_at=now,
                        last_seen_at=now,
                    )
                    s.add(rec)
                    batch_first[h] = rec
                    results.append(WriteResult(record_id=-1, decision=rec.decision, surprise=sur or 0.0))
                    new_rows.append((i, rec))
                s.flush()
                occurrences = []
                for i, u in enumerate(units):
                    rec = new_rows[i][1]
                    results[i] = results[i].model_copy(update={"record_id": rec.id})
                    occ = Occurrence(
                        record_id=rec.id,
                        namespace_id=rt.ns_id,
                        document_id=u.document_id,
                        kind=u.kind,
                        source=u.source,
                        chunk_index=u.chunk_index,
                        start_line=u.start_line,
                        end_line=u.end_line,
                        meta=u.meta,
                        session_id=u.session_id,
                        role=u.role,
                        timestamp=u.timestamp,
                        created_at=now,
                    )
                    occurrences.append(occ)
                s.add_all(occurrences)
                s.flush()
                if self.config.retrieval.detect_updates:  # knowledge updates (titans_agent.updates)
                    rc = self.config.retrieval
                    created = [(rec, units[i], emb_np[i]) for i, (_, rec) in enumerate(new_rows) if results[i].stored]
                    link_updates(s, rt.ns_id, rt.ids, rt.emb, created, rc.update_similarity, rc.update_kinds)
                for i, u in enumerate(units):
                    if u.turn_of is not None:
                        sess = s.get(SessionRow, u.turn_of[0])
                        if sess is None:
                            raise StoreError(f"session {u.session_id!r} vanished while writing its turn")
                        sess.n_turns += 1
                        sess.updated_at = now
                        s.add(
                            Turn(
                                session_pk=sess.id,
                                seq=sess.n_turns,
                                role=u.role or "",
                                content=u.turn_of[1],
                                timestamp=u.timestamp or now,
                                occurrence_id=occurrences[i].id,
                            )
                        )
                        results[i] = results[i].model_copy(update={"turn_seq": sess.n_turns})
                for doc_id, (done, complete) in (doc_progress or {}).items():
                    s.execute(
                        update(Document)
                        .where(Document.id == doc_id)
                        .values(chunks_done=done, complete=complete, updated_at=now)
                    )
                s.execute(
                    update(NamespaceRow)
                    .where(NamespaceRow.id == rt.ns_id)
                    .values(state=state_to_bytes(new_state), step=new_state.step, revision=revision + 1, updated_at=now)
                )
                s.commit()
        # Only after the commit: the in-memory state follows what is persisted.
        rt.state = new_state
        rt.revision = revision + 1
        fresh = [(rec.id, i) for i, (_, rec) in enumerate(new_rows) if results[i].stored]
        if fresh:
            rt.ids = np.concatenate([rt.ids, np.array([r for r, _ in fresh], dtype=np.int64)])
            add = x[[i for _, i in fresh]].float()
            rt.emb = torch.cat([rt.emb, add])
            rt.values = torch.cat([rt.values, self._values(rt.memory, add)])
        return results

    # ------------------------------------------------------------------ public writes
    def remember(
        self,
        text: str,
        metadata: dict[str, Any] | None = None,
        *,
        source: str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> WriteResult:
        """Write one note through the surprise gate.

        Args:
            text: the note. Longer than the embedder's window, it is chunked like a document
                and the result of its first chunk is returned (every chunk is written).
            metadata: JSON-serialisable dict kept with the note.
            source: optional name of where the note comes from (e.g. "crm", or a key an adapter
                addresses notes by); ``recall(source=...)``, :meth:`records` and ``forget(source=...)``
                find it by that name.
            namespace: where to write.

        Returns:
            The decision, surprise and record id.

        Raises:
            EmptyInputError: the text is empty or whitespace (nothing is written, the memory is untouched).
            InvalidInputError: bad metadata, source or namespace.
            StoreError: the database stayed locked by other writers past the retry budget (nothing stored).
        """
        text = check_text(text, "text")
        meta = check_metadata(metadata)
        if source is not None:
            source = check_name(source, "source")
        with self._lock:
            self._check_open()
            rt = self._runtime(namespace)
            assert rt is not None
            pieces = self._pieces(text)
            units = [_Unit(text=p, kind="note", meta=meta, source=source) for p in pieces]
            return self._write(rt, units)[0]

    def update_metadata(
        self, metadata: dict[str, Any], *, source: str, namespace: str = DEFAULT_NAMESPACE, merge: bool = True
    ) -> int:
        """Change the metadata of every occurrence of ``source`` without writing the text again (the
        memory is not touched). Returns how many occurrences changed (0 for an unknown source).

        Args:
            metadata: JSON-serialisable dict.
            source: the source name (exact match).
            namespace: where to look.
            merge: update the existing metadata with ``metadata`` (True) or replace it (False).

        Raises:
            InvalidInputError: bad metadata, source or namespace.
        """
        meta = check_metadata(metadata)
        source = check_name(source, "source")
        with self._lock:
            self._check_open()
            rt = self._runtime(namespace, create=False)
            if rt is None:
                return 0
            with self.store.session() as s:
                occs = (
                    s.execute(
                        select(Occurrence).where(Occurrence.namespace_id == rt.ns_id, Occurrence.source == source)
                    )
                    .scalars()
                    .all()
                )
                for o in occs:
                    o.meta = {**(o.meta or {}), **meta} if merge else dict(meta)
                s.commit()
            return len(occs)

    def records(
        self,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        source: str | None = None,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Hit]:
        """List what is stored, without a query: one :class:`Hit` per occurrence (score 0.0), in
        the order written.

        Args:
            namespace: where to look.
            source: only occurrences of this source (exact match).
            kinds: only these kinds ("chunk", "note", "turn").
            limit: at most this many (None: all).
            offset: skip this many first.

        Raises:
            InvalidInputError: unknown kinds, a negative limit or offset, or a bad namespace.
        """
        kinds = check_kinds(kinds)
        if source is not None:
            source = check_name(source, "source")
        if (
            (limit is not None and (not isinstance(limit, int) or limit < 0))
            or not isinstance(offset, int)
            or offset < 0
        ):
            raise InvalidInputError("limit and offset must be non-negative integers")
        with self._lock:
            self._check_open()
            rt = self._runtime(namespace, create=False)
            if rt is None:
                return []
            stmt = (
                select(Occurrence, Record)
                .join(Record, Record.id == Occurrence.record_id)
                .where(Occurrence.namespace_id == rt.ns_id)
                .order_by(Occurrence.id)
                .offset(offset)
            )
            if source is not None:
                stmt = stmt.where(Occurrence.source == source)
            if kinds is not None:
                stmt = stmt.where(Occurrence.kind.in_(list(kinds)))
            if limit is not None:
                stmt = stmt.limit(limit)
            with self.store.session() as s:
                rows = s.execute(stmt).all()
            return [build_hits([(0.0, r.id)], {r.id: {}}, {r.id: r}, {r.id: [o]}, None, None, None)[0] for o, r in rows]

    def _pieces(self, text: str) -> list[str]:
        if self.chunker.count_tokens(text) <= self.chunker.max_tokens:
            return [text.strip()]
        return [c.text for c in self.chunker.split(text)]

    def add_turn(
        self,
        session_id: str,
        role: str,
        content: str,
        timestamp: dt.datetime | str | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        metadata: dict[str, Any] | None = None,
    ) -> WriteResult:
        """Append a conversation turn to a session and write it through the surprise gate.

        The turn is always appended to the session's transcript (with the next sequence number);
        its memory record may be an existing one when the same text was seen before. A turn longer
        than the embedder's window is written as several chunks; the result is its first chunk's.

        Args:
            session_id: the conversation; any non-blank string, matched exactly.
            role: who spoke ("user", "assistant", a speaker's name), at most 64 characters.
            content: what was said.
            timestamp: when (datetime, naive = UTC, or ISO 8601 string); default now.
            namespace: where to write.
            metadata: JSON-serialisable dict kept with the record.

        Raises:
            EmptyInputError: content is empty or whitespace (nothing is written).
            InvalidInputError: bad session id, role, timestamp, metadata or namespace.
        """
        return self.add_turns([(session_id, role, content, timestamp, metadata)], namespace=namespace)[0]

    def add_turns(
        self,
        turns: Iterable[tuple[Any, ...] | dict[str, Any]],
        *,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> list[WriteResult]:
        """Append many turns at once: embedded and committed in batches of ``batch_size`` (one
        transaction each), which is much faster than one :meth:`add_turn` per turn.

        Args:
            turns: tuples ``(session_id, role, content[, timestamp[, metadata]])`` or dicts with
                those keys, in conversation order.
            namespace: where to write.

        Returns:
            One :class:`WriteResult` per turn, in order.

        Raises:
            EmptyInputError, InvalidInputError: a turn is invalid; the error names its position
                and nothing is written.
        """
        if isinstance(turns, (str, bytes, dict)) or not isinstance(turns, Iterable):
            raise InvalidInputError(f"turns must be a list of tuples or dicts, got {type(turns).__name__}")
        checked = []
        for i, item in enumerate(turns):
            try:
                if not isinstance(item, (dict, tuple, list)):
                    raise InvalidInputError(
                        f"expected a tuple (session_id, role, content[, timestamp[, metadata]]) or a dict, "
                        f"got {type(item).__name__}"
                    )
                if isinstance(item, dict):
                    unknown = set(item) - {"session_id", "role", "content", "timestamp", "metadata"}
                    if unknown:
                        raise InvalidInputError(f"unknown keys {sorted(unknown)}")
                    fields = (
                        item.get("session_id"),
                        item.get("role"),
                        item.get("content"),
                        item.get("timestamp"),
                        item.get("metadata"),
                    )
                else:
                    if not 3 <= len(item) <= 5:
                        raise InvalidInputError("expected (session_id, role, content[, timestamp[, metadata]])")
                    fields = (*item, None, None)[:5]
                session_id, role, content, timestamp, metadata = fields
                content = check_text(content, "content")
                session_id = check_name(session_id, "session_id")
                role = check_name(role, "role", max_chars=MAX_ROLE_CHARS)
                checked.append((session_id, role, content, as_utc(timestamp), check_metadata(metadata)))
            except InvalidInputError as exc:
                raise type(exc)(f"turn {i}: {exc}") from None
        results: list[WriteResult] = []
        with self._lock:
            self._check_open()
            rt = self._runtime(namespace)
            assert rt is not None
            sessions = self._session_ids(rt, {c[0] for c in checked})
            units: list[_Unit] = []
            firsts: list[int] = []  # index in ``units`` of each turn's first piece
            for session_id, role, content, ts, meta in checked:
                pieces = self._pieces(content)
                firsts.append(len(units))
                for j, piece in enumerate(pieces):
                    units.append(
                        _Unit(
                            text=content.strip() if len(pieces) == 1 else piece,
                            kind="turn",
                            context=f"{role} {ts.strftime('%d %B %Y')}",
                            source=f"session:{session_id}",
                            meta=meta,
                            session_id=session_id,
                            role=role,
                            timestamp=ts,
                            turn_of=(sessions[session_id], content) if j == 0 else None,
                            embed_prefix=f"{role[:40]}: ",
                        )
                    )
            out: list[WriteResult] = []
            size = self.config.batch_size
            for start in range(0, len(units), size):
                out.extend(self._write(rt, units[start : start + size]))
            results = [out[i] for i in firsts]
        return results

    def _session_ids(self, rt: _Runtime, names: set[str]) -> dict[str, int]:
        """Primary keys of the namespace's sessions ``names``, creating the missing ones."""
        for attempt in self.store.write_attempts():
            with attempt, self.store.write_session(rt.ns_id) as s:
                found = dict(
                    s.execute(
                        select(SessionRow.session_id, SessionRow.id).where(
                            SessionRow.namespace_id == rt.ns_id, SessionRow.session_id.in_(names)
                        )
                    ).all()
                )
                missing = [n for n in sorted(names) if n not in found]
                if missing:
                    rows = [SessionRow(namespace_id=rt.ns_id, session_id=n) for n in missing]
                    s.add_all(rows)
                    s.commit()
                    found.update({r.session_id: r.id for r in rows})
        return found

    def turns(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> list[dict[str, Any]]:
        """The transcript of a session in sequence order: dicts with seq, role, content, timestamp,
        record_id. Empty for an unknown session.

        Raises:
            InvalidInputError: a session id that is not a non-blank string, or a bad namespace.
        """
        session_id = check_name(session_id, "session_id")
        with self._lock:
            self._check_open()
            rt = self._runtime(namespace, create=False)
            if rt is None:
                return []
            with self.store.session() as s:
                rows = s.execute(
                    select(Turn, Occurrence.record_id)
                    .join(SessionRow, Turn.session_pk == SessionRow.id)
                    .outerjoin(Occurrence, Turn.occurrence_id == Occurrence.id)
                    .where(SessionRow.namespace_id == rt.ns_id, SessionRow.session_id == session_id)
                    .order_by(Turn.seq)
                ).all()
                return [
                    {"seq": t.seq, "role": t.role, "content": t.content, "timestamp": t.timestamp, "record_id": rid}
                    for t, rid in rows
                ]

    def ingest(
        self,
        target: str | Path | Iterable[str | Path],
        *,
        source: str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        metadata: dict[str, Any] | None = None,
        progress: Callable[[IngestProgress], None] | None = None,
    ) -> IngestReport:
        """Ingest files, folders (recursively) or a raw text.

        With ``source`` given, ``target`` is the text itself and ``source`` names it. Otherwise
        ``target`` is a path or a list of paths. Each document is split into token-aware chunks
        (code at language structure, prose at paragraphs and sentences), each at most the
        embedder's window, each keeping its line range; chunks are written through the surprise
        gate in batches, one transaction per batch. A document that was completely ingested with the
        same content is skipped ("unchanged"); one interrupted mid-way resumes after its last
        committed chunk; one whose content changed replaces its old records.

        Args:
            target: path(s), or the text when ``source`` is given.
            source: name of a raw text (e.g. "notes/meeting-2024-05-01").
            namespace: where to write.
            include: glob patterns a file must match (relative path or name), e.g. ["*.py"].
            exclude: glob patterns of files to leave out.
            metadata: JSON-serialisable dict kept with every chunk.
            progress: called after every file and batch with an :class:`IngestProgress`.

        Returns:
            An :class:`IngestReport`; unreadable, binary, empty, too large files and symlink loops
            are listed in ``skipped`` with a reason, never raised.

        Raises:
            EmptyInputError: ``source`` was given and the text is blank.
            InvalidInputError: bad namespace, metadata, or a non-text target.
        """
        t0 = time.perf_counter()
        meta = check_metadata(metadata)
        include = check_patterns(include, "include")
        exclude = check_patterns(exclude, "exclude")
        if source is not None:
            source = check_name(source, "source")
        elif not isinstance(target, (str, Path)) and (isinstance(target, bytes) or not isinstance(target, Iterable)):
            raise InvalidInputError(
                f"target must be a path, a list of paths, or a text with source=; got {type(target).__name__}"
            )
        report = IngestReport()
        with self._lock:
            self._check_open()
            rt = self._runtime(namespace)
            assert rt is not None
            if source is not None:
                text = check_text(target, "text")
                data = text.encode("utf-8", "surrogatepass")
                items: Iterable[SourceFile | SkippedFile] = [
                    SourceFile(
                        path=Path(source),
                        display=source,
                        text=text.replace("\r\n", "\n"),
                        encoding="utf-8",
                        n_bytes=len(data),
                        sha256=hashlib.sha256(data).hexdigest(),
                        warnings=(),
                    )
                ]
                named = True
            else:
                if isinstance(target, (str, Path)) and not os.path.lexists(target):
                    raise InvalidInputError(
                        f"no such file or folder: {str(target)[:200]!r}; to ingest a text, pass source=<name>"
                    )
                paths = [target] if isinstance(target, (str, Path)) else list(target)
                if not paths or not all(isinstance(p, (str, Path)) for p in paths):
                    raise InvalidInputError("target must be a path, a list of paths, or a text with source=")
                items = discover(paths, include=include, exclude=exclude, max_file_bytes=self.config.max_file_bytes)
                named = False
            prog = IngestProgress()
            pending: list[_Unit] = []
            progress_of: dict[int, tuple[int, bool]] = {}

            def flush() -> None:
                if not pending:
                    return
                for r in self._write(rt, pending, dict(progress_of)):
                    if r.decision in ("new", "known"):
                        report.stored += 1
                        report.known += r.decision == "known"
                    elif r.decision == "merged":
                        report.merged += 1
                    else:
                        report.repeats += 1
                prog.stored = report.stored
                pending.clear()
                progress_of.clear()

            for item in items:
                if isinstance(item, SkippedFile):
                    report.skipped.append(SkippedSource(path=item.path, reason=item.reason))
                    continue
                prog.current = item.display
                src = item.display if named else str(item.path)
                report.warnings.extend(f"{item.display}: {w}" for w in item.warnings)
                chunks = self.chunker.split(item.text, path=None if named else item.path)
                if not chunks:
                    report.skipped.append(SkippedSource(path=item.display, reason="whitespace only"))
                    continue
                doc_id, start = self._open_document(rt, src, item.sha256, len(chunks))
                if doc_id is None:
                    report.unchanged += 1
                    prog.files += 1
                    if progress:
                        progress(prog)
                    continue
                report.files += 1
                context = re.sub(r"[/\\._-]+", " ", item.display)
                for c in chunks[start:]:
                    pending.append(
                        _Unit(
                            text=c.text,
                            kind="chunk",
                            context=context,
                            source=src,
                            document_id=doc_id,
                            chunk_index=c.index,
                            start_line=c.start_line,
                            end_line=c.end_line,
                            meta={**meta, **c.location, "path": item.display} if not named else {**meta, **c.location},
                        )
                    )
                    progress_of[doc_id] = (c.index + 1, c.index + 1 == len(chunks))
                    report.chunks += 1
                    if len(pending) >= self.config.batch_size:  # batches span files
                        flush()
                        prog.chunks = report.chunks
                        if progress:
                            progress(prog)
                prog.files += 1
                if progress:
                    progress(prog)
            flush()
            prog.chunks = report.chunks
            if progress:
                progress(prog)
        report.seconds = time.perf_counter() - t0
        return report

    def _open_document(self, rt: _Runtime, source: str, sha: str, n_chunks: int) -> tuple[int | None, int]:
        """Find or create the document row; return (id, first chunk to write) or (None, 0) when the
        same content is already completely ingested."""
        for attempt in self.store.write_attempts():
            with attempt, self.store.write_session(rt.ns_id) as s:
                doc = s.execute(
                    select(Document).where(Document.namespace_id == rt.ns_id, Document.source == source)
                ).scalar_one_or_none()
                if doc is not None and doc.sha256 == sha and doc.n_chunks == n_chunks:
                    if doc.complete:
                        return None, 0
                    return doc.id, doc.chunks_done
                if doc is not None:  # content changed: its old records go, the new ones replace them
                    s.execute(delete(Occurrence).where(Occurrence.document_id == doc.id))
                    self._delete_orphans(s, rt)
                    self._bump_revision(s, rt)
                    doc.sha256, doc.n_chunks, doc.chunks_done, doc.complete = sha, n_chunks, 0, False
                    doc.updated_at = utcnow()
                    s.commit()
                    self._reload_index(rt)
                    return doc.id, 0
                doc = Document(namespace_id=rt.ns_id, source=source, sha256=sha, n_chunks=n_chunks)
                s.add(doc)
                s.commit()
                return doc.id, 0

    def _reload_index(self, rt: _Runtime, s: Any = None) -> None:
        """Bring a runtime up to date with the database: memory state, revision and dense index.

        Everything is read in one snapshot (the caller's session ``s``, e.g. a locked write
        session, else a new :meth:`Store.snapshot_session`), so the state always matches the
        records. Records are only inserted under the namespace's write lock, in id order; when no
        record the runtime holds was deleted or replaced, only the newer ones are read (O(new)),
        otherwise the whole index is reloaded.
        """
        if s is None:
            with self.store.snapshot_session() as snap:
                self._reload_index(rt, snap)
            return
        state_blob, revision = s.execute(
            select(NamespaceRow.state, NamespaceRow.revision).where(NamespaceRow.id == rt.ns_id)
        ).one()
        last = int(rt.ids[-1]) if rt.ids.shape[0] else 0
        n_old = s.execute(
            select(func.count()).select_from(Record).where(Record.namespace_id == rt.ns_id, Record.id <= last)
        ).scalar_one()
        unchanged = n_old == rt.ids.shape[0]
        if unchanged and last:  # an id reused after a delete would hold other content
            blob = s.execute(select(Record.embedding).where(Record.id == last)).scalar()
            unchanged = blob is not None and np.array_equal(
                np.frombuffer(blob, dtype=np.float32), rt.emb[-1].cpu().numpy()
            )
        newer = s.execute(
            select(Record.id, Record.embedding)
            .where(Record.namespace_id == rt.ns_id, Record.id > (last if unchanged else 0))
            .order_by(Record.id)
        ).all()
        ids = np.array([r[0] for r in newer], dtype=np.int64)
        emb = self._emb_tensor([r[1] for r in newer])
        values = self._values(rt.memory, emb)
        if unchanged:
            ids, emb, values = np.concatenate([rt.ids, ids]), torch.cat([rt.emb, emb]), torch.cat([rt.values, values])
        else:  # records were deleted (their ids may come back with other texts)
            rt.content_words.clear()
        rt.state = state_from_bytes(state_blob, device=self.device)
        rt.ids, rt.emb, rt.values, rt.revision = ids, emb, values, revision

    # ------------------------------------------------------------------ recall
    def recall(
        self,
        query: str,
        k: int = 5,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        kinds: Sequence[str] | None = None,
        source: str | None = None,
        session_id: str | None = None,
        as_of: dt.datetime | str | None = None,
        since: dt.datetime | str | None = None,
        until: dt.datetime | str | None = None,
        include_superseded: bool = True,
    ) -> list[Hit]:
        """The ``k`` records that best answer ``query``, best first.

        Ranking fuses BM25 over FTS5 (the text, plus each turn's speaker and date), dense cosine
        similarity and the memory read-out M*(q) (eq. 15) with weighted reciprocal-rank fusion, then
        adds locality (a turn scores part of its best adjacent turn's score; chunks too when
        ``neighbour_kinds`` lists them) and demotes superseded records (:class:`RetrievalConfig`).
        Ties break by record id, so the same database gives the same ranking.

        Time: a record's time is that of its occurrences (a turn's timestamp; otherwise when it was
        written). ``since``/``until`` keep records with an occurrence in that range (inclusive);
        ``as_of`` keeps what was known then (an occurrence at or before it) and applies only the
        supersessions known then, so a record superseded later is current again.

        Args:
            query: what to look for.
            k: how many hits at most (>= 1).
            namespace: where to look; only this namespace's records can be returned.
            kinds: only these record kinds ("chunk", "note", "turn").
            source: only records of this source (exact match).
            session_id: only turns of this session.
            as_of: recall as of this time (datetime, naive = UTC, or ISO 8601).
            since, until: only records with an occurrence in this time range.
            include_superseded: keep superseded records (demoted by ``superseded_weight``; their
                hits name the successors in ``superseded_by``); False drops them.

        Raises:
            EmptyInputError: the query is empty or whitespace.
            InvalidInputError: k < 1, unknown kinds, a bad time, or a bad namespace.
        """
        query = check_text(query, "query")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidInputError(f"k must be a positive integer, got {k!r}")
        kinds = check_kinds(kinds)
        if source is not None:
            source = check_name(source, "source")
        if session_id is not None:
            session_id = check_name(session_id, "session_id")
        times = {n: None if v is None else as_utc(v) for n, v in (("as_of", as_of), ("since", since), ("until", until))}
        until_t = min((t for t in (times["as_of"], times["until"]) if t is not None), default=None)
        with self._lock:
            self._check_open()
            rt = self._runtime(namespace, create=False)
            if rt is None or rt.ids.shape[0] == 0:
                return []
            rcfg = self.config.retrieval
            q = torch.from_numpy(self.embedder.embed([query])).to(self.device)
            allowed, ok_occ = self._allowed_ids(rt, kinds, source, session_id, times["since"], until_t)
            mask = (
                None
                if allowed is None
                else torch.from_numpy(np.isin(rt.ids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))).to(
                    self.device
                )
            )
            n_cand = max(rcfg.candidates, k)
            ranks: Ranks = {}
            weights = {
                "lexical": rcfg.lexical_weight if rcfg.use_lexical else 0.0,
                "dense": rcfg.dense_weight if rcfg.use_dense else 0.0,
                "neural": rcfg.neural_weight if rcfg.use_neural else 0.0,
            }
            if weights["lexical"] > 0:
                with self.store.session() as s:
                    lex = self.store.lexical_search(s, rt.ns_id, query, n_cand * 4 if allowed is not None else n_cand)
                rank_ids(ranks, "lexical", (rid for rid, _ in lex), allowed, n_cand)
            with torch.no_grad():
                if weights["dense"] > 0:
                    rank_by_similarity(ranks, "dense", rt.ids, rt.emb @ q[0], mask, n_cand)
                if weights["neural"] > 0:
                    y = rt.memory.read(rt.state, q.to(rt.memory.dtype)).float()
                    y = torch.nn.functional.normalize(y, dim=-1)[0]
                    rank_by_similarity(ranks, "neural", rt.ids, rt.values @ y, mask, n_cand)
            scores = fuse_scores(ranks, weights, rcfg.rrf_k)
            with self.store.session() as s:
                adjacent = (
                    neighbour_map(s, rt.ns_id, scores, rcfg.neighbour_kinds)
                    if rcfg.neighbour_weight > 0 and scores
                    else {}
                )
                links = links_for(s, set(scores) | set(adjacent), times["as_of"])
                # demoted before the expansion, so a superseded statement lifts its neighbours less
                scores = demote_superseded(scores, links, rcfg.superseded_weight, not include_superseded, allowed)
                demote_others = rcfg.other_person_weight < 1.0 and about_oneself(query)
                want_shares = bool(adjacent) and rcfg.neighbour_min_words > 0
                pool = set(scores) | {n for r in scores for n in adjacent.get(r, ())} if want_shares else set()
                # one text query at most: the records the demotion reads, and those whose content
                # words are not cached yet (a record's text never changes)
                need = (set(scores) if demote_others else set()) | (pool - rt.content_words.keys())
                texts: dict[int, str] = {}
                if need:
                    texts = dict(s.execute(select(Record.id, Record.text).where(Record.id.in_(list(need)))).all())
                rt.content_words.update((rid, content_words(t)) for rid, t in texts.items())
                if demote_others:
                    scores = demote_other_people(scores, texts, rcfg.other_person_weight)
                share = None
                if want_shares:
                    counts = {rid: rt.content_words[rid] for rid in pool if rid in rt.content_words}
                    share = neighbour_shares(counts, rcfg.neighbour_min_words)
                scores = expand_neighbours(scores, adjacent, rcfg.neighbour_weight, allowed, share)
                if not include_superseded:
                    scores = {rid: v for rid, v in scores.items() if rid not in links.superseded_by}
                fused = top_k(scores, k)
                if not fused:
                    return []
                ids = [rid for _, rid in fused]
                records = {r.id: r for r in s.execute(select(Record).where(Record.id.in_(ids))).scalars()}
                places: dict[int, list[Occurrence]] = {}
                occ_stmt = select(Occurrence).where(Occurrence.record_id.in_(ids)).order_by(Occurrence.id)
                for o in s.execute(occ_stmt).scalars():
                    places.setdefault(o.record_id, []).append(o)
            return build_hits(fused, ranks, records, places, kinds, source, session_id, links, ok_occ)

    def _allowed_ids(
        self,
        rt: _Runtime,
        kinds: Sequence[str] | None,
        source: str | None,
        session_id: str | None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
    ) -> tuple[set[int] | None, set[int] | None]:
        """Records (and occurrences) that pass recall's filters; ``(None, None)`` without filters.
        An occurrence's time is its timestamp (turns), else when it was written."""
        if kinds is None and source is None and session_id is None and since is None and until is None:
            return None, None
        stmt = select(Occurrence.record_id, Occurrence.id).where(Occurrence.namespace_id == rt.ns_id)
        if kinds is not None:
            stmt = stmt.where(Occurrence.kind.in_(list(kinds)))
        if source is not None:
            stmt = stmt.where(Occurrence.source == source)
        if session_id is not None:
            stmt = stmt.where(Occurrence.session_id == session_id)
        when = func.coalesce(Occurrence.timestamp, Occurrence.created_at)
        if since is not None:
            stmt = stmt.where(when >= since)
        if until is not None:
            stmt = stmt.where(when <= until)
        with self.store.session() as s:
            rows = s.execute(stmt).all()
        return {r for r, _ in rows}, {o for _, o in rows}

    # ------------------------------------------------------------------ housekeeping
    def forget(
        self, *, source: str | None = None, record_id: int | None = None, namespace: str = DEFAULT_NAMESPACE
    ) -> int:
        """Forget everything written from a source, or one record; returns how many units went.

        ``source`` removes every occurrence of that file, named text or session ("session:<id>"):
        chunks, notes and turns (their transcript lines too). A record that another source also
        holds stays for that source. ``record_id`` removes the record wherever it occurs, with its
        transcript lines. Forgotten text is never recalled again. The neural weights keep what the
        memory learned from it (a trained network cannot unlearn exactly); recall only ranks stored
        records.

        Returns:
            The number of occurrences removed (chunks, notes or turns).

        Raises:
            InvalidInputError: neither or both of ``source`` and ``record_id`` given.
            RecordNotFoundError: no record with that id in the namespace.
        """
        if (source is None) == (record_id is None):
            raise InvalidInputError("give exactly one of source= or record_id=")
        if source is not None:
            source = check_name(source, "source")
        else:
            record_id = check_record_id(record_id)
        with self._lock:
            self._check_open()
            rt = self._runtime(namespace, create=False)
            if rt is None:
                if record_id is not None:
                    raise RecordNotFoundError(f"no record {record_id} in namespace {namespace!r}")
                return 0
            for attempt in self.store.write_attempts():
                with attempt, self.store.write_session(rt.ns_id) as s:
                    if record_id is not None:
                        rec = s.get(Record, record_id)
                        if rec is None or rec.namespace_id != rt.ns_id:
                            raise RecordNotFoundError(f"no record {record_id} in namespace {namespace!r}")
                        where: tuple[Any, ...] = (Occurrence.record_id == record_id,)
                    else:
                        where = (Occurrence.namespace_id == rt.ns_id, Occurrence.source == source)
                    n = s.execute(select(func.count()).select_from(Occurrence).where(*where)).scalar_one()
                    s.execute(delete(Occurrence).where(*where))  # turns go with their occurrence
                    if source is not None:
                        s.execute(delete(Document).where(Document.namespace_id == rt.ns_id, Document.source == source))
                    self._delete_orphans(s, rt)
                    self._bump_revision(s, rt)
                    s.commit()
            self._reload_index(rt)
            return n

    @staticmethod
    def _bump_revision(s: Any, rt: _Runtime) -> None:
        """Mark the namespace changed (in the caller's transaction) so other processes reload it."""
        s.execute(update(NamespaceRow).where(NamespaceRow.id == rt.ns_id).values(revision=NamespaceRow.revision + 1))

    @staticmethod
    def _delete_orphans(s: Any, rt: _Runtime) -> None:
        """Delete the namespace's records that no longer occur anywhere (in the caller's transaction)."""
        has_place = select(Occurrence.id).where(Occurrence.record_id == Record.id).exists()
        s.execute(delete(Record).where(Record.namespace_id == rt.ns_id, ~has_place))

    def stats(self, namespace: str = DEFAULT_NAMESPACE) -> NamespaceStats:
        """Counts and memory state of a namespace (zeros for one never written)."""
        with self._lock:
            self._check_open()
            rt = self._runtime(namespace, create=False)
            cfg = self.config.memory.model_copy(update={"dim": self.embedder.dim})
            if rt is None:
                return NamespaceStats(
                    namespace=namespace,
                    records=0,
                    chunks=0,
                    notes=0,
                    turns=0,
                    documents=0,
                    sessions=0,
                    memory_step=0,
                    mean_surprise=None,
                    embedder=self.embedder.name,
                    dim=self.embedder.dim,
                    memory=cfg.model_dump(),
                )
            with self.store.session() as s:
                by_kind = dict(
                    s.execute(
                        select(Occurrence.kind, func.count())
                        .where(Occurrence.namespace_id == rt.ns_id)
                        .group_by(Occurrence.kind)
                    ).all()
                )
                n_records = s.execute(
                    select(func.count()).select_from(Record).where(Record.namespace_id == rt.ns_id)
                ).scalar_one()
                mean_s = s.execute(select(func.avg(Record.surprise)).where(Record.namespace_id == rt.ns_id)).scalar()
                docs = (
                    s.execute(
                        select(func.count())
                        .select_from(Document)
                        .where(Document.namespace_id == rt.ns_id, Document.complete.is_(True))
                    ).scalar()
                    or 0
                )
                sessions = (
                    s.execute(
                        select(func.count()).select_from(SessionRow).where(SessionRow.namespace_id == rt.ns_id)
                    ).scalar()
                    or 0
                )
            return NamespaceStats(
                namespace=namespace,
                records=n_records,
                chunks=by_kind.get("chunk", 0),
                notes=by_kind.get("note", 0),
                turns=by_kind.get("turn", 0),
                documents=docs,
                sessions=sessions,
                memory_step=rt.state.step,
                mean_surprise=None if mean_s is None else float(mean_s),
                embedder=self.embedder.name,
                dim=self.embedder.dim,
                memory=rt.memory.config.model_dump(),
            )
