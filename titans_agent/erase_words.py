"""What of a document's derived data survives a forget: the rule of words (:func:`rederive_documents`).

A chunk of a document carries data derived from the document's text outside its own text: its
location (``occurrences.location``: the heading path in force at it, its section or clause
labels, and a citation made of them) and its record's lexical context (``records.context``: after
the source's name words, the document's title lines and, for Python source, the names of the
classes and functions enclosing it). Those pieces may come from another chunk's text (a heading
line, a title, a ``class`` line), so forgetting that chunk must take them out of the chunks that
remain. :mod:`titans_agent.erase` takes out what it can place exactly (a title when chunk 0 goes,
a scope name whose ``class``/``def`` line went); this module then applies one rule to every
document that lost a chunk occurrence, in the same transaction, after the delete:

    A piece of a remaining chunk's derived data that came from the document's text survives only
    if every word of it (each maximal run of word characters, ``\\w+``, compared case-folded)
    occurs in the text of a remaining chunk of that document.

The pieces: each heading of ``headings`` (a heading cut at 200 characters may end with the start
of a word), ``section`` and each of ``sections`` (a location that loses one is cited again from
what stays, :func:`titans_agent.ingest.structure.citation`; page numbers are not text and stay);
in the context, each whitespace-separated token after the name words of the chunk's source (the
header's name words are the caller's label, kept in ``occurrences.source``). A context part is the
document's when it starts with the name words of the chunk's source or their end (a file's header
names its path as given); the parts of a record's context from other places are left alone.
Records whose context changes get ``changed_revision`` set to the erasing revision, so every
process's BM25 index reads them again.

So no word of forgotten text stays in a remaining chunk's location or context unless the
document's remaining text holds it. What the rule keeps is more than what came from the remaining
text: a forgotten heading all of whose words occur elsewhere in the document stays.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from titans_agent.ingest.structure import citation
from titans_agent.store import erasure, repository
from titans_agent.store.erasure import ChunkPlace
from titans_agent.text import WORD, name_words

__all__ = ["HEADING_CHARS", "held_words", "kept_context", "kept_location", "rederive_documents", "survives"]

HEADING_CHARS = 200
"""A heading of this many characters may have been cut (its last word may be the start of one)."""


def held_words(texts: Iterable[str]) -> frozenset[str]:
    """The words (``\\w+``, case-folded) of ``texts``."""
    return frozenset(w for t in texts for w in WORD.findall(t.casefold()))


def survives(piece: str, held: Collection[str], *, cut: bool = False) -> bool:
    """Whether every word of ``piece`` is in ``held``; with ``cut``, its last word may be the
    start of one."""
    words = WORD.findall(piece.casefold())
    if cut and words:
        last = words.pop()
        if last not in held and not any(w.startswith(last) for w in held):
            return False
    return all(w in held for w in words)


def kept_location(loc: dict[str, Any], held: Collection[str]) -> dict[str, Any] | None:
    """``loc`` (a location's JSON form) without its headings and section labels whose words are
    not all in ``held``, cited again; None when nothing goes."""
    headings = loc.get("headings") or []
    labels = loc.get("sections") or []
    kept_h = [h for h in headings if survives(h, held, cut=len(h) >= HEADING_CHARS)]
    kept_l = [label for label in labels if survives(label, held)]
    section = loc.get("section")
    kept_s = section if section is None or survives(section, held) else None
    if (kept_h, kept_l, kept_s) == (headings, labels, section):
        return None
    new = {k: v for k, v in loc.items() if k not in ("headings", "sections", "section", "citation")}
    if kept_h:
        new["headings"] = kept_h
    if kept_s is None and kept_l:
        kept_s = kept_l[0]  # the first section the chunk touches that stays
    if kept_s is not None:
        new["section"] = kept_s
    if len(kept_l) > 1:
        new["sections"] = kept_l
    cited = citation(new)
    if cited:
        new["citation"] = cited
    return new


def kept_context(ctx: str, source: str | None, held: Collection[str]) -> str:
    """``ctx`` (a record's context, " | "-joined parts) with, in each part that is the header of
    a chunk of ``source`` (it starts with the source's name words or their end), each token after
    the name words that :func:`survives` not ``held`` taken out."""
    words = name_words(source or "").split()
    heads = [" ".join(words[i:]) for i in range(len(words))]  # longest first
    parts = ctx.split(" | ")
    for i, part in enumerate(parts):
        head = next((h for h in heads if part == h or part.startswith(h + " ")), None)
        if head is None:
            continue
        kept = [t for t in part[len(head) :].split() if survives(t, held)]
        parts[i] = " ".join([head, *kept])
    return " | ".join(parts)


def rederive_documents(s: Any, doc_ids: Collection[int], revision: int) -> int:
    """Apply the rule (see the module's docstring) to the remaining chunks of the documents
    ``doc_ids``, after the delete and in the erasing transaction: rewrite the locations and the
    contexts that lose a piece, the records' ``changed_revision`` set to ``revision``. Returns how
    many locations and contexts changed."""
    remaining = erasure.document_chunks(s, doc_ids)
    held: dict[int, frozenset[str]] = {doc: held_words(c.text for c in chunks) for doc, chunks in remaining.items()}
    locations: dict[int, dict[str, Any]] = {}
    for occ, doc, loc in erasure.chunk_locations(s, set(remaining)):
        new = kept_location(loc, held[doc])
        if new is not None:
            locations[occ] = new
    erasure.set_locations(s, locations)
    chunks: list[tuple[int, ChunkPlace]] = [(doc, c) for doc, cs in remaining.items() for c in cs]
    places = erasure.record_places(s, {c.record_id for _, c in chunks})
    contexts: dict[int, str] = {}
    for doc, c in chunks:
        ctx = contexts.get(c.record_id, places[c.record_id][0])
        kept = kept_context(ctx, c.source, held[doc])
        if kept != places[c.record_id][0] or c.record_id in contexts:
            contexts[c.record_id] = kept
    contexts = {rid: ctx for rid, ctx in contexts.items() if ctx != places[rid][0]}
    repository.set_contexts(s, contexts, revision)
    return len(locations) + len(contexts)
