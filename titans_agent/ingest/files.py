"""Find the text files under folders and decode them, whatever they hold.

:func:`discover` walks files and folders in a fixed (sorted) order and yields, lazily, one
:class:`SourceFile` per text file and one :class:`SkippedFile` per file it will not ingest, with a
short reason. It never raises on a bad file: an unreadable, vanished, binary, huge or looping entry
becomes a :class:`SkippedFile`, so one bad file never aborts an ingest.

Decoding (:func:`read_text_file`), in order:

1. known binary signatures (PNG, JPEG, PDF, ZIP, gzip, ELF, ...) -> ``binary (<mime type>)``;
2. a byte-order mark: UTF-8, UTF-16 LE/BE, UTF-32 LE/BE;
3. a large share of control bytes (NUL, ...) -> ``binary``; a few NUL bytes are removed, with a
   warning;
4. strict UTF-8;
5. charset-normalizer's guess, kept only if the decoded text is plausible (printable); among
   equally good single-byte guesses cp1252 wins, as it is by far the most common;
6. otherwise UTF-8 with replacement characters if only a few bytes are bad, else ``binary``.

Newlines are normalised to ``"\\n"``.

Documents are read by content before step 1 (see :mod:`titans_agent.ingest.formats`): a PDF (``%PDF-``)
and a DOCX (a zip with ``word/document.xml``) become their text with page breaks and headings
inline; an ``.html``/``.htm`` file is decoded as above, then reduced to its text with headings. A
document that cannot be read (encrypted, broken, expanding beyond ``DOCUMENT_EXPANSION`` times
``max_file_bytes``) is skipped with the reason.

Walking a folder honours ``.gitignore`` files (git's own rules through the pathspec library: the
folder's own, those of its parents up to the repository root, and nested ones), and leaves out
vendored and generated folders (:data:`DEFAULT_EXCLUDE_DIRS`) and files that may hold secrets
(:data:`DEFAULT_EXCLUDE_FILES`). Where a stored file's identity is looked up from a path the user
spells: :mod:`titans_agent.ingest.sources`.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import stat
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from titans_agent.errors import InvalidInputError
from titans_agent.ingest.decoding import decode
from titans_agent.ingest.formats import DocumentFormatError, extract, sniff
from titans_agent.ingest.patterns import (
    DEFAULT_EXCLUDE_DIRS,
    DEFAULT_EXCLUDE_FILES,
    Ignores,
    check_globs,
    gitignored,
    holds_private_key,
    load_gitignore,
    matches_glob,
    matches_name,
    parent_gitignores,
)
from titans_agent.text import LONE_SURROGATE
from titans_agent.validation import MAX_NAME_BYTES

__all__ = [
    "DEFAULT_EXCLUDE_DIRS",
    "DEFAULT_EXCLUDE_FILES",
    "DOCUMENT_EXPANSION",
    "DEFAULT_MAX_FILE_BYTES",
    "SkippedFile",
    "SourceFile",
    "discover",
    "read_text_file",
]

logger = logging.getLogger(__name__)

#: A document's text (PDF, DOCX, HTML) may hold at most this many times ``max_file_bytes``
#: characters, and a DOCX may unzip to at most this many times ``max_file_bytes`` bytes.
DOCUMENT_EXPANSION = 16

#: Files larger than this many bytes are skipped without being read (4 MiB).
DEFAULT_MAX_FILE_BYTES = 4_194_304


@dataclass(frozen=True)
class SourceFile:
    """A decoded text file.

    Attributes:
        path: Absolute real path (symlinks resolved): the identity of the document.
        display: The path as the user sees it: relative to the folder given to :func:`discover`
            (with ``/`` separators), or the path exactly as given for a file named directly.
        text: The decoded text, newlines normalised to ``"\\n"``, NUL characters removed; for a
            document, its extracted text (pages separated by ``"\\n\\f\\n"``, headings as
            Markdown ``#`` lines).
        encoding: The codec used, e.g. ``"utf-8"``, ``"utf-8-sig"``, ``"utf-16"``, ``"cp1252"``;
            ``"pdf"`` or ``"docx"`` for those documents.
        n_bytes: Size of the raw file in bytes.
        sha256: Hex SHA-256 of the raw bytes (before decoding).
        warnings: What was repaired, e.g. ``"3 NUL bytes removed"``, ``"undecodable bytes
            replaced"``, ``"2 of 9 pages without text"``.
        format: ``"text"``, or the document format read: ``"pdf"``, ``"docx"``, ``"html"``.
    """

    path: Path
    display: str
    text: str
    encoding: str
    n_bytes: int
    sha256: str
    warnings: tuple[str, ...] = ()
    format: str = "text"


@dataclass(frozen=True)
class SkippedFile:
    """A file or folder that is not ingested, and why.

    Attributes:
        path: The path as displayed (same convention as :attr:`SourceFile.display`).
        reason: Short and human readable: ``"empty"``, ``"whitespace only"``, ``"too large
            (5,242,880 bytes > 4,194,304)"``, ``"binary (image/png)"``, ``"binary"``, ``"symlink
            loop"``, ``"broken symlink"``, ``"duplicate of <display>"``, ``"permission denied"``,
            ``"excluded (.git)"``, ``"excluded (may hold secrets)"``, ``"ignored (.gitignore)"``,
            ``"file name is not valid UTF-8"``
            (shown with ``\\xff`` escapes), ``"does not exist"``, ``"not a
            regular file"``, ``"encrypted pdf"``, ``"unreadable pdf (...)"``, ``"pdf without a text
            layer (scanned?)"``, ``"unreadable docx (...)"``, ``"too large (... once unzipped >
            N)"``.
    """

    path: str
    reason: str


_BAD_NAME = "file name is not valid UTF-8"


def _shown(path: str) -> str:
    """``path`` printable: bytes that were not UTF-8 (surrogate escapes) written as ``\\xff``."""

    def escape(m: re.Match[str]) -> str:
        code = ord(m.group())
        return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "\ufffd"

    return LONE_SURROGATE.sub(escape, path)


def _os_reason(exc: OSError) -> str:
    """A short reason for an OS error met while reading a file or folder."""
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, FileNotFoundError):
        return "does not exist"
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if isinstance(exc, IsADirectoryError):
        return "not a regular file"
    return f"unreadable ({exc.strerror or type(exc).__name__})"


def read_text_file(
    path: Path | str | os.PathLike[str],
    *,
    display: str | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> SourceFile | SkippedFile:
    """Read and decode one file; never raises for a bad file.

    Args:
        path: The file (symlinks are followed).
        display: How to show the path in the result; defaults to ``str(path)``.
        max_file_bytes: Larger files are skipped without reading them.

    Returns:
        A :class:`SourceFile`, or a :class:`SkippedFile` whose reason is one of ``"does not
        exist"``, ``"broken symlink"``, ``"symlink loop"``, ``"permission denied"``, ``"not a
        regular file"``, ``"empty"``, ``"whitespace only"``, ``"too large (N bytes > M)"``,
        ``"binary"``, ``"binary (<mime type>)"`` or ``"unreadable (<os error>)"``.

    Raises:
        InvalidInputError: If ``max_file_bytes`` is not a positive int (a caller's mistake, not a
            bad file).
    """
    _check_max_file_bytes(max_file_bytes)
    display = str(path) if display is None else display
    try:
        st = os.stat(path)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) and os.path.islink(path):
            return SkippedFile(display, "broken symlink")
        return SkippedFile(display, _os_reason(exc))
    if not stat.S_ISREG(st.st_mode):  # never open a FIFO or device: it could block
        return SkippedFile(display, "not a regular file")
    if st.st_size == 0:
        return SkippedFile(display, "empty")
    if st.st_size > max_file_bytes:
        return SkippedFile(display, f"too large ({st.st_size:,} bytes > {max_file_bytes:,})")
    try:
        real = Path(os.path.realpath(path))
        with open(real, "rb") as fh:
            # read what the stat promised (a read(n) allocates n bytes up front), then, if the
            # file grew meanwhile, up to one byte past the limit
            data = fh.read(min(st.st_size, max_file_bytes) + 1)
            if st.st_size < len(data) <= max_file_bytes:
                data += fh.read(max_file_bytes + 1 - len(data))
    except OSError as exc:
        return SkippedFile(display, _os_reason(exc))
    if not data:  # emptied since the stat
        return SkippedFile(display, "empty")
    if len(data) > max_file_bytes:  # grew since the stat
        return SkippedFile(display, f"too large (> {max_file_bytes:,} bytes)")
    fmt = sniff(data, real.suffix)
    if fmt in ("pdf", "docx"):
        try:
            doc = extract(data, fmt, max_expanded_bytes=DOCUMENT_EXPANSION * max_file_bytes)
        except DocumentFormatError as exc:
            return SkippedFile(display, str(exc))
        text, encoding, warnings = doc.text, fmt, list(doc.warnings)
    else:
        decoded = decode(data)
        if isinstance(decoded, str):
            return SkippedFile(display, decoded)
        text, encoding, warnings = decoded
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if fmt == "html":
        try:
            doc = extract(text, fmt, max_expanded_bytes=DOCUMENT_EXPANSION * max_file_bytes)
        except DocumentFormatError as exc:
            return SkippedFile(display, str(exc))
        text = doc.text
    if not text.strip():
        return SkippedFile(display, "whitespace only")
    if warnings:
        logger.info("%s: %s", display, "; ".join(warnings))
    return SourceFile(
        path=real,
        display=display,
        text=text,
        encoding=encoding,
        n_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        warnings=tuple(warnings),
        format=fmt or "text",
    )


# -- discovery ----------------------------------------------------------------------------------


class _Walk:
    """State shared by every path given to one :func:`discover` call."""

    def __init__(
        self,
        include: Sequence[str] | None,
        exclude: Sequence[str] | None,
        max_file_bytes: int,
        gitignore: bool = True,
        exclude_dirs: Sequence[str] = DEFAULT_EXCLUDE_DIRS,
        exclude_files: Sequence[str] = DEFAULT_EXCLUDE_FILES,
    ) -> None:
        self.include = list(include or ())
        self.exclude = [p.rstrip("/") or p for p in exclude or ()]  # "build/" names a folder
        self.max_file_bytes = max_file_bytes
        self.gitignore = gitignore
        self.exclude_dirs = tuple(exclude_dirs)
        self.exclude_files = tuple(exclude_files)
        self.files: dict[str, str] = {}  # real path -> display of the first visit
        self.dirs: dict[tuple[int, int], str] = {}  # (st_dev, st_ino) -> display
        self.prefix = ""  # the walked folder's name and "/", set by tree()
        # Links met while walking, followed after every given path: (prefix, rel, path, ignores).
        self.links: list[tuple[str, str, str, Ignores]] = []
        # The walked folders: (real path, the .gitignore files in force in it), deepest first.
        self.roots: list[tuple[str, Ignores]] = []

    def file(self, path: str, display: str, walked: bool = True) -> SourceFile | SkippedFile:
        real = _real(path)
        if real is None:
            return SkippedFile(display, _UNRESOLVED)
        if LONE_SURROGATE.search(real) or LONE_SURROGATE.search(display):  # it could not be stored as text
            return SkippedFile(_shown(display), _BAD_NAME)
        if len(real.encode("utf-8")) > MAX_NAME_BYTES:  # its path is the source name it is stored under
            return SkippedFile(display, f"path too long to store (over {MAX_NAME_BYTES:,} bytes)")
        if walked and real != os.path.abspath(path):  # reached through a link: its target obeys the rules too
            refused = self.refused(real, False)
            if refused is not None:
                return SkippedFile(display, refused)
        first = self.files.get(real)
        if first is not None:
            return SkippedFile(display, f"duplicate of {first}")
        result = read_text_file(Path(path), display=display, max_file_bytes=self.max_file_bytes)
        self.files[real] = display
        if walked and self.exclude_files and isinstance(result, SourceFile) and holds_private_key(result.text):
            return SkippedFile(display, "excluded (holds a private key)")
        return result

    def tree(self, root: str, root_display: str) -> Iterator[SourceFile | SkippedFile]:
        """Walk ``root`` depth-first in sorted order; each frame is (dir, rel prefix, entries)."""
        try:
            st = os.stat(root)
        except OSError as exc:
            yield SkippedFile(root_display, _os_reason(exc))
            return
        key = (st.st_dev, st.st_ino)
        if key in self.dirs:
            yield SkippedFile(root_display, f"duplicate of {self.dirs[key]}")
            return
        self.dirs[key] = root_display
        # Shown paths start with the walked folder's own name ("email/mime/text.py"), so files of
        # two folders given together stay distinguishable; globs still match relative paths.
        self.prefix = (os.path.basename(os.path.normpath(root)) or root_display) + "/"
        listed = self._list(root, root_display)
        if isinstance(listed, SkippedFile):
            yield listed
            return
        ignores: Ignores = []
        if self.gitignore:
            ignores = parent_gitignores(root)
            if ignores and gitignored(root, True, ignores):
                # The folder asked for is one its repository ignores (a build folder, an installed
                # package): it is read whole, with only its own .gitignore files.
                logger.info("%s is ignored by its repository's .gitignore; walking it anyway", root_display)
                ignores = []
            ignores = ignores + load_gitignore(root)
        self.roots.append((os.path.realpath(root), ignores))
        self.roots.sort(key=lambda item: -len(item[0]))
        yield from self._walk(root, "", listed, ignores)

    def refused(self, real: str, is_dir: bool) -> str | None:
        """Why the real path a link leads to is not read, or None: it is outside every walked
        folder (a walk reads what the folder holds: a link must not carry it to ``/etc/shadow`` or
        ``~/.kube/config``), or its own path would be left out by ``exclude``, the excluded folders
        or ``.gitignore`` (the walk's rules, from the walked folder that holds it)."""
        root, ignores = next(
            ((r, i) for r, i in self.roots if real == r or real.startswith(r.rstrip(os.sep) + os.sep)), ("", None)
        )
        shown = _shown(real)
        if ignores is None:
            return f"links out of the folder (to {shown}; name it to read it)"
        if real == root:
            return None
        rel = os.path.relpath(real, root).replace(os.sep, "/")
        if matches_glob(rel, self.exclude):
            return f"excluded (links to {shown})"
        parts = rel.split("/")
        if not is_dir and self._secret(parts[-1]):
            return f"excluded (may hold secrets; links to {shown})"
        folder = root
        for name in parts[:-1]:
            folder = os.path.join(folder, name)
            if matches_name(name, self.exclude_dirs):
                return f"excluded (links into {name})"
            if self.gitignore and gitignored(folder, True, ignores):
                return f"ignored (.gitignore; links to {shown})"
            if self.gitignore:
                ignores = ignores + load_gitignore(folder)
        if self.gitignore and gitignored(real, is_dir, ignores):
            return f"ignored (.gitignore; links to {shown})"
        return None

    def _walk(
        self, folder: str, prefix: str, listed: list[os.DirEntry[str]], ignores: Ignores
    ) -> Iterator[SourceFile | SkippedFile]:
        """Walk ``folder`` (its sorted entries ``listed``; ``prefix``: its path relative to the walked
        folder, with a trailing ``/`` unless empty) depth-first."""
        stack: list[tuple[str, str, Iterator[os.DirEntry[str]], Ignores]] = [(folder, prefix, iter(listed), ignores)]
        while stack:
            _, prefix, entries, ignores = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                continue
            rel = prefix + entry.name
            sub = yield from self._entry(entry, rel, [frame[0] for frame in stack], ignores)
            if sub is not None:
                inner = ignores + load_gitignore(entry.path) if self.gitignore else ignores
                stack.append((entry.path, rel + "/", iter(sub), inner))

    def followed_links(self) -> Iterator[SourceFile | SkippedFile]:
        """Follow the links met while walking, in the order met: a file or folder that the walks
        reached by its own path is a ``duplicate of`` that path; one reached only through links is
        read (walked) under the first link's name. Links met inside a folder walked here are
        followed after it."""
        while self.links:
            self.prefix, rel, path, ignores = self.links.pop(0)
            display = self.prefix + rel
            try:
                st = os.stat(path)
            except OSError as exc:  # changed since it was met
                yield SkippedFile(display, _os_reason(exc))
                continue
            if not stat.S_ISDIR(st.st_mode):
                yield self.file(path, display)
                continue
            key = (st.st_dev, st.st_ino)
            if key in self.dirs:
                yield SkippedFile(display, f"duplicate of {self.dirs[key]}")
                continue
            real = _real(path)
            refused = _UNRESOLVED if real is None else self.refused(real, True)
            if refused is not None:
                yield SkippedFile(display, refused)
                continue
            self.dirs[key] = display
            listed = self._list(path, display)
            if isinstance(listed, SkippedFile):
                yield listed
                continue
            inner = ignores + load_gitignore(path) if self.gitignore else ignores
            yield from self._walk(path, rel + "/", listed, inner)

    def _filtered(self, rel: str) -> bool:
        """Whether include/exclude leave a (non-folder) entry out, silently."""
        if self.include and not matches_glob(rel, self.include):
            return True
        return matches_glob(rel, self.exclude)

    def _secret(self, name: str) -> bool:
        """Whether a file of this name is left out as one that may hold secrets."""
        return matches_name(name, self.exclude_files)

    def _list(self, path: str, display: str) -> list[os.DirEntry[str]] | SkippedFile:
        try:
            with os.scandir(path) as it:
                return sorted(it, key=lambda e: e.name)
        except OSError as exc:
            return SkippedFile(display, _os_reason(exc))

    def _entry(
        self, entry: os.DirEntry[str], rel: str, ancestors: list[str], ignores: Ignores
    ) -> Generator[SourceFile | SkippedFile, None, list[os.DirEntry[str]] | None]:
        """Yield the outcome for one entry; return its sorted children if it is a folder to walk."""
        if LONE_SURROGATE.search(entry.name):
            yield SkippedFile(_shown(self.prefix + rel), _BAD_NAME)
            return None
        try:
            is_link = entry.is_symlink()
            st = entry.stat(follow_symlinks=True)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) and os.path.islink(entry.path):
                reason = "broken symlink"
            else:
                reason = _os_reason(exc)
            if not self._filtered(rel):
                yield SkippedFile(self.prefix + rel, reason)
            return None

        if stat.S_ISDIR(st.st_mode):
            if matches_name(entry.name, self.exclude_dirs):
                yield SkippedFile(self.prefix + rel, f"excluded ({entry.name})")
                return None
            if matches_glob(rel, self.exclude):
                return None
            if gitignored(entry.path, True, ignores):
                yield SkippedFile(self.prefix + rel, "ignored (.gitignore)")
                return None
            key = (st.st_dev, st.st_ino)
            if is_link:
                target = _real(entry.path)
                if target is None:  # a loop the system refuses to resolve (or a path too long to)
                    yield SkippedFile(self.prefix + rel, "symlink loop")
                    return None
                for ancestor in ancestors:
                    real_ancestor = os.path.realpath(ancestor)
                    if real_ancestor == target or real_ancestor.startswith(target.rstrip(os.sep) + os.sep):
                        yield SkippedFile(self.prefix + rel, "symlink loop")
                        return None
                self.links.append((self.prefix, rel, entry.path, ignores))  # followed after the walks
                return None
            if key in self.dirs:
                yield SkippedFile(self.prefix + rel, f"duplicate of {self.dirs[key]}")
                return None
            self.dirs[key] = self.prefix + rel
            listed = self._list(entry.path, self.prefix + rel)
            if isinstance(listed, SkippedFile):
                yield listed
                return None
            return listed

        if self._filtered(rel):
            return None
        if self._secret(entry.name):
            yield SkippedFile(self.prefix + rel, "excluded (may hold secrets)")
            return None
        if gitignored(entry.path, False, ignores):
            yield SkippedFile(self.prefix + rel, "ignored (.gitignore)")
            return None
        if not stat.S_ISREG(st.st_mode):
            yield SkippedFile(self.prefix + rel, "not a regular file")
            return None
        if is_link:  # read after the walks: the file's own path, when walked, comes first
            self.links.append((self.prefix, rel, entry.path, ignores))
            return None
        yield self.file(entry.path, self.prefix + rel)
        return None


def discover(
    paths: Sequence[str | os.PathLike[str]],
    *,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    gitignore: bool = True,
    exclude_dirs: Sequence[str] = DEFAULT_EXCLUDE_DIRS,
    exclude_files: Sequence[str] = DEFAULT_EXCLUDE_FILES,
) -> Iterator[SourceFile | SkippedFile]:
    """Yield every file under ``paths``, decoded or skipped with a reason, in a fixed order.

    Folders are walked recursively, entries sorted by name. Symlinks are followed; a link to a
    folder that contains it (``up -> ..``, ``self -> .``) is reported as ``symlink loop``, a
    dangling one as ``broken symlink``, and a file or folder reached a second time (through
    another link, or given twice) as ``duplicate of <display>``. The links met while walking are
    followed last (after every path given), so a file or folder that a walk reaches by its own
    path is read under that path and its links are the duplicates, whatever the names' order. A
    link is followed only when the real path it leads to is inside a folder walked here
    (otherwise ``links out of the folder (to <real path>; name it to read it)``: a walk reads what
    the folder holds) and both its own name and that path pass ``exclude``, ``exclude_dirs`` and
    ``.gitignore`` (the walk's rules): otherwise it is reported as ``excluded (links to <real
    path>)`` or ``ignored (.gitignore; links to <real path>)``. Folders named in
    ``exclude_dirs`` are reported once each as ``excluded (<name>)`` and not entered; files whose
    name matches ``exclude_files`` (``.env``, private keys, credential stores) as ``excluded (may
    hold secrets)``, not read. With ``gitignore``, a file or folder that git would ignore (the
    walked folder's ``.gitignore``, nested ones, and those of its parents up to the repository
    root, with git's rules: ``!`` re-includes, a trailing ``/`` names folders, a leading ``/``
    anchors) is reported as ``ignored (.gitignore)`` and not read; an ignored folder is reported
    once and not entered.
    A folder given here that its own repository ignores (``pkg/build``, a package installed
    inside a git checkout) is walked anyway, with only the ``.gitignore`` files inside it.

    Glob patterns are matched against the path relative to the given folder (``/`` separators)
    and against the bare file name: ``*`` and ``?`` stay within one folder level, ``**`` spans
    any number (``"*.py"``, ``"docs/**"``, ``"tests/*"``, ``"**/fixtures/*.json"``).

    Args:
        paths: Files and folders (a single path is accepted too). A file named here is always
            read (``include`` and ``exclude`` only filter what a walk finds); a folder is walked;
            a missing path is reported as ``does not exist``.
        include: If given, a file found by walking is read only if it matches one of these globs
            (a single string is one glob). Files that do not match are left out silently.
        exclude: Files and folders matching any of these globs are left out silently.
        max_file_bytes: Larger files are skipped as ``too large`` without being read.
        gitignore: Honour ``.gitignore`` files while walking folders (a file named directly is
            always read).
        exclude_dirs: Folder names, or ``fnmatch`` patterns of names, never walked into (default
            :data:`DEFAULT_EXCLUDE_DIRS`); ``[]`` walks every folder.
        exclude_files: File names, or ``fnmatch`` patterns of names, that a walk does not read
            (default :data:`DEFAULT_EXCLUDE_FILES`: files that may hold secrets); ``[]`` reads
            them. A file named directly in ``paths`` is always read.

    Returns:
        A lazy iterator of one :class:`SourceFile` or :class:`SkippedFile` per file met; it never
        raises for a bad file or folder.

    Raises:
        InvalidInputError: At the call, if ``max_file_bytes`` is not a positive int, or a pattern
            is not a string or holds more than :data:`~titans_agent.ingest.patterns.MAX_GLOBSTARS`
            runs of ``**`` (a ``.gitignore`` line that does is not used, with a warning).
    """
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]  # type: ignore[list-item]
    include = check_globs(include, "include")
    exclude = check_globs(exclude, "exclude")
    _check_max_file_bytes(max_file_bytes)
    walk = _Walk(
        include,
        exclude,
        max_file_bytes,
        gitignore=bool(gitignore),
        exclude_dirs=tuple(check_globs(exclude_dirs, "exclude_dirs")),
        exclude_files=tuple(check_globs(exclude_files, "exclude_files")),
    )
    return _discover(list(paths), walk)


