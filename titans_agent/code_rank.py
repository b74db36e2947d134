"""Ranking for source code: the file a question is about, then the chunk inside it.

Pure functions over the namespace's in-memory indexes; no I/O. Recall (:mod:`titans_agent.recall`)
uses them for the chunks of source code files only (documents whose chunker language is code, see
:data:`titans_agent.ingest.headers.NOT_CODE`), so conversations and prose documents rank as before.

- **The file signal** (:func:`file_scores`): Okapi BM25 of the query's index terms over each code
  file as a whole (the term frequencies and lengths of its chunks summed, the document frequency
  counted over the files), ``k1`` = 1.2, ``b`` = 0.75 (Robertson and Zaragoza 2009). An issue that
  names a class in one paragraph, the method in another and the error in its traceback matches the
  file that holds all three, though no single chunk does. A chunk scores its file's score;
  recall fuses it as one more signal (``RetrievalConfig.file_weight``), standardised over the
  files, and the chunks of the best files enter the candidates, so the best chunk of the right
  file is ranked even when its own words were not the best match.
- **Files the query names** (:func:`path_mentions`, :func:`named_files`): a file path
  (``requests/sessions.py``, a traceback's ``File ".../django/db/models/query.py"``) or a dotted
  module path (``django.db.models.query.QuerySet``) in the query names the files whose path ends
  with at least its last two parts (a package's ``__init__`` file stands for the package). Each
  mention counts in the file signal as one more query term held by the files it names, with the
  same idf over the files: a file named alone weighs like a rare identifier, the ten frames of a
  traceback each like a commoner one.
- **Environment dumps** (:func:`without_environment`): an issue often ends with the output of
  ``pip list`` or ``xr.show_versions()``, forty package names with their versions, which match the
  packaging script and the version printer better than the code the issue is about. A run of
  :data:`DUMP_LINES` or more lines that each name a version (or ``None``) is left out of the words
  that recall's lexical and file signals read.
- **The auxiliary prior** (:func:`is_auxiliary_path`, :func:`asks_for_auxiliary`): tests, docs,
  examples and benchmarks repeat the names of the code they exercise, so they crowd the top of a
  list for a question about the code itself; a chunk that only imports (:func:`is_import_block`)
  repeats the names of everything its module uses. Their fused scores are multiplied by
  ``RetrievalConfig.auxiliary_weight`` unless the query asks for them ("which tests cover ...",
  "an example of ...", "where is Session imported?").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple, Protocol

import numpy as np

from titans_agent.bm25 import K1, B, idf_nonnegative, term_score

__all__ = [
    "AUXILIARY_DIRS",
    "DUMP_LINES",
    "CodeFiles",
    "Mention",
    "asks_for_auxiliary",
    "demote_auxiliary",
    "demote_import_blocks",
    "file_scores",
    "file_signal",
    "MAX_MENTIONS",
    "MENTION_PARTS",
    "is_auxiliary_path",
    "is_import_block",
    "named_files",
    "path_mentions",
    "without_environment",
]

AUXILIARY_DIRS = frozenset(
    """test tests testing __tests__ spec specs testdata test_data fixtures doc docs documentation
    example examples sample samples demo demos benchmark benchmarks bench asv_bench""".split()
)
"""Folder names whose files exercise or describe the code rather than implement it."""

_AUX_FILE = re.compile(
    r"^(?:test_.*|.*_tests?|conftest|.*\.(?:test|spec)|.*_spec|.*_bench)\.[^.]+$|^.*_test\.go$", re.IGNORECASE
)

_ASKS = re.compile(  # a request for them, not a bug report that mentions "a test" or "the example"
    r"\b(?:(?:which|what|where(?:\s+(?:is|are))?)\s+(?:[\w.`()]+\s+){0,2}?(?:unit\s+|test\s+)?tests?\b"
    r"|tests\s+(?:for|covering|of)\b|test\s+(?:coverage|files?\s+for|cases?\s+for)\b"
    r"|(?:is|are|where|how)\s+(?:[\w.`()]+\s+){0,3}(?:tested|imported)\b"
    r"|where\s+(?:is|are)\s+(?:[\w.`()]+\s+){0,3}documented\b"
    r"|(?:show|give|find)\s+(?:me\s+)?(?:an?\s+|some\s+)?(?:examples?|samples?|demos?|benchmarks?)\b"
    r"|examples?\s+(?:of\s+)?(?:how\s+to|using|showing)\b"
    r"|where\s+(?:is|are)\s+(?:an?\s+|the\s+)?(?:examples?|benchmarks?|docs|documentation)\b"
    r"|what\s+(?:do|does)\s+the\s+(?:docs|documentation)\s+say\b)",
    re.IGNORECASE,
)


DUMP_LINES = 5
"""This many consecutive version lines (blank lines between them allowed) make an environment dump."""

_VERSION_LINE = re.compile(
    r"^[ \t\-*|>#]*[A-Za-z][\w.\-\[\] ]{0,40}?[ \t]*(?::|==|=|\||[ \t])[ \t]*"
    r"(?:v?\d+(?:\.\d+)+[\w.+\-]*|None|N/A)[ \t|]*$"
)


def without_environment(query: str) -> str:
    """``query`` without its environment dumps: runs of at least :data:`DUMP_LINES` lines such as
    ``numpy: 1.18.5``, ``netCDF4: None``, ``pandas    1.0.5`` or ``| sphinx | 3.1.2 |`` (blank lines
    inside a run are kept in it). Shorter runs, and every other line, are kept as they were; the
    text is unchanged when it has no dump. Linear in the query's length."""
    lines = query.split("\n")
    if len(lines) < DUMP_LINES:
        return query
    version = [len(line) <= 120 and _VERSION_LINE.match(line.rstrip("\r")) is not None for line in lines]
    drop = [False] * len(lines)
    i = 0
    while i < len(lines):
        if not version[i]:
            i += 1
            continue
        j, count, last = i, 0, i
        while j < len(lines) and (version[j] or not lines[j].strip()):
            if version[j]:
                count, last = count + 1, j
            j += 1
        if count >= DUMP_LINES:
            for t in range(i, last + 1):
                drop[t] = True
        i = last + 1
    if not any(drop):
        return query
    return "\n".join(line for line, d in zip(lines, drop) if not d)


