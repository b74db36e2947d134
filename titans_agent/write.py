"""The gated write: embed -> surprise and update -> decide (pure) -> commit -> the runtime follows.

Every unit (a chunk, a note, a turn) is embedded once, then, inside one transaction that holds the
namespace's write lock, projected once by the memory (:meth:`NeuralMemory.write`: its surprise
``||M(k) - v||^2 / ||v||^2`` under the memory before the write, Behrouz et al. 2024 eq. 12, then
the update of eq. 12-14) and compared with the dense index once: the same similarity matrix serves
the near-duplicate decision and knowledge-update detection. :func:`decide` then says, for each
unit:

- ``repeat``: its normalised text equals a record's (or an earlier unit's of the batch): not stored
  again; that record's hit count and last-seen time go up;
- ``merged``: its surprise is below ``write_threshold`` AND it nearly duplicates a record (cosine
  at least ``duplicate_similarity`` and the same words and numbers): merged into that record;
- ``known``: stored, flagged as already predicted by the memory (surprise below the threshold);
- ``new``: stored. Nothing new is ever dropped.

The records, occurrences, transcript lines, supersession links, document progress and the new
revision commit together or not at all; a lock conflict retries the whole transaction. The memory
state is persisted as a checkpoint plus the log: the occurrences are the log (a reader replays the
writes after the checkpoint, :meth:`Runtimes.state_in`), and a write also checkpoints the state
when ``AgentConfig.checkpoint_units`` units have been written since the last checkpoint, or when it
replaced a source (its deleted occurrences leave the log). A non-finite memory state is never
persisted: chunks whose update would be non-finite are rejected by the scan and the last good
state is kept. The runtime follows only after the commit. Each occurrence keeps the revision its
write commits and, where it differs from its record's, the embedding it was written with: a
rebuild of the memory (:func:`titans_agent.erase.rebuild`) and the replay of the log replay the
writes from them, unit for unit and call for call.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from titans_agent.context import PipelineContext
from titans_agent.core.memory import state_to_bytes
from titans_agent.errors import StoreError
from titans_agent.rows import BatchRecord, CheckpointHead, OccurrenceFields, UnitRow
from titans_agent.runtime import Runtime
from titans_agent.store import checkpoints, repository
from titans_agent.store.context import supersession_links
from titans_agent.text import content_words, text_hash, word_set
from titans_agent.types import WriteResult, utcnow
from titans_agent.updates import (
    CLAUSE_SIMILARITY_SHARE,
    FreshRecord,
    covered_relations,
    find_supersessions,
    nearest_above,
    update_candidates,
)
from titans_agent.validation import CheckedTurn, SkippedTurn, require_namespace

__all__ = [
    "Decision",
    "WriteUnit",
    "decide",
    "turn_context",
    "turn_units",
    "update_metadata",
    "with_skipped",
    "write_turns",
    "write_units",
]

log = logging.getLogger(__name__)

PREVIOUS_TURN_CHARS = 1000  # of the turn before, in a turn's lexical context


@dataclass(frozen=True, kw_only=True)
class WriteUnit(OccurrenceFields):
    """One unit to write, as the pipelines build it: where it goes (the fields of
    :class:`~titans_agent.rows.OccurrenceFields`: kind, source, document, chunk, lines, metadata,
    location, session, role, timestamp) and what it says.

    Attributes:
        text: what is stored (and embedded after ``embed_prefix``).
        context: lexical context indexed with the text (source words, the speaker and date).
        turn_of: for a turn's first piece, the turn's whole content: it adds the transcript line to
            the session ``session_id``, found (or made) in the write's transaction, where the
            turn's lexical context is derived too (:func:`turn_units`).
        embed_prefix: embedded before the text (e.g. "Caroline: "), never stored in it.
    """

    text: str
    context: str = ""
    turn_of: str | None = None
    embed_prefix: str = ""


@dataclass(frozen=True)
class Decision:
    """What the gate does with one unit.

    Attributes:
        decision: "repeat", "merged", "known" or "new".
        target: the record it repeats or merges into: a record id, or a :class:`BatchRecord` for
            the record an earlier unit of the same batch creates; None for a stored unit.
        surprise: its surprise, None when not finite.
    """

    decision: str
    target: int | BatchRecord | None
    surprise: float | None


def decide(
    hashes: Sequence[str],
    words: Sequence[frozenset[str]],
    surprise: np.ndarray,
    existing: Mapping[str, int],
    nearest: Sequence[tuple[int, float] | None],
    nearest_words: Mapping[int, frozenset[str]],
    *,
    threshold: float,
    duplicate_similarity: float,
) -> list[Decision]:
    """The gate's decisions for a batch (pure).

    Args:
        hashes: per unit, the text hash of its normal form (:func:`titans_agent.text.text_hash`).
        words: per unit, its word set (:func:`titans_agent.text.word_set`).
        surprise: ``(m,)`` per unit, its surprise under the memory before the write.
        existing: text hash -> the oldest record of the namespace with that text.
        nearest: per unit, ``(record id, cosine)`` of its most similar record, None for an empty index.
        nearest_words: record id -> word set, for the records in ``nearest`` that may be merged into.
        threshold: ``write_threshold``: surprise below it counts as predicted.
        duplicate_similarity: the cosine at which a predicted unit may merge.
    """
    out: list[Decision] = []
    batch_first: dict[str, BatchRecord] = {}
    for i, h in enumerate(hashes):
        sur = float(surprise[i]) if np.isfinite(surprise[i]) else None
        target: int | BatchRecord | None = existing.get(h) or batch_first.get(h)
        if target is not None:
            out.append(Decision("repeat", target, sur))
            continue
        near = nearest[i]
        if sur is not None and sur < threshold and near is not None and near[1] >= duplicate_similarity:
            if nearest_words.get(near[0]) == words[i]:
                out.append(Decision("merged", near[0], sur))
                continue
        batch_first[h] = BatchRecord(i)
        out.append(Decision("known" if sur is not None and sur < threshold else "new", None, sur))
    return out


def _nearest(sims: np.ndarray | None, ids: np.ndarray, m: int) -> list[tuple[int, float] | None]:
    if sims is None:
        return [None] * m
    js = np.argmax(sims, axis=1)
    return [(int(ids[j]), float(sims[i, j])) for i, j in enumerate(js)]


def write_units(
    ctx: PipelineContext,
    *,
    rt: Runtime,
    units: Sequence[WriteUnit],
    doc_progress: dict[int, tuple[int, bool]] | None = None,
    replace_source: str | None = None,
) -> list[WriteResult]:
    """Embed, gate, update the memory and commit ``units`` in one transaction.

    The embedding runs first, outside any database lock. Then one transaction holds the
    namespace's write lock (:meth:`Store.write_session`: SQLite ``BEGIN IMMEDIATE``, PostgreSQL
    an advisory lock on the name and ``SELECT ... FOR UPDATE``) from start to commit: it checks
    that the namespace is still the one ``rt`` was loaded from (:meth:`Runtimes.claim`: when it
    was dropped since, ``rt`` is loaded anew from the namespace now of that name, made again when
    there is none, as a first write makes it); it reads the namespace's revision and, when
    another process or agent committed since this runtime was loaded, reloads the memory state
    and record index first; it finds or makes the sessions of the batch's turns and derives their
    lexical contexts; it computes the surprise, the decisions and the memory update from
    that state; it writes records, occurrences, turns, links, document progress and the new state
    (revision + 1) and commits. A lock conflict rolls back and retries the whole transaction
    (:meth:`Store.write_attempts`), so two writers never lose each other's update.

    Args:
        ctx: the agent's context.
        rt: the namespace's runtime (it follows the commit).
        units: the batch, in write order.
        doc_progress: document id -> (chunks done, complete) to commit with the batch.
        replace_source: forget this source's occurrences (and the records left without any) in
            the same transaction, before the units are gated: a replaced note is never lost to a
            failure between the forgetting and the write.

    Returns:
        One :class:`WriteResult` per unit.

    Raises:
        NamespaceNotFoundError: the units are chunks of a document opened in an earlier transaction
            and the namespace was dropped since (nothing was written).
        StoreError: the embedder returned malformed embeddings, a record or document vanished, or
            the namespace stayed locked beyond the retry budget (nothing was written).
    """
    store, runtimes, embedder, config = ctx.store, ctx.runtimes, ctx.embedder, ctx.config
    emb_np = embedder.embed([u.embed_prefix + u.text for u in units])
    if emb_np.shape != (len(units), embedder.dim) or not np.isfinite(emb_np).all():
        raise StoreError("the embedder returned embeddings of the wrong shape or non-finite values")
    x = torch.from_numpy(emb_np).to(runtimes.device)
    hashes = [text_hash(u.text) for u in units]
    words = [word_set(u.text) for u in units]
    rcfg = config.retrieval
    pinned = bool(doc_progress) or any(u.document_id is not None for u in units)
    for attempt in store.write_attempts():
        with (
            attempt,
            store.write_session(rt.ns_id, name=rt.name) as s,
            _reload_on_failure(rt, replace_source is not None),
        ):
            # the namespace as it is under the lock: made again when dropped since the look-up
            revision = runtimes.claim(rt, s, create=True, pinned=pinned)
            if revision is None:  # pragma: no cover - claim(create=True) always finds or makes it
                raise StoreError(f"namespace {rt.name!r} could not be created")
            runtimes.bring_to(rt, s, revision)  # another writer committed: continue from its state
            state = runtimes.state_in(rt, s)  # before any deletion: the log still holds every unit
            replaced = replace_source is not None and repository.delete_occurrences(s, rt.ns_id, source=replace_source)
            if replaced:
                runtimes.reload(rt, s)  # the index as this transaction sees it (undone on failure)
            mem = rt.memory
            with torch.no_grad():
                surprise_t, res = mem.write(state, x.to(mem.dtype))
            if res.rejected_chunks:
                log.warning(
                    "rejected %d memory update chunk(s) that would have made the state non-finite; "
                    "the last good state is kept",
                    res.rejected_chunks,
                )
            surprise = surprise_t.float().cpu().numpy()
            n_old = rt.ids.shape[0]
            # One similarity matrix per write, (m, n_old + m): each unit against the index, then
            # against the batch (two products side by side; the index itself is never copied).
            sims = None
            if n_old or rcfg.detect_updates:
                sims = torch.cat([x @ rt.emb.T, x @ x.T], dim=1).cpu().numpy()
            old_sims = sims[:, :n_old] if sims is not None and n_old else None
            nearest = _nearest(old_sims, rt.ids, len(units))
            maybe = [
                n[0]
                for n, sur in zip(nearest, surprise)
                if n is not None and n[1] >= config.duplicate_similarity and sur < config.write_threshold
            ]
            nearest_words = {rid: word_set(t) for rid, t in repository.record_texts(s, maybe).items()}
            existing = repository.first_records_by_hash(s, rt.ns_id, hashes)
            decisions = decide(
                hashes,
                words,
                surprise,
                existing,
                nearest,
                nearest_words,
                threshold=config.write_threshold,
                duplicate_similarity=config.duplicate_similarity,
            )
            now = utcnow()
            bound, session_keys = _bind_turns(s, rt.ns_id, units)
            rows = [_row(*unit) for unit in zip(bound, hashes, emb_np, decisions, session_keys, strict=True)]
            try:
                rec_ids, occ_ids, seqs = repository.commit_units(s, rt.ns_id, rows, now, revision + 1)
            except LookupError as exc:
                raise StoreError(str(exc)) from None
            stored = [i for i, d in enumerate(decisions) if d.target is None]
            if rcfg.detect_updates and sims is not None:
                _link_updates(s, rt, units, stored, rec_ids, sims, now, rcfg.update_similarity, rcfg.update_kinds)
            try:
                repository.set_document_progress(s, rt.ns_id, doc_progress or {}, now)
            except LookupError as exc:
                raise StoreError(str(exc)) from None
            new_state = res.state
            repository.advance(s, rt.ns_id, new_state.step, revision + 1, now)
            position = max(occ_ids)
            head = rt.checkpoint
            if replaced or new_state.step - (head.step if head else 0) >= config.checkpoint_units:
                head = CheckpointHead(revision + 1, position, new_state.step)
                checkpoints.save_checkpoint(s, rt.ns_id, state_to_bytes(new_state), head, now)
            s.commit()
    # Only after the commit: the in-memory state follows what is persisted.
    if revision is None:  # pragma: no cover - the loop above raised instead
        raise StoreError(f"namespace {rt.name!r} could not be written")
    added = x[stored] if stored else x[:0]
    rt.follow_commit(
        state=new_state, revision=revision + 1, ids=[rec_ids[i] for i in stored], emb=added, position=position,
        checkpoint=head,
    )  # fmt: skip
    return [
        WriteResult(record_id=rec_ids[i], decision=d.decision, surprise=d.surprise or 0.0, turn_seq=seqs[i])  # type: ignore[arg-type]
        for i, d in enumerate(decisions)
    ]


@contextmanager
def _reload_on_failure(rt: Runtime, active: bool) -> Iterator[None]:
    """When the transaction fails after the runtime was read from its uncommitted view, mark the
    runtime stale so that its next use reloads it from what was committed."""
    try:
        yield
    except BaseException:
        if active:
            rt.mark_stale()
        raise


def _row(u: WriteUnit, h: str, emb: np.ndarray, d: Decision, session_pk: int | None) -> UnitRow:
    return UnitRow(
        text=u.text,
        text_hash=h,
        context=u.context,
        embedding=emb.tobytes(),
        place=u.place,
        target=d.target,
        decision=d.decision,
        surprise=d.surprise,
        session_pk=session_pk,
        turn_content=u.turn_of,
    )


def _link_updates(
    s: Any,
    rt: Runtime,
    units: Sequence[WriteUnit],
    stored: Sequence[int],
    rec_ids: Sequence[int],
    sims: np.ndarray,
    now: dt.datetime,
    threshold: float,
    kinds: Sequence[str],
) -> None:
    """Link the records this write created to the older records they supersede
    (:mod:`titans_agent.updates`), in the write's transaction, after their occurrences were flushed."""
    fresh_rows = [i for i in stored if units[i].kind in kinds and units[i].kind != "chunk"]
    if not fresh_rows:
        return
    n_old = rt.ids.shape[0]
    # Only the older records some fresh one may test (each one's MAX_CANDIDATES nearest above the
    # clause-level floor) become columns, in index order, then the fresh ones: a fresh record's nearest
    # among these columns are its nearest of the whole index, so the links are the same, and what
    # follows no longer grows with the namespace.
    floor = threshold * CLAUSE_SIMILARITY_SHARE
    near = [nearest_above(sims[i, :n_old], floor) for i in fresh_rows]
    old_cols = np.unique(np.concatenate(near)) if near else np.zeros(0, dtype=np.int64)
    rows = np.asarray(fresh_rows, dtype=np.int64)
    cols = np.concatenate([old_cols, n_old + rows])
    sub = np.nan_to_num(sims[np.ix_(rows, cols)], nan=0.0)  # (m, len(old_cols) + m)
    ids = np.concatenate([rt.ids[old_cols], np.array([rec_ids[i] for i in fresh_rows], dtype=np.int64)])
    cand = update_candidates(ids, sub, threshold)
    if not cand:
        return
    fresh = [
        FreshRecord(rec_ids[i], units[i].text, units[i].kind, units[i].role, units[i].timestamp or now)
        for i in fresh_rows
    ]
    superseded_by, _ = supersession_links(s, cand)
    successors = {n for news in superseded_by.values() for n in news}
    texts = repository.record_texts(s, set(cand) | successors)
    covered = {
        old: covered_relations(texts.get(old, ""), [texts.get(n, "") for n in news])
        for old, news in superseded_by.items()
    }
    texts.update({f.id: f.text for f in fresh})
    places = repository.occurrence_places(s, cand)
    cross = "turn" in kinds and "note" in kinds
    links = find_supersessions(fresh, ids, sub, texts, places, threshold, covered=covered, cross_kind=cross)
    repository.add_supersessions(s, rt.ns_id, links)


