"""Text out of document formats (PDF, DOCX, HTML), with their structure kept in the text.

:func:`extract` turns the raw bytes of a document into one plain text that the
:class:`~titans_agent.ingest.chunking.Chunker` reads like any other, with the structure written inline so
that every chunk can say where it came from:

* **PDF** (pypdf): the text of each page, pages separated by ``"\\n\\f\\n"`` (a form feed on its own
  line, the ``pdftotext`` convention); page *n* is the text after the *(n-1)*-th form feed.
* **DOCX** (python-docx): paragraphs and tables in document order (table rows as ``a | b``); a
  paragraph styled ``Title`` becomes a level-1 heading line (``"# " + text``) and one styled
  ``Heading N`` a level-(N+1) one, so the title heads the heading path.
* **HTML** (BeautifulSoup, ``html.parser``): scripts, styles, ``<nav>`` and ``<head>`` dropped,
  ``<h1>``-``<h6>`` become Markdown heading lines, block elements paragraphs, table rows
  ``a | b`` lines; whitespace is collapsed (``<pre>`` loses its indentation).

A body line that would read as a Markdown heading (it starts with ``#``) is escaped as ``\\#``, so
only real headings become headings.

Hostile input is bounded: a DOCX (a zip) whose parts expand to more than ``max_expanded_bytes``
is refused before it is parsed, and extraction stops with :class:`DocumentFormatError` once the text
grows beyond that size. Every failure of a parser (a truncated PDF, an encrypted one, a broken
zip) is a :class:`DocumentFormatError`, never the parser's own exception. Decompression inside
a PDF is bounded by pypdf's own limits; python-docx parses XML without resolving entities, and a
zip member never inflates past the size its header declares.
"""

from __future__ import annotations

import io
import logging
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from titans_agent.errors import TitansAgentError

__all__ = ["PAGE_BREAK", "DocumentFormatError", "Extracted", "MARKDOWN_SUFFIXES", "extract", "sniff"]

logger = logging.getLogger(__name__)

#: Written between the pages of a PDF (a form feed on its own line).
PAGE_BREAK = "\n\f\n"

#: Extensions whose extracted text is Markdown-like (headings as ``#`` lines).
MARKDOWN_SUFFIXES = frozenset({".html", ".htm", ".xhtml", ".docx"})

_HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
_HTML_DROP = frozenset({"script", "style", "noscript", "template", "head", "svg", "iframe", "object", "nav"})
_HTML_BLOCKS = frozenset({
    "p", "div", "section", "article", "main", "aside", "header", "footer", "li", "ul", "ol",
    "dl", "dt", "dd", "blockquote", "pre", "table", "figure", "figcaption", "caption", "form",
    "address", "details", "summary", "hr",
})  # fmt: skip
_MARK = "\ue000"  # a private-use character that marks the headings written into an HTML text
_HEADING_STYLE = re.compile(r"heading\s*([1-9])\b", re.IGNORECASE)


class DocumentFormatError(TitansAgentError):
    """A document (PDF, DOCX, HTML) cannot be read: broken, encrypted, too large once expanded,
    or its parser is not installed. :func:`~titans_agent.ingest.files.read_text_file` reports it as a
    skipped file with the message as reason."""


@dataclass(frozen=True)
class Extracted:
    """The text of a document.

    Attributes:
        text: Plain text with the structure inline (see the module docstring); newlines ``"\\n"``.
        format: ``"pdf"``, ``"docx"`` or ``"html"``.
        pages: Number of pages (PDF only), else ``None``.
        warnings: What was lost or repaired, e.g. ``"2 pages without text"``.
    """

    text: str
    format: str
    pages: int | None = None
    warnings: tuple[str, ...] = ()


def sniff(data: bytes, suffix: str) -> str | None:
    """Which document format ``data`` holds, judged by content first.

    Args:
        data: The raw bytes of the file (at least the first few KiB).
        suffix: The file's extension, lower case with its dot (``".html"``); only HTML, which has
            no signature, is recognised by it.

    Returns:
        ``"pdf"`` (``%PDF-`` signature), ``"docx"`` (a zip holding ``word/document.xml``),
        ``"html"`` (by extension), or ``None`` for anything else.
    """
    if data.startswith(b"%PDF-"):
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                if "word/document.xml" in zf.namelist():
                    return "docx"
        except (zipfile.BadZipFile, OSError, ValueError, EOFError):
            return None
        return None
    if suffix.lower() in _HTML_SUFFIXES:
        return "html"
    return None


