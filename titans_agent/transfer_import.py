"""Import a file written by :func:`titans_agent.transfer.export_jsonl` (the format is described
there) into a database, in one transaction.

Import runs the checks a write runs, so that no file can put into a database what a write could
not: every line is read by :func:`titans_agent.transfer_format.read_lines` (strict UTF-8 and JSON,
no NaN or Infinity, values both databases store, fields as a write accepts them), every reference
and repeat is checked here (refs in order, known records, documents, sessions and occurrences; no
namespace, document, session or turn twice; text hashes that match their texts; an occurrence of a
document is a chunk of that document's source; a document has done at most its chunks; a session's
turns are numbered within ``1..n_turns`` (``add_turn`` numbers the next one ``n_turns + 1``); every turn
names a turn occurrence of its own session, one no other turn names, so that forgetting the
session forgets its transcript), the memory config and the chunking are validated by their models
(no other key, strict types), and every tensor
of a namespace is checked before its rows are written: the outer parameters and the state are
verified safetensors blobs (checksums, names), shaped and typed as the memory config says, and
finite; the embeddings are finite float32 vectors of the header's dimension. Any error raises an
:class:`~titans_agent.errors.InvalidInputError` naming the line and the field, and the transaction
rolls back: nothing is written.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import itertools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import ValidationError

from titans_agent.config import MemoryConfig
from titans_agent.context import HasContext, PipelineContext
from titans_agent.core.memory import MemoryState, NeuralMemory, params_from_bytes, state_from_bytes
from titans_agent.embeddings import Embedder
from titans_agent.errors import CorruptBlobError, EmbedderMismatchError, InvalidInputError, NonFiniteStateError
from titans_agent.rows import CheckpointHead
from titans_agent.runtime import replay_log
from titans_agent.store import dump, repository
from titans_agent.store.erasure import write_groups
from titans_agent.text import text_hash
from titans_agent.transfer_format import (
    COUNTERS,
    EXPORT_VERSION,
    DocumentLine,
    EndLine,
    HeaderLine,
    Line,
    NamespaceLine,
    OccurrenceLine,
    RecordLine,
    SessionLine,
    SupersessionLine,
    TransferReport,
    TurnLine,
    read_lines,
)
from titans_agent.validation import check_text

__all__ = ["REPLAY_UNITS", "import_jsonl"]

log = logging.getLogger(__name__)

_BATCH = 500
_IMPORT_LOCK = "titans-agent import"  # the write lock's name when a file names no namespace first

REPLAY_UNITS = 64
"""An imported namespace of fewer units than this keeps no checkpoint when its log, replayed from
M_0, gives the exported state bit for bit: as a namespace written here keeps none before
``AgentConfig.checkpoint_units`` (64) units. A checkpoint is 4.7 MB with the default memory, so
restoring thousands of small chat namespaces would otherwise cost about a hundred times what they
held."""


@dataclass
class _NamespaceImport:
    """Ids of what one namespace has inserted so far (file refs -> database ids)."""

    ns_id: int
    name: str
    documents: dict[str, int] = field(default_factory=dict)  # source -> id
    records: list[int] = field(default_factory=list)  # ref -> id
    occurrences: list[int] = field(default_factory=list)  # position -> id
    sessions: dict[str, int] = field(default_factory=dict)  # session id -> key
    n_turns: dict[str, int] = field(default_factory=dict)  # session id -> its n_turns
    turn_owners: list[str | None] = field(default_factory=list)  # position -> session id of a turn occurrence
    named: set[int] = field(default_factory=set)  # positions of occurrences a turn line names
    turns: set[tuple[str, int]] = field(default_factory=set)  # (session id, seq) seen
    pending_records: list[dict[str, Any]] = field(default_factory=list)  # of dump.RECORD_COLUMNS
    pending_occurrences: list[dict[str, Any]] = field(default_factory=list)  # of dump.OCCURRENCE_COLUMNS
    state: bytes = b""  # the exported state: checkpointed after the namespace's occurrences
    step: int = 0
    memory: NeuralMemory | None = None  # its outer parameters, as every process loads them


def _finish(s: Any, cur: _NamespaceImport) -> None:
    """Insert what is pending of the namespace, then checkpoint its exported state after its last
    occurrence (the state has applied every unit the file holds), unless the namespace is small and
    its log replays to that state exactly (:data:`REPLAY_UNITS`)."""
    _flush(s, cur)
    if cur.step < REPLAY_UNITS and _replays_exactly(s, cur):
        return
    head = CheckpointHead(0, dump.last_occurrence_id(s, cur.ns_id), cur.step)
    dump.save_checkpoint(s, cur.ns_id, cur.state, head)


def _replays_exactly(s: Any, cur: _NamespaceImport) -> bool:
    """Whether replaying the imported log from M_0 (as a process loading the namespace does) gives
    the exported state bit for bit."""
    if cur.memory is None:
        return False
    state, _ = replay_log(cur.memory, cur.memory.init_state(), 0, write_groups(s, cur.ns_id, 0))
    want = state_from_bytes(cur.state)
    got_t, want_t = (*state.weights, *state.momentum, state.pending), (*want.weights, *want.momentum, want.pending)
    return state.step == want.step and all(torch.equal(a, b) for a, b in zip(got_t, want_t, strict=True))


def _lock_name(path: Path) -> str:
    """The name the import's write lock is taken by: the file's first namespace (on PostgreSQL a
    concurrent creation of that namespace then waits for the import, or the import for it, and sees
    it), else a fixed one. Only a regular file is peeked at (the import reads it again); its errors
    are left to the import proper, which reports them where it meets them."""
    if path.is_file():
        try:
            with contextlib.closing(read_lines(path)) as lines:
                for _, line in itertools.islice(lines, 2):  # the header, then the first namespace
                    if isinstance(line, NamespaceLine):
                        return line.name
        except ValueError:  # InvalidInputError among them
            pass
    return _IMPORT_LOCK


def _unb64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInputError(f"{what}: not base64: {exc}") from None


def _check_header(line: Line, embedder: Embedder, path: Path) -> HeaderLine:
    if not isinstance(line, HeaderLine):
        raise InvalidInputError(f"{path}: the first line must be the titans-agent export header")
    if line.version > EXPORT_VERSION:
        raise InvalidInputError(
            f"{path}: export format version {line.version} is newer than this titans-agent reads ({EXPORT_VERSION})"
        )
    if line.embedder != embedder.name or line.dim != embedder.dim:
        raise EmbedderMismatchError(
            f"{path} was exported with embedder {line.embedder!r} (dim {line.dim}); this database uses "
            f"{embedder.name!r} (dim {embedder.dim}). Import it with the same embedder."
        )
    return line


def _memory(params: bytes, mcfg: MemoryConfig, where: str) -> NeuralMemory:
    """The namespace's memory with its outer parameters loaded (as a runtime loads them: same
    rounding), every parameter checked finite."""
    memory = NeuralMemory(mcfg, device="cpu", initialise=False)
    try:
        params_from_bytes(memory, params)  # verifies the checksum, names, shapes and dtypes
    except CorruptBlobError as exc:
        raise CorruptBlobError(f"{where}: params: {exc}") from None
    memory.requires_grad_(False)
    for name, tensor in memory.state_dict().items():
        if not bool(torch.isfinite(tensor).all()):
            raise InvalidInputError(f"{where}: params: the parameter {name} holds NaN or Infinity")
    return memory


def _state(blob: bytes, step: int, memory: NeuralMemory, where: str) -> MemoryState:
    """The namespace's state, checked against its memory: the same layers, shapes and dtype, fewer
    pending inputs than a chunk, the namespace's step, every value finite."""
    try:
        state = state_from_bytes(blob)  # checksum, names, consistency
    except CorruptBlobError as exc:
        raise CorruptBlobError(f"{where}: state: {exc}") from None
    except NonFiniteStateError:
        raise InvalidInputError(f"{where}: state: the memory state holds NaN or Infinity") from None
    cfg = memory.config
    if [tuple(w.shape) for w in state.weights] != [tuple(p.shape) for p in memory.M0]:
        raise InvalidInputError(f"{where}: state: its layers' shapes do not match the memory config")
    if any(t.dtype != memory.dtype for t in (*state.weights, *state.momentum, state.pending)):
        raise InvalidInputError(f"{where}: state: its tensors are not of the memory's dtype ({cfg.dtype})")
    if state.pending.shape[0] >= cfg.chunk_size:
        raise InvalidInputError(
            f"{where}: state: {state.pending.shape[0]} pending inputs; a state holds fewer than a chunk "
            f"({cfg.chunk_size})"
        )
    if state.step != step:
        raise InvalidInputError(f"{where}: state: its step {state.step} is not the namespace's step {step}")
    return state


