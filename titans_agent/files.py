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
"""

from __future__ import annotations

import errno
import fnmatch
import functools
import hashlib
import logging
import os
import re
import stat
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from titans_agent.errors import InvalidInputError

__all__ = [
    "DEFAULT_EXCLUDE_DIRS",
    "DEFAULT_MAX_FILE_BYTES",
    "SkippedFile",
    "SourceFile",
    "discover",
    "read_text_file",
]

logger = logging.getLogger(__name__)

#: Directory names never walked into (each one met is reported as ``excluded (<name>)``).
DEFAULT_EXCLUDE_DIRS = (
    ".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".mypy_cache",
    ".pytest_cache", ".ruff_cache"
)  # fmt: skip

#: Files larger than this many bytes are skipped without being read (4 MiB).
DEFAULT_MAX_FILE_BYTES = 4_194_304


@dataclass(frozen=True)
class SourceFile:
    """A decoded text file.

    Attributes:
        path: Absolute real path (symlinks resolved): the identity of the document.
        display: The path as the user sees it: relative to the folder given to :func:`discover`
            (with ``/`` separators), or the path exactly as given for a file named directly.
        text: The decoded text, newlines normalised to ``"\\n"``, NUL characters removed.
        encoding: The codec used, e.g. ``"utf-8"``, ``"utf-8-sig"``, ``"utf-16"``, ``"cp1252"``.
        n_bytes: Size of the raw file in bytes.
        sha256: Hex SHA-256 of the raw bytes (before decoding).
        warnings: What was repaired, e.g. ``"3 NUL bytes removed"``, ``"undecodable bytes
            replaced"``.
    """

    path: Path
    display: str
    text: str
    encoding: str
    n_bytes: int
    sha256: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class SkippedFile:
    """A file or folder that is not ingested, and why.

    Attributes:
        path: The path as displayed (same convention as :attr:`SourceFile.display`).
        reason: Short and human readable: ``"empty"``, ``"whitespace only"``, ``"too large
            (5,242,880 bytes > 4,194,304)"``, ``"binary (image/png)"``, ``"binary"``, ``"symlink
            loop"``, ``"broken symlink"``, ``"duplicate of <display>"``, ``"permission denied"``,
            ``"excluded (.git)"``, ``"does not exist"``, ``"not a regular file"``.
    """

    path: str
    reason: str


# -- binary detection ---------------------------------------------------------------------------

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"PK\x05\x06", "application/zip"),
    (b"PK\x07\x08", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
    (b"\x7fELF", "application/x-elf"),
    (b"\xfd7zXZ\x00", "application/x-xz"),
    (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (b"Rar!\x1a\x07", "application/vnd.rar"),
    (b"\x28\xb5\x2f\xfd", "application/zstd"),
    (b"SQLite format 3\x00", "application/vnd.sqlite3"),
    (b"\x00asm", "application/wasm"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "application/x-ole-storage"),
    (b"\xca\xfe\xba\xbe", "application/java-vm"),
    (b"\xcf\xfa\xed\xfe", "application/x-mach-binary"),
    (b"\xce\xfa\xed\xfe", "application/x-mach-binary"),
    (b"\x93NUMPY", "application/x-npy"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"wOFF", "font/woff"),
    (b"wOF2", "font/woff2"),
    (b"\x1a\x45\xdf\xa3", "video/webm"),
)

# Control bytes that do not occur in text (tab, LF, VT, FF, CR and ESC do).
_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 11, 12, 13, 27))
_BINARY_CONTROL_SHARE = 0.05  # more control bytes than this share: binary
_MIN_PRINTABLE_SHARE = 0.97  # a decoded guess must be at least this printable
_MAX_REPLACED_SHARE = 0.02  # UTF-8 with replacements is kept only below this share of bad chars

_BOMS: tuple[tuple[bytes, str, str], ...] = (  # (mark, codec, name reported); UTF-32 before UTF-16
    (b"\xff\xfe\x00\x00", "utf-32", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32", "utf-32"),
    (b"\xef\xbb\xbf", "utf-8-sig", "utf-8-sig"),
    (b"\xff\xfe", "utf-16", "utf-16"),
    (b"\xfe\xff", "utf-16", "utf-16"),
)


def _magic_type(data: bytes) -> str | None:
    """MIME type of a known binary signature at the start of ``data``, else ``None``."""
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] in (b"WEBP", b"WAVE", b"AVI "):
        return {b"WEBP": "image/webp", b"WAVE": "audio/wav", b"AVI ": "video/x-msvideo"}[data[8:12]]
    if data[4:8] == b"ftyp":
        return "video/mp4"
    if data[:3] == b"ID3" and len(data) > 4 and data[3] in (2, 3, 4) and data[4] == 0:
        return "audio/mpeg"
    return None


def _printable_share(text: str) -> float:
    """Share of characters that are printable or ordinary whitespace (of the first 100,000)."""
    text = text[:100_000]
    if not text:
        return 1.0
    bad = sum(1 for ch in text if not ch.isprintable() and ch not in "\t\n\r\f\v\x1b")
    return 1.0 - bad / len(text)


def _utf16_without_bom(data: bytes) -> tuple[str, str] | None:
    """Decode BOM-less UTF-16 text (ASCII-heavy: one byte of each pair is NUL), else ``None``."""
    if len(data) < 4 or len(data) % 2:
        return None
    even_nul = data[0::2].count(0) / (len(data) // 2)
    odd_nul = data[1::2].count(0) / (len(data) // 2)
    if odd_nul > 0.6 and even_nul < 0.05:
        codec = "utf-16-le"
    elif even_nul > 0.6 and odd_nul < 0.05:
        codec = "utf-16-be"
    else:
        return None
    try:
        text = data.decode(codec)
    except UnicodeDecodeError:
        return None
    return (text, codec) if _printable_share(text) >= _MIN_PRINTABLE_SHARE else None


def _guess(data: bytes) -> tuple[str, str] | None:
    """charset-normalizer's guess as ``(text, codec)`` if it decodes to plausible text."""
    from charset_normalizer import from_bytes

    try:
        matches = list(from_bytes(data))
    except Exception:  # a third-party detector must not abort an ingest
        logger.exception("charset detection failed")
        return None
    if not matches:
        return None
    best = matches[0]
    # Short Western texts are ambiguous between code pages (b"na\xefve" is valid cp1006 and
    # cp1250); prefer cp1252 when it is as good as the best guess.
    for m in matches:
        if m.encoding == "cp1252" and m.chaos <= best.chaos + 0.1 and m.coherence >= best.coherence - 0.05:
            best = m
            break
    text = str(best)
    if _printable_share(text) < _MIN_PRINTABLE_SHARE:
        return None
    return text, best.encoding