def extract(data: bytes | str, fmt: str, *, max_expanded_bytes: int) -> Extracted:
    """Extract the text of a document in format ``fmt``.

    Args:
        data: Raw bytes (``"pdf"``, ``"docx"``), or the decoded text (``"html"``).
        fmt: ``"pdf"``, ``"docx"`` or ``"html"`` (see :func:`sniff`).
        max_expanded_bytes: Most bytes a DOCX's parts may expand to, and most characters of
            extracted text; beyond it the document is refused.

    Returns:
        An :class:`Extracted`.

    Raises:
        DocumentFormatError: The document is broken, encrypted, too large once expanded, or the
            library that reads it is not installed.
    """
    if fmt == "pdf":
        return _pdf(_as_bytes(data), max_expanded_bytes)
    if fmt == "docx":
        return _docx(_as_bytes(data), max_expanded_bytes)
    if fmt == "html":
        text = data if isinstance(data, str) else data.decode("utf-8", errors="replace")
        return _html(text, max_expanded_bytes)
    raise DocumentFormatError(f"unknown document format {fmt!r}")


def _as_bytes(data: bytes | str) -> bytes:
    if isinstance(data, str):
        raise DocumentFormatError("a binary document was passed as text")
    return data


def _escape(line: str) -> str:
    """Escape a body line that Markdown would read as a heading."""
    return "\\" + line if line.lstrip().startswith("#") else line


def _check_size(n: int, limit: int, what: str) -> None:
    if n > limit:
        raise DocumentFormatError(f"too large ({what} > {limit:,})")


# -- PDF -----------------------------------------------------------------------------------------


def _pdf(data: bytes, limit: int) -> Extracted:
    try:
        from pypdf import PdfReader
    except ImportError as exc:  # a dependency, but keep a clear reason if it was removed
        raise DocumentFormatError("binary (application/pdf); pip install pypdf to read it") from exc
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                ok = reader.decrypt("")  # an empty user password: readable by anyone
            except Exception as exc:  # pypdf raises several types for unsupported crypto
                raise DocumentFormatError("encrypted pdf") from exc
            if not ok:
                raise DocumentFormatError("encrypted pdf")
        pages: list[str] = []
        total = 0
        for page in reader.pages:
            text = page.extract_text() or ""
            text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n").replace("\x00", "")
            total += len(text)
            _check_size(total, limit, "extracted text, characters")
            pages.append(text.strip("\n"))
    except DocumentFormatError:
        raise
    except Exception as exc:  # a hostile PDF can make pypdf raise almost anything
        raise DocumentFormatError(f"unreadable pdf ({type(exc).__name__}: {str(exc)[:120]})") from exc
    blank = sum(1 for p in pages if not p.strip())
    warnings = (f"{blank} of {len(pages)} pages without text",) if blank else ()
    if pages and blank == len(pages):
        raise DocumentFormatError("pdf without a text layer (scanned?)")
    return Extracted(text=PAGE_BREAK.join(pages), format="pdf", pages=len(pages), warnings=warnings)


# -- DOCX ----------------------------------------------------------------------------------------


def _docx(data: bytes, limit: int) -> Extracted:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            expanded = sum(info.file_size for info in zf.infolist())
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise DocumentFormatError(f"unreadable docx ({exc})") from exc
    _check_size(expanded, limit, f"{expanded:,} bytes once unzipped")
    try:
        import docx
        from docx.table import Table
    except ImportError as exc:
        raise DocumentFormatError("binary (docx); pip install python-docx to read it") from exc
    try:
        document = docx.Document(io.BytesIO(data))
        # Style names by id, looked up once: Paragraph.style resolves the default style on every
        # call, which is quadratic in a long document.
        names = {style.style_id: style.name or "" for style in document.styles}
        blocks: list[str] = []
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                blocks.extend(_docx_table(block))
            else:
                style_id = getattr(getattr(block, "_p", None), "style", None)
                blocks.append(_docx_paragraph(block.text, names.get(style_id, "") if style_id else ""))
    except Exception as exc:  # a crafted document can make python-docx or lxml raise anything
        raise DocumentFormatError(f"unreadable docx ({type(exc).__name__}: {str(exc)[:120]})") from exc
    text = "\n\n".join(b for b in blocks if b.strip())
    _check_size(len(text), limit, "extracted text, characters")
    return Extracted(text=text, format="docx")