def _new_namespace(s: Any, line: NamespaceLine, header: HeaderLine, where: str) -> _NamespaceImport:
    """Check the namespace's configuration and every tensor of it, then insert its row."""
    name = line.name
    repository.lock_namespace_name(s, name)  # held to the commit: no one makes or writes this name meanwhile
    if dump.namespace_exists(s, name):
        raise InvalidInputError(
            f"namespace {name!r} already exists in this database; import never merges "
            "(import into another database; forgetting its records does not remove a namespace)"
        )
    where = f"{where}: namespace line"
    try:
        mcfg = MemoryConfig.model_validate(line.memory_config, strict=True)
    except ValidationError as exc:
        raise InvalidInputError(f"{where}: memory_config: namespace {name!r} has an invalid one: {exc}") from None
    if mcfg.dim != header.dim:
        raise InvalidInputError(
            f"{where}: memory_config: namespace {name!r} has dim {mcfg.dim}, the header {header.dim}"
        )
    if line.chunking is not None and line.chunking.embedder != header.embedder:
        raise InvalidInputError(
            f"{where}: chunking.embedder: namespace {name!r} was chunked for embedder {line.chunking.embedder!r}, "
            f"the header's is {header.embedder!r}"
        )
    params, state = _unb64(line.params, f"{where}: params"), _unb64(line.state, f"{where}: state")
    memory = _memory(params, mcfg, where)
    _state(state, line.step, memory, where)
    ns_id = dump.insert_namespace(
        s,
        name,
        embedder=header.embedder,
        dim=header.dim,
        memory_config=line.memory_config,
        parameters_id=dump.parameters_id(s, params, line.memory_config),
        step=line.step,
        created_at=line.created_at,
        updated_at=line.updated_at,
        chunking=None if line.chunking is None else line.chunking.model_dump(),
    )
    return _NamespaceImport(ns_id, name, state=state, step=line.step, memory=memory)