def turn_context(role: str, timestamp: dt.datetime, content: str, previous: str | None) -> str:
    """A turn's lexical context: its speaker, its date and the first :data:`PREVIOUS_TURN_CHARS`
    characters of ``previous``, the turn before it in its session (None: none), unless the turn
    has no content words ("ok" would only echo the turn before). Erasure
    (:func:`titans_agent.erase.forget`) derives it again when the turn before is forgotten."""
    context = f"{role} {timestamp.strftime('%d %B %Y')}"
    if previous and content_words(content) > 0:
        context = f"{context} {previous[:PREVIOUS_TURN_CHARS]}"
    return context


def turn_units(turns: Sequence[CheckedTurn], pieces: Callable[[str], list[str]]) -> tuple[list[WriteUnit], list[int]]:
    """The units of conversation turns: one per turn, or one per piece of a turn longer than the
    embedder's window (``pieces`` cuts it), each embedded after "<speaker>: "; a turn's first piece
    carries the turn (``turn_of``) and adds its transcript line. Their session and lexical context
    (:func:`turn_context`: the speaker, the date and the turn before, which weighs half the text: a
    reply is also found by the question it answers) are read in the transaction that writes them
    (:func:`write_units`), where the session and the turn before are what the namespace holds.

    Args:
        turns: checked turns, in conversation order.
        pieces: the pieces a text is written as.

    Returns:
        The units, and the index in them of each turn's first piece.
    """
    units: list[WriteUnit] = []
    firsts: list[int] = []
    for t in turns:
        parts = pieces(t.content)
        firsts.append(len(units))
        for j, piece in enumerate(parts):
            units.append(
                WriteUnit(
                    text=t.content.strip() if len(parts) == 1 else piece,
                    kind="turn",
                    source=f"session:{t.session_id}",
                    meta=t.metadata,
                    session_id=t.session_id,
                    role=t.role,
                    timestamp=t.timestamp,
                    turn_of=t.content if j == 0 else None,
                    embed_prefix=f"{t.role[:40]}: ",
                )
            )
    return units, firsts