def _decode(data: bytes) -> tuple[str, str, list[str]] | str:
    """Decode raw bytes as ``(text, encoding, warnings)``, or return why it is binary."""
    mime = _magic_type(data)
    if mime is not None:
        return f"binary ({mime})"
    warnings: list[str] = []
    for mark, codec, name in _BOMS:
        if data.startswith(mark):
            try:
                text = data.decode(codec)
            except UnicodeDecodeError:
                text = data.decode(codec, errors="replace")
                warnings.append("undecodable bytes replaced")
            n_nul = text.count("\x00")
            if n_nul:
                text = text.replace("\x00", "")
                warnings.append(_nul_warning(n_nul))
            return text, name, warnings

    n_control = len(data) - len(data.translate(None, _CONTROL_BYTES))
    if n_control > max(_BINARY_CONTROL_SHARE * len(data), 2):  # a stray NUL in a tiny file is not binary
        utf16 = _utf16_without_bom(data)
        if utf16 is not None:
            return utf16[0], utf16[1], warnings
        return "binary"
    n_nul = data.count(0)
    if n_nul:
        data = data.replace(b"\x00", b"")
        warnings.append(_nul_warning(n_nul))

    try:
        return data.decode("utf-8"), "utf-8", warnings
    except UnicodeDecodeError:
        pass
    guess = _guess(data)
    if guess is not None:
        return guess[0], guess[1], warnings
    text = data.decode("utf-8", errors="replace")
    if text.count("\ufffd") <= _MAX_REPLACED_SHARE * len(text):
        warnings.append("undecodable bytes replaced")
        return text, "utf-8", warnings
    return "binary"


def _nul_warning(n: int) -> str:
    return f"{n} NUL byte{'' if n == 1 else 's'} removed"


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
            data = fh.read(max_file_bytes + 1)
    except OSError as exc:
        return SkippedFile(display, _os_reason(exc))
    if not data:  # emptied since the stat
        return SkippedFile(display, "empty")
    if len(data) > max_file_bytes:  # grew since the stat
        return SkippedFile(display, f"too large (> {max_file_bytes:,} bytes)")
    decoded = _decode(data)
    if isinstance(decoded, str):
        return SkippedFile(display, decoded)
    text, encoding, warnings = decoded
    text = text.replace("\r\n", "\n").replace("\r", "\n")
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
    )


# -- glob patterns ------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob: ``**`` spans folders, ``*`` and ``?`` stay within one, ``[...]`` is a set."""
    pattern = pattern.replace("\\", "/")
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")  # zero or more folders
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = pattern.find("]", i + 2 if pattern.startswith("[!", i) else i + 1)
            if j < 0:
                out.append(re.escape(c))
                i += 1
            else:
                # fnmatch's translation of one set, e.g. "[!a-c]" -> "[^a-c]"
                out.append(fnmatch.translate(pattern[i : j + 1])[4:-3])
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _matches(rel: str, patterns: Sequence[str]) -> bool:
    """Whether a relative ``/`` path, or its bare name, matches any glob in ``patterns``."""
    name = rel.rsplit("/", 1)[-1]
    return any(_glob_regex(p).match(rel) or _glob_regex(p).match(name) for p in patterns)


# -- discovery ----------------------------------------------------------------------------------


