"""Export a memory database to JSON Lines and import it into another one.

The file is UTF-8 JSON Lines (``ensure_ascii``: every character, even a lone surrogate, round-trips),
one object per line, each with a ``type``:

1. ``header``: ``format`` ("titans-agent-export"), ``version`` (:data:`EXPORT_VERSION`, 3),
   ``embedder`` and ``dim``.
2. per namespace, sorted by name:

   - ``namespace``: name, memory config, outer parameters and test-time state (base64 safetensors
     blobs, with their sha256 checksums inside), step and times, and ``chunking`` (the chunking
     configuration its documents were cut with, or null);
   - ``document`` lines (sorted by source): content hash, chunk counts, completeness;
   - ``record`` lines in the order written, each with a ``ref`` (its position, 0, 1, ...): text,
     lexical context, the float32 embedding (base64), surprise, decision, hits and times;
   - ``occurrence`` lines in the order written, each naming its record by ``record`` (a ref) and its
     document by source, with the caller's ``metadata`` and, apart from it, ``location`` (where in
     its document a chunk is: :class:`~titans_agent.types.Location` in its short form, or null),
     ``write_revision`` (the namespace revision of the write that made it) and ``embedding`` (the
     float32 embedding it was written with, base64, where it differs from its record's; else null):
     what a rebuild of the memory replays (:mod:`titans_agent.erase`);
   - ``supersession`` lines (knowledge updates, in the order found): ``old`` and ``new`` record refs;
   - ``session`` lines (sorted by id) and ``turn`` lines (by session, then sequence), a turn naming
     its occurrence by position among the namespace's occurrences.
3. ``end``: the number of lines before it (``lines``). A file without it, or whose count differs,
   was cut short (a copy interrupted, ``head``) and is refused.

The export reads one snapshot (SQLite: one read transaction; PostgreSQL: REPEATABLE READ), so a
file written while other processes write is still consistent: its states match its records.

Nothing in the file depends on database ids or on when it was exported, so export, import into a
fresh database, export again gives a byte-identical file.

Versions: 2 added the namespace's ``chunking`` and the occurrence's ``location`` (schema version 3);
3 the occurrence's ``write_revision`` and ``embedding`` (schema version 4). Import reads every
version up to :data:`EXPORT_VERSION`: an older file lacks the newer fields, and imports with them
null. A file of a newer version is refused, saying so (the header is read first),
so an older titans-agent refuses a version-2 file with that reason instead of tripping over its
new fields.

Import is one transaction: it writes every namespace of the file, or (on any error) nothing. It
holds the write lock from its start, and a lock conflict retries it whole, like every write. It
refuses a file written with another embedder (name or dimension), and a namespace that already
exists in the database (it never merges; import into another database, or ``forget`` first).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import itertools
import json
import logging
import os
import tempfile
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from titans_agent.config import MemoryConfig
from titans_agent.core.memory import NeuralMemory, params_from_bytes, state_from_bytes, state_to_bytes
from titans_agent.errors import EmbedderMismatchError, InvalidInputError
from titans_agent.rows import CheckpointHead
from titans_agent.runtime import replay_log
from titans_agent.store import dump
from titans_agent.store.erasure import write_groups
from titans_agent.text import text_hash
from titans_agent.types import Location
from titans_agent.validation import check_namespace

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "TransferReport", "export_jsonl", "import_jsonl"]

log = logging.getLogger(__name__)

EXPORT_FORMAT = "titans-agent-export"
EXPORT_VERSION = 3
"""The export format version written; import reads 1 (without ``chunking`` and ``location``), 2
(without ``write_revision`` and ``embedding``) and 3."""
_BATCH = 500
_IMPORT_LOCK = "titans-agent import"  # the write lock's name when a file names no namespace first


class TransferReport(BaseModel):
    """What an export or import moved: counts over every namespace in the file."""

    namespaces: list[str] = Field(default_factory=list)
    records: int = 0
    occurrences: int = 0
    supersessions: int = 0
    documents: int = 0
    sessions: int = 0
    turns: int = 0


# ---------------------------------------------------------------------- line models
class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


class _Header(_Line):
    type: Literal["header"]
    format: Literal["titans-agent-export"]
    version: int = Field(ge=1)
    embedder: str
    dim: int = Field(ge=1)


class _Namespace(_Line):
    type: Literal["namespace"]
    name: str
    memory_config: dict[str, Any]
    params: str
    state: str
    step: int = Field(ge=0)
    created_at: dt.datetime
    updated_at: dt.datetime
    chunking: dict[str, Any] | None = None  # version 2 on


class _Document(_Line):
    type: Literal["document"]
    source: str
    sha256: str = Field(max_length=64)
    n_chunks: int = Field(ge=0)
    chunks_done: int = Field(ge=0)
    complete: bool
    created_at: dt.datetime
    updated_at: dt.datetime


class _Record(_Line):
    type: Literal["record"]
    ref: int = Field(ge=0)
    text: str
    context: str
    text_hash: str = Field(max_length=64)
    embedding: str
    surprise: float | None
    decision: Literal["new", "known"]
    hits: int = Field(ge=0)
    created_at: dt.datetime
    last_seen_at: dt.datetime


class _Occurrence(_Line):
    type: Literal["occurrence"]
    record: int = Field(ge=0)
    document: str | None
    kind: Literal["chunk", "note", "turn"]
    source: str | None
    chunk_index: int | None
    start_line: int | None
    end_line: int | None
    metadata: dict[str, Any]
    session_id: str | None
    role: str | None
    timestamp: dt.datetime | None
    created_at: dt.datetime
    location: Location | None = None  # version 2 on; Location.to_dict() form
    write_revision: int | None = Field(None, ge=0)  # version 3 on
    embedding: str | None = None  # version 3 on; base64 float32, only where it differs from the record's


class _Supersession(_Line):
    type: Literal["supersession"]
    old: int = Field(ge=0)
    new: int = Field(ge=0)
    similarity: float
    effective_at: dt.datetime
    created_at: dt.datetime


class _Session(_Line):
    type: Literal["session"]
    session_id: str
    n_turns: int = Field(ge=0)
    created_at: dt.datetime
    updated_at: dt.datetime


class _Turn(_Line):
    type: Literal["turn"]
    session_id: str
    seq: int = Field(ge=0)
    role: str
    content: str
    timestamp: dt.datetime
    occurrence: int | None = Field(default=None, ge=0)


_COUNTERS = {
    "occurrence": "occurrences",
    "supersession": "supersessions",
    "document": "documents",
    "session": "sessions",
    "turn": "turns",
}


class _End(_Line):
    type: Literal["end"]
    lines: int = Field(ge=1)


_MODELS: dict[str, type[_Line]] = {
    "end": _End,
    "header": _Header,
    "namespace": _Namespace,
    "document": _Document,
    "record": _Record,
    "occurrence": _Occurrence,
    "supersession": _Supersession,
    "session": _Session,
    "turn": _Turn,
}
_TYPES = {model: kind for kind, model in _MODELS.items()}


# ---------------------------------------------------------------------- export
def _time(value: dt.datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc).isoformat()


def _b64(data: bytes | bytearray | memoryview) -> str:
    return base64.b64encode(data).decode("ascii")


def _dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=True, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"


def _line(model: type[_Line], row: Mapping[str, Any], **values: Any) -> str:
    """One line of ``model``'s type: each of its fields from ``values``, else from the row's column
    of that name; times in ISO form (UTC), blobs in base64. The line models define the format both
    ways: what import validates is what export writes."""
    obj: dict[str, Any] = {"type": _TYPES[model]}
    for name in model.model_fields:
        if name != "type":
            value = values[name] if name in values else row[name]
            if isinstance(value, dt.datetime):
                value = _time(value)
            elif isinstance(value, (bytes, bytearray, memoryview)):
                value = _b64(value)
            obj[name] = value
    return _dumps(obj)


def _full_state(s: Any, ns: Mapping[str, Any]) -> bytes:
    """The namespace's whole memory state (its checkpoint, or M_0, followed by the writes logged
    after it), as the blob an export line carries."""
    memory = NeuralMemory(MemoryConfig.model_validate(ns["memory_config"]), device="cpu", initialise=False)
    params_from_bytes(memory, ns["params"])
    memory.requires_grad_(False)
    if ns["checkpoint"] is None:
        state, position = memory.init_state(), 0
    else:
        head, blob = ns["checkpoint"]
        state, position = state_from_bytes(blob), head.position
    state, last = replay_log(memory, state, position, write_groups(s, ns["id"], position))
    if ns["checkpoint"] is not None and last == position:
        return blob  # nothing written since: the checkpoint's own bytes (an import's, byte for byte)
    return state_to_bytes(state)


def _namespace_lines(s: Any, name: str, report: TransferReport) -> Iterator[str]:
    ns = dump.namespace_row(s, name)
    yield _line(_Namespace, ns, state=_full_state(s, ns))
    doc_source: dict[int, str] = {}
    for d in dump.document_rows(s, ns["id"]):
        doc_source[d["id"]] = d["source"]
        report.documents += 1
        yield _line(_Document, d, complete=bool(d["complete"]))
    record_ref: dict[int, int] = {}
    for r in dump.record_rows(s, ns["id"]):
        record_ref[r["id"]] = len(record_ref)
        yield _line(_Record, r, ref=record_ref[r["id"]])
    report.records += len(record_ref)
    occ_ref: dict[int, int] = {}
    for o in dump.occurrence_rows(s, ns["id"]):
        occ_ref[o["id"]] = len(occ_ref)
        document = None if o["document_id"] is None else doc_source[o["document_id"]]
        yield _line(_Occurrence, o, record=record_ref[o["record_id"]], document=document, metadata=o["meta"] or {})
    report.occurrences += len(occ_ref)
    for link in dump.supersession_rows(s, ns["id"]):
        report.supersessions += 1
        yield _line(_Supersession, link, old=record_ref[link["old_record_id"]], new=record_ref[link["new_record_id"]])
    for sess in dump.session_rows(s, ns["id"]):
        report.sessions += 1
        yield _line(_Session, sess)
    for t in dump.turn_rows(s, ns["id"]):
        report.turns += 1
        occurrence = None if t["occurrence_id"] is None else occ_ref.get(t["occurrence_id"])
        yield _line(_Turn, t, occurrence=occurrence)


def export_jsonl(agent: Any, path: str | Path, namespaces: Sequence[str] | None = None) -> TransferReport:
    """Write the agent's namespaces (all, or ``namespaces``) to a JSON Lines file.

    The file is written next to ``path`` under a temporary name and renamed when complete, so a
    failed export never leaves a partial file. The export reads one snapshot (SQLite: one read
    transaction; PostgreSQL: REPEATABLE READ), so concurrent writers cannot make it inconsistent.
    Other threads of the agent go on meanwhile (it reads the database, not their runtimes); it
    takes no database write lock.

    Args:
        agent: an open :class:`~titans_agent.MemoryAgent`.
        path: the file to write (replaced if it exists).
        namespaces: names to export (exact); None exports every namespace.

    Returns:
        The counts written.

    Raises:
        InvalidInputError: a named namespace does not exist, or a name is malformed.
        StoreError: the agent is closed.
        OSError: the file cannot be written.
    """
    locks = getattr(agent, "_locks", None)
    with contextlib.nullcontext() if locks is None else locks.namespace(None):
        return _export(agent, Path(path), namespaces)


def _export(agent: Any, target: Path, namespaces: Sequence[str] | None) -> TransferReport:
    existing = agent.namespaces()  # raises StoreError when the agent is closed
    if namespaces is None:
        names = existing
    else:
        if isinstance(namespaces, str):
            raise InvalidInputError("namespaces must be a list of names, not a string")
        names = sorted({check_namespace(n) for n in namespaces})
        missing = [n for n in names if n not in existing]
        if missing:
            raise InvalidInputError(f"no namespace {missing[0]!r} in the database (it has {existing})")
    report = TransferReport(namespaces=names)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or Path("."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out, agent.store.snapshot_session() as s:
            written = 1
            out.write(
                _dumps(
                    {
                        "type": "header",
                        "format": EXPORT_FORMAT,
                        "version": EXPORT_VERSION,
                        "embedder": agent.embedder.name,
                        "dim": agent.embedder.dim,
                    }
                )
            )
            for name in names:
                lines = list(_namespace_lines(s, name, report))
                out.writelines(lines)
                written += len(lines)
            out.write(_dumps({"type": "end", "lines": written}))
            s.rollback()
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    log.info("exported %s to %s", report, target)
    return report


# ---------------------------------------------------------------------- import
@dataclass
class _NamespaceImport:
    """Ids of what one namespace has inserted so far (file refs -> database ids)."""

    ns_id: int
    name: str
    documents: dict[str, int] = field(default_factory=dict)  # source -> id
    records: list[int] = field(default_factory=list)  # ref -> id
    occurrences: list[int] = field(default_factory=list)  # position -> id
    sessions: dict[str, int] = field(default_factory=dict)  # session id -> key
    pending_records: list[dict[str, Any]] = field(default_factory=list)  # of dump.RECORD_COLUMNS
    pending_occurrences: list[dict[str, Any]] = field(default_factory=list)  # of dump.OCCURRENCE_COLUMNS
    state: bytes = b""  # the exported state: checkpointed after the namespace's occurrences
    step: int = 0
    memory: NeuralMemory | None = None  # its outer parameters, as every process loads them


REPLAY_UNITS = 64
"""An imported namespace of fewer units than this keeps no checkpoint when its log, replayed from
M_0, gives the exported state bit for bit: as a namespace written here keeps none before
``AgentConfig.checkpoint_units`` (64) units. A checkpoint is 4.7 MB with the default memory, so
restoring thousands of small chat namespaces would otherwise cost about a hundred times what they
held."""


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


def _lines(path: Path) -> Generator[tuple[int, _Line], None, None]:
    with path.open("r", encoding="utf-8", newline="\n") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError as exc:
                raise InvalidInputError(f"{path}:{lineno}: not JSON: {exc}") from None
            kind = obj.get("type") if isinstance(obj, dict) else None
            model = _MODELS.get(kind) if isinstance(kind, str) else None
            if model is None:
                raise InvalidInputError(f"{path}:{lineno}: unknown line type {kind!r}")
            try:
                yield lineno, model.model_validate(obj)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise InvalidInputError(f"{path}:{lineno}: {kind} line: {where}: {first['msg']}") from None


def _lock_name(path: Path) -> str:
    """The name the import's write lock is taken by: the file's first namespace (on PostgreSQL a
    concurrent creation of that namespace then waits for the import, or the import for it, and sees
    it), else a fixed one. Only a regular file is peeked at (the import reads it again); its errors
    are left to the import proper, which reports them where it meets them."""
    if path.is_file():
        try:
            with contextlib.closing(_lines(path)) as lines:
                for _, line in itertools.islice(lines, 2):  # the header, then the first namespace
                    if isinstance(line, _Namespace):
                        return check_namespace(line.name)
        except (InvalidInputError, ValueError):
            pass
    return _IMPORT_LOCK


def _unb64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInputError(f"{what} is not base64: {exc}") from None


def _check_header(line: _Line, agent: Any, path: Path) -> _Header:
    if not isinstance(line, _Header):
        raise InvalidInputError(f"{path}: the first line must be the titans-agent export header")
    if line.version > EXPORT_VERSION:
        raise InvalidInputError(
            f"{path}: export format version {line.version} is newer than this titans-agent reads ({EXPORT_VERSION})"
        )
    if line.embedder != agent.embedder.name or line.dim != agent.embedder.dim:
        raise EmbedderMismatchError(
            f"{path} was exported with embedder {line.embedder!r} (dim {line.dim}); this database uses "
            f"{agent.embedder.name!r} (dim {agent.embedder.dim}). Import it with the same embedder."
        )
    return line


def _new_namespace(s: Any, line: _Namespace, header: _Header, lineno: int) -> _NamespaceImport:
    name = check_namespace(line.name)
    if dump.namespace_exists(s, name):
        raise InvalidInputError(
            f"namespace {name!r} already exists in this database; import never merges "
            "(import into another database; forgetting its records does not remove a namespace)"
        )
    try:
        mcfg = MemoryConfig.model_validate(line.memory_config)
    except ValidationError as exc:
        raise InvalidInputError(f"line {lineno}: namespace {name!r} has an invalid memory config: {exc}") from None
    if mcfg.dim != header.dim:
        raise InvalidInputError(f"line {lineno}: namespace {name!r} has dim {mcfg.dim}, the header says {header.dim}")
    params, state_blob = _unb64(line.params, "params"), _unb64(line.state, "state")
    memory = NeuralMemory(mcfg, device="cpu", initialise=False)  # as a runtime loads it: same rounding
    params_from_bytes(memory, params)  # verifies the checksum, names and shapes
    memory.requires_grad_(False)
    state = state_from_bytes(state_blob)  # verifies the checksum and the state's consistency
    if [tuple(w.shape) for w in state.weights] != [tuple(p.shape) for p in memory.M0] or state.step != line.step:
        raise InvalidInputError(f"line {lineno}: namespace {name!r}: its state does not match its memory config")
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
        chunking=line.chunking,
    )
    return _NamespaceImport(ns_id, name, state=state_blob, step=line.step, memory=memory)


def _flush(s: Any, cur: _NamespaceImport) -> None:
    """Insert the pending records, then the pending occurrences, and keep their new ids in order."""
    if cur.pending_records:
        cur.records.extend(dump.insert_records(s, cur.ns_id, cur.pending_records))
        cur.pending_records.clear()
    if cur.pending_occurrences:
        cur.occurrences.extend(dump.insert_occurrences(s, cur.ns_id, cur.pending_occurrences))
        cur.pending_occurrences.clear()


def _add_line(s: Any, cur: _NamespaceImport, line: _Line, dim: int, where: str) -> None:
    ns_id = cur.ns_id
    if isinstance(line, _Document):
        cur.documents[line.source] = dump.insert_document(s, ns_id, **line.model_dump(exclude={"type"}))
    elif isinstance(line, _Record):
        if line.ref != len(cur.records) + len(cur.pending_records):
            raise InvalidInputError(f"{where}: record ref {line.ref} out of order")
        if not line.text.strip():
            raise InvalidInputError(f"{where}: a record with empty text")
        if text_hash(line.text) != line.text_hash:
            # the hash finds repeats: a wrong one would make a later write of that text a "repeat"
            raise InvalidInputError(f"{where}: the record's text_hash does not match its text (crafted or damaged)")
        emb = _unb64(line.embedding, "embedding")
        if len(emb) != 4 * dim or not np.isfinite(np.frombuffer(emb, dtype=np.float32)).all():
            raise InvalidInputError(f"{where}: embedding is not {dim} finite float32 values")
        cur.pending_records.append({**line.model_dump(include=set(dump.RECORD_COLUMNS)), "embedding": emb})
    elif isinstance(line, _Occurrence):
        _flush(s, cur)
        if line.record >= len(cur.records):
            raise InvalidInputError(f"{where}: occurrence of unknown record {line.record}")
        if line.document is not None and line.document not in cur.documents:
            raise InvalidInputError(f"{where}: occurrence of unknown document {line.document!r}")
        emb = None
        if line.embedding is not None:
            emb = _unb64(line.embedding, "embedding")
            if len(emb) != 4 * dim or not np.isfinite(np.frombuffer(emb, dtype=np.float32)).all():
                raise InvalidInputError(f"{where}: occurrence embedding is not {dim} finite float32 values")
        columns = line.model_dump(include=set(dump.OCCURRENCE_COLUMNS) - {"location", "embedding"})
        cur.pending_occurrences.append(
            {
                **columns,
                "record_id": cur.records[line.record],
                "document_id": None if line.document is None else cur.documents[line.document],
                "meta": line.metadata,
                "location": None if line.location is None else line.location.to_dict(),
                "embedding": emb,
            }
        )
    elif isinstance(line, _Supersession):
        _flush(s, cur)
        if max(line.old, line.new) >= len(cur.records):
            raise InvalidInputError(f"{where}: supersession of unknown record {max(line.old, line.new)}")
        old, new = cur.records[line.old], cur.records[line.new]
        rest = line.model_dump(include={"similarity", "effective_at", "created_at"})
        dump.add_supersession(s, ns_id, old_record_id=old, new_record_id=new, **rest)
    elif isinstance(line, _Session):
        _flush(s, cur)
        cur.sessions[line.session_id] = dump.insert_session(s, ns_id, **line.model_dump(exclude={"type"}))
    elif isinstance(line, _Turn):
        _flush(s, cur)
        session_pk = cur.sessions.get(line.session_id)
        if session_pk is None:
            raise InvalidInputError(f"{where}: turn of unknown session {line.session_id!r}")
        if line.occurrence is not None and line.occurrence >= len(cur.occurrences):
            raise InvalidInputError(f"{where}: turn of unknown occurrence {line.occurrence}")
        occurrence_id = None if line.occurrence is None else cur.occurrences[line.occurrence]
        dump.add_turn(
            s, session_pk, **line.model_dump(exclude={"type", "session_id", "occurrence"}), occurrence_id=occurrence_id
        )
    if len(cur.pending_records) >= _BATCH or len(cur.pending_occurrences) >= _BATCH:
        _flush(s, cur)


def import_jsonl(agent: Any, path: str | Path) -> TransferReport:
    """Import a file written by :func:`export_jsonl` into the agent's database, in one transaction.

    Every blob is verified (safetensors only, checksums, shapes against the memory config) and every
    line validated before anything is committed; on any error nothing is written. The transaction
    holds the database's write lock from its start (SQLite ``BEGIN IMMEDIATE``; PostgreSQL an
    advisory lock on the file's first namespace name) and, like every write, a lock conflict retries
    the whole import (:meth:`~titans_agent.store.engine.Store.write_attempts`). It holds the agent's
    exclusive lock too (other threads of this agent wait until it is done).

    Args:
        agent: an open :class:`~titans_agent.MemoryAgent`.
        path: the JSON Lines file.

    Returns:
        The counts imported.

    Raises:
        EmbedderMismatchError: the file was exported with another embedder name or dimension.
        InvalidInputError: the file is not a titans-agent export (bad JSON, unknown or malformed
            lines, dangling references, a newer format version), or one of its namespaces already
            exists in the database (import never merges).
        CorruptBlobError: a memory state or parameter blob is corrupted or crafted.
        StoreError: the agent is closed, or the database cannot be written (also: still locked
            after the retries).
        OSError: the file cannot be read.
    """
    path = Path(path)
    locks = getattr(agent, "_locks", None)
    with contextlib.nullcontext() if locks is None else locks.exclusive():
        agent.namespaces()  # raises StoreError when the agent is closed
        store = agent.store
        lock_name = _lock_name(path)
        for attempt in store.write_attempts():
            with attempt, store.write_session(name=lock_name) as s:
                report = _import(s, agent, path)
                s.commit()
    log.info("imported %s from %s", report, path)
    return report


def _import(s: Any, agent: Any, path: Path) -> TransferReport:
    """One attempt of :func:`import_jsonl`: read the whole file into the session ``s`` (uncommitted)."""
    report = TransferReport()
    header: _Header | None = None
    cur: _NamespaceImport | None = None
    end: _End | None = None
    seen = 0  # lines before the end line
    for lineno, line in _lines(path):
        where = f"{path}:{lineno}"
        if header is None:
            header = _check_header(line, agent, path)
            seen = 1
            continue
        if end is not None:
            raise InvalidInputError(f"{where}: a line after the end line")
        if isinstance(line, _End):
            if line.lines != seen:
                raise InvalidInputError(
                    f"{where}: the end line counts {line.lines} lines but the file has {seen}; the file is damaged"
                )
            end = line
            continue
        seen += 1
        if isinstance(line, _Header):
            raise InvalidInputError(f"{where}: a second header")
        if isinstance(line, _Namespace):
            if cur is not None:
                _finish(s, cur)
            cur = _new_namespace(s, line, header, lineno)
            report.namespaces.append(cur.name)
            continue
        if cur is None:
            raise InvalidInputError(f"{where}: a {line.type} line before any namespace line")  # type: ignore[attr-defined]
        _add_line(s, cur, line, header.dim, where)
        kind = line.type  # type: ignore[attr-defined]
        if kind == "record":
            report.records += 1
        elif kind in _COUNTERS:
            setattr(report, _COUNTERS[kind], getattr(report, _COUNTERS[kind]) + 1)
    if header is None:
        raise InvalidInputError(f"{path} is empty: no export header")
    if end is None:
        raise InvalidInputError(
            f"{path} has no end line: the file was cut short (an interrupted copy?); nothing was imported"
        )
    if cur is not None:
        _finish(s, cur)
    return report
