"""Erasure: forgetting records, unlearning them from the neural memory, dropping a namespace.

- :func:`forget` removes occurrences (of a source, or every occurrence of one record), the
  transcript lines of forgotten turns with them, a forgotten source's document row, and then every
  record left without an occurrence, in one transaction; the namespace's revision goes up, so every
  process reloads its index. Plain forgetting leaves the neural weights as they are: the memory
  learned from the forgotten text at test time and keeps that (recall only ranks stored records).
- A piece of a turn: a turn longer than the embedder's window is written as several records (its
  pieces, exact slices of its text; with ``chunk_overlap_tokens`` each starts with the end of the
  one before) and one transcript line holding the whole text. Forgetting one piece (its record)
  forgets that piece only, not the turn: its text is cut out of the line (:func:`cut_line`), which
  keeps the rest of the turn. A character goes when only forgotten pieces hold it: the words a
  remaining piece also holds (by overlap) stay, and a cut's white space becomes one run. A piece
  that cannot be placed in the line (a repeat found in another case or spacing is placed; a piece
  merged into a near duplicate keeps that record's text, which may not be) takes with it every
  character of the line that no placed piece holds, so that nothing of it stays. When the first
  piece goes, the line moves to the first piece that stays (``record_id`` in the transcript); the
  line goes with its last piece. The next turn's context is derived again from the shortened line
  (below), as are the remaining pieces' own.
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
    (:func:`titans_agent.write.turn_context`): each turn whose previous turn went or lost a piece
    gets the context of the turn now before it, as it is now (none for a session's new first
    turn), and a record that keeps other
    occurrences loses the contexts its forgotten ones added. A record whose occurrences are all
    turns and notes gets its context folded again from its remaining occurrences, as
    :func:`~titans_agent.store.repository.commit_units` folds it: exactly what a namespace written
    without the forgotten units holds. A record that also occurs as a chunk (whose header is not
    stored apart) gets the forgotten contexts cut out of its own and the changed ones replaced;
  * a chunk's context holds its document's header, the source's name words and the document's
    title, which is text of the document's first chunk (chunk index 0; ``title_lines``): when that
    chunk's record is deleted, the title leaves the context of every remaining record that held
    the document's header (its other chunks, a record of another source one of them repeated).
    The name words stay (the source name, kept in ``occurrences.source``);
  * a chunk of Python source also holds the names of the classes and functions enclosing it
    (``enclosing_scopes``), read from ``class``/``def`` lines that may lie in other chunks. The
    file's lines are not stored apart from its chunks, so they are put together again from the
    chunks (before the delete; each chunk's text from its first line on) and each chunk's names
    found again with their lines: a name whose line no remaining chunk of the file holds leaves
    that chunk's part of its record's context (the other names, and the header, stay; a name whose
    line a remaining chunk holds stays). Where the chunks do not give the lines back (a chunk
    stored as an earlier record's text, a line cut in two), the rule of words below still applies;
  * then, for every document that lost a chunk, one rule (:mod:`titans_agent.erase_words`): a
    heading or section label in a remaining chunk's location (``occurrences.location``, cited
    again), and a title word or scope name in its record's context, survives only if its words
    occur in the text of a remaining chunk of that document.
- :func:`drop` deletes a namespace and every row of it (see :func:`titans_agent.store.erasure.drop_namespace`).

Units written before schema version 4 carry neither their write nor their own embedding: they are
grouped by write time (one per write) and replayed with their record's embedding, which for a
repeat or merged unit only approximates what it was written with (a warning says how many).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from titans_agent import erase_words
from titans_agent.context import PipelineContext
from titans_agent.core.memory import MemoryState, NeuralMemory, state_to_bytes
from titans_agent.errors import NonFiniteStateError, RecordNotFoundError
from titans_agent.ingest.headers import enclosing_scope_lines, title_lines
from titans_agent.rows import CheckpointHead
from titans_agent.runtime import Runtime
from titans_agent.store import checkpoints, erasure, repository
from titans_agent.store.erasure import ChunkPlace, Doomed, RecordBook, TurnLine, WriteGroup
from titans_agent.text import name_words
from titans_agent.types import utcnow
from titans_agent.validation import check_namespace, require_namespace
from titans_agent.write import turn_context

__all__ = [
    "ContextPlan",
    "Rebuilt",
    "context_plan",
    "cut_line",
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


def _rebuild_in(s: Any, rt: Runtime, revision: int, *, device: torch.device) -> Rebuilt:
    """Replay the namespace's remaining units in the write session ``s`` on ``device`` and stage the
    new state (a checkpoint at revision + 1) and the records' bookkeeping; the caller commits."""
    t0 = time.perf_counter()
    done = replay(rt.memory, erasure.write_groups(s, rt.ns_id), device)
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
        lines: turn id -> the line ``(content, occurrence id)`` after the forget, or None when it
            goes, for each line a forgotten piece changes (:func:`cut_line`; not a line that goes
            with its first piece's occurrence).
        code: document id -> its chunks, for each Python file that loses a chunk.
    """

    doomed: list[Doomed]
    sessions: dict[str, list[TurnLine]] = field(default_factory=dict)
    firsts: dict[int, tuple[int, str]] = field(default_factory=dict)
    holders: dict[int, set[int]] = field(default_factory=dict)
    lines: dict[int, tuple[str, int] | None] = field(default_factory=dict)
    code: dict[int, list[ChunkPlace]] = field(default_factory=dict)


def context_plan(s: Any, ns_id: int, *, source: str | None, record_id: int | None) -> ContextPlan:
    """Read, in the erasing transaction before its delete, what :func:`rederive_contexts` needs,
    and what becomes of each transcript line that loses a piece."""
    doomed = erasure.doomed_occurrences(s, ns_id, source=source, record_id=record_id)
    gone = {d.id for d in doomed}
    sids = {d.session_id for d in doomed if d.kind == "turn" and d.session_id is not None}
    docs = {d.document_id for d in doomed if d.document_id is not None and d.chunk_index == 0}
    firsts, holders = erasure.document_headers(s, docs)
    sessions = erasure.session_lines(s, ns_id, sids)
    cut = [ln for lines in sessions.values() for ln in lines if {o for o, _ in ln.occurrences} & gone]
    texts = repository.record_texts(s, {r for ln in cut if len(ln.occurrences) > 1 for _, r in ln.occurrences})
    after: dict[int, tuple[str, int] | None] = {}
    for ln in cut:
        kept = [occ for occ, _ in ln.occurrences if occ not in gone]
        content = cut_line(ln.content, [(texts[r], o in gone) for o, r in ln.occurrences]) if kept else None
        if ln.turn_id is None or (content is None and ln.occurrence_id in gone):
            continue  # the line goes with its first piece's occurrence
        if content is None or (content, kept[0]) != (ln.content, ln.occurrence_id):
            after[ln.turn_id] = None if content is None else (content, kept[0])  # moved to the first that stays
    code: dict[int, list[ChunkPlace]] = {}
    files = {d.document_id: d.source for d in doomed if d.kind == "chunk" and d.document_id is not None}
    if files:
        from titans_agent.ingest.chunking import Language, language_for_path  # loaded by any ingest

        python = {doc for doc, src in files.items() if language_for_path(src) is Language.PYTHON}
        code = erasure.document_chunks(s, python)  # only chunks of Python source get enclosing names
    return ContextPlan(doomed, sessions, firsts, holders, after, code)


def _place(content: str, text: str, start: int) -> tuple[int, int] | None:
    """Where ``text`` (a piece's record text) is in ``content`` from ``start`` on: exactly, or with
    the same words in another case or spacing (a repeat keeps the text of the record it repeats)."""
    at = content.find(text, start)
    if at >= 0:
        return at, at + len(text)
    words = text.split()
    m = re.compile(r"\s+".join(map(re.escape, words)), re.IGNORECASE).search(content, start) if words else None
    return None if m is None else (m.start(), m.end())


def cut_line(content: str, pieces: Sequence[tuple[str, bool]]) -> str | None:
    """A transcript line without the text of its forgotten pieces: ``pieces`` are its pieces'
    ``(record text, forgotten)`` in order. Each piece is placed in the line; a character goes when
    only forgotten pieces hold it (words a remaining piece also holds, by overlap, stay), and so
    does every character no piece can be placed over when a forgotten piece cannot be placed
    (a piece merged into a near duplicate keeps that record's text). A cut's white space becomes
    one run. None when nothing stays."""
    held = bytearray(len(content))  # 1: a remaining piece holds it; 2: a forgotten one does
    start, lost = 0, False
    for text, forgotten in pieces:
        span = _place(content, text, start)
        if span is None:
            lost = lost or forgotten
            continue
        start = span[0] + 1
        for i in range(*span):
            held[i] = 1 if not forgotten or held[i] == 1 else 2
    drop = [not c.isspace() and (held[i] == 2 or (lost and held[i] == 0)) for i, c in enumerate(content)]
    if not any(drop):
        return content
    parts: list[str] = []  # the text between dropped characters
    run: list[str] = []
    for c, d in zip(content, drop, strict=True):
        if d:
            parts.append("".join(run))
            run = []
        else:
            run.append(c)
    parts.append("".join(run))
    kept = [p for p in parts if p.strip()]
    if not kept:
        return None
    text = kept[0]
    for p in kept[1:]:  # a cut becomes one run of white space, the one before it (else after it)
        space = text[len(text.rstrip()) :] or p[: len(p) - len(p.lstrip())] or " "
        text = text.rstrip() + space + p.lstrip()
    text = text if parts[0].strip() else text.lstrip()
    return text if parts[-1].strip() else text.rstrip()


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


def _turn_contexts(
    lines: Sequence[TurnLine], gone: set[int], cut: Mapping[int, tuple[str, int] | None]
) -> Iterable[tuple[TurnLine, str, str | None]]:
    """For each line of a transcript: ``(line, its context as written, its context after the
    forget)``, where the lines of ``cut`` (turn id -> the line after, None: it goes) change and the
    others whose occurrence is in gone go; None for a line that goes."""
    before = after = None
    for line in lines:
        old = turn_context(line.role, line.timestamp, line.content, before)
        before = line.content
        if line.turn_id in cut:
            cut_to = cut[line.turn_id]  # type: ignore[index]
            content = None if cut_to is None else cut_to[0]
        else:
            content = None if line.occurrence_id in gone else line.content
        if content is None:
            yield line, old, None
            continue
        yield line, old, turn_context(line.role, line.timestamp, content, after)
        after = content


def _scope_changes(chunks: Sequence[ChunkPlace], gone: set[int]) -> Iterable[tuple[int, str, str, str]]:
    """For the chunks of a Python file (some in ``gone``): ``(record id, the names of the scopes
    enclosing a chunk as written, those names without each one whose class/def line no remaining
    chunk holds, the name words of its source)`` of each chunk that loses a name. The file's lines
    are put together again from its chunks (a line a chunk holds after its first wins: a first
    line may lack its start)."""
    best: dict[int, tuple[bool, str]] = {}
    held: dict[int, set[str]] = {}  # line -> the words of it that remaining chunks hold
    for c in chunks:
        for i, line in enumerate(c.text.split("\n") if c.start_line is not None else ()):
            no = c.start_line + i  # type: ignore[operator]
            best[no] = max(best.get(no, (False, "")), (i > 0, line), key=lambda v: (v[0], len(v[1])))
            if c.id not in gone:
                held.setdefault(no, set()).update(re.findall(r"\w+", line))
    lines = [best.get(no, (False, ""))[1] for no in range(1, max(best, default=0) + 1)]
    for c in chunks:
        scopes = enclosing_scope_lines(lines, c.start_line) if c.start_line is not None else []
        kept = [name for no, name in scopes if name in held.get(no, ())]
        if len(kept) < len(scopes):
            yield c.record_id, " ".join(name for _, name in scopes), " ".join(kept), name_words(c.source or "")


def _with_scopes(ctx: str, old: str, new: str, words: str) -> str:
    """``ctx`` with one of its " | "-joined parts that ends with the scope names ``old`` (a chunk's
    context: its header, then those names) ending with ``new`` instead: the first whose header is
    the source's name ``words`` (or their end: a file's header names its path as given), else the
    first."""
    parts = ctx.split(" | ")
    ends = [i for i, part in enumerate(parts) if part == old or part.endswith(" " + old)]
    heads = {i: parts[i][: len(parts[i]) - len(old)].rstrip() for i in ends}
    mine = [i for i in ends if heads[i] and (words == heads[i] or words.endswith(" " + heads[i]))]
    for i in (mine or ends)[:1]:
        parts[i] = " ".join(p for p in (heads[i], new) if p)
    return " | ".join(parts)


def rederive_contexts(s: Any, ns_id: int, plan: ContextPlan, revision: int) -> int:
    """Derive again, after the delete of ``plan.doomed`` and in the same transaction, the lexical
    contexts derived from what went (see the module's docstring); the records changed get
    ``changed_revision = revision``. Returns how many changed."""
    gone = {d.id for d in plan.doomed}
    now: dict[int, str] = {}  # a remaining turn occurrence -> its unit context without what went
    subs: dict[int, list[tuple[str, str]]] = {}  # record -> (its unit context as written, now)
    drops: dict[int, list[str]] = {}  # record -> the unit contexts its forgotten occurrences added
    for lines in plan.sessions.values():
        for line, old, new in _turn_contexts(lines, gone, plan.lines):
            for occ, rid in line.occurrences:
                if new is None or occ in gone:
                    drops.setdefault(rid, []).append(old)
                    continue
                now[occ] = new
                if new != old:
                    subs.setdefault(rid, []).append((old, new))
    scopes: dict[int, list[tuple[str, ...]]] = {}  # record -> (enclosing names as written, now, name words)
    for chunks in plan.code.values():
        for rid, *change in _scope_changes(chunks, gone):
            scopes.setdefault(rid, []).append(tuple(change))
    turned = set(subs) | set(drops) | {d.record_id for d in plan.doomed}
    candidates = turned.union(*plan.holders.values(), scopes)
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
        for line, old, _ in _turn_contexts(lines, set(), {}):
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
        for old, names, words in scopes.get(rid, ()):
            new = _with_scopes(new, old, names, words)
        if new != ctx:
            changed[rid] = new
    repository.set_contexts(s, changed, revision)
    docs = {d.document_id for d in plan.doomed if d.kind == "chunk" and d.document_id is not None}
    return len(changed) + erase_words.rederive_documents(s, docs, revision)  # the rule of words


def forget(
    ctx: PipelineContext,
    *,
    rt: Runtime,
    source: str | None,
    record_id: int | None,
    unlearn: bool = False,
    missing_ok: bool = False,
) -> int:
    """Forget a source's occurrences or one record's; returns how many occurrences went. A record
    that is a piece of a longer turn takes its text out of the turn's transcript line, which keeps
    the rest (see the module's docstring); what other contexts were derived from goes too.

    The transaction acts on the namespace called ``rt.name`` as it is under its lock
    (:meth:`Runtimes.claim`): dropped since the caller looked it up, and made again, it is that new
    namespace; dropped and not made again, it is a namespace that does not exist.

    Args:
        ctx: the agent's context.
        rt: the namespace's runtime (it follows the commit).
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
    store, runtimes = ctx.store, ctx.runtimes
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
            runtimes.bring_to(rt, s, revision)
            # the state as written so far, materialised while the log still holds every unit
            state = None if unlearn else runtimes.state_in(rt, s)
            plan = context_plan(s, rt.ns_id, source=source, record_id=record_id)
            erasure.set_turn_lines(s, plan.lines)  # a forgotten piece of a turn leaves its line
            n = repository.delete_occurrences(s, rt.ns_id, source=source, record_id=record_id)
            rederive_contexts(s, rt.ns_id, plan, revision + 1)
            if state is None:
                _rebuild_in(s, rt, revision, device=runtimes.device)
            elif n:
                checkpoint_after_delete(s, rt, state, revision + 1)  # the memory keeps what it learned from them
            else:
                repository.bump_revision(s, rt.ns_id)
            s.commit()
    runtimes.follow_erasure(rt)  # nothing derived from what went stays in memory
    return n


def rebuild(ctx: PipelineContext, *, rt: Runtime) -> int:
    """Rebuild the namespace's memory state from M_0 by replaying its remaining units (one
    transaction); returns how many units were replayed (the new ``step``).

    The transaction rebuilds the namespace called ``rt.name`` as it is under its lock
    (:meth:`Runtimes.claim`); one dropped since the caller looked it up and not made again has
    nothing to rebuild (0).

    Raises:
        NonFiniteStateError: the rebuilt state is not finite (nothing was written).
        StoreError: the namespace stayed locked past the retry budget.
    """
    store, runtimes = ctx.store, ctx.runtimes
    for attempt in store.write_attempts():
        with attempt, store.write_session(rt.ns_id, name=rt.name) as s:
            revision = runtimes.claim(rt, s, create=False)
            if revision is None:  # dropped since the caller's look-up, not made again
                return 0
            done = _rebuild_in(s, rt, revision, device=runtimes.device)
            s.commit()
    runtimes.follow_checkpoint(rt)  # its state is loaded again from the new checkpoint when needed
    return done.units


def drop(ctx: PipelineContext, *, namespace: str) -> bool:
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
    store, runtimes = ctx.store, ctx.runtimes
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