def _flush(s: Any, cur: _NamespaceImport) -> None:
    """Insert the pending records, then the pending occurrences, and keep their new ids in order."""
    if cur.pending_records:
        cur.records.extend(dump.insert_records(s, cur.ns_id, cur.pending_records))
        cur.pending_records.clear()
    if cur.pending_occurrences:
        cur.occurrences.extend(dump.insert_occurrences(s, cur.ns_id, cur.pending_occurrences))
        cur.pending_occurrences.clear()


def _embedding(value: str, dim: int, where: str) -> bytes:
    emb = _unb64(value, f"{where}: embedding")
    if len(emb) != 4 * dim or not np.isfinite(np.frombuffer(emb, dtype=np.float32)).all():
        raise InvalidInputError(f"{where}: embedding: not {dim} finite float32 values")
    return emb


def _within(text: str, what: str, max_chars: int | None, where: str) -> None:
    """A turn's content no longer than a write of one may be (``AgentConfig.max_text_chars``). Records
    are not held to it: a chunk of a document is bounded by its tokens, not by characters."""
    try:
        check_text(text, what, max_chars)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}: {what}: {exc}") from None


def _add_line(s: Any, cur: _NamespaceImport, line: Line, dim: int, max_chars: int | None, where: str) -> None:
    ns_id = cur.ns_id
    where = f"{where}: {line.type} line"  # type: ignore[attr-defined]
    if isinstance(line, DocumentLine):
        if line.source in cur.documents:
            raise InvalidInputError(f"{where}: source: a second document {line.source!r} in namespace {cur.name!r}")
        if line.chunks_done > line.n_chunks:
            raise InvalidInputError(f"{where}: chunks_done: {line.chunks_done} done of {line.n_chunks} chunks")
        cur.documents[line.source] = dump.insert_document(s, ns_id, **line.model_dump(exclude={"type"}))
    elif isinstance(line, RecordLine):
        if line.ref != len(cur.records) + len(cur.pending_records):
            raise InvalidInputError(f"{where}: ref: record ref {line.ref} out of order")
        if text_hash(line.text) != line.text_hash:
            # the hash finds repeats: a wrong one would make a later write of that text a "repeat"
            raise InvalidInputError(
                f"{where}: text_hash: the record's text_hash does not match its text (crafted or damaged)"
            )
        emb = _embedding(line.embedding, dim, where)
        cur.pending_records.append({**line.model_dump(include=set(dump.RECORD_COLUMNS)), "embedding": emb})
    elif isinstance(line, OccurrenceLine):
        _flush(s, cur)
        if line.record >= len(cur.records):
            raise InvalidInputError(f"{where}: record: occurrence of unknown record {line.record}")
        if line.document is not None and line.document not in cur.documents:
            raise InvalidInputError(f"{where}: document: occurrence of unknown document {line.document!r}")
        if line.document is not None and line.kind != "chunk":
            raise InvalidInputError(f"{where}: document: a {line.kind} occurrence of document {line.document!r}")
        if line.document is not None and line.source != line.document:
            raise InvalidInputError(f"{where}: source: {line.source!r}, its document's is {line.document!r}")
        cur.turn_owners.append(line.session_id if line.kind == "turn" else None)
        own = None if line.embedding is None else _embedding(line.embedding, dim, where)
        columns = line.model_dump(include=set(dump.OCCURRENCE_COLUMNS) - {"location", "embedding"})
        cur.pending_occurrences.append(
            {
                **columns,
                "record_id": cur.records[line.record],
                "document_id": None if line.document is None else cur.documents[line.document],
                "meta": line.metadata,
                "location": None if line.location is None else line.location.to_dict(),
                "embedding": own,
            }
        )
    elif isinstance(line, SupersessionLine):
        _flush(s, cur)
        if max(line.old, line.new) >= len(cur.records):
            raise InvalidInputError(f"{where}: old: supersession of unknown record {max(line.old, line.new)}")
        if line.old == line.new:
            raise InvalidInputError(f"{where}: new: record {line.new} supersedes itself")
        old, new = cur.records[line.old], cur.records[line.new]
        rest = line.model_dump(include={"similarity", "effective_at", "created_at"})
        dump.add_supersession(s, ns_id, old_record_id=old, new_record_id=new, **rest)
    elif isinstance(line, SessionLine):
        _flush(s, cur)
        if line.session_id in cur.sessions:
            raise InvalidInputError(f"{where}: session_id: a second session {line.session_id!r}")
        cur.n_turns[line.session_id] = line.n_turns
        cur.sessions[line.session_id] = dump.insert_session(s, ns_id, **line.model_dump(exclude={"type"}))
    elif isinstance(line, TurnLine):
        _flush(s, cur)
        _within(line.content, "content", max_chars, where)
        session_pk = cur.sessions.get(line.session_id)
        if session_pk is None:
            raise InvalidInputError(f"{where}: session_id: turn of unknown session {line.session_id!r}")
        if (line.session_id, line.seq) in cur.turns:
            raise InvalidInputError(f"{where}: seq: a second turn {line.seq} of session {line.session_id!r}")
        cur.turns.add((line.session_id, line.seq))
        if line.seq > cur.n_turns[line.session_id]:
            raise InvalidInputError(
                f"{where}: seq: turn {line.seq} of session {line.session_id!r}, which counts "
                f"{cur.n_turns[line.session_id]} turns (n_turns)"
            )
        _check_turn_occurrence(cur, line, where)
        occurrence_id = cur.occurrences[line.occurrence]  # type: ignore[index]
        dump.add_turn(
            s, session_pk, **line.model_dump(exclude={"type", "session_id", "occurrence"}), occurrence_id=occurrence_id
        )
    if len(cur.pending_records) >= _BATCH or len(cur.pending_occurrences) >= _BATCH:
        _flush(s, cur)