class _Walk:
    """State shared by every path given to one :func:`discover` call."""

    def __init__(self, include: Sequence[str] | None, exclude: Sequence[str] | None, max_file_bytes: int) -> None:
        self.include = list(include or ())
        self.exclude = [p.rstrip("/") or p for p in exclude or ()]  # "build/" names a folder
        self.max_file_bytes = max_file_bytes
        self.files: dict[str, str] = {}  # real path -> display of the first visit
        self.dirs: dict[tuple[int, int], str] = {}  # (st_dev, st_ino) -> display
        self.prefix = ""  # the walked folder's name and "/", set by tree()

    def file(self, path: str, display: str) -> SourceFile | SkippedFile:
        real = os.path.realpath(path)
        first = self.files.get(real)
        if first is not None:
            return SkippedFile(display, f"duplicate of {first}")
        result = read_text_file(Path(path), display=display, max_file_bytes=self.max_file_bytes)
        self.files[real] = display
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
        stack: list[tuple[str, str, Iterator[os.DirEntry[str]]]] = [(root, "", iter(listed))]
        while stack:
            _, prefix, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                continue
            rel = prefix + entry.name
            sub = yield from self._entry(entry, rel, [frame[0] for frame in stack])
            if sub is not None:
                stack.append((entry.path, rel + "/", iter(sub)))

    def _filtered(self, rel: str) -> bool:
        """Whether include/exclude leave a (non-folder) entry out, silently."""
        if self.include and not _matches(rel, self.include):
            return True
        return _matches(rel, self.exclude)

    def _list(self, path: str, display: str) -> list[os.DirEntry[str]] | SkippedFile:
        try:
            with os.scandir(path) as it:
                return sorted(it, key=lambda e: e.name)
        except OSError as exc:
            return SkippedFile(display, _os_reason(exc))

    def _entry(
        self, entry: os.DirEntry[str], rel: str, ancestors: list[str]
    ) -> Generator[SourceFile | SkippedFile, None, list[os.DirEntry[str]] | None]:
        """Yield the outcome for one entry; return its sorted children if it is a folder to walk."""
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
            if entry.name in DEFAULT_EXCLUDE_DIRS:
                yield SkippedFile(self.prefix + rel, f"excluded ({entry.name})")
                return None
            if _matches(rel, self.exclude):
                return None
            key = (st.st_dev, st.st_ino)
            if is_link:
                target = os.path.realpath(entry.path)
                for ancestor in ancestors:
                    real_ancestor = os.path.realpath(ancestor)
                    if real_ancestor == target or real_ancestor.startswith(target.rstrip(os.sep) + os.sep):
                        yield SkippedFile(self.prefix + rel, "symlink loop")
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
        if not stat.S_ISREG(st.st_mode):
            yield SkippedFile(self.prefix + rel, "not a regular file")
            return None
        yield self.file(entry.path, self.prefix + rel)
        return None


def discover(
    paths: Sequence[str | os.PathLike[str]],
    *,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> Iterator[SourceFile | SkippedFile]:
    """Yield every file under ``paths``, decoded or skipped with a reason, in a fixed order.

    Folders are walked recursively, entries sorted by name. Symlinks are followed; a link to a
    folder that contains it (``up -> ..``, ``self -> .``) is reported as ``symlink loop``, a
    dangling one as ``broken symlink``, and a file or folder reached a second time (through
    another link, or given twice) as ``duplicate of <display>``. Folders named in
    :data:`DEFAULT_EXCLUDE_DIRS` are reported once each as ``excluded (<name>)`` and not entered.

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

    Returns:
        A lazy iterator of one :class:`SourceFile` or :class:`SkippedFile` per file met; it never
        raises for a bad file or folder.

    Raises:
        InvalidInputError: At the call, if ``max_file_bytes`` is not a positive int or a pattern
            is not a string.
    """
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]  # type: ignore[list-item]
    include = _patterns(include, "include")
    exclude = _patterns(exclude, "exclude")
    _check_max_file_bytes(max_file_bytes)
    return _discover(list(paths), include, exclude, max_file_bytes)


def _patterns(patterns: Sequence[str] | str | None, name: str) -> list[str]:
    if patterns is None:
        return []
    if isinstance(patterns, str):
        return [patterns]
    patterns = list(patterns)
    if not all(isinstance(p, str) and p for p in patterns):
        raise InvalidInputError(f"{name} must be glob strings, got {patterns!r}")
    return patterns


def _check_max_file_bytes(max_file_bytes: int) -> None:
    if type(max_file_bytes) is not int or max_file_bytes < 1:
        raise InvalidInputError(f"max_file_bytes must be a positive int, got {max_file_bytes!r}")


def _discover(
    paths: list[str | os.PathLike[str]], include: list[str], exclude: list[str], max_file_bytes: int
) -> Iterator[SourceFile | SkippedFile]:
    walk = _Walk(include, exclude, max_file_bytes)
    for given in paths:
        shown = os.fspath(given)
        path = os.path.abspath(shown)
        if not os.path.lexists(path):
            yield SkippedFile(shown, "does not exist")
        elif os.path.isdir(path):
            yield from walk.tree(path, shown)
        else:  # a file, or a link that read_text_file reports as broken or looping
            yield walk.file(path, shown)