def is_auxiliary_path(source: str) -> bool:
    """Whether a file is a test, a doc, an example or a benchmark by its path: a folder named in
    :data:`AUXILIARY_DIRS` (case-insensitive) or a test file's name (``test_x.py``, ``x_test.go``,
    ``x.spec.ts``, ``conftest.py``). Separators ``/`` and ``\\`` both count."""
    parts = [p for p in re.split(r"[\\/]+", source) if p]
    if not parts:
        return False
    return any(p.lower() in AUXILIARY_DIRS for p in parts[:-1]) or bool(_AUX_FILE.match(parts[-1]))


_IMPORT = re.compile(
    r"^\s*(?:from\s+[\w.]+\s+import\b|import\s|use\s+[\w:{}, *]+;|#include\b"
    r"|(?:const|let|var)\s+[\w{}\s,]+=\s*require\()"
)
_IMPORT_FRAME = re.compile(
    r"^\s*(?:if\s+(?:typing\.)?TYPE_CHECKING\s*:|try\s*:|except\s+(?:ImportError|ModuleNotFoundError)\b.*"
    r"|else\s*:|pass|package\s+[\w.]+\s*;?)\s*$"
)
_IMPORT_CONTINUATION = re.compile(  # a parenthesised name list's lines, brackets, comments
    r"^\s*(?:[\w.*]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.*]+(?:\s+as\s+\w+)?)*\s*,?|[(){}\[\]];?|#.*|//.*"
    r"|(?:[\w.]+\s+)?\"[^\"]*\";?"  # a Go import block's path, maybe named: log "github.com/x/log"
    r"|\}\s*from\s+(?:\"[^\"]*\"|'[^']*');?)\s*$"  # the end of an ES module's multi-line import
)


def is_import_block(text: str) -> bool:
    """Whether a chunk of code only imports: every non-blank line is an import (Python ``import``
    and ``from ... import``, Rust ``use``, C ``#include``, CommonJS ``require``), a continuation of
    one (a parenthesised name list, a Go import block's quoted paths, an ES module's closing
    ``} from "./x";``), a comment, or the frame around imports (``if TYPE_CHECKING:``,
    ``try:``/``except ImportError:``, Go's and Java's ``package``); and there are at least as many
    imports as frame lines. Read line by line up to the first line that is none of these (most
    chunks stop at their first); a text's answer is remembered (recall asks again for the same
    candidates)."""
    return _is_import_block(text) if len(text) <= 20_000 else False


