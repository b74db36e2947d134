"""The ingest pipeline: files -> chunks -> write units, with document resume and progress.

Each document (a file found by :func:`~titans_agent.ingest.files.discover`, or a named text) is
split by the :class:`~titans_agent.ingest.chunking.Chunker` with the format its content was read as
(so a PDF without its suffix keeps its pages); its chunks are written through the gated write
(:func:`titans_agent.write.write_units`) in batches of ``batch_size`` that span files, one
transaction each, which also commits each document's progress. A document already completely
ingested with the same content is skipped ("unchanged"); one interrupted mid-way resumes after its
last committed chunk; one whose content changed replaces its old records.

The pipeline takes the namespace's lock (through the ``hold`` it is given) for each unit of work
only: checking the chunking, opening a document, committing a batch. Reading and cutting files and
the ``progress`` callback run outside it, so a callback may call the agent in any namespace (two
ingests whose callbacks recall in each other's namespace do not wait for each other), and an agent
closed meanwhile (by the callback or another thread) stops the ingest before its next unit.

A namespace records the chunking configuration its documents were cut with; ingesting with another
one would cut every document anew and replace its records, so it is refused
(:class:`~titans_agent.errors.ChunkingMismatchError`) while the namespace holds documents.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from titans_agent.context import PipelineContext
from titans_agent.embeddings import Embedder
from titans_agent.erase import checkpoint_after_delete
from titans_agent.errors import ChunkingMismatchError, StoreError
from titans_agent.ingest.chunking import Chunker, language_for_path
from titans_agent.ingest.files import SkippedFile, SourceFile, discover
from titans_agent.ingest.headers import NOT_CODE, chunk_context, document_header, enclosing_scopes
from titans_agent.ingest.patterns import check_globs
from titans_agent.runtime import Runtime
from titans_agent.store import repository
from titans_agent.types import IngestReport, SkippedSource
from titans_agent.validation import check_ingest_target, check_source_name
from titans_agent.write import WriteUnit, write_units

__all__ = ["IngestProgress", "chunking_config", "ingest_items", "ingest_sources", "named_text"]


@dataclass
class IngestProgress:
    """Passed to the ``progress`` callback of :meth:`MemoryAgent.ingest` after every file and batch
    (after the batch's commit, holding no lock of the agent).

    Attributes:
        files: documents read and cut so far (their chunks may still wait for their batch).
        chunks: chunks committed so far.
        stored: of those, chunks stored as new or known records.
        current: the document being read.
        complete: documents whose every chunk is committed (unchanged ones too): what an
            interrupted ingest keeps whole; a rerun skips them and resumes a partial one after its
            last committed chunk.
    """

    files: int = 0
    chunks: int = 0
    stored: int = 0
    current: str = ""
    complete: int = 0


def named_text(source: str, text: str) -> SourceFile:
    """A text given with ``source=`` as a document named ``source`` (its sha256 over UTF-8)."""
    data = text.encode("utf-8", "surrogatepass")
    return SourceFile(
        path=Path(source),
        display=source,
        text=text.replace("\r\n", "\n"),
        encoding="utf-8",
        n_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        warnings=(),
    )


def ingest_sources(
    target: Any, source: Any, include: Any, exclude: Any, max_file_bytes: int
) -> Iterable[SourceFile | SkippedFile]:
    """What :meth:`MemoryAgent.ingest` reads: the named text (``source`` given), or a lazy walk of
    the paths of ``target`` (:func:`~titans_agent.ingest.files.discover`), its arguments checked here.

    Raises:
        EmptyInputError: ``source`` was given and the text is blank.
        InvalidInputError: a non-text target, a bad source name, glob pattern or ``max_file_bytes``.
    """
    include = check_globs(include, "include")
    exclude = check_globs(exclude, "exclude")
    text, paths = check_ingest_target(target, source)
    if text is not None:
        return [named_text(check_source_name(source), text)]
    return discover(paths or [], include=include, exclude=exclude, max_file_bytes=max_file_bytes)


def chunking_config(chunker: Chunker, embedder: Embedder) -> dict[str, Any]:
    """What must match for a namespace's documents to be cut the same way again: the chunk size
    (tokens, after the embedder's window), the overlap (tokens), and the embedder."""
    return {
        "chunk_tokens": chunker.max_tokens,
        "chunk_overlap_tokens": chunker.overlap_tokens,
        "embedder": embedder.name,
    }


def _check_chunking(ctx: PipelineContext, *, rt: Runtime, wanted: dict[str, Any]) -> None:
    """Refuse a chunking configuration other than the namespace's while it holds documents; record
    it when the namespace has none (or none was recorded, for namespaces made before it was)."""
    if rt.chunking == wanted:
        return
    store = ctx.store
    for attempt in store.write_attempts():
        with attempt, store.write_session(rt.ns_id, name=rt.name) as s:
            if rt.revision_in(s) is None:  # dropped since the look-up: the document's transaction checks anew
                return
            _chunking_in(s, rt, wanted)
            s.commit()
    rt.follow_chunking(wanted)


def _chunking_in(s: Any, rt: Runtime, wanted: dict[str, Any]) -> None:
    """In the write session ``s``: refuse ``wanted`` when the namespace's documents were cut
    otherwise, else record it (the caller commits, then tells ``rt``: :meth:`Runtime.follow_chunking`)."""
    if rt.chunking is not None and repository.document_count(s, rt.ns_id):
        have = ", ".join(f"{k}={v!r}" for k, v in sorted(rt.chunking.items()))
        want = ", ".join(f"{k}={v!r}" for k, v in sorted(wanted.items()))
        raise ChunkingMismatchError(
            f"the documents of namespace {rt.name!r} were chunked with {have}; this agent chunks "
            f"with {want}: ingesting would cut and replace every document. Open the database with "
            "AgentConfig(chunk_tokens=..., chunk_overlap_tokens=...) as the namespace has them, "
            "or ingest into another namespace"
        )
    repository.set_chunking(s, rt.ns_id, wanted)


def _state_before_delete(ctx: PipelineContext, *, rt: Runtime, s: Any, revision: int, out: list) -> None:
    """Append the namespace's memory state at ``revision`` (read in the write session ``s``) to
    ``out``: called while the log still holds the occurrences about to be deleted."""
    ctx.runtimes.bring_to(rt, s, revision)
    out.append(ctx.runtimes.state_in(rt, s))


def _open_document(
    ctx: PipelineContext, *, rt: Runtime, item: SourceFile, src: str, n: int
) -> tuple[int | None, int, bool]:
    """Find or create the document row; ``(id, first chunk to write, replaced)``, or
    ``(None, 0, False)`` when the same content is already completely ingested; ``replaced`` when the
    content changed and the old chunks were removed.

    A changed document's old occurrences are deleted; they are part of the memory's log, so the
    state that learned from them is checkpointed in the same transaction (the weights keep what
    they learned, as :func:`titans_agent.erase.forget` does) and every process continues from it.

    The transaction opens it in the namespace as it is under the lock (:meth:`Runtimes.claim`):
    one dropped since the look-up is made again (as a first write makes it), and its chunking
    checked there (``runtimes.chunking``: the agent's, what :func:`_check_chunking` checked).

    Raises:
        ChunkingMismatchError: the namespace made again by another agent cut its documents otherwise.
        StoreError: the namespace stayed locked past the retry budget."""
    store, runtimes = ctx.store, ctx.runtimes
    wanted = runtimes.chunking
    for attempt in store.write_attempts():
        with attempt, store.write_session(rt.ns_id, name=rt.name) as s:
            revision = runtimes.claim(rt, s, create=True)
            if revision is None:  # pragma: no cover - claim(create=True) always finds or makes it
                raise StoreError(f"namespace {rt.name!r} could not be created")
            recorded = wanted is not None and rt.chunking != wanted
            if wanted is not None and recorded:
                _chunking_in(s, rt, wanted)
            learned: list = []
            materialise = partial(_state_before_delete, ctx, rt=rt, s=s, revision=revision, out=learned)
            doc_id, start, replaced = repository.open_document(
                s, rt.ns_id, src, item.sha256, n, before_delete=materialise
            )
            if replaced:
                checkpoint_after_delete(s, rt, learned[0], revision + 1)
            s.commit()
    if recorded:
        rt.follow_chunking(wanted)  # type: ignore[arg-type]
    if replaced:
        runtimes.follow_checkpoint(rt)  # its state is loaded again from the new checkpoint when needed
    return doc_id, start, replaced


def ingest_items(
    ctx: PipelineContext,
    *,
    rt: Runtime,
    chunker: Chunker,
    items: Iterable[SourceFile | SkippedFile],
    named: bool,
    metadata: dict[str, Any],
    hold: Callable[[], AbstractContextManager[Any]],
    progress: Callable[[IngestProgress], None] | None = None,
) -> IngestReport:
    """Chunk and write every document of ``items``; skipped files are reported, never raised.

    Args:
        ctx: the agent's context.
        rt: the namespace's runtime.
        chunker: cuts the documents.
        items: what discovery found (or one named text).
        named: the items are named texts (their source is their name, not a path).
        metadata: the caller's metadata, kept with every chunk (never mixed with locations).
        hold: a context that holds the namespace's lock, and raises ``StoreError`` when the agent
            was closed; every unit of work runs in one, nothing else does (see the module docstring).
        progress: called after every file and batch (after its commit), outside ``hold``.

    Raises:
        ChunkingMismatchError: the namespace's documents were cut with another configuration.
        StoreError: the agent was closed during the ingest (before the next unit; the batches
            committed before stay, and the document is resumed by the next ingest); see also
            :func:`~titans_agent.write.write_units`.
    """
    t0 = time.perf_counter()
    embedder, config = ctx.embedder, ctx.config
    report = IngestReport()
    prog = IngestProgress()
    pending: list[WriteUnit] = []
    progress_of: dict[int, tuple[int, bool]] = {}
    checked = False

    def flush() -> None:
        if not pending:
            return
        with hold():
            results: Sequence = write_units(ctx, rt=rt, units=pending, doc_progress=dict(progress_of))
        for r in results:
            if r.decision in ("new", "known"):
                report.stored += 1
                report.known += r.decision == "known"
            elif r.decision == "merged":
                report.merged += 1
            else:
                report.repeats += 1
        prog.chunks, prog.stored = report.chunks, report.stored  # every chunk queued is committed now
        prog.complete += sum(done for _, done in progress_of.values())
        pending.clear()
        progress_of.clear()

    def tell() -> None:
        if progress:
            progress(prog)

    for item in items:
        if isinstance(item, SkippedFile):
            report.skipped.append(SkippedSource(path=item.path, reason=item.reason))
            continue
        prog.current = item.display
        src = item.display if named else str(item.path)
        report.warnings.extend(f"{item.display}: {w}" for w in item.warnings)
        chunks = chunker.split(item.text, path=None if named else item.path, format=item.format)
        if not chunks:
            report.skipped.append(SkippedSource(path=item.display, reason="whitespace only"))
            continue
        with hold():
            if not checked:
                _check_chunking(ctx, rt=rt, wanted=chunking_config(chunker, embedder))
                checked = True
            doc_id, start, replaced = _open_document(ctx, rt=rt, item=item, src=src, n=len(chunks))
        if doc_id is None:
            report.unchanged += 1
            prog.files += 1
            prog.complete += 1
            tell()
            continue
        report.files += 1
        report.replaced += replaced
        language = None if item.format != "text" else language_for_path(item.display)
        code = language is not None and language.value not in NOT_CODE
        header = document_header(item.display, item.text, code)
        lines = item.text.splitlines() if language is not None and language.value == "python" else None
        meta = dict(metadata) if named else {"path": item.display, **metadata}  # the caller's keys win
        for c in chunks[start:]:
            pending.append(
                WriteUnit(
                    text=c.text,
                    kind="chunk",
                    context=chunk_context(
                        header, c.symbols or (enclosing_scopes(lines, c.start_line) if lines else ())
                    ),
                    source=src,
                    document_id=doc_id,
                    chunk_index=c.index,
                    start_line=c.start_line,
                    end_line=c.end_line,
                    meta=meta,
                    location=c.location.to_dict(),
                )
            )
            progress_of[doc_id] = (c.index + 1, c.index + 1 == len(chunks))
            report.chunks += 1
            if len(pending) >= config.batch_size:  # batches span files
                flush()
                tell()
        prog.files += 1
        tell()
    flush()
    prog.chunks = report.chunks
    tell()
    report.seconds = time.perf_counter() - t0
    return report