def _docx_paragraph(text: str, style: str) -> str:
    """One paragraph as text: a heading line for the ``Title`` and ``Heading N`` styles."""
    text = (text or "").replace("\r", "\n").replace("\x00", "")
    level = 1 if style.lower() == "title" else None
    match = _HEADING_STYLE.match(style)
    if match:
        level = int(match.group(1)) + 1  # under the document's Title
    if level is not None and text.strip():
        return "#" * min(level, 6) + " " + " ".join(text.split())
    return "\n".join(_escape(line) for line in text.split("\n"))


def _docx_table(table: object) -> list[str]:
    rows: list[str] = []
    for row in getattr(table, "rows", ()):
        cells: list[str] = []
        for cell in row.cells:
            text = " ".join(cell.text.split())
            if not cells or cells[-1] != text:  # a merged cell repeats in every column it spans
                cells.append(text)
        if any(cells):
            rows.append(_escape(" | ".join(cells)))
    return ["\n".join(rows)] if rows else []


# -- HTML ----------------------------------------------------------------------------------------


def _html(markup: str, limit: int) -> Extracted:
    try:
        from bs4 import BeautifulSoup
    except ImportError as exc:
        raise DocumentFormatError("html; pip install beautifulsoup4 to read it") from exc
    try:
        soup = BeautifulSoup(markup.replace(_MARK, ""), "html.parser")
        raw = "".join(_html_pieces(soup))
    except RecursionError as exc:  # absurdly deep nesting inside a heading
        raise DocumentFormatError("unreadable html (nested too deeply)") from exc
    except Exception as exc:  # the parser is lenient, but one bad page must not abort an ingest
        raise DocumentFormatError(f"unreadable html ({type(exc).__name__}: {str(exc)[:120]})") from exc
    lines: list[str] = []
    for line in raw.split("\n"):
        line = " ".join(line.replace(_MARK, " " + _MARK).split()).removesuffix(" |").strip()
        if not line:
            if lines and lines[-1]:
                lines.append("")
            continue
        if line.startswith(_MARK):  # a heading written above; anything else is body text
            lines.append("#" * int(line[1]) + line[2:])
        else:
            lines.append(_escape(line.replace(_MARK, "")))
    text = "\n".join(lines).strip()
    _check_size(len(text), limit, "extracted text, characters")
    return Extracted(text=text, format="html")


def _html_pieces(soup: Any) -> Iterator[str]:
    """The text of a parsed page in document order, block elements as paragraphs, headings as
    marked lines. One iterative pass (an explicit stack, no tree edits), so deeply nested markup
    costs linear time."""
    from bs4 import CData, NavigableString, Tag

    stack: list[tuple[Iterator[Any], str]] = [(iter(soup.contents), "")]
    while stack:
        node = next(stack[-1][0], None)
        if node is None:
            yield stack.pop()[1]  # what closes the element: a paragraph break, a cell separator
            continue
        if isinstance(node, NavigableString):
            if type(node) in (NavigableString, CData):  # not comments, doctypes, scripts
                yield str(node)
            continue
        if not isinstance(node, Tag) or node.name in _HTML_DROP:
            continue
        name = node.name
        if len(name) == 2 and name[0] == "h" and name[1] in "123456":
            title = " ".join(node.get_text(" ").split())
            yield f"\n\n{_MARK}{name[1]} {title}\n\n" if title else "\n\n"
        elif name == "br":
            yield "\n"
        else:
            if name in _HTML_BLOCKS:
                yield "\n\n"
            elif name == "tr":  # one line per table row
                yield "\n"
            end = " | " if name in ("td", "th") else "\n\n" if name in _HTML_BLOCKS else ""
            stack.append((iter(node.contents), end))