def _check_turn_occurrence(cur: _NamespaceImport, line: TurnLine, where: str) -> None:
    """A transcript line goes with its occurrence (forgetting the occurrence deletes it): the line
    must name a turn occurrence of its own session that no other line names."""
    at = line.occurrence
    if at is None:
        raise InvalidInputError(f"{where}: occurrence: a turn needs its occurrence (it is forgotten with it)")
    if at >= len(cur.occurrences):
        raise InvalidInputError(f"{where}: occurrence: turn of unknown occurrence {at}")
    if cur.turn_owners[at] != line.session_id:
        raise InvalidInputError(
            f"{where}: occurrence: occurrence {at} is no turn occurrence of session {line.session_id!r}"
        )
    if at in cur.named:
        raise InvalidInputError(f"{where}: occurrence: occurrence {at} is named by a second turn")
    cur.named.add(at)


def import_jsonl(agent: HasContext, path: str | Path) -> TransferReport:
    """Import a file written by :func:`~titans_agent.transfer.export_jsonl` into the agent's
    database, in one transaction (:func:`import_file` with the agent's context).

    Every line is validated as a write validates what it stores (texts, names, metadata, finite
    numbers, integers and times the columns hold), every reference checked, and every tensor of a
    namespace verified before its rows are written (safetensors only, checksums, shapes and dtype
    against the memory config, finite values); on any error nothing is written. The transaction
    holds the database's write lock from its start (SQLite ``BEGIN IMMEDIATE``; PostgreSQL an
    advisory lock on the file's first namespace name) and, like every write, a lock conflict retries
    the whole import (:meth:`~titans_agent.store.engine.Store.write_attempts`). It holds the agent's
    exclusive lock too (other threads of this agent wait until it is done).

    Persisted (when it succeeds): each namespace of the file with its records, occurrences (and
    their metadata index), documents, knowledge updates, sessions and turns, its outer parameters
    and its state (a checkpoint, unless a small namespace's log replays to it exactly).

    Args:
        agent: an open :class:`~titans_agent.MemoryAgent`.
        path: the JSON Lines file.

    Returns:
        The counts imported.

    Raises:
        EmbedderMismatchError: the file was exported with another embedder name or dimension.
        InvalidInputError: the file is not a titans-agent export or is damaged or crafted (not
            UTF-8, bad JSON, NaN or Infinity, unknown or malformed lines, values a write would
            refuse (a turn's content over ``AgentConfig.max_text_chars`` among them), dangling
            references, a repeated namespace, document, session or turn, a memory
            state or parameter that is not finite or does not fit the memory config, a newer format
            version), or one of its namespaces already exists in the database (import never
            merges). The message names the line and the field.
        CorruptBlobError: a memory state or parameter blob is corrupted or crafted (checksum,
            names, shapes; also an ``InvalidInputError``).
        StoreError: the agent is closed, or the database cannot be written (also: still locked
            after the retries).
        OSError: the file cannot be read.
    """
    return import_file(agent.context, path=path)