@lru_cache(maxsize=1 << 14)
def _is_import_block(text: str) -> bool:
    imports = frame = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        if len(line) > 200:
            return False
        if _IMPORT.match(line):
            imports += 1
        elif _IMPORT_FRAME.match(line):
            frame += 1
        elif not _IMPORT_CONTINUATION.match(line):
            return False
    return imports > 0 and imports >= frame


def demote_import_blocks(
    scores: dict[int, float], files: CodeFiles, texts: Mapping[int, str], weight: float
) -> dict[int, float]:
    """``score(r) <- weight * score(r)`` for every chunk of a code file whose text
    (``texts``; records without one are left alone) only imports (:func:`is_import_block`)."""
    if weight >= 1.0 or not scores or len(files) == 0:
        return dict(scores)
    rids = np.fromiter(scores, dtype=np.int64, count=len(scores))
    code = (files.files_of(rids) >= 0).tolist()
    return {
        rid: (v * weight if c and rid in texts and is_import_block(texts[rid]) else v)
        for (rid, v), c in zip(scores.items(), code)
    }


def asks_for_auxiliary(query: str) -> bool:
    """Whether a query asks for tests, examples, benchmarks or documentation ("which tests cover
    the parser?", "is rebuild_auth tested?", "an example of a custom adapter"), so the auxiliary
    prior does not apply. A test function named in a pasted reproduction (``def test_foo():``) is
    not asking for tests."""
    return _ASKS.search(query) is not None


@dataclass(frozen=True, eq=False)
class CodeFiles:
    """The namespace's source code files as the file signal reads them.

    Attributes:
        records: ``(n,)`` int64, ascending: the chunk record ids of code files.
        file_of: ``(n,)`` int64: the position in :attr:`documents` of each record's file (a record
            stored in several files, such as a licence header, counts in its first).
        documents: ``(f,)`` the document ids of the code files.
        auxiliary: ``(f,)`` bool: the file is a test, doc, example or benchmark
            (:func:`is_auxiliary_path` of its path below the folders every code file shares but
            the last: a project ingested from ``/home/u/examples/proj`` is not an example).
        by_name: a file's module name (lower-cased, no extension; a package's ``__init__`` file:
            the package's name) -> the positions of the files of that name.
        parts: ``(f,)`` each file's path parts as :attr:`by_name` reads them
            (``.../django/db/models/__init__.py`` -> ``(..., "django", "db", "models")``).
        record_auxiliary: ``(n,)`` bool: every code file holding the record is auxiliary (a chunk
            that a test repeats word for word from the library is still library code); None:
            :attr:`auxiliary` of each record's file.
    """

    records: np.ndarray
    file_of: np.ndarray
    documents: tuple[int, ...]
    auxiliary: np.ndarray
    by_name: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    parts: tuple[tuple[str, ...], ...] = ()
    record_auxiliary: np.ndarray | None = None

    @classmethod
    def build(cls, sources: Mapping[int, str], chunks: Sequence[tuple[int, int]]) -> CodeFiles:
        """From document id -> source path of the code files, and ``(record id, document id)``
        pairs (other documents' pairs are ignored)."""
        documents = tuple(sorted(sources))
        where = {d: i for i, d in enumerate(documents)}
        auxiliary = np.fromiter(_auxiliary_files([sources[d] for d in documents]), dtype=bool, count=len(documents))
        first: dict[int, int] = {}
        library: set[int] = set()  # records held by a file that is not auxiliary
        for rid, doc in chunks:
            i = where.get(doc)
            if i is None:
                continue
            if rid not in first:
                first[rid] = i
            if not auxiliary[i]:
                library.add(rid)
        records = np.fromiter(sorted(first), dtype=np.int64, count=len(first))
        file_of = np.fromiter((first[int(r)] for r in records), dtype=np.int64, count=len(first))
        record_auxiliary = np.fromiter((int(r) not in library for r in records), dtype=bool, count=len(first))
        parts = tuple(_module_parts(sources[d]) for d in documents)
        by_name: dict[str, list[int]] = {}
        for i, ps in enumerate(parts):
            if ps:
                by_name.setdefault(ps[-1], []).append(i)
        by_name_t = {k: tuple(v) for k, v in by_name.items()}
        return cls(records, file_of, documents, auxiliary, by_name_t, parts, record_auxiliary)

    def __len__(self) -> int:
        return len(self.documents)

    def files_of(self, rids: np.ndarray) -> np.ndarray:
        """The file positions ``(m,)`` of record ids ``(m,)``, -1 for a record of no code file."""
        if self.records.shape[0] == 0:
            return np.full(rids.shape[0], -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.records, rids), self.records.shape[0] - 1)
        return np.where(self.records[pos] == rids, self.file_of[pos], -1)


