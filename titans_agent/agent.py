"""MemoryAgent: the public object. Ingest, remember, converse, recall, forget.

The facade: it opens and closes the database, checks every argument and hands the work to a
pipeline: :mod:`titans_agent.ingest.pipeline` (files -> chunks -> writes), :mod:`titans_agent.write`
(the surprise-gated write, Behrouz et al. 2024 eq. 12-14: nothing new is ever dropped),
:mod:`titans_agent.recall` (one snapshot read, pure ranking), :mod:`titans_agent.erase`. Each
namespace's live memory is kept by :class:`titans_agent.runtime.Runtimes`; the SQL lives in
:mod:`titans_agent.store.repository`.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from titans_agent.config import DEFAULT_NAMESPACE, AgentConfig
from titans_agent.core.memory import MemoryState, resolve_device
from titans_agent.embeddings import Embedder, load_embedder
from titans_agent.erase import forget as forget_occurrences
from titans_agent.errors import InvalidInputError, RecordNotFoundError, StoreError
from titans_agent.ingest.chunking import Chunker
from titans_agent.ingest.files import SkippedFile, SourceFile, discover
from titans_agent.ingest.pipeline import IngestProgress, chunking_config, ingest_items, named_text
from titans_agent.recall import RecallFilters
from titans_agent.recall import recall as run_recall
from titans_agent.retrieval import build_hits
from titans_agent.runtime import Runtime, Runtimes
from titans_agent.store import Store, repository
from titans_agent.types import Hit, IngestReport, NamespaceStats, WriteResult
from titans_agent.validation import (
    as_utc,
    check_ingest_target,
    check_kinds,
    check_metadata,
    check_name,
    check_namespace,
    check_page,
    check_patterns,
    check_record_id,
    check_text,
    check_turns,
)
from titans_agent.write import WriteUnit, write_turns, write_units

__all__ = ["DEFAULT_NAMESPACE", "IngestProgress", "MemoryAgent"]


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
        self._runtimes = Runtimes(
            store,
            dim=embedder.dim,
            embedder=embedder.name,
            device=self.device,
            memory_config=config.memory,
            chunking=chunking_config(self.chunker, embedder),
        )
        self._closed = False
        self._runtimes.check_embedder()

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
            StoreError: the database cannot be opened, is not a titans-agent database, or its URL
                names a backend other than SQLite or PostgreSQL.
            EmbedderMismatchError: the database was made with another embedder (name or dimension).
            EmbedderLoadError: the embedding model cannot be loaded from local files.
        """
        config = config or AgentConfig()
        store = Store(path_or_url)
        try:
            if embedder is None:
                embedder = load_embedder(config.embedder, device=str(resolve_device(config.device)))
            return cls(store, config, embedder)
        except BaseException:
            store.close(discard_new_file=True)  # a failed open leaves no empty database behind
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

    def _live(self, namespace: str) -> Runtime:
        """The namespace's runtime for a write, created when new."""
        self._check_open()
        rt = self._runtimes.get(namespace, create=True)
        if rt is None:  # pragma: no cover - get(create=True) always returns one
            raise StoreError(f"namespace {namespace!r} could not be created")
        return rt

    def _pieces(self, text: str) -> list[str]:
        """A note or turn as written: itself, or its chunks when longer than the embedder's window."""
        if self.chunker.count_tokens(text) <= self.chunker.max_tokens:
            return [text.strip()]
        return [c.text for c in self.chunker.split(text)]

    # ------------------------------------------------------------------ namespaces
    def namespaces(self) -> list[str]:
        """Names of the namespaces in the database, sorted."""
        with self._lock:
            self._check_open()
            with self.store.session() as s:
                return repository.namespace_names(s)

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
            rt = self._runtimes.get(namespace, create=False)
            return None if rt is None else rt.state.clone()

    def stats(self, namespace: str = DEFAULT_NAMESPACE) -> NamespaceStats:
        """Counts and memory state of a namespace (zeros for one never written)."""
        with self._lock:
            self._check_open()
            rt = self._runtimes.get(namespace, create=False)
            counts: dict[str, Any] = {"by_kind": {}, "records": 0, "mean_surprise": None, "documents": 0, "sessions": 0}
            if rt is not None:
                with self.store.session() as s:
                    counts = repository.namespace_counts(s, rt.ns_id)
            kinds = counts.pop("by_kind")
            return NamespaceStats(
                namespace=namespace,
                **counts,
                chunks=kinds.get("chunk", 0),
                notes=kinds.get("note", 0),
                turns=kinds.get("turn", 0),
                memory_step=0 if rt is None else rt.state.step,
                embedder=self.embedder.name,
                dim=self.embedder.dim,
                memory=(self._runtimes.memory_config if rt is None else rt.memory.config).model_dump(),
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
            InvalidInputError: bad metadata, source or namespace.
            StoreError: the database stayed locked by other writers past the retry budget (nothing stored).
        """
        text = check_text(text, "text")
        meta = check_metadata(metadata)
        if source is not None:
            source = check_name(source, "source")
        elif replace:
            raise InvalidInputError("replace=True needs the source= whose note it replaces")
        with self._lock:
            rt = self._live(namespace)
            units = [WriteUnit(text=p, kind="note", meta=meta, source=source) for p in self._pieces(text)]
            return write_units(
                self.store, self._runtimes, rt, self.embedder, self.config, units, None, source if replace else None
            )[0]

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
        checked = check_turns(turns)
        with self._lock:
            rt = self._live(namespace)
            return write_turns(self.store, self._runtimes, rt, self.embedder, self.config, checked, self._pieces)

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
        text, paths = check_ingest_target(target, source)
        with self._lock:
            rt = self._live(namespace)
            if text is not None:
                items: Iterable[SourceFile | SkippedFile] = [named_text(check_name(source, "source"), text)]
            else:
                items = discover(paths, include=include, exclude=exclude, max_file_bytes=self.config.max_file_bytes)
            report = ingest_items(
                self.store,
                self._runtimes,
                rt,
                self.embedder,
                self.config,
                self.chunker,
                items,
                named=source is not None,
                metadata=meta,
                progress=progress,
            )
        report.seconds = time.perf_counter() - t0
        return report

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
            rt = self._runtimes.get(namespace, create=False)
            if rt is None:
                return 0
            for attempt in self.store.write_attempts():
                with attempt, self.store.write_session(rt.ns_id) as s:
                    n = repository.update_source_metadata(s, rt.ns_id, source, meta, merge)
                    s.commit()
            return n

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
        filters = RecallFilters(
            kinds=check_kinds(kinds),
            source=None if source is None else check_name(source, "source"),
            session_id=None if session_id is None else check_name(session_id, "session_id"),
            since=None if since is None else as_utc(since),
            until=None if until is None else as_utc(until),
            as_of=None if as_of is None else as_utc(as_of),
            include_superseded=bool(include_superseded),
        )
        namespace = check_namespace(namespace)
        with self._lock:
            self._check_open()
            return run_recall(
                self.store, self._runtimes, self.embedder, self.config.retrieval, namespace, query, k, filters
            )

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
        check_page(limit, offset)
        with self._lock:
            self._check_open()
            rt = self._runtimes.get(namespace, create=False)
            if rt is None:
                return []
            with self.store.session() as s:
                rows = repository.list_occurrences(s, rt.ns_id, source=source, kinds=kinds, limit=limit, offset=offset)
            return [build_hits([(0.0, r.id)], {r.id: {}}, {r.id: r}, {r.id: [o]}, None, None, None)[0] for r, o in rows]

    def turns(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> list[dict[str, Any]]:
        """The transcript of a session in sequence order: dicts with seq, role, content, timestamp,
        record_id. Empty for an unknown session.

        Raises:
            InvalidInputError: a session id that is not a non-blank string, or a bad namespace.
        """
        session_id = check_name(session_id, "session_id")
        with self._lock:
            self._check_open()
            rt = self._runtimes.get(namespace, create=False)
            if rt is None:
                return []
            with self.store.session() as s:
                return repository.transcript(s, rt.ns_id, session_id)

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
            rt = self._runtimes.get(namespace, create=False)
            if rt is None:
                if record_id is not None:
                    raise RecordNotFoundError(f"no record {record_id} in namespace {namespace!r}")
                return 0
            return forget_occurrences(self.store, self._runtimes, rt, source=source, record_id=record_id)
