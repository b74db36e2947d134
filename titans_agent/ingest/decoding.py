"""Bytes to text, whatever they hold: binary signatures, byte-order marks, control bytes, UTF-8,
charset-normalizer's guess (see :func:`decode`, and :mod:`titans_agent.ingest.files` for the order)."""

from __future__ import annotations

import logging

__all__ = ["decode"]

logger = logging.getLogger(__name__)

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
_UTF8_MAJORITY = 4  # a text with this many well-formed non-ASCII characters per bad byte is UTF-8

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


def decode(data: bytes) -> tuple[str, str, list[str]] | str:
    """Decode raw bytes as ``(text, encoding, warnings)``, or return why it is binary.

    Args:
        data: The whole file.

    Returns:
        ``(text, codec, warnings)`` (NUL characters removed, newlines as in the file), or a reason
        string: ``"binary"`` or ``"binary (<mime type>)"``.
    """
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
    # UTF-8 with a few stray bytes (a pasted fragment, a truncated write) is UTF-8: a legacy
    # code page's guess would turn every accented letter of it into mojibake. Its non-ASCII
    # characters then mostly decode; a legacy text's (b"caf\xe9") mostly do not.
    text = data.decode("utf-8", errors="replace")
    n_bad = text.count("\ufffd")
    n_good = len(text) - len(text.encode("ascii", "ignore")) - n_bad  # non-ASCII characters that decoded
    if n_good >= _UTF8_MAJORITY * n_bad and n_bad <= _MAX_REPLACED_SHARE * len(text):
        warnings.append("undecodable bytes replaced")
        return text, "utf-8", warnings
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
