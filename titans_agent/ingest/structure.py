"""Where a piece of a document is: its page, its heading path and its section or clause number.

:meth:`DocumentStructure.parse` reads the structure a text carries inline (see
:mod:`titans_agent.ingest.formats`): page breaks (form feeds, as written between PDF pages), Markdown
headings (parsed by markdown-it-py, so ``#`` lines inside code fences are not headings; DOCX and
HTML headings arrive as Markdown headings), and the section and clause numbers of legal texts:

* ``Section 4.2``, ``Sec. 4.2``, ``SECTION 4.2(a)`` -> ``"4.2"``, ``"4.2(a)"``;
* ``Article 7``, ``ARTICLE VII``, ``Art. 7`` -> ``"Article 7"``, ``"Article VII"``;
* ``§ 12``, ``§12`` -> ``"§ 12"``; ``Clause 5`` -> ``"Clause 5"``;
* a line starting with a dotted number (not ``0.``) and a capitalised word, ``4.2.1 The Licensee
  ...`` -> ``"4.2.1"``; in plain text (not Markdown, where it is a list item) also ``1.
  Definitions`` -> ``"1"``; in Markdown, a heading ``## 4. Payment`` -> ``"4"``.

In Markdown nothing inside a fenced code block starts a section (``# 3. A chat history`` there is a
comment); an indented block is not taken for code (legal texts indent their sub-clauses).

A keyword must be followed by its number and then by the end of the line, punctuation or a
capitalised word, so a sentence that starts with a reference ("Section 4.2 applies ...") is not
taken for the start of section 4.2.

:meth:`DocumentStructure.locate` turns a character span into the :class:`~titans_agent.types.Location`
kept with a chunk.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any

from titans_agent.types import Location

__all__ = ["DocumentStructure", "citation"]

_ROMAN = r"[IVXLCDM]+"
_NUMBER = r"\d+(?:\.\d+)*\.?(?:\([a-z0-9]{1,4}\))*"
# What may follow a section number for the line to start a section (not mention one).
_AFTER = r"(?-i:(?=[ \t]*$|[ \t]*[.:)\-\u2013\u2014]|[ \t]+[A-Z\u00c0-\u00de(\"'\u201c\u2018\[]))"  # case-sensitive
_KEYWORD = re.compile(
    rf"^[ \t>*_#]*(?P<kw>section|sec\.|article|art\.|clause|\u00a7\u00a7?)[ \t]*"
    rf"(?P<id>{_NUMBER}|{_ROMAN}\b)(?![\d.]*\d){_AFTER}",
    re.IGNORECASE | re.MULTILINE,
)
_DOTTED = re.compile(
    r"^[ \t>*_#]*(?P<id>[1-9]\d{0,2}(?:\.\d{1,3})+)\.?(?=[ \t]+[A-Z\u00c0-\u00de(\"\u201c])", re.MULTILINE
)
_TOP_PROSE = re.compile(r"^[ \t]*(?P<id>\d{1,3})\.(?=[ \t]+[A-Z\u00c0-\u00de])", re.MULTILINE)
_TOP_HEADING = re.compile(r"^[ \t]*#{1,6}[ \t]+(?P<id>\d{1,3})\.?(?=[ \t]+[A-Z\u00c0-\u00de])", re.MULTILINE)
_MAX_TITLE = 200  # characters of a heading kept in a location


@dataclass
class DocumentStructure:
    """The structure of one text, as character offsets.

    Attributes:
        paged: Whether the text has pages (a PDF, or a text holding form feeds).
        page_breaks: Offsets of the ``"\\f"`` characters that separate pages, ascending.
        headings: ``(offset of the heading's line, level 1-6, title)``, ascending.
        sections: ``(offset of the line, label)`` of each section or clause start, ascending; an
            empty label marks where a section ends without a new one (a Markdown heading).
    """

    paged: bool = False
    page_breaks: list[int] = field(default_factory=list)
    headings: list[tuple[int, int, str]] = field(default_factory=list)
    sections: list[tuple[int, str]] = field(default_factory=list)
    _section_offsets: list[int] = field(init=False, repr=False, compare=False)
    _parents: list[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Indexes built once, so locating every chunk of a long document stays linear.
        self._section_offsets = [offset for offset, _ in self.sections]
        self._parents = []  # index of each heading's enclosing heading, -1 for none
        open_headings: list[int] = []
        for i, (_, level, _) in enumerate(self.headings):
            while open_headings and self.headings[open_headings[-1]][1] >= level:
                open_headings.pop()
            self._parents.append(open_headings[-1] if open_headings else -1)
            open_headings.append(i)

    @classmethod
    def parse(cls, text: str, *, markdown: bool, paged: bool = False) -> DocumentStructure:
        """Find the pages, headings and section numbers of ``text``.

        Args:
            text: The whole document (newlines ``"\\n"``).
            markdown: Read Markdown headings (``.md`` files, and DOCX and HTML once extracted);
                otherwise the text is plain prose, where ``1. Title`` lines count as sections.
            paged: The text is paged even without a form feed (a one-page PDF).

        Returns:
            The structure; empty lists where the text has none of it.
        """
        breaks = [m.start() for m in re.finditer("\f", text)]
        headings, code = _markdown_blocks(text) if markdown else ([], set())
        found: dict[int, str] = {}
        patterns = (_TOP_HEADING, _DOTTED, _KEYWORD) if markdown else (_TOP_PROSE, _DOTTED, _KEYWORD)
        for pattern in patterns:  # a later pattern wins on the same line (a keyword is surest)
            for m in pattern.finditer(text):
                found[text.rfind("\n", 0, m.start() + 1) + 1] = _label(m)
        for offset in code.intersection(found):  # Markdown: no section inside a code fence
            del found[offset]
        # In Markdown a heading no deeper than the one that opened a section ends that section.
        opened_at: int | None = None
        for offset, level, _ in headings:
            if offset in found:
                opened_at = level
            elif opened_at is not None and level <= opened_at:
                found[offset] = ""  # no section from here on
                opened_at = None
        return cls(
            paged=paged or bool(breaks),
            page_breaks=breaks,
            headings=headings,
            sections=sorted(found.items()),
        )

    def boundaries(self) -> list[int]:
        """Offsets where a new chunk starts: every heading's and section's line and every page
        break (the form feed itself), ascending, without 0."""
        cuts = {offset for offset, _, _ in self.headings} | {offset for offset, _ in self.sections}
        return sorted(cuts.union(self.page_breaks) - {0})

    def locate(self, start: int, end: int, at: int | None = None) -> Location:
        """The location of ``text[start:end]``.

        Args:
            start: Offset of the span's first character.
            end: Offset just past its last character.
            at: Where the span's heading path and section are read (default ``start``): past a
                heading line that only introduces the text after it.

        Returns:
            A :class:`~titans_agent.types.Location` with only the fields that apply set: ``page``
            (1-based page of ``start``) and ``end_page`` (when the span runs onto later pages);
            ``headings`` (the heading path in force at ``at``, outermost first); ``section`` (the
            section or clause in force at ``at``, else the first one starting after it) and
            ``sections`` (every one the span touches, when more than one); ``citation`` (these in
            words: ``"section 4.2, page 7"``, ``"Terms > Payment, pages 3-4"``).
        """
        loc: dict[str, Any] = {}
        if self.paged:
            page = bisect.bisect_left(self.page_breaks, start) + 1
            last = bisect.bisect_left(self.page_breaks, end) + 1
            loc["page"] = page
            if last > page:
                loc["end_page"] = last
        at = start if at is None else at
        path = self._heading_path(at)
        if path:
            loc["headings"] = path
        offsets = self._section_offsets
        first = bisect.bisect_right(offsets, start) - 1
        current = bisect.bisect_right(offsets, at) - 1
        inside = bisect.bisect_left(offsets, end)
        # the section in force at start (if any), then those starting inside the span
        touched = [label for _, label in self.sections[max(first, 0) : inside] if label]
        labels = [label for _, label in self.sections[max(current, 0) : inside] if label]
        if labels:
            loc["section"] = labels[0]
            unique = list(dict.fromkeys(touched))
            if len(unique) > 1:
                loc["sections"] = unique
        cited = citation(loc)
        if cited:
            loc["citation"] = cited
        return Location(**loc)

    def _heading_path(self, start: int) -> list[str]:
        """Titles of the heading in force at ``start`` and of those enclosing it, outermost first."""
        idx = bisect.bisect_right(self.headings, (start, 7, "")) - 1
        path: list[str] = []
        while idx >= 0:
            path.append(self.headings[idx][2])
            idx = self._parents[idx]
        return path[::-1]


def _label(m: re.Match[str]) -> str:
    ident = m.group("id").rstrip(".")
    kw = (m.groupdict().get("kw") or "").lower()
    if kw.startswith("\u00a7"):
        return f"\u00a7 {ident}"
    if kw.startswith("art"):
        return f"Article {ident}"
    if kw == "clause":
        return f"Clause {ident}"
    return ident


def citation(loc: dict[str, Any]) -> str:
    """A location's citation, from its fields in their JSON form (``section``, ``headings``,
    ``page``, ``end_page``): ``"section 4.2, page 7"``, ``"Terms > Payment, pages 3-4"``; empty
    when none is set. Erasure cites again a location that lost a heading or section."""
    parts: list[str] = []
    section = loc.get("section")
    if section:
        parts.append(f"section {section}" if section[0].isdigit() else section)
    elif loc.get("headings"):
        parts.append(" > ".join(loc["headings"]))
    if "page" in loc:
        parts.append(f"pages {loc['page']}-{loc['end_page']}" if "end_page" in loc else f"page {loc['page']}")
    return ", ".join(parts)


def _markdown_blocks(text: str) -> tuple[list[tuple[int, int, str]], set[int]]:
    """Via markdown-it-py: ``(offset of the line, level, title)`` of every ATX and setext heading,
    and the offsets of the lines of fenced code blocks (with their fences)."""
    from markdown_it import MarkdownIt

    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    # Block structure is all that is needed: the heading's raw text is in its inline token.
    tokens = MarkdownIt("commonmark").disable(["inline", "text_join"]).parse(text)
    headings: list[tuple[int, int, str]] = []
    code: set[int] = set()
    for i, tok in enumerate(tokens):
        if tok.map is None:
            continue
        first, stop = tok.map
        if tok.type == "fence":
            code.update(line_starts[first:stop])
        elif tok.type == "heading_open":
            title = tokens[i + 1].content if i + 1 < len(tokens) and tokens[i + 1].type == "inline" else ""
            title = " ".join(title.replace("\\#", "#").split())[:_MAX_TITLE]
            if title:
                headings.append((line_starts[first], int(tok.tag[1]), title))
    return headings, code
