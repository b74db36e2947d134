"""MemoryAgent: the public object. Ingest, remember, converse, recall, forget.

The facade: it opens and closes the database, checks every argument and hands the work to a
pipeline: :mod:`titans_agent.ingest.pipeline` (files -> chunks -> writes), :mod:`titans_agent.write`
(the surprise-gated write, Behrouz et al. 2024 eq. 12-14: nothing new is ever dropped),
:mod:`titans_agent.recall` (one snapshot read, pure ranking), :mod:`titans_agent.erase`. Each
namespace's live memory is kept by :class:`titans_agent.runtime.Runtimes`; the SQL lives in
:mod:`titans_agent.store.repository`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from titans_agent.config import DEFAULT_NAMESPACE, AgentConfig, MemoryConfig
from titans_agent.context import PipelineContext
from titans_agent.embeddings import Embedder, load_embedder
from titans_agent.errors import InvalidInputError, RecordNotFoundError, StoreError
from titans_agent.ingest.sources import stored_source
from titans_agent.locking import AgentLocks
from titans_agent.store import Store, repository
from titans_agent.types import Hit, IngestReport, NamespaceStats, WriteResult
from titans_agent.validation import (
    CheckedTurn,
    SkippedTurn,
    check_embedder_rows,
    check_kinds,
    check_metadata,
    check_name,
    check_namespace,
    check_page,
    check_record_id,
    check_source_name,
    check_text,
    check_turn_batch,
    check_turns,
    require_namespace,
)

if TYPE_CHECKING:  # the memory, its pipelines and the runtimes import torch: each is imported where used
    import torch

    from titans_agent.core.memory import MemoryState
    from titans_agent.ingest.chunking import Chunker
    from titans_agent.ingest.pipeline import IngestProgress
    from titans_agent.runtime import Runtime, Runtimes
    from titans_agent.user import UserMemory

__all__ = ["DEFAULT_NAMESPACE", "MemoryAgent"]


class MemoryAgent:
    """Long-term memory for an AI application: a Titans neural memory kept in a database.

    Open one with :meth:`open`; use it as a context manager or call :meth:`close`. Every method
    takes ``namespace`` (default "default"); namespaces share nothing: each has its own neural
    state, records, documents and sessions, and names match exactly (no wildcards, no prefixes).
    A read or forget in a namespace the database does not have raises ``NamespaceNotFoundError``
    (the default namespace always exists; ``missing_ok=True`` reads a missing one as empty).
    Thread-safe: calls on different namespaces run at once, on one namespace in turn
    (:class:`~titans_agent.locking.AgentLocks`); the README gives the multi-process model.
    """

    def __init__(self, store: Store, config: AgentConfig, embedder: Embedder) -> None:
        self.store = store
        self.config = config
        self.embedder = embedder
        self._device: torch.device | None = None
        self._lock = threading.RLock()  # lazy set-up only (the model, the runtimes, the chunker)
        self._locks = AgentLocks()
        self._closed = False
        self._chunker: Chunker | None = None
        self._rts: Runtimes | None = None
        self._ctx = PipelineContext(store, embedder, config, self._locks, lambda: self._runtimes, self._check_open)
        self._ready = False  # the embedder's model is loaded and checked against the database
        # A lazy embedder's model loads at the first write or recall; until then it is checked by name.
        if getattr(embedder, "loaded", True):
            self._embedder_ready()
        else:
            self._check_embedder(None)

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)  # a store, config or embedder assigned later reaches the pipelines too
        if name in ("store", "config", "embedder") and "_ctx" in vars(self):
            super().__setattr__("_ctx", dataclasses.replace(self._ctx, **{name: value}))

    @property
    def device(self) -> torch.device:
        """Where memories and indexes live: ``config.device``, resolved at first use."""
        if self._device is None:
            from titans_agent.core.memory import resolve_device

            self._device = resolve_device(self.config.device)
        return self._device

    def _check_embedder(self, dim: int | None) -> int | None:
        """Refuse namespaces of another embedder name, or dimension ``dim``; return theirs (or None)."""
        with self.store.session() as s:
            return check_embedder_rows(repository.namespace_embedders(s), self.embedder.name, dim, str(self.store.url))

    def _embedder_ready(self) -> None:
        """Load the embedder's model (once) and check it against the database."""
        if not self._ready:
            with self._lock:
                if not self._ready:
                    self._check_embedder(dim := self.embedder.dim)
                    self._runtimes_at(dim)
                    self._ready = True

    def _runtimes_at(self, dim: int) -> Runtimes:
        if self._rts is None or self._rts.dim != dim:
            from titans_agent.runtime import Runtimes

            self._rts = Runtimes.of_agent(
                self.store, self.config, dim=dim, embedder=self.embedder.name, device=self.device
            )
        return self._rts

    @property
    def _runtimes(self) -> Runtimes:
        """Every namespace's live memory (made at first use; from an empty database, with the model)."""
        if self._rts is None:
            with self._lock:
                if self._rts is None:
                    dim = self._check_embedder(None)
                    self._embedder_ready() if dim is None else self._runtimes_at(dim)
        assert self._rts is not None
        return self._rts

    context = property(lambda self: self._ctx, doc="What the pipelines work with (:class:`PipelineContext`).")

    @property
    def chunker(self) -> Chunker:
        """Cuts documents and long notes or turns (made at first use: it needs the tokenizer)."""
        if self._chunker is None:
            from titans_agent.ingest.chunking import Chunker

            with self._lock:
                e, c = self.embedder, self.config
                if self._chunker is None:
                    self._chunker = Chunker(e.tokenizer, min(c.chunk_tokens, e.max_tokens), c.chunk_overlap_tokens)
        return self._chunker

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(
        cls,
        path_or_url: str | Path,
        config: AgentConfig | None = None,
        *,
        embedder: Embedder | None = None,
        read_only: bool = False,
        create: bool = True,
    ) -> MemoryAgent:
        """Open (or create) a memory database. The model of ``config.embedder`` loads at the first
        write or recall, not here (listing, counting and forgetting never load it).

        Args:
            path_or_url: a SQLite file path (created with its folders) or a SQLAlchemy URL.
            config: agent configuration; default :class:`AgentConfig()`.
            embedder: an embedder object to use instead of loading ``config.embedder``.
            read_only: never write: the database must exist at this version's schema (nothing is
                created or migrated); SQLite opens the file ``mode=ro`` (a read-only file system
                works), PostgreSQL sessions are read-only; every write raises ``ReadOnlyError``.
            create: False refuses a database that does not exist yet, as ``read_only`` does.

        Raises:
            DatabaseNotFoundError: (``create=False`` or ``read_only``) no such database; nothing is created.
            StoreError: the database cannot be opened, is not a titans-agent database, has an older schema
                (read-only: open it writable once to migrate it), or its URL names another backend.
            EmbedderMismatchError: the database was made with another embedder (name or dimension).
            EmbedderLoadError: the embedding model cannot be loaded from local files.
        """
        config = config or AgentConfig()
        store = Store(path_or_url, read_only=read_only, create=create)
        try:
            chosen = embedder if embedder is not None else load_embedder(config.embedder, device=config.device)
            return cls(store, config, chosen)
        except BaseException:
            store.close(discard_new_file=True)  # a failed open leaves no empty database behind
            raise

    def __enter__(self) -> MemoryAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the database. Every write was already committed; closing twice is harmless."""
        with self._locks.exclusive():
            if not self._closed:
                self._closed = True
                if self._rts is not None:
                    self._rts.clear()
                self.store.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("this MemoryAgent is closed")

    @contextmanager
    def _held(self, namespace: str | None) -> Iterator[None]:
        """Hold ``namespace``'s lock (None: the shared side only) on an open agent."""
        with self._locks.namespace(namespace):
            self._check_open()
            yield

    def _live(self, namespace: str) -> Runtime:
        """The namespace's runtime for a write, created when new."""
        self._check_open()
        self.store.check_writable()
        self._embedder_ready()
        if self._runtimes.chunking is None:  # what a new namespace records (it needs the tokenizer)
            from titans_agent.ingest.pipeline import chunking_config

            with self._lock:
                self._runtimes.use_chunking(chunking_config(self.chunker, self.embedder))
        return self._runtimes.get_or_create(namespace)

    def _pieces(self, text: str) -> list[str]:
        """A note or turn as written: itself, or its chunks when longer than the embedder's window."""
        if self.chunker.count_tokens(text) <= self.chunker.max_tokens:
            return [text.strip()]
        return [c.text for c in self.chunker.split(text)]

    # ------------------------------------------------------------------ namespaces
    def user(self, namespace: str) -> UserMemory:
        """One user's memory: a :class:`~titans_agent.user.UserMemory` bound to ``namespace``, whose
        methods are this agent's without ``namespace=`` (a user with no memories yet reads as
        empty). Nothing is read or written; the namespace is made at the user's first write.

        Raises:
            InvalidInputError: a bad namespace name.
        """
        from titans_agent.user import UserMemory

        return UserMemory(self, namespace)

    def namespaces(self) -> list[str]:
        """Names of the namespaces in the database, sorted."""
        with self._held(None), self.store.session() as s:
            return repository.namespace_names(s)

    def memory_state(self, namespace: str = DEFAULT_NAMESPACE, *, missing_ok: bool = False) -> MemoryState | None:
        """The namespace's neural memory state as of the database's latest commit, or None when the
        default namespace (or, with ``missing_ok``, any) does not exist yet (nothing is created).

        The state holds ``weights`` and ``momentum`` (tuples of float32 tensors, one per memory
        layer: ``(d_out, d_in)``), ``pending`` (``(p, d)`` inputs of an unfinished chunk) and
        ``step`` (tokens written). It is a copy: changing it changes nothing stored.

        Raises:
            NamespaceNotFoundError: no such namespace (not the default one) and not ``missing_ok``.
            InvalidInputError: a bad namespace name.
            StoreError: the agent is closed.
        """
        with self._held(namespace), self.store.snapshot_session() as s:
            rt = self._runtimes.in_snapshot(s, namespace)
            if rt is None:
                require_namespace(namespace, False, missing_ok)  # raises unless it reads as empty
                return None
            return self._runtimes.state_in(rt, s).clone()

    def stats(self, namespace: str = DEFAULT_NAMESPACE, *, missing_ok: bool = False) -> NamespaceStats:
        """Counts and memory state of a namespace (zeros for the default one, or with ``missing_ok``
        any one, when it does not exist yet). Reads rows only: no memory is built, no model loaded.

        Raises:
            NamespaceNotFoundError: no such namespace (not the default one) and not ``missing_ok``.
            InvalidInputError: a bad namespace name.
            StoreError: the agent is closed.
        """
        counts: dict[str, Any] = {"by_kind": {}, "records": 0, "mean_surprise": None, "documents": 0, "sessions": 0}
        with self._held(namespace), self.store.session() as s:
            row = repository.namespace_summary(s, check_namespace(namespace))
            if row is not None:
                counts = repository.namespace_counts(s, row[0])
            else:
                require_namespace(namespace, False, missing_ok)
        kinds = counts.pop("by_kind")
        if row is not None:
            dim, step, memory = row[1], row[2], MemoryConfig.model_validate(row[3])
        else:
            dim = self._rts.dim if self._rts is not None else self.embedder.dim
            step, memory = 0, self.config.memory.model_copy(update={"dim": dim})
        return NamespaceStats(
            namespace=namespace,
            **counts,
            chunks=kinds.get("chunk", 0),
            notes=kinds.get("note", 0),
            turns=kinds.get("turn", 0),
            memory_step=step,
            embedder=self.embedder.name,
            dim=dim,
            memory=memory.model_dump(),
        )

    # ------------------------------------------------------------------ writes
    def remember(
        self,
        text: str,
        metadata: dict[str, Any] | None = None,
        *,
        source: str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        replace: bool = False,
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
            replace: forget what ``source`` held first, in the same transaction as the write (a
                key-value store's put: the old value is never lost without the new one written).

        Returns:
            The decision, surprise and record id.

        Raises:
            EmptyInputError: the text is empty or whitespace (nothing is written, the memory is untouched).
            InvalidInputError: bad metadata, source or namespace; a text over ``config.max_text_chars``.
            StoreError: the database stayed locked by other writers past the retry budget (nothing stored).
        """
        text = check_text(text, "text", self.config.max_text_chars)
        meta = check_metadata(metadata)
        if source is not None:
            source = check_source_name(source)
        elif replace:
            raise InvalidInputError("replace=True needs the source= whose note it replaces")
        from titans_agent.write import WriteUnit, write_units

        with self._locks.namespace(namespace):
            rt = self._live(namespace)
            units = [WriteUnit(text=p, kind="note", meta=meta, source=source) for p in self._pieces(text)]
            return write_units(self._ctx, rt=rt, units=units, replace_source=source if replace else None)[0]

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
            EmptyInputError: content has nothing visible: empty, whitespace, or only control and
                format characters such as a zero-width space (nothing is written).
            InvalidInputError: bad session id, role, timestamp, metadata or namespace; content over ``max_text_chars``.
        """
        turn = (session_id, role, content, timestamp, metadata)
        return self._write_turns(check_turns([turn], self.config.max_text_chars, positions=False), [], namespace)[0]

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
            One :class:`WriteResult` per turn, in order (``results[i]`` is turn ``i``'s). A turn
            whose content has nothing visible (empty, whitespace, or only control and format
            characters such as a zero-width space) is not written and does not sink the batch:
            its result has decision "skipped" and a ``reason`` (record_id and surprise None), and
            a warning is logged. Nothing written (every turn skipped) makes no namespace.

        Raises:
            InvalidInputError: a turn is otherwise invalid (bad session id, role, timestamp or
                metadata, a content over ``max_text_chars`` or not a string); the error names its
                position and nothing is written.
        """
        checked, skipped = check_turn_batch(turns, self.config.max_text_chars)
        return self._write_turns(checked, skipped, namespace)

    def _write_turns(self, checked: list[CheckedTurn], skipped: list[SkippedTurn], namespace: str) -> list[WriteResult]:
        from titans_agent.write import with_skipped, write_turns

        if not checked:  # nothing to write (an empty batch, or every turn skipped): no namespace to make
            check_namespace(namespace)
            return with_skipped([], skipped)
        with self._locks.namespace(namespace):
            rt = self._live(namespace)
            return with_skipped(write_turns(self._ctx, rt=rt, turns=checked, pieces=self._pieces), skipped)

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
        max_file_bytes: int | None = None,
    ) -> IngestReport:
        """Ingest files, folders (recursively) or a raw text.

        With ``source`` given, ``target`` is the text itself and ``source`` names it. Otherwise
        ``target`` is a path or a list of paths. Each document is split into token-aware chunks
        (code at language structure, prose at paragraphs and sentences), each at most the
        embedder's window, each keeping its line range; chunks are written through the surprise
        gate in batches, one transaction per batch. A document that was completely ingested with the
        same content is skipped ("unchanged"); one interrupted mid-way resumes after its last
        committed chunk; one whose content changed replaces its old records. The namespace's lock
        is held per batch and document opening, so other calls on it may run in between.

        Args:
            target: path(s), or the text when ``source`` is given.
            source: name of a raw text (e.g. "notes/meeting-2024-05-01").
            namespace: where to write.
            include: glob patterns a file must match (relative path or name), e.g. ["*.py"].
            exclude: glob patterns of files to leave out.
            metadata: JSON-serialisable dict kept with every chunk.
            progress: called after every file and batch (after its commit) with an
                :class:`IngestProgress`, holding no lock: it may call the agent, in any namespace.
            max_file_bytes: skip larger files (default ``config.max_file_bytes``, 4 MiB).

        Returns:
            An :class:`IngestReport`; unreadable, binary, empty, too large files and symlink loops
            are listed in ``skipped`` with a reason, never raised.

        Raises:
            EmptyInputError: ``source`` was given and the text is blank.
            InvalidInputError: bad namespace, metadata, ``max_file_bytes``, or a non-text target.
            StoreError: the agent was closed during the ingest (by ``progress`` or another thread):
                it stops before its next batch or document and nothing more is committed; what was
                committed stays, and the next ingest resumes the unfinished document.
        """
        t0 = time.perf_counter()
        limit = self.config.max_file_bytes if max_file_bytes is None else max_file_bytes
        meta = check_metadata(metadata)
        from titans_agent.ingest.pipeline import ingest_items, ingest_sources

        items = ingest_sources(target, source, include, exclude, limit)  # a lazy walk, or the text
        with self._locks.namespace(namespace):
            rt = self._live(namespace)
        report = ingest_items(
            self._ctx, rt=rt, chunker=self.chunker, items=items, named=source is not None, metadata=meta,
            progress=progress, hold=lambda: self._held(namespace),
        )  # fmt: skip
        report.seconds = time.perf_counter() - t0
        return report

    def update_metadata(
        self,
        metadata: dict[str, Any],
        *,
        source: str,
        namespace: str = DEFAULT_NAMESPACE,
        merge: bool = True,
        missing_ok: bool = False,
    ) -> int:
        """Change the metadata of every occurrence of ``source`` without writing the text again (the
        memory is not touched). Returns how many occurrences changed (0 for an unknown source).

        Args:
            metadata: JSON-serialisable dict.
            source: the source name (exact match).
            namespace: where to look.
            merge: update the existing metadata with ``metadata`` (True) or replace it (False).
            missing_ok: a namespace that does not exist changes nothing (0) instead of raising.

        Raises:
            NamespaceNotFoundError: no such namespace (not the default one) and not ``missing_ok``.
            InvalidInputError: bad metadata, source or namespace.
        """
        meta = check_metadata(metadata)
        source = check_name(source, "source")
        with self._held(namespace):
            rt = self._runtimes.get(namespace, create=False)
            if rt is None:
                require_namespace(namespace, False, missing_ok)  # raises unless it reads as empty
                return 0
            from titans_agent.write import update_metadata as update_rows

            return update_rows(self._ctx, rt=rt, source=source, metadata=meta, merge=merge, missing_ok=missing_ok)

    # ------------------------------------------------------------------ reads
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
        filter: dict[str, Any] | None = None,
        missing_ok: bool = False,
    ) -> list[Hit]:
        """The ``k`` records that best answer ``query``, best first.

        Ranking fuses BM25 over the namespace's in-memory index (the text, plus each turn's
        speaker, date and the turn before it; built at the namespace's first recall in a process),
        dense cosine similarity and, when enabled, the memory read-out M*(q) (eq. 15) by their
        standardised scores (or reciprocal ranks, ``fusion="rank"``), demotes superseded records,
        then adds locality: a turn scores part of the best score of its session and of its best
        adjacent turn (chunks too when ``neighbour_kinds`` lists them; :class:`RetrievalConfig`).
        Ties break by record id, so the same database gives the same ranking.

        Time: a record's time is that of its occurrences (a turn's timestamp; otherwise when it was
        written). ``since``/``until`` keep records with an occurrence in that range (inclusive);
        ``as_of`` keeps what was known then (an occurrence at or before it) and applies only the
        supersessions known then, so a record superseded later is current again.

        Metadata: ``filter`` tests each occurrence's metadata (from ``ingest``/``remember``/
        ``add_turn(s)``), in SQL before ranking; a record passes when one occurrence does (its hit
        shows that one). ``{"court": "NY"}`` is equality; ``$eq $ne $gt $gte $lt $lte $in $nin
        $exists`` go in a dict (``{"year": {"$gte": 2020}}``); a dotted key is a nested path
        (``{"client.region": "EU"}``); several keys must all hold; top-level ``$and``/``$or`` take
        lists. Values compare like JSON: numbers with numbers (``True`` is not 1), strings with
        strings; another type matches nothing, and a missing key nothing but ``$exists: False``,
        ``$ne``, ``$nin``. :func:`matches_filter` applies the same rules to one dict.

        Args:
            query: what to look for.
            k: how many hits at most (>= 1).
            namespace: where to look; only this namespace's records can be returned.
            kinds: only these record kinds ("chunk", "note", "turn").
            source: only records of this source: a name as stored, or any path to an ingested file.
            session_id: only turns of this session.
            as_of: recall as of this time (datetime, naive = UTC, or ISO 8601).
            since, until: only records with an occurrence in this time range.
            include_superseded: keep superseded records (demoted by ``superseded_weight``; their
                hits name the successors in ``superseded_by``); False drops them.
            filter: only records with an occurrence whose metadata passes this filter (see above).
            missing_ok: a namespace that does not exist gives ``[]`` instead of raising: for a
                user whose namespace is made at their first write, who has no memories yet.

        Raises:
            NamespaceNotFoundError: no such namespace (not the default one) and not ``missing_ok``.
            EmptyInputError: the query is empty or whitespace.
            InvalidInputError: k < 1, unknown kinds, a bad time, a bad namespace, or a malformed
                filter (an unknown operator, a bad path or operand: the message names it).
            StoreError: the embedder returned a non-finite query embedding.
        """
        from titans_agent.recall import recall as run_recall
        from titans_agent.recall import recall_filters

        query = check_text(query, "query")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidInputError(f"k must be a positive integer, got {k!r}")
        namespace = check_namespace(namespace)
        with self._held(namespace):
            source = stored_source(self.store, namespace, source)
            filters = recall_filters(kinds, source, session_id, since, until, as_of, include_superseded, filter)
            self._embedder_ready()
            return run_recall(
                self._ctx, namespace=namespace, query=query, k=k, filters=filters, missing_ok=missing_ok,
                count_tokens=lambda text: self.chunker.count_tokens(text),  # the chunker is made at first use
            )  # fmt: skip

    def records(
        self,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        source: str | None = None,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
        offset: int = 0,
        missing_ok: bool = False,
    ) -> list[Hit]:
        """List what is stored, without a query: one :class:`Hit` per occurrence (score 0.0), in
        the order written.

        Args:
            namespace: where to look.
            source: only occurrences of this source: a name as stored, or any path to an ingested file.
            kinds: only these kinds ("chunk", "note", "turn").
            limit: at most this many (None: all).
            offset: skip this many first.
            missing_ok: a namespace that does not exist lists ``[]`` instead of raising.

        Raises:
            NamespaceNotFoundError: no such namespace (not the default one) and not ``missing_ok``.
            InvalidInputError: unknown kinds, a negative limit or offset, or a bad namespace.
        """
        kinds = check_kinds(kinds)
        check_page(limit, offset)
        with self._held(namespace), self.store.session() as s:
            source = stored_source(self.store, namespace, source)
            ns_id = repository.namespace_id(s, check_namespace(namespace))  # no memory is loaded
            if ns_id is None:
                require_namespace(namespace, False, missing_ok)  # raises unless it reads as empty
                return []
            rows = repository.list_occurrences(s, ns_id, source=source, kinds=kinds, limit=limit, offset=offset)
            _, places = repository.records_with_occurrences(s, sorted({r.id for r, _ in rows}))
        from titans_agent.retrieval import make_hit

        return [make_hit(r, o, occurrences=places.get(r.id, ())) for r, o in rows]

    def turns(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE, missing_ok: bool = False) -> list[dict]:
        """The transcript of a session in sequence order: dicts with seq, role, content, timestamp,
        record_id. Empty for an unknown session, and (``missing_ok``) for a namespace that does not exist.

        Raises:
            NamespaceNotFoundError: no such namespace (not the default one) and not ``missing_ok``.
            InvalidInputError: a session id that is not a non-blank string, or a bad namespace.
        """
        session_id = check_name(session_id, "session_id")
        with self._held(namespace), self.store.session() as s:
            ns_id = repository.namespace_id(s, check_namespace(namespace))
            if ns_id is None:
                require_namespace(namespace, False, missing_ok)  # raises unless it reads as empty
                return []
            return repository.transcript(s, ns_id, session_id)

    # ------------------------------------------------------------------ housekeeping
    def forget(
        self,
        *,
        source: str | None = None,
        record_id: int | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        unlearn: bool = False,
        missing_ok: bool = False,
    ) -> int:
        """Forget everything written from a source, or one record; returns how many units went.

        ``source`` removes every occurrence of that file (any path to it), named text or session ("session:<id>"):
        chunks, notes and turns (their transcript lines too). A record that another source also
        holds stays for that source. ``record_id`` removes the record wherever it occurs, with its
        transcript lines (a piece of a longer turn is cut out of its line, which keeps the rest).
        Forgotten text is never recalled again, but by default the neural weights keep what the
        memory learned from it at test time. ``unlearn=True`` also rebuilds the memory state without
        it in the same transaction (as :meth:`rebuild_memory`: the state then equals that of a
        namespace that never saw the forgotten units). The database keeps no separate index of the
        words, so nothing of the forgotten text stays in it.

        Returns:
            The number of occurrences removed (chunks, notes or turns).

        Raises:
            NamespaceNotFoundError: no such namespace (not the default one) and not ``missing_ok``
                (with it, the namespace counts as empty: 0, or ``RecordNotFoundError``).
            InvalidInputError: neither or both of ``source`` and ``record_id`` given.
            RecordNotFoundError: no record with that id in the namespace.
            NonFiniteStateError: (``unlearn``) the rebuilt state is not finite; nothing was removed.
        """
        if (source is None) == (record_id is None):
            raise InvalidInputError("give exactly one of source= or record_id=")
        record_id = None if record_id is None else check_record_id(record_id)
        with self._held(namespace):
            source = stored_source(self.store, namespace, source)
            rt = self._runtimes.get(namespace, create=False)
            if rt is None:
                require_namespace(namespace, False, missing_ok)
                if record_id is not None:
                    raise RecordNotFoundError(f"no record {record_id} in namespace {namespace!r}")
                return 0
            from titans_agent.erase import forget as forget_occurrences

            return forget_occurrences(
                self._ctx, rt=rt, source=source, record_id=record_id, unlearn=bool(unlearn), missing_ok=missing_ok
            )

    def rebuild_memory(self, namespace: str = DEFAULT_NAMESPACE) -> int:
        """Rebuild the namespace's neural memory from its initial weights M_0 by writing every
        remaining unit again, in the original order and writes, with the embeddings they were
        written with: afterwards nothing forgotten (by :meth:`forget`, a re-ingested document, a
        replaced note) is left in the weights. One transaction holding the namespace's write lock;
        it persists the new state (weights, momentum, pending chunk, step) and each record's
        surprise, hit count and times as its remaining occurrences give them. It costs a replay of
        everything (see the README).

        Returns:
            The units replayed (the memory's new step); 0 for a namespace that does not exist
            (nothing is created).

        Raises:
            InvalidInputError: a bad namespace name.
            NonFiniteStateError: the rebuilt state is not finite (nothing is written).
            StoreError: the agent is closed, or the namespace stayed locked past the retry budget.
        """
        with self._held(namespace):
            rt = self._runtimes.get(namespace, create=False)
            from titans_agent.erase import rebuild as rebuild_state

            return 0 if rt is None else rebuild_state(self._ctx, rt=rt)

    def drop_namespace(self, namespace: str) -> bool:
        """Delete a namespace and everything of it, in one transaction: its records (the
        database keeps no separate index of their words), occurrences, documents, sessions and
        turns, knowledge-update links, and the namespace row with its neural memory (parameters
        and state). Other namespaces are not touched. Other agents and processes that had it open
        load it anew (empty) when they use the name again.

        Returns:
            True when it was dropped, False when there is no such namespace (dropping is idempotent).

        Raises:
            InvalidInputError: a bad namespace name.
            StoreError: the agent is closed, or the namespace stayed locked past the retry budget.
        """
        with self._held(namespace):
            from titans_agent.erase import drop as drop_rows

            return drop_rows(self._ctx, namespace=namespace)
