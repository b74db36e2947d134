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
   one speaker says never overrides another's facts); a note supersedes a note, and a note about
   the user (first person, or "The user ...": :func:`about_user`) and a turn of the user's side
   supersede each other (what an agent's ``remember`` tool wrote, "The user lives in Boston.", and
   the user's later "I moved to Seattle.": :func:`speaks_for_user`). Notes about
   one subject named at their start ("The user lives in Paris." then "The user moved to Berlin.":
   :func:`titans_agent.facts.fact_subject`) are compared clause by clause as first-person ones are,
   never as wholes; turns keep to the speaker's own facts. Which kinds
   are checked is ``RetrievalConfig.update_kinds``: turns and notes by default, ``("turn",)``
   leaves notes out (notes that are distinct facts in the same words, such as "first note ..."
   then "third note ...", announce no change and are not linked); chunks of documents never;
4. **later**: the new statement's time (turn timestamp, else write time) is not before the old one's.

**Facts inside messages.** A message often states several facts ("Hi! I'm a nurse and I live in
Lyon.") and a later one changes one of them ("Big news: I moved to Montreal."). The two are far apart
as wholes, so tests 1 and 2 are also run clause by clause (:func:`clause_change`, with
:mod:`titans_agent.facts`): a clause of the new record that announces a change supersedes a clause of
the older one that states the same relation (where one lives, works, studies, ...), down to half the
cosine of test 1. Such a link is about those relations only (:class:`Change`): recall treats the
older record as stale for a question about them ("Where do I live now?") and as current for any other
("Am I a nurse?"). Every older record a clause-level change replaces is linked, not only the most
similar.

A link takes effect at the new statement's time (``effective_at``): ``recall(as_of=...)`` before it
treats the older record as current again. Links go with either record (``ON DELETE CASCADE``).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from titans_agent.facts import (
    ASSISTANT_ROLES,
    RELATIONS,
    clauses,
    fact_subject,
    named_owners,
    relations,
    reports_speech,
    role_people,
    same_subject,
    stated_relations,
    third_parties,
)
from titans_agent.text import FIRST_PERSON, STOPWORDS, WORD

__all__ = [
    "RELATIONS",
    "ADDITIVE_CUES",
    "UPDATE_CUES",
    "UpdateLinks",
    "Change",
    "WHOLE_RECORD",
    "about_user",
    "adds_fact",
    "clause_change",
    "detect_change",
    "announces_change",
    "content_differs",
    "is_update",
    "FreshRecord",
    "MAX_CANDIDATES",
    "find_supersessions",
    "covered_relations",
    "link_change",
    "link_scope",
    "nearest_above",
    "update_candidates",
    "salient_tokens",
    "speaks_for_user",
    "states_own_fact",
    "third_parties",
]

log = logging.getLogger(__name__)

_TOKEN = WORD
MAX_LINKS_PER_RECORD = 1  # a new record supersedes at most this many older ones as wholes (the most similar)
CLAUSE_SIMILARITY_SHARE = 0.5
"""A clause-level change (:func:`clause_change`) may link records whose cosine is this share of
``RetrievalConfig.update_similarity`` (0.25 by default): a multi-fact message and a change of one of
its facts are far apart as wholes."""
MAX_CANDIDATES = 32
"""A new record is tested against at most this many older records: its most similar ones above
the clause-level floor (:data:`CLAUSE_SIMILARITY_SHARE` of ``update_similarity``), so that a
write's cost does not grow with how many records of the namespace
are about the same subject (a long chat repeats a subject thousands of times)."""


@lru_cache(maxsize=65536)
def salient_tokens(text: str) -> frozenset[str]:
    """Lowercased word and number tokens of ``text`` without English stopwords."""
    return frozenset(w for w in _TOKEN.findall(text.lower()) if w not in STOPWORDS)


UPDATE_CUES = frozenset(
    """now new newly moved move switched switch changed change anymore instead replaced replace started
    left quit sold raised lowered hired became become currently longer upgraded swapped transferred
    relocated reorganisation reorganization promoted nowadays lately recently stopped joined adopted
    bought graduated retired""".split()
)
"""Words that announce a change ("I moved ...", "my rent is now ...", "no longer ..."): a new statement
supersedes only when it has one (conversations repeat a subject far more often than they update it)."""

ADDITIVE_CUES = frozenset("also too additionally another besides either".split())
"""Words that add a fact rather than replace one ("I now also play tennis"): such a statement never
supersedes."""


def _parties(text: str) -> frozenset[str]:
    """:func:`third_parties` and the roles after a possessive ("my manager is Priya" is about the
    manager: a change of it is not a change of the speaker's job)."""
    return third_parties(text) | role_people(text)


_CHANGE_PHRASES = re.compile(
    r"\b(these days|as of|from now on|turns out|ended up|gave up|took a job|got a job|not any ?more|"
    r"since (?:last|this))\b",
    re.IGNORECASE,
)


@lru_cache(maxsize=65536)
def announces_change(text: str) -> bool:
    """Whether ``text`` has a word of :data:`UPDATE_CUES` or a change phrase ("these days", "turns
    out", "gave up", "took a job", ...)."""
    return not UPDATE_CUES.isdisjoint(_TOKEN.findall(text.lower())) or bool(_CHANGE_PHRASES.search(text))


_FIRST_PERSON = FIRST_PERSON
_QUESTION_START = frozenset(
    "should shall do does did is are am was were can could would will may might must what where when who whom "
    "whose why how which".split()
)
_NEGATION = re.compile(r"\b(not|never|n't|nor|still)\b|n't\b", re.IGNORECASE)
_NO_LONGER = re.compile(r"\b(no longer|anymore|any more)\b", re.IGNORECASE)


_ELIDED_SUBJECT = re.compile(
    r"\W*(?:(?:finally|just|recently|so|also|and|well)\W+)*(?:got|moved|relocated|switched|started|quit|adopted|bought|"
    r"joined|left|sold|retired|graduated|became|gave up)\b",
    re.IGNORECASE,
)


@lru_cache(maxsize=65536)
def states_own_fact(text: str) -> bool:
    """Whether ``text`` is a statement by the speaker about themself: first-person words (or a chat's
    elided "I": "Got a kitten", "Relocated to Vancouver"), and not a question (no "?", and no
    sentence opening with a question word or an auxiliary: "Should my rent now be ...")."""
    if "?" in text:
        return False
    if _FIRST_PERSON.isdisjoint(_TOKEN.findall(text.lower())) and not _ELIDED_SUBJECT.match(text):
        return False
    openings = (s.strip().split(maxsplit=1) for s in re.split(r"[.!;\n]+", text) if s.strip())
    return not any(words and words[0].lower() in _QUESTION_START for words in openings)


_STRONG_CHANGE = re.compile(
    r"\b(no longer|anymore|any more|instead of|switched from|moved from|moved to)\b", re.IGNORECASE
)
_OPENING_ADDITIVE = re.compile(r"(^|[.!;\n]\s*)(also|besides)\b[,:]?", re.IGNORECASE)


@lru_cache(maxsize=65536)
def adds_fact(text: str) -> bool:
    """Whether ``text`` adds a fact rather than replacing one: a word of :data:`ADDITIVE_CUES`
    ("I now also play tennis"), except an "Also"/"Besides" opening a sentence (a discourse marker:
    "Also, I'm no longer vegetarian") and except in a statement of an explicit change ("no longer",
    "anymore", "instead of", "switched from", "moved to"), which replaces whatever else it says."""
    if _STRONG_CHANGE.search(text):
        return False
    return not ADDITIVE_CUES.isdisjoint(_TOKEN.findall(_OPENING_ADDITIVE.sub(" ", text).lower()))


_IRREALIS = re.compile(
    r"\b(might|maybe|perhaps|want to|wanna|would|wish|if|ever(?!\s+since)|hope|hoping|thinking (?:of|about)|"
    r"planning|plan to|considering|should|could|applied|apply|applying|trying to|try to|tried to|"
    r"failed to|interview\w*)\b|\w'd\b",
    re.IGNORECASE,
)


@lru_cache(maxsize=65536)
def denies_change(text: str) -> bool:
    """Whether ``text`` is negated, says a fact continues ("I have not switched", "I never will",
    "I still live in Lyon") unless it also says "no longer" or "anymore" ("I don't live in Paris
    anymore" is a change), or only wishes, plans or tries ("I might move to Seattle", "I applied for
    the new job at Globex", "If I moved ...")."""
    if _IRREALIS.search(text):
        return True
    return bool(_NEGATION.search(text)) and not _NO_LONGER.search(text)


def is_update(old: str, new: str, conversational: bool = True) -> bool:
    """The text tests of a supersession: for conversation turns (``conversational``) both state the
    speaker's own facts (:func:`states_own_fact`); ``new`` announces a change and adds nothing
    (:func:`adds_fact`); both are about the same other people (:func:`third_parties`);
    and ``new`` brings content ``old`` lacks (:func:`content_differs`)."""
    return (
        (not conversational or (states_own_fact(old) and states_own_fact(new)))
        and not _THIRD_SUBJECT.search(new)
        and announces_change(new)
        and not denies_change(new)
        and not adds_fact(new)
        and _parties(old) == _parties(new)
        and content_differs(old, new)
    )


def content_differs(old: str, new: str) -> bool:
    """Whether ``new`` states something ``old`` does not: a salient token (number, name, content
    word) that ``old`` lacks, change cues aside. ``old``'s words may all reappear: "I moved from Vim
    to Helix" repeats "Vim" and still replaces it; a paraphrase or "My editor is Vim, now." does not."""
    a, b = salient_tokens(old), salient_tokens(new)
    return bool((b - a) - UPDATE_CUES)


_STOPS = re.compile(r"\b(no longer|anymore|any more|quit|quitting|stopped|gave up)\b", re.IGNORECASE)
_PLURAL_SELF = frozenset({"we", "our", "ours", "us"})


_OTHER_SUBJECT = re.compile(r"\b(he|she|they|him|her|them|his|hers|their|you|your|it|its)\b", re.IGNORECASE)


def _bare_fact(clause: str) -> bool:
    """A clause that names no one: how chat introductions state the speaker's facts ("Yara, med
    student in Cairo, no pets.", "Vegan for five years now.")."""
    return "?" not in clause and not _OTHER_SUBJECT.search(clause) and not third_parties(clause)


@lru_cache(maxsize=65536)
def _people(clause: str) -> frozenset[str]:
    """The other people a clause names: relation words ("sister") and named possessors ("Marc's");
    a possessive of a thing or a role ("the doctor's advice") names no one."""
    words = set(_TOKEN.findall(clause.lower()))
    return frozenset((words & RELATIONS) | named_owners(clause) | role_people(clause))


_THIRD_SUBJECT = re.compile(r"\b(he|she|they|he's|she's|they're)\b", re.IGNORECASE)
_ACQUIRED = re.compile(r"\b(?:got|get|getting)\s+(?:a|an|my|our|the|a new)\b", re.IGNORECASE)
_OWNED = frozenset({"pet", "vehicle", "device", "work", "relationship"})


@dataclass(frozen=True)
class Change:
    """What a newer statement changes in an older one.

    Attributes:
        relations: the relations (:data:`titans_agent.facts.RELATION_PATTERNS`) the change is about;
            empty when the records are compared whole (the older record is stale as a whole).
        stale: the older record's clauses that the change replaces (empty: the whole record).
    """

    relations: frozenset[str]
    stale: tuple[str, ...]


WHOLE_RECORD = Change(frozenset(), ())


def clause_change(old: str, new: str, named: bool = False, user_speaks: bool = False) -> Change | None:
    """The clause-level test of a supersession between two conversation statements.

    A clause of ``new`` changes a clause of ``old`` when both state the speaker's own fact
    (:func:`states_own_fact`), share a relation (:func:`titans_agent.facts.relations`: where one
    lives, works, ...), the new clause announces a change (:func:`announces_change`), is not negated
    (:func:`denies_change`) and adds nothing (:func:`adds_fact`), names no other person the old one
    does not (a plural "we" may drop the partner the old one named: "I live in Boston with my partner"
    then "We moved to Seattle"), and states something the old clause lacks (:func:`content_differs`)
    or stops it ("no longer", "quit", "gave up"). With ``named`` (two notes about one subject, as
    :func:`find_supersessions` decides), a clause about a subject named at its start ("The user
    moved to Berlin.": :func:`titans_agent.facts.fact_subject`) changes a clause about the same
    subject as a first-person one changes the speaker's; conversation turns keep to the speaker's
    own facts (a chat names other people: "Sounds ...", "Congrats ..." open replies). With
    ``user_speaks`` (a note about "the user" and the user's own words: :func:`speaks_for_user`),
    a clause about the user ("The user lives in Boston.") is the speaker's own.

    Returns:
        The shared relations and the old clauses replaced, or None when no clause changes.
    """
    rels: set[str] = set()
    stale: list[str] = []
    own = (lambda c: states_own_fact(c) or fact_subject(c) == "user") if user_speaks else states_own_fact
    new_clauses = [c for c in clauses(new) if relations(c)]
    old_clauses = [c for c in clauses(old) if stated_relations(c) and (own(c) or _bare_fact(c) or fact_subject(c))]
    if not new_clauses or not old_clauses:
        return None
    for nc in new_clauses:
        # whose fact: the speaker's own (None), or a subject named at the clause's start ("The user ...")
        subject = None if own(nc) or not named else fact_subject(nc)
        if (subject is None and not own(nc)) or denies_change(nc) or adds_fact(nc):
            continue
        if _THIRD_SUBJECT.search(nc) or (
            not announces_change(nc) and not (_ACQUIRED.search(nc) and relations(nc) & _OWNED)
        ):
            continue
        n_parties = _people(nc) - {subject}
        plural = not _PLURAL_SELF.isdisjoint(_TOKEN.findall(nc.lower()))
        if subject is not None and reports_speech(nc):
            continue  # "Alice said Bob moved to Berlin" is not about Alice
        for oc in old_clauses:
            named_old = fact_subject(oc) if not own(oc) else None
            if named_old != subject or (subject is None and not (own(oc) or _bare_fact(oc))):
                continue  # a named subject's fact changes only that subject's; the speaker's, the speaker's
            shared = relations(nc) & stated_relations(oc)
            o_parties = _people(oc) - {subject}
            same_people = n_parties == o_parties or (plural and n_parties < o_parties)
            if shared and same_people and (content_differs(oc, nc) or _STOPS.search(nc)):
                rels |= shared
                if oc not in stale:
                    stale.append(oc)
    return Change(frozenset(rels), tuple(stale)) if rels else None


def detect_change(
    old: str, new: str, conversational: bool, similar: bool, named: bool = False, user_speaks: bool = False
) -> Change | None:
    """Whether ``new`` supersedes ``old``, and in what: the whole record (:data:`WHOLE_RECORD`) when
    the two are ``similar`` (embedding cosine at least ``RetrievalConfig.update_similarity``), pass
    :func:`is_update` and are not a clause-level change of a multi-fact statement; else, for
    conversational text, the clauses :func:`clause_change` finds (the two need not be similar as
    wholes: "Hi! I'm a nurse and I live in Lyon." and "I moved to Montreal." are not); else None.
    A clause-level change is a whole-record one unless another clause of ``old`` states a fact of
    some relation ("I'm a nurse") or the replaced clauses state another relation too. ``named``,
    ``user_speaks``: as :func:`clause_change`. Deterministic: recall derives a link's relations again
    with it."""
    change = clause_change(old, new, named, user_speaks)
    if change is not None and (
        any(stated_relations(c) for c in clauses(old) if c not in change.stale)
        or any(stated_relations(c) - change.relations for c in change.stale)
    ):
        return change  # part of the older record stays true ("software engineer" after a move)
    if similar and is_update(old, new, conversational):
        return WHOLE_RECORD
    return None if change is None else WHOLE_RECORD


@lru_cache(maxsize=16384)
def link_change(old: str, new: str) -> Change:
    """What a stored link between ``old`` and ``new`` changes (:func:`detect_change`, read again from
    the texts): :data:`WHOLE_RECORD` when the older record is stale as a whole (or when the texts no
    longer pass the tests, as after a change of these rules: the link stands)."""
    named, user = _by_subject(old, new), speaks_for_user(old, new)
    return detect_change(old, new, conversational=True, similar=True, named=named, user_speaks=user) or WHOLE_RECORD


def covered_relations(old: str, successors: Sequence[str]) -> frozenset[str]:
    """The relations in which links to ``successors`` supersede ``old`` (:func:`link_change`); empty
    when one of them supersedes it as a whole."""
    out: set[str] = set()
    for new in successors:
        rel = link_change(old, new).relations
        if not rel:
            return frozenset()
        out |= rel
    return frozenset(out)


def link_scope(old: str, new: str) -> frozenset[str]:
    """The relations a stored link between ``old`` and ``new`` is about (:func:`link_change`): empty
    when the older record is stale as a whole."""
    return link_change(old, new).relations


def _as_aware(t: dt.datetime) -> dt.datetime:
    return t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t


@dataclass(frozen=True)
class FreshRecord:
    """A record a write just created, as update detection sees it.

    Attributes:
        id: its record id.
        text: its text.
        kind: "turn" or "note" (chunks never supersede).
        role: the speaker, for turns.
        when: the statement's time (the turn's timestamp, else the write's time).
    """

    id: int
    text: str
    kind: str
    role: str | None
    when: dt.datetime


Place = tuple[str, "str | None", dt.datetime]
"""An occurrence of an older record: ``(kind, role, time)``."""


def nearest_above(sims: np.ndarray, threshold: float, limit: int = MAX_CANDIDATES) -> np.ndarray:
    """Column indices of the at most ``limit`` largest entries of ``sims`` that are at least
    ``threshold``, most similar first (ties: the lower index first; NaN never qualifies). Linear in
    ``len(sims)`` (a partition, not a sort of the whole row): what bounds a write's update detection
    in a large namespace.

    Args:
        sims: ``(n,)`` cosines.
        threshold: the least cosine kept.
        limit: the most indices returned.

    Returns:
        ``(k,)`` int64 indices, ``k <= limit``.
    """
    above = np.flatnonzero(sims >= threshold)
    if above.shape[0] > limit:
        vals = sims[above]
        # the limit-th largest value; every entry above it is kept, ties at it by the lower index
        kth = np.partition(vals, vals.shape[0] - limit)[vals.shape[0] - limit]
        above = np.concatenate([above[vals > kth], above[vals == kth]])[:limit]
    order = np.lexsort((above, -sims[above]))
    return above[order].astype(np.int64, copy=False)


def update_candidates(old_ids: np.ndarray, sims: np.ndarray, threshold: float, limit: int = MAX_CANDIDATES) -> set[int]:
    """Ids of the records some fresh record may supersede: for each fresh record, its at most
    ``limit`` most similar records of cosine at least ``threshold`` times
    :data:`CLAUSE_SIMILARITY_SHARE` (:func:`nearest_above`).

    Args:
        old_ids: ``(n,)`` ids of the records stored before the write, then of the fresh ones.
        sims: ``(m, n)`` cosine of each of the ``m`` fresh records (the last ``m`` of ``old_ids``)
            to every record; row ``i`` is read only up to ``n - m + i`` (older records and the
            batch's earlier ones).
        threshold: the least cosine of a candidate.
        limit: the most candidates per fresh record.
    """
    m, n = sims.shape
    floor = threshold * CLAUSE_SIMILARITY_SHARE
    out: set[int] = set()
    for i in range(m):
        out.update(int(old_ids[j]) for j in nearest_above(sims[i, : n - m + i], floor, limit))
    return out


def find_supersessions(
    fresh: Sequence[FreshRecord],
    ids: np.ndarray,
    sims: np.ndarray,
    texts: dict[int, str],
    places: dict[int, list[Place]],
    threshold: float,
    limit: int = MAX_CANDIDATES,
    covered: dict[int, frozenset[str]] | None = None,
    cross_kind: bool = True,
) -> list[tuple[int, int, float, dt.datetime]]:
    """Which older records the fresh ones supersede (the tests of the module docstring).

    Args:
        fresh: the records a write created, of the kinds that may supersede, in write order.
        ids: ``(n,)`` the ids of the columns of ``sims``: the records stored before the write, then
            ``fresh``'s.
        sims: ``(m, n)`` cosine of each fresh record to every column (see :func:`update_candidates`).
        texts: record id -> text, for every candidate.
        places: record id -> its occurrences, for every candidate (the batch's earlier ones too).
        threshold: the cosine above which two records may be about the same subject.
        limit: the most older records tested per fresh record (its most similar ones,
            :func:`nearest_above`).
        covered: record id -> the relations in which a link already supersedes it (empty: as a
            whole), for the candidates that are superseded: such a record is not linked again for
            what it is already superseded in, so n updates of one fact make n links, not n^2/2.
        cross_kind: a note and a turn of the user's side may supersede each other (both kinds
            checked: ``RetrievalConfig.update_kinds``); see :func:`_compatible`.

    Returns:
        Links ``(old id, new id, cosine, effective at)``, most similar candidates first: at most
        :data:`MAX_LINKS_PER_RECORD` whole-record ones per fresh record and kind of the older record
        (a turn and a note that state one fact are both replaced), and every clause-level one
        (:func:`detect_change`) among the candidates.
    """
    links: list[tuple[int, int, float, dt.datetime]] = []
    m, n = sims.shape
    floor = threshold * CLAUSE_SIMILARITY_SHARE
    for i, rec in enumerate(fresh):
        when = _as_aware(rec.when)
        added: dict[str, int] = {}  # whole-record links made, per kind of the older record
        for j in nearest_above(sims[i, : n - m + i], floor, limit):
            old_id = int(ids[j])
            if not _compatible(rec, places.get(old_id, []), when, texts.get(old_id, ""), cross_kind):
                continue
            similar = bool(sims[i, j] >= threshold)
            old_text = texts.get(old_id, "")
            user = speaks_for_user(old_text, rec.text)
            own = rec.kind == "turn" or states_own_fact(rec.text) or user
            if not own and not _same_thing(old_text, rec.text) and not same_subject(old_text, rec.text):
                continue  # a note about a thing: "Customer Globex ..." never updates "Customer Acme ..."
            # a note about a named subject ("The user moved to Berlin.") changes only a fact of the same
            # relation about that subject: the clause tests alone, not similarity as a whole
            by_subject = not own and _by_subject(old_text, rec.text)
            change = detect_change(
                old_text, rec.text, own, similar and not by_subject and not user, named=by_subject, user_speaks=user
            )
            old_kind = next((kind for kind, _, _ in places.get(old_id, [])), "")
            if change is None or (change is WHOLE_RECORD and added.get(old_kind, 0) >= MAX_LINKS_PER_RECORD):
                continue
            done = (covered or {}).get(old_id)
            if done is not None and (not done or (change.relations and change.relations <= done)):
                continue  # already superseded in what this changes: its successor is what to link
            links.append((old_id, rec.id, float(sims[i, j]), when))
            added[old_kind] = added.get(old_kind, 0) + (change is WHOLE_RECORD)
    if links:
        log.debug("linked %d superseded record(s)", len(links))
    return links


def about_user(text: str) -> bool:
    """Whether ``text`` is a note about the chat's user: a clause with "the user" as its subject
    ("The user lives in Boston.", :func:`titans_agent.facts.fact_subject`) and no first-person
    statement. What a model or an application writes with ``remember`` in a user's namespace."""
    return not states_own_fact(text) and any(fact_subject(c) == "user" for c in clauses(text))


def speaks_for_user(old: str, new: str) -> bool:
    """Whether one text is a note about the user (:func:`about_user`) and the other the user's own
    statement (:func:`states_own_fact`): "The user lives in Boston." and "I moved to Seattle." are
    then compared as two statements of one speaker. One rule for writing a link and reading it."""
    return (about_user(old) and states_own_fact(new)) or (about_user(new) and states_own_fact(old))


def _by_subject(old: str, new: str) -> bool:
    """Whether a note is compared with an older one as a fact of a named subject (clause by clause,
    :func:`clause_change` with ``named``): both about one subject, not a first-person note, not one
    thing whose value changes. One rule for writing a link and reading it again."""
    return not states_own_fact(new) and not _same_thing(old, new) and same_subject(old, new)


def _same_thing(old: str, new: str) -> bool:
    """Whether a note about a thing keeps every word of the older one but its numbers ("The staging
    server now listens on port 9443." after "... on port 8443."): the thing named stays, a value
    changes."""
    return not {w for w in salient_tokens(old) if not w.isdigit()} - salient_tokens(new)


def _compatible(
    rec: FreshRecord, old_places: Sequence[Place], when: dt.datetime, old_text: str = "", cross_kind: bool = False
) -> bool:
    """Same speaker for turns (notes for notes), and the old statement not later than the new one.
    With ``cross_kind``, a note and a turn of the user's side (any role but the assistant's,
    :data:`titans_agent.facts.ASSISTANT_ROLES`) too, when the note is about the user: first person
    ("I live in Boston.") or "the user" (:func:`about_user`). In a user's namespace both are the
    user's facts: what an agent's ``remember`` tool wrote and what the user said later (or the
    reverse) update each other."""
    for kind, role, time in old_places:
        if _as_aware(time) > when:
            continue
        if rec.kind == "turn" and kind == "turn" and (role or "").casefold() == (rec.role or "").casefold():
            return True
        if rec.kind == "note" and kind == "note":
            return True
        if cross_kind and {rec.kind, kind} == {"turn", "note"}:
            turn_role = rec.role if rec.kind == "turn" else role
            note = rec.text if rec.kind == "note" else old_text
            if (turn_role or "").casefold() not in ASSISTANT_ROLES and (states_own_fact(note) or about_user(note)):
                return True
    return False


@dataclass
class UpdateLinks:
    """Supersession links of some records, as known at a time.

    Attributes:
        superseded_by: old record id -> the ids of the records that supersede it.
        supersedes: new record id -> the ids of the records it supersedes.
        stale: old record id -> its clauses that the links in scope replace (:meth:`in_scope`;
            absent when it is replaced as a whole).
    """

    superseded_by: dict[int, list[int]]
    supersedes: dict[int, list[int]]
    stale: dict[int, list[str]] = field(default_factory=dict)

    def whole_only(self) -> UpdateLinks:
        """The links that supersede a record as a whole (those without :attr:`stale` clauses): what
        ``recall(include_superseded=False)`` drops; a record still partly current is kept."""
        by = {old: news for old, news in self.superseded_by.items() if old not in self.stale}
        sup: dict[int, list[int]] = {}
        for old, news in by.items():
            for n in news:
                sup.setdefault(n, []).append(old)
        return UpdateLinks(by, sup)

    def annotated(self, texts: dict[int, str]) -> UpdateLinks:
        """Every link, with :attr:`stale` filled for the records that clause-level links replace
        only in part (:func:`link_change`): what a hit shows, whatever the question."""
        return self.in_scope(texts, None)

    def in_scope(self, texts: dict[int, str], asked: frozenset[str] | None) -> UpdateLinks:
        """The links in effect for a question about the relations ``asked``
        (:func:`titans_agent.facts.query_relations`): every whole-record link, and a clause-level
        link (:func:`link_scope`) only when the question asks about one of its relations (``asked``
        None: every link). A link whose texts are not in ``texts`` counts as whole-record."""
        by: dict[int, list[int]] = {}
        stale: dict[int, list[str]] = {}
        for old, news in self.superseded_by.items():
            whole = False
            for n in news:
                change = link_change(texts[old], texts[n]) if old in texts and n in texts else WHOLE_RECORD
                if asked is not None and change.relations and change.relations.isdisjoint(asked):
                    continue
                by.setdefault(old, []).append(n)
                whole = whole or not change.stale
                stale.setdefault(old, []).extend(c for c in change.stale if c not in stale.get(old, []))
            if whole:
                stale.pop(old, None)
        sup: dict[int, list[int]] = {}
        for old, news in by.items():
            for n in news:
                sup.setdefault(n, []).append(old)
        return UpdateLinks(by, sup, {old: c for old, c in stale.items() if c})
