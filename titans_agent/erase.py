"""Erasure: forgetting records, unlearning them from the neural memory, dropping a namespace.

- :func:`forget` removes occurrences (of a source, or every occurrence of one record), the
  transcript lines of forgotten turns with them, a forgotten source's document row, and then every
  record left without an occurrence, in one transaction; the namespace's revision goes up, so every
  process reloads its index. Plain forgetting leaves the neural weights as they are: the memory
  learned from the forgotten text at test time and keeps that (recall only ranks stored records).
- With ``unlearn=True``, and in :func:`rebuild` alone, the memory state is rebuilt in the same
  transaction: from M_0 (the namespace's initial weights, from its persisted outer parameters, zero
  momentum, step 0) every remaining unit is written again, in the original order and in the
  original writes (the units one write call committed together update the memory together, as one
  chunked scan: the update depends on that grouping), each with the embedding it was written with
  (:func:`titans_agent.store.erasure.write_groups`). The result equals, bit for bit, the state of a
  namespace written in the same calls without the forgotten units (on the same kind of device and
  torch build: another BLAS may round differently). What a unit is: an occurrence. A repeat or merged
  near duplicate was written to the memory like any unit, so it is replayed while its occurrence
  remains and is gone with it; a record that keeps other occurrences keeps its text and embedding
  (the same normalised text, or the same words and numbers, by the gate's rules). Each record's
  surprise (its first remaining unit's, under the rebuilt memory), hit count (its remaining
  occurrences) and first and last times are rewritten to match; its write decision is not made
  again. A rebuild holds the namespace's write lock while it replays (on SQLite the database's),
  so other writers wait for it. A non-finite state is never persisted (the scan rejects non-finite
  chunks; a non-finite result raises :class:`NonFiniteStateError` and nothing is written). The
  database keeps no index of the records' words (recall's BM25 index is in memory and is built
  again once records were deleted), so no deleted term stays behind in it.
- What other records' lexical contexts were derived from the forgotten units is derived again in
  the same transaction (:func:`rederive_contexts`), their ``changed_revision`` set to the erasing
  revision so that every process's BM25 index reads them again:

  * a turn's context holds the turn before it in its session
    (:func:`titans_agent.write.turn_context`): each turn whose previous turn went gets the context
    of the turn now before it (none for a session's new first turn), and a record that keeps other
    occurrences loses the contexts its forgotten ones added. A record whose occurrences are all
    turns and notes gets its context folded again from its remaining occurrences, as
    :func:`~titans_agent.store.repository.commit_units` folds it: exactly what a namespace written
    without the forgotten units holds. A record that also occurs as a chunk (whose header is not
    stored apart) gets the forgotten contexts cut out of its own and the changed ones replaced;
  * a chunk's context holds its document's header, the source's name words and the document's
    title, which is text of the document's first chunk (chunk index 0; ``title_lines``): when that
    chunk's record is deleted, the title leaves the context of every remaining record that held
    the document's header (its other chunks, a record of another source one of them repeated).
    The name words stay (the source name, kept in ``occurrences.source``), and so do the names of
    the Python classes and functions enclosing a code chunk, even when their ``class``/``def``
    line was in a forgotten chunk (a file's lines are not stored apart from its chunks).
- :func:`drop` deletes a namespace and every row of it (see :func:`titans_agent.store.erasure.drop_namespace`).

Units written before schema version 4 carry neither their write nor their own embedding: they are
grouped by write time (one per write) and replayed with their record's embedding, which for a
repeat or merged unit only approximates what it was written with (a warning says how many).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from titans_agent.core.memory import MemoryState, NeuralMemory, state_to_bytes
from titans_agent.errors import NonFiniteStateError, RecordNotFoundError
from titans_agent.ingest.headers import title_lines
from titans_agent.rows import CheckpointHead
from titans_agent.runtime import Runtime, Runtimes
from titans_agent.store import Store, checkpoints, erasure, repository
from titans_agent.store.erasure import Doomed, RecordBook, TurnLine, WriteGroup
from titans_agent.types import utcnow
from titans_agent.validation import check_namespace, require_namespace
from titans_agent.write import turn_context

__all__ = [
    "ContextPlan",
    "Rebuilt",
    "context_plan",
    "drop",
    "fold_contexts",
    "forget",
    "rebuild",
    "rederive_contexts",
    "replay",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rebuilt:
    """What :func:`replay` gives.

    Attributes:
        state: the rebuilt memory state.
        books: record id -> its rebuilt surprise, hits and times.
        units: units replayed (the new ``step``).
        writes: writes replayed.
        legacy: units written before schema version 4 (replayed approximately).
        rejected: chunks the scan rejected as non-finite (the state before them was kept).
    """

    state: MemoryState
    books: dict[int, RecordBook]
    units: int
    writes: int
    legacy: int
    rejected: int


def replay(memory: NeuralMemory, groups: Iterable[WriteGroup], device: torch.device) -> Rebuilt:
    """Write ``groups`` (in order, one :meth:`NeuralMemory.write` each, as the gated write did) into
    the memory from its initial state M_0.

    Raises:
        NonFiniteStateError: the rebuilt state is not finite.
    """
    dim = memory.config.dim
    state = memory.init_state()
    books: dict[int, RecordBook] = {}
    units = writes = legacy = rejected = 0
    for g in groups:
        arr = np.frombuffer(b"".join(g.embeddings), dtype=np.float32).reshape(len(g.embeddings), dim)
        x = torch.from_numpy(arr.copy()).to(device)
        with torch.no_grad():
            surprise_t, res = memory.write(state, x.to(memory.dtype))
        state = res.state
        surprise = surprise_t.float().cpu().numpy()
        for rid, sur, at in zip(g.record_ids, surprise, g.created_at):
            book = books.get(rid)
            if book is None:
                books[rid] = RecordBook(float(sur) if np.isfinite(sur) else None, 1, at, at)
            else:
                book.hits += 1
                book.created_at, book.last_seen_at = min(book.created_at, at), max(book.last_seen_at, at)
        units += len(g.record_ids)
        writes += 1
        legacy += g.legacy
        rejected += res.rejected_chunks
    if not state.is_finite():
        raise NonFiniteStateError("the rebuilt memory state is not finite; nothing was written")
    return Rebuilt(state, books, units, writes, legacy, rejected)


def checkpoint_after_delete(s: Any, rt: Runtime, state: MemoryState, revision: int) -> None:
    """Stage ``state`` as the namespace's checkpoint at ``revision``, positioned after every
    occurrence left, and move the namespace row to it. Every path that deletes occurrences (they
    are the memory's log) calls it in the same transaction, with the state materialised before the
    delete (or rebuilt without them), so that no process replays a log the state did not see."""
    now = utcnow()
    head = CheckpointHead(revision, checkpoints.last_occurrence_id(s, rt.ns_id), state.step)
    checkpoints.save_checkpoint(s, rt.ns_id, state_to_bytes(state), head, now)
    repository.advance(s, rt.ns_id, state.step, revision, now)


def _rebuild_in(s: Any, rt: Runtime, revision: int, runtimes: Runtimes) -> Rebuilt:
    """Replay the namespace's remaining units in the write session ``s`` and stage the new state
    (a checkpoint at revision + 1) and the records' bookkeeping; the caller commits."""
    t0 = time.perf_counter()
    done = replay(rt.memory, erasure.write_groups(s, rt.ns_id), runtimes.device)
    erasure.set_record_books(s, done.books)
    checkpoint_after_delete(s, rt, done.state, revision + 1)
    if done.rejected:
        log.warning("the rebuild of %r rejected %d non-finite memory update chunk(s)", rt.name, done.rejected)
    if done.legacy:
        log.warning(
            "namespace %r: %d unit(s) written before schema version 4 were replayed grouped by write time and "
            "with their record's embedding; the rebuilt memory approximates theirs",
            rt.name,
            done.legacy,
        )
    log.info(
        "rebuilt the memory of namespace %r from M_0: %d units in %d writes, %.2f s",
        rt.name,
        done.units,
        done.writes,
        time.perf_counter() - t0,
    )
    return done


@dataclass
class ContextPlan:
    """What the contexts of other records were derived from, read before the forgotten occurrences
    are deleted (:func:`context_plan`).

    Attributes:
        doomed: the occurrences to forget.
        sessions: session id -> its transcript lines (with their pieces' occurrences), for each
            session that loses a turn.
        firsts: document id -> ``(record id, text)`` of its chunk 0, for each document whose chunk 0
            occurrence is forgotten.
        holders: document id -> the records with an occurrence in it, for those documents.
    """

    doomed: list[Doomed]
    sessions: dict[str, list[TurnLine]] = field(default_factory=dict)
    firsts: dict[int, tuple[int, str]] = field(default_factory=dict)
    holders: dict[int, set[int]] = field(default_factory=dict)


def context_plan(s: Any, ns_id: int, *, source: str | None, record_id: int | None) -> ContextPlan:
    """Read, in the erasing transaction before its delete, what :func:`rederive_contexts` needs."""
    doomed = erasure.doomed_occurrences(s, ns_id, source=source, record_id=record_id)
    sids = {d.session_id for d in doomed if d.kind == "turn" and d.session_id is not None}
    docs = {d.document_id for d in doomed if d.document_id is not None and d.chunk_index == 0}
    firsts, holders = erasure.document_headers(s, docs)
    return ContextPlan(doomed, erasure.session_lines(s, ns_id, sids), firsts, holders)


def fold_contexts(parts: Sequence[str]) -> str:
    """A record's context from its units' contexts in write order, as
    :func:`~titans_agent.store.repository.commit_units` builds it: the first unit's, then each
    later one not already in it, after " | ", while it is shorter than ``MAX_CONTEXT_CHARS``."""
    ctx = parts[0] if parts else ""
    for p in parts[1:]:
        if p and p not in ctx and len(ctx) < repository.MAX_CONTEXT_CHARS:
            ctx = f"{ctx} | {p}" if ctx else p
    return ctx


def _without_part(ctx: str, part: str) -> str:
    """``ctx`` without one of the " | "-joined parts equal to ``part`` (unchanged when none is)."""
    if ctx == part:
        return ""
    if ctx.startswith(part + " | "):
        return ctx[len(part) + 3 :]
    return ctx.replace(" | " + part, "", 1)


def _turn_contexts(lines: Sequence[TurnLine], gone: set[int]) -> Iterable[tuple[TurnLine, str, str | None]]:
    """For each line of a transcript: ``(line, its context as written, its context without the
    lines whose occurrence is in gone)``; None for a line that goes."""
    before = after = None
    for line in lines:
        old = turn_context(line.role, line.timestamp, line.content, before)
        before = line.content
        if line.occurrence_id is not None and line.occurrence_id in gone:
            yield line, old, None
            continue
        yield line, old, turn_context(line.role, line.timestamp, line.content, after)
        after = line.content


def rederive_contexts(s: Any, ns_id: int, plan: ContextPlan, revision: int) -> int:
    """Derive again, after the delete of ``plan.doomed`` and in the same transaction, the lexical
    contexts derived from what went (see the module's docstring); the records changed get
    ``changed_revision = revision``. Returns how many changed."""
    gone = {d.id for d in plan.doomed}
    now: dict[int, str] = {}  # a remaining turn occurrence -> its unit context without what went
    subs: dict[int, list[tuple[str, str]]] = {}  # record -> (its unit context as written, now)
    drops: dict[int, list[str]] = {}  # record -> the unit contexts its forgotten occurrences added
    for lines in plan.sessions.values():
        for line, old, new in _turn_contexts(lines, gone):
            for occ, rid in line.occurrences:
                if new is None or occ in gone:
                    drops.setdefault(rid, []).append(old)
                    continue
                now[occ] = new
                if new != old:
                    subs.setdefault(rid, []).append((old, new))
    turned = set(subs) | set(drops) | {d.record_id for d in plan.doomed}
    candidates = turned.union(*plan.holders.values())
    places = erasure.record_places(s, candidates)  # the records that remain
    titles: dict[int, list[str]] = {}
    for doc, (first, text) in plan.firsts.items():
        title = " ".join(title_lines(text))
        if first not in places and title:  # its text was erased: so is the title derived from it
            for rid in plan.holders.get(doc, ()):
                titles.setdefault(rid, []).append(title)
    folded = {rid for rid in turned if rid in places and all(kind in ("turn", "note") for _, kind, _ in places[rid][1])}
    others = {sid for rid in folded for occ, _, sid in places[rid][1] if occ not in now and sid is not None} - set(
        plan.sessions
    )
    for lines in erasure.session_lines(s, ns_id, others).values():
        for line, old, _ in _turn_contexts(lines, set()):
            now.update((occ, old) for occ, _ in line.occurrences)
    changed: dict[int, str] = {}
    for rid, (ctx, occs) in places.items():
        if rid in folded and all(kind == "note" or occ in now for occ, kind, _ in occs):
            new = fold_contexts([now.get(occ, "") for occ, _, _ in occs])
        else:
            new = ctx
            for part in drops.get(rid, ()):
                new = _without_part(new, part)
            for old, part in subs.get(rid, ()):
                new = new.replace(old, part, 1)
        for title in titles.get(rid, ()):
            new = new.replace(" " + title, "")
        if new != ctx:
            changed[rid] = new
    repository.set_contexts(s, changed, revision)
    return len(changed)


def forget(
    store: Store,
    runtimes: Runtimes,
    rt: Runtime,
    *,
    source: str | None,
    record_id: int | None,
    unlearn: bool = False,
    missing_ok: bool = False,
) -> int:
    """Forget a source's occurrences or one record's; returns how many occurrences went.

    The transaction acts on the namespace called ``rt.name`` as it is under its lock
    (:meth:`Runtimes.claim`): dropped since the caller looked it up, and made again, it is that new
    namespace; dropped and not made again, it is a namespace that does not exist.

    Args:
        source: a checked source name, or None.
        record_id: a checked record id, or None (exactly one of the two is given).
        unlearn: also rebuild the memory state without them, in the same transaction.
        missing_ok: a namespace dropped meanwhile counts as empty (as the default namespace does).

    Raises:
        NamespaceNotFoundError: the namespace was dropped before the lock (not the default one, and
            not ``missing_ok``).
        RecordNotFoundError: no record ``record_id`` in the namespace.
        NonFiniteStateError: (``unlearn``) the rebuilt state is not finite; nothing was removed.
        StoreError: the namespace stayed locked past the retry budget (nothing was removed).
    """
    for attempt in store.write_attempts():
        with attempt, store.write_session(rt.ns_id, name=rt.name) as s:
            revision = runtimes.claim(rt, s, create=False)
            if revision is None:  # dropped since the caller's look-up, not made again
                require_namespace(rt.name, False, missing_ok)
                if record_id is not None:
                    raise RecordNotFoundError(f"no record {record_id} in namespace {rt.name!r}")
                return 0
            if record_id is not None and not repository.record_in_namespace(s, rt.ns_id, record_id):
                raise RecordNotFoundError(f"no record {record_id} in namespace {rt.name!r}")
            if revision != rt.revision:
                runtimes.reload(rt, s)
            # the state as written so far, materialised while the log still holds every unit
            state = None if unlearn else runtimes.state_in(rt, s)
            plan = context_plan(s, rt.ns_id, source=source, record_id=record_id)
            n = repository.delete_occurrences(s, rt.ns_id, source=source, record_id=record_id)
            rederive_contexts(s, rt.ns_id, plan, revision + 1)
            if state is None:
                _rebuild_in(s, rt, revision, runtimes)
            elif n:
                checkpoint_after_delete(s, rt, state, revision + 1)  # the memory keeps what it learned from them
            else:
                repository.bump_revision(s, rt.ns_id)
            s.commit()
    rt.loaded_state = None  # loaded again from the new checkpoint when next needed
    rt.lexical = rt.half = rt.documents = None  # nothing derived from what went stays in memory
    runtimes.reload(rt)
    return n


def rebuild(store: Store, runtimes: Runtimes, rt: Runtime) -> int:
    """Rebuild the namespace's memory state from M_0 by replaying its remaining units (one
    transaction); returns how many units were replayed (the new ``step``).

    The transaction rebuilds the namespace called ``rt.name`` as it is under its lock
    (:meth:`Runtimes.claim`); one dropped since the caller looked it up and not made again has
    nothing to rebuild (0).

    Raises:
        NonFiniteStateError: the rebuilt state is not finite (nothing was written).
        StoreError: the namespace stayed locked past the retry budget.
    """
    for attempt in store.write_attempts():
        with attempt, store.write_session(rt.ns_id, name=rt.name) as s:
            revision = runtimes.claim(rt, s, create=False)
            if revision is None:  # dropped since the caller's look-up, not made again
                return 0
            done = _rebuild_in(s, rt, revision, runtimes)
            s.commit()
    rt.loaded_state = None  # loaded again from the new checkpoint when next needed
    runtimes.reload(rt)
    return done.units


def drop(store: Store, runtimes: Runtimes, namespace: str) -> bool:
    """Delete the namespace ``namespace`` and everything of it, in one transaction that holds its
    write lock (and, on PostgreSQL, its name's: no one creates it meanwhile). The cached runtime
    goes. Returns False when there is no such namespace.

    A write racing the drop (in another agent or process, which looked the namespace up before the
    drop and takes its lock after) never writes into another namespace and never meets a driver
    error: every write transaction checks, under the lock, that the namespace row is the one it
    looked up (its id and random incarnation, :meth:`Runtimes.claim`). The write then acts on the
    namespace as it is: remember, add_turn(s) and ingest make the namespace again and write there,
    as a first write does (each of their transactions on its own: the batches a call committed
    before the drop went with it); forget finds no namespace (``NamespaceNotFoundError``, or 0 for
    the default namespace or with ``missing_ok``), rebuild_memory and update_metadata find nothing
    (0). Only a batch of a document whose ingest opened it before the drop raises
    ``NamespaceNotFoundError`` (nothing of it is written).

    Raises:
        InvalidInputError: a bad namespace name.
        StoreError: the namespace stayed locked past the retry budget (nothing was deleted).
    """
    namespace = check_namespace(namespace)
    dropped = False
    for _ in range(3):  # the name may be dropped and made again between the look-up and the lock
        with store.session() as s:
            ns_id = repository.namespace_id(s, namespace)
        if ns_id is None:
            break
        for attempt in store.write_attempts():
            with attempt, store.write_session(ns_id, name=namespace) as s:
                found = repository.namespace_id(s, namespace)
                if found == ns_id:
                    counts = erasure.drop_namespace(s, ns_id)
                    s.commit()
                    log.info("dropped namespace %r: %s", namespace, counts)
        if found == ns_id:
            dropped = True
            break
    runtimes.discard(namespace)
    return dropped
