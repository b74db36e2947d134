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

Import (:mod:`titans_agent.transfer_import`) is one transaction: it writes every namespace of the
file, or (on any error) nothing. It holds the write lock from its start, and a lock conflict retries
it whole, like every write. It refuses a file written with another embedder (name or dimension), and
a namespace that already exists in the database (it never merges; import into another database, or
``forget`` first). It accepts only what a write would store (:mod:`titans_agent.transfer_format`
holds the line models and the strict reader): no NaN or Infinity, no NUL or lone surrogate, integers
the columns hold, texts, names and metadata as a write checks them, and every tensor of a namespace
(outer parameters, state, embeddings) finite and shaped as its memory config says.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from titans_agent.config import DEFAULT_NAMESPACE, MemoryConfig
from titans_agent.context import HasContext, PipelineContext
from titans_agent.core.memory import NeuralMemory, params_from_bytes, state_from_bytes, state_to_bytes
from titans_agent.errors import InvalidInputError, NamespaceNotFoundError
from titans_agent.runtime import replay_log
from titans_agent.store import dump, repository
from titans_agent.store.erasure import write_groups
from titans_agent.transfer_format import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    TYPES,
    DocumentLine,
    Line,
    NamespaceLine,
    OccurrenceLine,
    RecordLine,
    SessionLine,
    SupersessionLine,
    TransferReport,
    TurnLine,
)
from titans_agent.transfer_import import REPLAY_UNITS, import_file, import_jsonl
from titans_agent.validation import check_namespace

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "REPLAY_UNITS",
    "TransferReport",
    "export_file",
    "export_jsonl",
    "import_file",
    "import_jsonl",
]

log = logging.getLogger(__name__)


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


def _line(model: type[Line], row: Mapping[str, Any], **values: Any) -> str:
    """One line of ``model``'s type: each of its fields from ``values``, else from the row's column
    of that name; times in ISO form (UTC), blobs in base64. The line models define the format both
    ways: what import validates is what export writes."""
    obj: dict[str, Any] = {"type": TYPES[model]}
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
    yield _line(NamespaceLine, ns, state=_full_state(s, ns))
    doc_source: dict[int, str] = {}
    for d in dump.document_rows(s, ns["id"]):
        doc_source[d["id"]] = d["source"]
        report.documents += 1
        yield _line(DocumentLine, d, complete=bool(d["complete"]))
    record_ref: dict[int, int] = {}
    for r in dump.record_rows(s, ns["id"]):
        record_ref[r["id"]] = len(record_ref)
        yield _line(RecordLine, r, ref=record_ref[r["id"]])
    report.records += len(record_ref)
    occ_ref: dict[int, int] = {}
    for o in dump.occurrence_rows(s, ns["id"]):
        occ_ref[o["id"]] = len(occ_ref)
        document = None if o["document_id"] is None else doc_source[o["document_id"]]
        yield _line(OccurrenceLine, o, record=record_ref[o["record_id"]], document=document, metadata=o["meta"] or {})
    report.occurrences += len(occ_ref)
    for link in dump.supersession_rows(s, ns["id"]):
        report.supersessions += 1
        yield _line(
            SupersessionLine, link, old=record_ref[link["old_record_id"]], new=record_ref[link["new_record_id"]]
        )
    for sess in dump.session_rows(s, ns["id"]):
        report.sessions += 1
        yield _line(SessionLine, sess)
    for t in dump.turn_rows(s, ns["id"]):
        report.turns += 1
        occurrence = None if t["occurrence_id"] is None else occ_ref.get(t["occurrence_id"])
        yield _line(TurnLine, t, occurrence=occurrence)


def export_jsonl(agent: HasContext, path: str | Path, namespaces: Sequence[str] | None = None) -> TransferReport:
    """Write the agent's namespaces (all, or ``namespaces``) to a JSON Lines file
    (:func:`export_file` with the agent's context).

    The file is written next to ``path`` under a temporary name and renamed when complete, so a
    failed export never leaves a partial file. The export reads one snapshot (SQLite: one read
    transaction; PostgreSQL: REPEATABLE READ), so concurrent writers cannot make it inconsistent.
    Other threads of the agent go on meanwhile (it reads the database, not their runtimes); it
    takes no database write lock.

    Args:
        agent: an open :class:`~titans_agent.MemoryAgent`.
        path: the file to write (replaced if it exists).
        namespaces: names to export (exact); None exports every namespace. The default namespace
            may be named before its first write: it is empty then, and the file has no lines of it.

    Returns:
        The counts written (``namespaces``: those the file holds).

    Raises:
        NamespaceNotFoundError: a named namespace (other than the default one) does not exist.
        InvalidInputError: a name is malformed, ``namespaces`` is a string, or ``path`` is (a link
            to) the SQLite database's own file or one of its ``-wal``, ``-shm``, ``-journal`` files.
        StoreError: the agent is closed.
        OSError: the file cannot be written.
    """
    return export_file(agent.context, path=path, namespaces=namespaces)


def export_file(ctx: PipelineContext, *, path: str | Path, namespaces: Sequence[str] | None = None) -> TransferReport:
    """:func:`export_jsonl` of the database ``ctx.store``, holding the shared side of ``ctx.locks``
    (written, and raised, as there)."""
    with ctx.locks.namespace(None):
        ctx.check_open()  # raises StoreError when the agent is closed
        return _export(ctx, Path(path), namespaces)


def _is_database_file(target: Path, files: list[Path]) -> bool:
    """Whether ``target`` is one of the database's ``files``: the same real path, or the same file
    (a hard link, another case of its name on a case-insensitive file system)."""
    if Path(os.path.realpath(target)) in files:
        return True
    for f in files:
        try:
            if os.path.samefile(target, f):
                return True
        except OSError:  # either does not exist: not the same file
            continue
    return False


def _export(ctx: PipelineContext, target: Path, namespaces: Sequence[str] | None) -> TransferReport:
    if isinstance(namespaces, str):
        raise InvalidInputError("namespaces must be a list of names, not a string")
    wanted = None if namespaces is None else sorted({check_namespace(n) for n in namespaces})
    if _is_database_file(target, ctx.store.database_files()):  # the rename would replace it
        raise InvalidInputError(f"cannot export to {target}: it is the database's own file; name another file")
    report = TransferReport()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or Path("."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out, ctx.store.snapshot_session() as s:
            # the names as the snapshot has them: a namespace dropped meanwhile is missing, never half read
            existing = repository.namespace_names(s)
            # the default namespace always exists for reads: before its first write it is empty (no lines)
            missing = [n for n in wanted or () if n not in existing and n != DEFAULT_NAMESPACE]
            if missing:
                raise NamespaceNotFoundError(f"no namespace {missing[0]!r} in the database (it has {existing})")
            names = report.namespaces = existing if wanted is None else [n for n in wanted if n in existing]
            written = 1
            out.write(
                _dumps(
                    {
                        "type": "header",
                        "format": EXPORT_FORMAT,
                        "version": EXPORT_VERSION,
                        "embedder": ctx.embedder.name,
                        "dim": ctx.embedder.dim,
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