def _bind_turns(s: Any, ns_id: int, units: Sequence[WriteUnit]) -> tuple[list[WriteUnit], list[int | None]]:
    """The turn units of a batch as the write transaction ``s`` sees their namespace: each turn's
    session (made when new, in this transaction: a session never exists without a turn) and its
    lexical context, from the turn before it (the session's last stored turn for the batch's first
    turn of it, then the batch's own). A batch starts with a turn's first piece (:func:`write_turns`).

    Returns:
        The units with their contexts, and per unit the session's primary key when it adds a
        transcript line (None otherwise).
    """
    names = {u.session_id for u in units if u.turn_of is not None and u.session_id is not None}
    if not names:
        return list(units), [None] * len(units)
    sessions = repository.session_keys(s, ns_id, names)
    before = repository.last_turns(s, ns_id, names)
    out: list[WriteUnit] = []
    keys: list[int | None] = []
    context = ""
    for u in units:
        if u.turn_of is not None and u.session_id is not None:  # a turn's first piece; its others follow it
            context = turn_context(u.role or "", u.timestamp or utcnow(), u.turn_of, before.get(u.session_id))
            before[u.session_id] = u.turn_of
            keys.append(sessions[u.session_id])
        else:
            keys.append(None)
        out.append(replace(u, context=context) if u.kind == "turn" and u.session_id is not None else u)
    return out, keys