def import_file(ctx: PipelineContext, *, path: str | Path) -> TransferReport:
    """:func:`import_jsonl` into the database ``ctx.store``, holding ``ctx.locks``' agent-wide side
    (persisted, and raised, as there)."""
    path = Path(path)
    store = ctx.store
    with ctx.locks.exclusive():
        ctx.check_open()  # raises StoreError when the agent is closed
        lock_name = _lock_name(path)
        for attempt in store.write_attempts():
            with attempt, store.write_session(name=lock_name) as s:
                report = _import(s, ctx, path)
                s.commit()
    log.info("imported %s from %s", report, path)
    return report


def _import(s: Any, ctx: PipelineContext, path: Path) -> TransferReport:
    """One attempt of :func:`import_jsonl`: read the whole file into the session ``s`` (uncommitted)."""
    report = TransferReport()
    header: HeaderLine | None = None
    cur: _NamespaceImport | None = None
    end: EndLine | None = None
    seen = 0  # lines before the end line
    max_chars = ctx.config.max_text_chars  # a turn's limit
    for lineno, line in read_lines(path):
        where = f"{path}:{lineno}"
        if header is None:
            header = _check_header(line, ctx.embedder, path)
            seen = 1
            continue
        if end is not None:
            raise InvalidInputError(f"{where}: a line after the end line")
        if isinstance(line, EndLine):
            if line.lines != seen:
                raise InvalidInputError(
                    f"{where}: the end line counts {line.lines} lines but the file has {seen}; the file is damaged"
                )
            end = line
            continue
        seen += 1
        if isinstance(line, HeaderLine):
            raise InvalidInputError(f"{where}: a second header")
        if isinstance(line, NamespaceLine):
            if line.name in report.namespaces:
                raise InvalidInputError(f"{where}: namespace line: name: namespace {line.name!r} twice in the file")
            if cur is not None:
                _finish(s, cur)
            cur = _new_namespace(s, line, header, where)
            report.namespaces.append(cur.name)
            continue
        if cur is None:
            raise InvalidInputError(f"{where}: a {line.type} line before any namespace line")  # type: ignore[attr-defined]
        _add_line(s, cur, line, header.dim, max_chars, where)
        kind = line.type  # type: ignore[attr-defined]
        if kind == "record":
            report.records += 1
        elif kind in COUNTERS:
            setattr(report, COUNTERS[kind], getattr(report, COUNTERS[kind]) + 1)
    if header is None:
        raise InvalidInputError(f"{path} is empty: no export header")
    if end is None:
        raise InvalidInputError(
            f"{path} has no end line: the file was cut short (an interrupted copy?); nothing was imported"
        )
    if cur is not None:
        _finish(s, cur)
    return report
