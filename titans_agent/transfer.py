"""Export a memory database to JSON Lines and import it into another one.

The file is UTF-8 JSON Lines (``ensure_ascii``: every character, even a lone surrogate, round-trips),
one object per line, each with a ``type``:

1. ``header``: ``format`` ("titans-agent-export"), ``version`` (1), ``embedder`` and ``dim``.
2. per namespace, sorted by name:

   - ``namespace``: name, memory config, outer parameters and test-time state (base64 safetensors
     blobs, with their sha256 checksums inside), step and times;
   - ``document`` lines (sorted by source): content hash, chunk counts, completeness;
   - ``record`` lines in the order written, each with a ``ref`` (its position, 0, 1, ...): text,
     lexical context, the float32 embedding (base64), surprise, decision, hits and times;
   - ``occurrence`` lines in the order written, each naming its record by ``record`` (a ref) and its
     document by source;
   - ``supersession`` lines (knowledge updates, in the order found): ``old`` and ``new`` record refs;
   - ``session`` lines (sorted by id) and ``turn`` lines (by session, then sequence), a turn naming
     its occurrence by position among the namespace's occurrences.
3. ``end``: the number of lines before it (``lines``). A file without it, or whose count differs,
   was cut short (a copy interrupted, ``head``) and is refused.

The export reads one snapshot (SQLite: one read transaction; PostgreSQL: REPEATABLE READ), so a
file written while other processes write is still consistent: its states match its records.

Nothing in the file depends on database ids or on when it was exported, so export, import into a
fresh database, export again gives a byte-identical file.

Import is one transaction: it writes every namespace of the file, or (on any error) nothing. It
refuses a file written with another embedder (name or dimension), and a namespace that already
exists in the database (it never merges; import into another database, or ``forget`` first).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from titans_agent.config import MemoryConfig
from titans_agent.errors import EmbedderMismatchError, InvalidInputError
from titans_agent.core.memory import NeuralMemory, params_from_bytes, state_from_bytes
from titans_agent.store import Document, NamespaceRow, Occurrence, Record, SessionRow, Turn
from titans_agent.store import Supersession
from titans_agent.text import text_hash
from titans_agent.validation import check_namespace

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "TransferReport", "export_jsonl", "import_jsonl"]

log = logging.getLogger(__name__)

EXPORT_FORMAT = "titans-agent-export"
EXPORT_VERSION = 1
_BATCH = 500


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
    version: int
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


# ---------------------------------------------------------------------- export
def _time(value: dt.datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc).isoformat()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=True, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"


def _namespace_lines(s: Session, ns: NamespaceRow, report: TransferReport) -> Iterator[str]:
    yield _dumps(
        {
            "type": "namespace",
            "name": ns.name,
            "memory_config": ns.memory_config,
            "params": _b64(ns.params),
            "state": _b64(ns.state),
            "step": ns.step,
            "created_at": _time(ns.created_at),
            "updated_at": _time(ns.updated_at),
        }
    )
    docs = s.execute(select(Document).where(Document.namespace_id == ns.id).order_by(Document.source)).scalars()
    doc_source: dict[int, str] = {}
    for d in docs:
        doc_source[d.id] = d.source
        report.documents += 1
        yield _dumps(
            {
                "type": "document",
                "source": d.source,
                "sha256": d.sha256,
                "n_chunks": d.n_chunks,
                "chunks_done": d.chunks_done,
                "complete": bool(d.complete),
                "created_at": _time(d.created_at),
                "updated_at": _time(d.updated_at),
            }
        )
    record_ref: dict[int, int] = {}
    for r in s.execute(select(Record).where(Record.namespace_id == ns.id).order_by(Record.id)).scalars():
        record_ref[r.id] = len(record_ref)
        yield _dumps(
            {
                "type": "record",
                "ref": record_ref[r.id],
                "text": r.text,
                "context": r.context,
                "text_hash": r.text_hash,
                "embedding": _b64(r.embedding),
                "surprise": r.surprise,
                "decision": r.decision,
                "hits": r.hits,
                "created_at": _time(r.created_at),
                "last_seen_at": _time(r.last_seen_at),
            }
        )
    report.records += len(record_ref)
    occ_ref: dict[int, int] = {}
    for o in s.execute(select(Occurrence).where(Occurrence.namespace_id == ns.id).order_by(Occurrence.id)).scalars():
        occ_ref[o.id] = len(occ_ref)
        yield _dumps(
            {
                "type": "occurrence",
                "record": record_ref[o.record_id],
                "document": None if o.document_id is None else doc_source[o.document_id],
                "kind": o.kind,
                "source": o.source,
                "chunk_index": o.chunk_index,
                "start_line": o.start_line,
                "end_line": o.end_line,
                "metadata": o.meta or {},
                "session_id": o.session_id,
                "role": o.role,
                "timestamp": _time(o.timestamp),
                "created_at": _time(o.created_at),
            }
        )
    report.occurrences += len(occ_ref)
    links = s.execute(
        select(Supersession).where(Supersession.namespace_id == ns.id).order_by(Supersession.id)
    ).scalars()
    for link in links:
        report.supersessions += 1
        yield _dumps(
            {
                "type": "supersession",
                "old": record_ref[link.old_record_id],
                "new": record_ref[link.new_record_id],
                "similarity": link.similarity,
                "effective_at": _time(link.effective_at),
                "created_at": _time(link.created_at),
            }
        )
    sessions = s.execute(
        select(SessionRow).where(SessionRow.namespace_id == ns.id).order_by(SessionRow.session_id)
    ).scalars()
    for sess in sessions:
        report.sessions += 1
        yield _dumps(
            {
                "type": "session",
                "session_id": sess.session_id,
                "n_turns": sess.n_turns,
                "created_at": _time(sess.created_at),
                "updated_at": _time(sess.updated_at),
            }
        )
    turns = s.execute(
        select(Turn, SessionRow.session_id)
        .join(SessionRow, Turn.session_pk == SessionRow.id)
        .where(SessionRow.namespace_id == ns.id)
        .order_by(SessionRow.session_id, Turn.seq)
    ).all()
    for t, session_id in turns:
        report.turns += 1
        yield _dumps(
            {
                "type": "turn",
                "session_id": session_id,
                "seq": t.seq,
                "role": t.role,
                "content": t.content,
                "timestamp": _time(t.timestamp),
                "occurrence": None if t.occurrence_id is None else occ_ref.get(t.occurrence_id),
            }
        )


def export_jsonl(agent: Any, path: str | Path, namespaces: Sequence[str] | None = None) -> TransferReport:
    """Write the agent's namespaces (all, or ``namespaces``) to a JSON Lines file.

    The file is written next to ``path`` under a temporary name and renamed when complete, so a
    failed export never leaves a partial file. On SQLite the export reads one snapshot (one read
    transaction), so concurrent writers cannot make it inconsistent.

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
    target = Path(path)
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
                ns = s.execute(select(NamespaceRow).where(NamespaceRow.name == name)).scalar_one()
                lines = list(_namespace_lines(s, ns, report))
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
class _NamespaceImport:
    """Ids of what one namespace has inserted so far (file refs -> database ids)."""

    def __init__(self, row: NamespaceRow) -> None:
        self.row = row
        self.documents: dict[str, int] = {}
        self.records: list[int] = []
        self.occurrences: list[int] = []
        self.sessions: dict[str, int] = {}
        self.pending_records: list[Record] = []
        self.pending_occurrences: list[Occurrence] = []


