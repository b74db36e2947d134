"""How a recalled memory is shown to a model: dated, and marked when a later memory superseded it.

The faces that put memories into a model's context (the LangChain middleware and ``recall`` tool,
the MCP server's ``recall``) write each one as ``[2024-03-01] I moved to Seattle.`` or
``[2024-01-01, superseded] I live in Boston.`` (or ``[2024-01-01, superseded in part: "I live in
Lyon."] Hi! I'm a nurse and I live in Lyon.`` when a later memory replaced one of its facts), in
recall's order: best first, and recall ranks a
record's successor above it (:meth:`~titans_agent.MemoryAgent.recall`), so the current version of a
fact comes before the one it replaced. Without the date and the mark a model cannot tell an old
fact from a new one. Nothing here imports LangChain or the MCP SDK.
"""

from __future__ import annotations

import datetime as dt

from titans_agent import Hit

__all__ = ["SUPERSEDED_MARK", "memory_date", "memory_label", "memory_line"]

SUPERSEDED_MARK = "superseded"
"""The word in a memory's label when a later memory supersedes it (``hit.superseded_by``)."""


def memory_date(hit: Hit) -> dt.date:
    """The day a memory is from, in UTC: a turn's timestamp (when it was said), else when the
    record was written (``created_at``: a note's or a document chunk's write time)."""
    when = hit.timestamp if hit.timestamp is not None else hit.created_at
    if when.tzinfo is not None:
        when = when.astimezone(dt.timezone.utc)
    return when.date()


def memory_label(hit: Hit) -> str:
    """``"[YYYY-MM-DD]"`` (:func:`memory_date`); ``"[YYYY-MM-DD, superseded]"`` when a later record
    supersedes this one as a whole (its ``superseded_by`` is not empty); ``"[YYYY-MM-DD, superseded
    in part: "I live in Lyon."]"`` when later records replace only some of its clauses
    (``stale_clauses``), so a model keeps the rest ("I'm a nurse") as true."""
    mark = ""
    if hit.stale_clauses:
        mark = f", {SUPERSEDED_MARK} in part: " + "; ".join(f'"{c}"' for c in hit.stale_clauses)
    elif hit.superseded_by:
        mark = f", {SUPERSEDED_MARK}"
    return f"[{memory_date(hit).isoformat()}{mark}]"


def memory_line(hit: Hit) -> str:
    """One memory as a model reads it: ``"[2024-03-01] I moved to Seattle."`` (:func:`memory_label`,
    a space, the text), then ``" (source lines a-b)"`` for a record of a named source (a file or a
    named text; a turn's ``session:<id>`` source is left out, its date says when it was said)."""
    where = ""
    if hit.source and hit.kind != "turn":
        where = f" ({hit.source}" + (f" lines {hit.location}" if hit.location else "") + ")"
    return f"{memory_label(hit)} {hit.text}{where}"