def _turn_batches(firsts: Sequence[int], n: int, batch_size: int) -> Iterator[slice]:
    """Batches of about ``batch_size`` of ``n`` units, cut between turns (``firsts``: where each
    turn starts): a turn's pieces commit together; a turn longer than a batch is a batch."""
    start = 0
    for begin, end in zip(firsts, [*firsts[1:], n]):
        if end - start > batch_size and begin > start:
            yield slice(start, begin)
            start = begin
    if start < n:
        yield slice(start, n)


def with_skipped(written: Sequence[WriteResult], skipped: Sequence[SkippedTurn]) -> list[WriteResult]:
    """The results of a batch's written turns with a "skipped" result at each left-out turn's
    position, so ``out[i]`` is the outcome of the batch's turn ``i``; each skip is logged (warning)."""
    out = list(written)
    for s in skipped:  # in increasing position: each insert lands where the turn stood
        log.warning("add_turns: turn %d skipped: %s", s.position, s.reason)
        out.insert(s.position, WriteResult(record_id=None, decision="skipped", surprise=None, reason=s.reason))
    return out


def write_turns(
    ctx: PipelineContext, *, rt: Runtime, turns: Sequence[CheckedTurn], pieces: Callable[[str], list[str]]
) -> list[WriteResult]:
    """Append turns to their sessions and write them through the gate in batches of about
    ``batch_size`` units (cut between turns), one transaction each: each batch makes its new
    sessions and reads the turns before its own in that transaction (:func:`write_units`), so a
    session and its turns always belong to the namespace the batch writes. One result per turn (its
    first piece's)."""
    units, firsts = turn_units(turns, pieces)
    out: list[WriteResult] = []
    for batch in _turn_batches(firsts, len(units), ctx.config.batch_size):
        out.extend(write_units(ctx, rt=rt, units=units[batch]))
    return [out[i] for i in firsts]


def update_metadata(
    ctx: PipelineContext, *, rt: Runtime, source: str, metadata: dict[str, Any], merge: bool, missing_ok: bool = False
) -> int:
    """Merge ``metadata`` into (or replace with it) the metadata of every occurrence of ``source``
    in one transaction holding the namespace's write lock, in the namespace called ``rt.name`` as
    it is under the lock (:meth:`Runtimes.claim`: dropped since the caller looked it up and made
    again, the new one); returns how many occurrences changed. The memory is not touched.

    Raises:
        NamespaceNotFoundError: the namespace was dropped before the lock and not made again (not
            the default one, and not ``missing_ok``: then 0).
        StoreError: the namespace stayed locked past the retry budget (nothing was changed).
    """
    store = ctx.store
    for attempt in store.write_attempts():
        with attempt, store.write_session(rt.ns_id, name=rt.name) as s:
            if ctx.runtimes.claim(rt, s, create=False) is None:  # dropped since the look-up
                require_namespace(rt.name, False, missing_ok)
                return 0
            n = repository.update_source_metadata(s, rt.ns_id, source, metadata, merge)
            s.commit()
    return n