def _lines(path: Path) -> Iterator[tuple[int, _Line]]:
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


def _new_namespace(s: Session, line: _Namespace, header: _Header, lineno: int) -> NamespaceRow:
    name = check_namespace(line.name)
    if s.execute(select(NamespaceRow.id).where(NamespaceRow.name == name)).first() is not None:
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
    memory = NeuralMemory(mcfg, device="cpu")
    params_from_bytes(memory, params)  # verifies the checksum, names and shapes
    state = state_from_bytes(state_blob)  # verifies the checksum and the state's consistency
    if [tuple(w.shape) for w in state.weights] != [tuple(p.shape) for p in memory.M0] or state.step != line.step:
        raise InvalidInputError(f"line {lineno}: namespace {name!r}: its state does not match its memory config")
    row = NamespaceRow(
        name=name,
        embedder=header.embedder,
        dim=header.dim,
        memory_config=line.memory_config,
        params=params,
        state=state_blob,
        step=line.step,
        revision=0,
        created_at=line.created_at,
        updated_at=line.updated_at,
    )
    s.add(row)
    s.flush()
    return row


def _flush(s: Session, cur: _NamespaceImport) -> None:
    """Insert the pending records, then the pending occurrences, and keep their new ids in order."""
    if cur.pending_records:
        s.add_all(cur.pending_records)
        s.flush()
        cur.records.extend(r.id for r in cur.pending_records)
        cur.pending_records.clear()
    if cur.pending_occurrences:
        s.add_all(cur.pending_occurrences)
        s.flush()
        cur.occurrences.extend(o.id for o in cur.pending_occurrences)
        cur.pending_occurrences.clear()


