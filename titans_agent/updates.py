"""Knowledge updates: a new record that states a newer version of an older one supersedes it.

"My editor is Vim" followed weeks later by "I moved from Vim to Helix" are two records; the second
*supersedes* the first. The older record is kept (never deleted), linked to its successor in the
``supersessions`` table, and :meth:`~titans_agent.MemoryAgent.recall` demotes it (or drops it, or
shows it unchanged; see ``include_superseded`` and :class:`~titans_agent.config.RetrievalConfig`).

Detection needs no LLM. When a record is created, it supersedes an older record of the same namespace
when all of these hold:

1. **same subject**: the embedding cosine of the two is at least ``RetrievalConfig.update_similarity``
   (0.5 for all-MiniLM-L6-v2, chosen on ``benchmarks/updates.py``'s generated suite; see the README);
2. **a change of the speaker's own fact, about the same people, with different content**: both are
   first-person statements, not questions (:func:`states_own_fact`); the new one announces a
   change (a word of :data:`UPDATE_CUES`: "now", "new", "moved", "switched", "no longer", ...) and
   adds nothing ("also", "too", ...: :data:`ADDITIVE_CUES`); both name the same other people
   (:func:`third_parties`: "my sister lives at ..." never updates "I live at ..."); and the new one
   has a salient token the old lacks (numbers, names, content words; stopwords, change cues and word
   order aside: "I moved from Vim to Helix" may repeat every word of "My editor is Vim"), so a
   paraphrase or a repeat never supersedes;
3. **same speaker** for conversation turns: a turn only supersedes a turn of the same role (what
   one speaker says never overrides another's facts); a note only supersedes a note. Which kinds
   are checked is ``RetrievalConfig.update_kinds``: turns only by default (a conversation states
   facts that change; notes written by an application, such as "first note ..." then "third note
   ...", are often distinct facts in the same words); chunks of documents never;
4. **later**: the new statement's time (turn timestamp, else write time) is not before the old one's.

A link takes effect at the new statement's time (``effective_at``): ``recall(as_of=...)`` before it
treats the older record as current again. Links go with either record (``ON DELETE CASCADE``).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from titans_agent.store import Occurrence, Record, Supersession, utcnow
from titans_agent.text import FIRST_PERSON, STOPWORDS, WORD

__all__ = [
    "RELATIONS",
    "ADDITIVE_CUES",
    "UPDATE_CUES",
    "UpdateLinks",
    "announces_change",
    "content_differs",
    "is_update",
    "link_updates",
    "links_for",
    "salient_tokens",
    "states_own_fact",
    "third_parties",
]

log = logging.getLogger(__name__)

_TOKEN = WORD
MAX_LINKS_PER_RECORD = 1  # a new record supersedes at most this many older ones (the most similar)


def salient_tokens(text: str) -> frozenset[str]:
    """Lowercased word and number tokens of ``text`` without English stopwords."""
    return frozenset(w for w in _TOKEN.findall(text.lower()) if w not in STOPWORDS)


RELATIONS = frozenset(
    """aunt boss boyfriend brother child children colleague colleagues cousin coworker dad daughter family
    father friend friends girlfriend grandfather grandma grandmother grandpa husband kid kids mom mother mum
    neighbor neighbour neighbours neighbors parents partner roommate sister son uncle wife""".split()
)
"""Words naming another person: a statement that mentions one is about that person, not the speaker."""

UPDATE_CUES = frozenset(
    """now new newly moved move switched switch changed change anymore instead replaced replace started
    left quit sold raised lowered hired became become currently longer upgraded swapped transferred
    relocated reorganisation reorganization promoted""".split()
)
"""Words that announce a change ("I moved ...", "my rent is now ...", "no longer ..."): a new statement
supersedes only when it has one (conversations repeat a subject far more often than they update it)."""

ADDITIVE_CUES = frozenset("also too additionally another besides either".split())
"""Words that add a fact rather than replace one ("I now also play tennis"): such a statement never
supersedes."""

_POSSESSIVE = re.compile(r"\b(\w+)['\u2019]s\b", re.UNICODE)


_NOT_POSSESSORS = frozenset("it that he she what there here who let this where how everyone nobody".split())


def third_parties(text: str) -> frozenset[str]:
    """Who else a statement is about: relation words ("sister") and possessors ("Sam's"), lowercased;
    contractions ("it's", "that's", "he's") are not possessors."""
    words = set(_TOKEN.findall(text.lower()))
    owners = {m.lower() for m in _POSSESSIVE.findall(text)} - _NOT_POSSESSORS
    return frozenset((words & RELATIONS) | owners)


def announces_change(text: str) -> bool:
    """Whether ``text`` has a word of :data:`UPDATE_CUES`."""
    return not UPDATE_CUES.isdisjoint(_TOKEN.findall(text.lower()))


_FIRST_PERSON = FIRST_PERSON
_QUESTION_START = frozenset(
    "should shall do does did is are am was were can could would will may might must what where when who whom "
    "whose why how which".split()
)
_NEGATION = re.compile(r"\b(not|never|n't|nor)\b|n't\b", re.IGNORECASE)
_NO_LONGER = re.compile(r"\b(no longer|anymore|any more)\b", re.IGNORECASE)


def states_own_fact(text: str) -> bool:
    """Whether ``text`` is a statement by the speaker about themself: first-person words, and not a
    question (no "?", and no sentence opening with a question word or an auxiliary: "Should my rent
    now be ...")."""
    if "?" in text or _FIRST_PERSON.isdisjoint(_TOKEN.findall(text.lower())):
        return False
    openings = (s.strip().split(maxsplit=1) for s in re.split(r"[.!;\n]+", text) if s.strip())
    return not any(words and words[0].lower() in _QUESTION_START for words in openings)


def denies_change(text: str) -> bool:
    """Whether ``text`` is negated ("I have not switched", "I never will"), unless it also says "no
    longer" or "anymore", which announce a change ("I don't live in Paris anymore")."""
    return bool(_NEGATION.search(text)) and not _NO_LONGER.search(text)


def is_update(old: str, new: str, conversational: bool = True) -> bool:
    """The text tests of a supersession: for conversation turns (``conversational``) both state the
    speaker's own facts (:func:`states_own_fact`); ``new`` announces a change and adds nothing
    (no word of :data:`ADDITIVE_CUES`); both are about the same other people (:func:`third_parties`);
    and ``new`` brings content ``old`` lacks (:func:`content_differs`)."""
    return (
        (not conversational or (states_own_fact(old) and states_own_fact(new)))
        and announces_change(new)
        and not denies_change(new)
        and ADDITIVE_CUES.isdisjoint(_TOKEN.findall(new.lower()))
        and third_parties(old) == third_parties(new)
        and content_differs(old, new)
    )


def content_differs(old: str, new: str) -> bool:
    """Whether ``new`` states something ``old`` does not: a salient token (number, name, content
    word) that ``old`` lacks, change cues aside. ``old``'s words may all reappear: "I moved from Vim
    to Helix" repeats "Vim" and still replaces it; a paraphrase or "My editor is Vim, now." does not."""
    a, b = salient_tokens(old), salient_tokens(new)
    return bool((b - a) - UPDATE_CUES)


@dataclass(frozen=True)
class _Place:
    kind: str
    role: str | None
    time: dt.datetime


def _as_aware(t: dt.datetime) -> dt.datetime:
    return t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t


def link_updates(
    s: Session,
    namespace_id: int,
    ids: np.ndarray,
    emb: Any,
    fresh: Sequence[tuple[Record, Any, np.ndarray]],
    threshold: float,
    kinds: Sequence[str] = ("turn",),
) -> int:
    """Link every freshly created record to the older records of its namespace it supersedes.

    Called inside the write's transaction, after the new records and their occurrences were
    flushed (they have ids, and the batch's earlier records can be superseded too).

    Args:
        s: the write's session (the links are added to it; the caller commits).
        namespace_id: the namespace written to.
        ids: ``(n,)`` ids of the records stored before this write, aligned with ``emb``.
        emb: ``(n, d)`` unit-norm embeddings of those records (a torch tensor or an array).
        fresh: ``(record, unit, embedding (d,))`` for each record this write created, in write
            order; ``unit`` has ``kind``, ``role`` and ``timestamp`` attributes.
        threshold: the cosine above which two records may be about the same subject.
        kinds: the kinds of new records that may supersede ("turn", "note"); chunks never do.

    Returns:
        How many links were added.
    """
    fresh = [f for f in fresh if f[1].kind in kinds and f[1].kind != "chunk"]
    if not fresh:
        return 0
    old_emb = np.asarray(emb.detach().cpu().numpy() if hasattr(emb, "detach") else emb, dtype=np.float32)
    all_ids = np.concatenate([np.asarray(ids, dtype=np.int64), np.array([r.id for r, _, _ in fresh], dtype=np.int64)])
    all_emb = np.concatenate([old_emb.reshape(-1, fresh[0][2].shape[0]), np.stack([e for _, _, e in fresh])])
    n_old = len(ids)
    all_emb = all_emb.astype(np.float64)
    all_emb /= np.maximum(np.linalg.norm(all_emb, axis=1, keepdims=True), 1e-12)  # cosine, whatever the scale
    sims = np.nan_to_num(all_emb[n_old:] @ all_emb.T, nan=0.0)  # (m, n_old + m)
    cand: set[int] = set()
    for i in range(len(fresh)):
        limit = n_old + i  # older records and the batch's earlier ones
        cand.update(int(all_ids[j]) for j in np.nonzero(sims[i, :limit] >= threshold)[0])
    if not cand:
        return 0
    places = _places(s, cand)
    texts = dict(s.execute(select(Record.id, Record.text).where(Record.id.in_(cand))).all())
    texts.update({r.id: r.text for r, _, _ in fresh})
    n_links = 0
    for i, (rec, unit, _) in enumerate(fresh):
        limit = n_old + i
        order = np.argsort(-sims[i, :limit], kind="stable")
        when = _as_aware(unit.timestamp or rec.created_at or utcnow())
        added = 0
        for j in order:
            if sims[i, j] < threshold or added >= MAX_LINKS_PER_RECORD:
                break
            old_id = int(all_ids[j])
            if not _compatible(unit, places.get(old_id, []), when):
                continue
            if not is_update(texts.get(old_id, ""), rec.text, conversational=unit.kind == "turn"):
                continue
            s.add(
                Supersession(
                    namespace_id=namespace_id,
                    old_record_id=old_id,
                    new_record_id=rec.id,
                    similarity=float(sims[i, j]),
                    effective_at=when,
                )
            )
            added += 1
        n_links += added
    if n_links:
        log.debug("linked %d superseded record(s)", n_links)
    return n_links


def _places(s: Session, record_ids: Iterable[int]) -> dict[int, list[_Place]]:
    rows = s.execute(
        select(
            Occurrence.record_id, Occurrence.kind, Occurrence.role, Occurrence.timestamp, Occurrence.created_at
        ).where(Occurrence.record_id.in_(list(record_ids)))
    ).all()
    out: dict[int, list[_Place]] = {}
    for rid, kind, role, ts, created in rows:
        out.setdefault(rid, []).append(_Place(kind, role, _as_aware(ts or created)))
    return out


def _compatible(unit: Any, old_places: Sequence[_Place], when: dt.datetime) -> bool:
    """Same speaker for turns (notes for notes), and the old statement not later than the new one."""
    for p in old_places:
        if p.time > when:
            continue
        if unit.kind == "turn" and p.kind == "turn" and (p.role or "").casefold() == (unit.role or "").casefold():
            return True
        if unit.kind == "note" and p.kind == "note":
            return True
    return False


@dataclass
class UpdateLinks:
    """Supersession links of some records, as known at a time.

    Attributes:
        superseded_by: old record id -> the ids of the records that supersede it.
        supersedes: new record id -> the ids of the records it supersedes.
    """

    superseded_by: dict[int, list[int]]
    supersedes: dict[int, list[int]]


def links_for(s: Session, record_ids: Iterable[int], as_of: dt.datetime | None = None) -> UpdateLinks:
    """The supersession links touching ``record_ids`` in effect at ``as_of`` (all when None)."""
    ids = list(record_ids)
    out = UpdateLinks({}, {})
    if not ids:
        return out
    stmt = select(Supersession.old_record_id, Supersession.new_record_id).where(
        (Supersession.old_record_id.in_(ids)) | (Supersession.new_record_id.in_(ids))
    )
    if as_of is not None:
        stmt = stmt.where(Supersession.effective_at <= as_of)
    for old, new in s.execute(stmt.order_by(Supersession.id)).all():
        out.superseded_by.setdefault(old, []).append(new)
        out.supersedes.setdefault(new, []).append(old)
    return out
