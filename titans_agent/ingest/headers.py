"""Contextual chunk headers: what a chunk is also found by, besides its own words.

A chunk of a contract rarely names the contract ("the Receiving Party shall ..."); a method of a
class rarely names its module. A query often does ("Consider the NDA between CopAcc and ToP Mentors;
does it ...", "how does click's progress bar compute ..."). So every chunk is indexed for full-text
search with a header of its document, kept apart from its text (the ``context`` field, which weighs
half the text in BM25; nothing of it is stored in the chunk's text or embedded):

- the document's name words (:func:`titans_agent.text.name_words`: percent-escapes decoded,
  camel case and separators split), which for most files name the parties, the product, the
  licence or the module;
- for a document that is not source code, its title: the short lines of its opening paragraph
  (a title, a version line, "between X and Y" lines), at most :data:`TITLE_CHARS` characters
  from the first :data:`TITLE_WINDOW`;
- for a chunk of Python source, the classes that enclose it (:func:`enclosing_scopes`), so a
  method chunk is found by its class name.

Pure functions; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from titans_agent.text import name_words

__all__ = [
    "NOT_CODE",
    "TITLE_CHARS",
    "TITLE_WINDOW",
    "chunk_context",
    "document_header",
    "enclosing_scope_lines",
    "enclosing_scopes",
    "title_lines",
]

NOT_CODE = frozenset({"markdown", "rst", "latex", "html"})
"""Chunker languages (:func:`titans_agent.ingest.chunking.language_for_path`) whose files are documents."""
TITLE_CHARS = 240
"""At most this many characters of title lines go into a document's header."""
TITLE_WINDOW = 1000
"""Title lines are looked for in the first this many characters of a document."""
_TITLE_LINE_MAX = 120  # a longer line is body text, which ends the title
_PY_SCOPE = re.compile(r"^([ \t]*)(?:async[ \t]+)?(class|def)[ \t]+([A-Za-z_]\w*)")


def title_lines(text: str) -> list[str]:
    """The document's title: its opening paragraph's lines (whitespace-collapsed; up to the first
    blank line) until a line longer than 120 characters, within the first :data:`TITLE_WINDOW`
    characters and at most :data:`TITLE_CHARS` characters in all. Empty when the document opens
    with body text."""
    out: list[str] = []
    used = 0
    for raw in text[:TITLE_WINDOW].splitlines():
        line = " ".join(raw.split())
        if not line:
            if out:
                break  # the title is the opening paragraph, not the hard-wrapped text after it
            continue
        if len(line) > _TITLE_LINE_MAX or used + len(line) > TITLE_CHARS:
            break
        out.append(line)
        used += len(line) + 1
    return out


def document_header(name: str, text: str, code: bool) -> tuple[str, str]:
    """The header of a document named ``name`` (a path or a source name) with content ``text``:
    ``(its name words, its title lines joined)``; the title is empty for source ``code``."""
    return name_words(name), "" if code else " ".join(title_lines(text))


def enclosing_scopes(lines: Sequence[str], start_line: int) -> list[str]:
    """The names of the Python classes and functions that enclose line ``start_line`` (1-based) of
    a file given as its ``lines``, outermost first: each ``class``/``def`` line above it whose
    indentation is smaller than that of every scope line found below it so far. Best effort for
    code that parses or not (decorators, strings that look like code may add a name)."""
    return [name for _, name in enclosing_scope_lines(lines, start_line)]


def enclosing_scope_lines(lines: Sequence[str], start_line: int) -> list[tuple[int, str]]:
    """:func:`enclosing_scopes` with the line (1-based) of each name's ``class``/``def`` line:
    ``(line, name)``, outermost first. Erasure (:func:`titans_agent.erase.forget`) drops a name
    whose line was only in forgotten text."""
    scopes: list[tuple[int, str]] = []
    limit: int | None = None  # a scope must be indented less than this
    if not 1 <= start_line <= len(lines):
        return scopes
    i = start_line - 1
    first = lines[i]
    if first.strip():
        limit = len(first) - len(first.lstrip())
    for j in range(i - 1, -1, -1):
        line = lines[j]
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if limit is not None and indent >= limit:
            continue
        m = _PY_SCOPE.match(line)
        if m:
            scopes.append((j + 1, m.group(3)))
        if line.lstrip().startswith(("#", "@", ")", "]", "}", '"', "'")) and not m:
            continue  # comments, decorators and the ends of brackets do not close a scope
        limit = indent
        if indent == 0:
            break
    return scopes[::-1]


def chunk_context(header: tuple[str, str], scopes: Sequence[str]) -> str:
    """A chunk's full-text context: its document's header (name words, title), then its
    enclosing scopes' names."""
    return " ".join(p for p in (*header, *scopes) if p)