def _auxiliary_files(sources: Sequence[str]) -> list[bool]:
    """:func:`is_auxiliary_path` of each source below the folders that every source shares, but
    the last of them: those say where the tree was ingested from (``/home/u/examples/proj``,
    ``/srv/docs/app``), not which of its files are tests; the last one stays, so a lone file or a
    folder ingested alone (``repo/tests``) keeps its folder's name."""
    split = [[p for p in re.split(r"[\\/]+", src) if p] for src in sources]
    common: list[str] | None = None
    for ps in split:
        folders = ps[:-1]
        if common is None:
            common = folders
        else:
            n = 0
            while n < len(common) and n < len(folders) and common[n] == folders[n]:
                n += 1
            del common[n:]
    drop = max(len(common or ()) - 1, 0)
    return [is_auxiliary_path("/".join(ps[drop:])) for ps in split]


class _Postings(Protocol):
    """What :func:`file_scores` reads of a BM25 index (:class:`titans_agent.bm25.BM25Index`)."""

    def live_postings(self, term: str) -> tuple[np.ndarray, np.ndarray]: ...

    def live_lengths(self) -> tuple[np.ndarray, np.ndarray]: ...


def _module_parts(source: str) -> tuple[str, ...]:
    """A file's path parts, lower-cased, its extension dropped, ``__init__`` (``index`` for
    JavaScript, ``mod`` for Rust) standing for its folder."""
    parts = [p.lower() for p in re.split(r"[\\/]+", source) if p and p != "."]
    if not parts:
        return ()
    parts[-1] = parts[-1].rsplit(".", 1)[0] if "." in parts[-1].strip(".") else parts[-1]
    if parts[-1] in ("__init__", "index", "mod") and len(parts) > 1:
        parts.pop()
    return tuple(parts)


_PATH_RUN = re.compile(r"[\w\-.\\/]+")  # a maximal run of path characters: found in linear time
_EXT_TAIL = re.compile(r"[\w\-]\.\w{1,5}$")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*$")
MENTION_PARTS = 16
"""A mention keeps at most this many parts: a file path its last ones, a dotted name its first."""
MAX_MENTIONS = 64
"""At most this many distinct mentions are read from a query (a pasted log names few files)."""


class Mention(NamedTuple):
    """A path a query names: its lower-cased parts, and whether it is a file path (which names
    only a file ending with it) or a dotted name (whose tail may be a class or a function)."""

    parts: tuple[str, ...]
    is_file: bool


_EXTENSIONS = frozenset("py pyi pyx js jsx mjs cjs ts tsx go rs java kt c h cc cpp hpp cs rb php swift scala".split())


def path_mentions(query: str) -> list[Mention]:
    """The file and module paths a query names (see :class:`Mention`): ``django/db/models/query.py``
    -> ``("django", "db", "models", "query")``, a file path; ``requests.sessions.Session`` ->
    ``("requests", "sessions", "session")``, a dotted name. Distinct, in order, at most
    :data:`MAX_MENTIONS`; a mention of fewer than two parts is left out (a bare ``utils.py``
    names too many files)."""
    out: dict[Mention, None] = {}
    for m in _PATH_RUN.finditer(query):
        run = m.group(0).strip(".-")  # a sentence's full stop, a dash
        if "/" in run or "\\" in run:
            if _EXT_TAIL.search(run) is not None:
                ps = _module_parts(run)[-MENTION_PARTS:]
                if len(ps) >= 2:
                    out[Mention(ps, True)] = None
        elif "." in run:
            names = run.split(".", MENTION_PARTS)[:MENTION_PARTS]
            if names[-1].lower() in _EXTENSIONS:  # a file name: "utils.py", "models.query.py"
                names.pop()
            if len(names) >= 2 and all(_IDENTIFIER.match(n) for n in names):
                out[Mention(tuple(n.lower() for n in names), False)] = None
        if len(out) >= MAX_MENTIONS:
            break
    return list(out)[:MAX_MENTIONS]