def _add_line(s: Session, cur: _NamespaceImport, line: _Line, dim: int, where: str) -> None:
    ns_id = cur.row.id
    if isinstance(line, _Document):
        doc = Document(
            namespace_id=ns_id,
            source=line.source,
            sha256=line.sha256,
            n_chunks=line.n_chunks,
            chunks_done=line.chunks_done,
            complete=line.complete,
            created_at=line.created_at,
            updated_at=line.updated_at,
        )
        s.add(doc)
        s.flush()
        cur.documents[line.source] = doc.id
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
        cur.pending_records.append(
            Record(
                namespace_id=ns_id,
                text=line.text,
                context=line.context,
                text_hash=line.text_hash,
                embedding=emb,
                surprise=line.surprise,
                decision=line.decision,
                hits=line.hits,
                created_at=line.created_at,
                last_seen_at=line.last_seen_at,
            )
        )
    elif isinstance(line, _Occurrence):
        _flush(s, cur)
        if line.record >= len(cur.records):
            raise InvalidInputError(f"{where}: occurrence of unknown record {line.record}")
        if line.document is not None and line.document not in cur.documents:
            raise InvalidInputError(f"{where}: occurrence of unknown document {line.document!r}")
        cur.pending_occurrences.append(
            Occurrence(
                record_id=cur.records[line.record],
                namespace_id=ns_id,
                document_id=None if line.document is None else cur.documents[line.document],
                kind=line.kind,
                source=line.source,
                chunk_index=line.chunk_index,
                start_line=line.start_line,
                end_line=line.end_line,
                meta=line.metadata,
                session_id=line.session_id,
                role=line.role,
                timestamp=line.timestamp,
                created_at=line.created_at,
            )
        )
    elif isinstance(line, _Supersession):
        _flush(s, cur)
        if max(line.old, line.new) >= len(cur.records):
            raise InvalidInputError(f"{where}: supersession of unknown record {max(line.old, line.new)}")
        s.add(
            Supersession(
                namespace_id=ns_id,
                old_record_id=cur.records[line.old],
                new_record_id=cur.records[line.new],
                similarity=line.similarity,
                effective_at=line.effective_at,
                created_at=line.created_at,
            )
        )
    elif isinstance(line, _Session):
        _flush(s, cur)
        sess = SessionRow(
            namespace_id=ns_id,
            session_id=line.session_id,
            n_turns=line.n_turns,
            created_at=line.created_at,
            updated_at=line.updated_at,
        )
        s.add(sess)
        s.flush()
        cur.sessions[line.session_id] = sess.id
    elif isinstance(line, _Turn):
        _flush(s, cur)
        session_pk = cur.sessions.get(line.session_id)
        if session_pk is None:
            raise InvalidInputError(f"{where}: turn of unknown session {line.session_id!r}")
        if line.occurrence is not None and line.occurrence >= len(cur.occurrences):
            raise InvalidInputError(f"{where}: turn of unknown occurrence {line.occurrence}")
        s.add(
            Turn(
                session_pk=session_pk,
                seq=line.seq,
                role=line.role,
                content=line.content,
                timestamp=line.timestamp,
                occurrence_id=None if line.occurrence is None else cur.occurrences[line.occurrence],
            )
        )
    if len(cur.pending_records) >= _BATCH or len(cur.pending_occurrences) >= _BATCH:
        _flush(s, cur)


def import_jsonl(agent: Any, path: str | Path) -> TransferReport:
    """Import a file written by :func:`export_jsonl` into the agent's database, in one transaction.

    Every blob is verified (safetensors only, checksums, shapes against the memory config) and every
    line validated before anything is committed; on any error nothing is written.

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
        StoreError: the agent is closed, or the database cannot be written.
        OSError: the file cannot be read.
    """
    path = Path(path)
    agent.namespaces()  # raises StoreError when the agent is closed
    report = TransferReport()
    header: _Header | None = None
    cur: _NamespaceImport | None = None
    end: _End | None = None
    seen = 0  # lines before the end line
    with agent.store.session() as s:
        try:
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
                            f"{where}: the end line counts {line.lines} lines but the file has {seen}; "
                            "the file is damaged"
                        )
                    end = line
                    continue
                seen += 1
                if isinstance(line, _Header):
                    raise InvalidInputError(f"{where}: a second header")
                if isinstance(line, _Namespace):
                    if cur is not None:
                        _flush(s, cur)
                    cur = _NamespaceImport(_new_namespace(s, line, header, lineno))
                    report.namespaces.append(cur.row.name)
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
                _flush(s, cur)
            s.commit()
        except BaseException:
            s.rollback()
            raise
    log.info("imported %s from %s", report, path)
    return report