_UNRESOLVED = "unresolvable path (a link loop, or too long to resolve)"


def _real(path: str) -> str | None:
    """The real path, or None when the system cannot resolve it (a link loop, a name too long):
    ``os.path.realpath`` would then return a path the kernel does not open (a link resolved
    through a path over 4,096 characters read as inside the walked folder, and opened outside).
    A missing file keeps its lexical real path (read_text_file reports it)."""
    try:
        return os.path.realpath(path, strict=True)
    except FileNotFoundError:
        return os.path.realpath(path)
    except OSError:
        return None


def _check_max_file_bytes(max_file_bytes: int) -> None:
    if type(max_file_bytes) is not int or max_file_bytes < 1:
        raise InvalidInputError(f"max_file_bytes must be a positive int, got {max_file_bytes!r}")


def _discover(paths: list[str | os.PathLike[str]], walk: _Walk) -> Iterator[SourceFile | SkippedFile]:
    for given in paths:
        shown = os.fspath(given)
        path = os.path.abspath(shown)
        if not os.path.lexists(path):
            yield SkippedFile(shown, "does not exist")
        elif os.path.isdir(path):
            yield from walk.tree(path, shown)
        else:  # a file, or a link that read_text_file reports as broken or looping
            yield walk.file(path, shown, walked=False)
    yield from walk.followed_links()