def named_files(files: CodeFiles, mentions: Sequence[Mention]) -> list[tuple[int, ...]]:
    """For each mention (:func:`path_mentions`), the positions of the files it names: those whose
    path parts end with two or more consecutive parts of the mention, ending at the mention's last
    part for a file path, at any part for a dotted name (``models.query.QuerySet`` names
    ``.../models/query.py``). A mention naming no file gives an empty tuple."""
    out = []
    for mention in mentions:
        hit: set[int] = set()
        ends = (len(mention.parts) - 1,) if mention.is_file else range(1, len(mention.parts))
        for j in ends:
            for i in files.by_name.get(mention.parts[j], ()):
                ps = files.parts[i]
                if len(ps) >= 2 and ps[-2] == mention.parts[j - 1]:
                    hit.add(i)
        out.append(tuple(sorted(hit)))
    return out


def file_scores(
    index: _Postings, files: CodeFiles, terms: Sequence[str], mentions: Sequence[Mention] = ()
) -> np.ndarray:
    """BM25 of ``terms`` (index terms, :func:`titans_agent.text.index_terms`) over each code file
    as a whole: ``(f,)`` float64, 0 for a file that holds none of them.

    A file's term frequency is the sum of its chunks' (their context words at the index's weight);
    its length, the sum of its chunks' lengths; ``idf`` is the non-negative form over the ``f``
    files (:func:`titans_agent.bm25.idf_nonnegative`), so a word in every file weighs nothing.
    Each mention of ``mentions`` (:func:`path_mentions`) that names files (:func:`named_files`)
    adds its idf over the files to each of them."""
    n = len(files)
    out = np.zeros(n, dtype=np.float64)
    if n == 0 or not terms:
        return out
    ids, lengths = index.live_lengths()
    where = files.files_of(ids)
    known = where >= 0
    file_length = np.bincount(where[known], weights=lengths[known], minlength=n)
    present = file_length > 0
    if not present.any():
        return out
    avg = float(file_length[present].mean())
    for term in dict.fromkeys(terms):
        rids, tf = index.live_postings(term)
        if rids.shape[0] == 0:
            continue
        at = files.files_of(rids)
        held = at >= 0
        if not held.any():
            continue
        f = np.bincount(at[held], weights=tf[held], minlength=n)
        hit = np.flatnonzero(f > 0)
        w = idf_nonnegative(int(present.sum()), int(hit.shape[0]))
        out[hit] += term_score(w, f[hit], file_length[hit], avg, K1, B)
    for named in dict.fromkeys(named_files(files, mentions)):
        live = [i for i in named if present[i]]  # a file with no live chunk has nothing to lift
        if live:  # one more term, held once by each named file (its saturation left out: 1)
            out[live] += idf_nonnegative(n, len(named))
    return out


def demote_auxiliary(scores: dict[int, float], files: CodeFiles, weight: float) -> dict[int, float]:
    """``score(r) <- weight * score(r)`` for every record of a test, doc, example or benchmark file
    (held by no other code file, :attr:`CodeFiles.record_auxiliary`); the others unchanged.
    ``scores`` is not changed."""
    if weight >= 1.0 or not scores or not files.auxiliary.any():
        return dict(scores)
    rids = np.fromiter(scores, dtype=np.int64, count=len(scores))
    aux = np.zeros(rids.shape[0], dtype=bool)
    if files.records.shape[0]:
        pos = np.minimum(np.searchsorted(files.records, rids), files.records.shape[0] - 1)
        ok = files.records[pos] == rids
        by_record = files.auxiliary[files.file_of] if files.record_auxiliary is None else files.record_auxiliary
        aux[ok] = by_record[pos[ok]]
    return {rid: (v * weight if a else v) for (rid, v), a in zip(scores.items(), aux.tolist())}


def file_signal(
    per_file: np.ndarray, files: CodeFiles, top: int
) -> tuple[np.ndarray, np.ndarray, float, float, list[int]]:
    """The file signal of the chunks, from :func:`file_scores` ``(f,)``: ``(record ids (n,), their
    files' scores (n,), mean, std, the chunk ids of the top files)``. The mean and standard deviation
    are over the ``f`` files and one background file scoring 0 (as the document signal's), so a
    chunk is lifted by how far its file stands out among the files, however many chunks each has.
    The top chunks are every chunk of the ``top`` best files that scored, best file first, in
    record order within a file."""
    n = per_file.shape[0] + 1
    mean = float(per_file.sum()) / n
    std = max(float((per_file * per_file).sum()) / n - mean * mean, 0.0) ** 0.5
    best = [int(i) for i in np.argsort(-per_file, kind="stable")[:top] if per_file[i] > 0]
    chunks = [int(r) for i in best for r in files.records[files.file_of == i]]
    return files.records, per_file[files.file_of], mean, std, chunks
