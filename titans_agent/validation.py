"""Checks and normal forms of what callers pass to MemoryAgent (texts, namespaces, metadata, times).

Every function raises :class:`~titans_agent.errors.InvalidInputError` (a ``ValueError``) or its
subclass :class:`~titans_agent.errors.EmptyInputError` for bad input, never anything else.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import unicodedata
from typing import Any

from titans_agent.errors import EmptyInputError, InvalidInputError
from titans_agent.types import utcnow

__all__ = [
    "MAX_METADATA_DEPTH",
    "as_utc",
    "check_metadata",
    "check_kinds",
    "check_name",
    "check_namespace",
    "check_patterns",
    "check_record_id",
    "check_text",
]

MAX_METADATA_DEPTH = 64  # nested dicts and lists in one metadata value
KINDS = ("chunk", "note", "turn")
_MAX_SQLITE_INT = 2**63 - 1

_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str, a surrogate code point is always a lone one


def check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str):
        raise InvalidInputError(f"namespace must be a string, got {type(namespace).__name__}")
    if not namespace.strip():
        raise InvalidInputError("namespace must not be blank")
    if len(namespace) > 512 or any(unicodedata.category(c) in ("Cc", "Cs") for c in namespace):
        raise InvalidInputError(
            "namespace must be at most 512 characters without control characters or lone surrogates"
        )
    return namespace


def check_name(value: Any, what: str, max_chars: int | None = None) -> str:
    """An identifier the caller chooses (a source, a session id, a role): returned unchanged.

    Unlike :func:`check_text`, nothing is replaced (two names must never collide), so a name that
    cannot be stored as UTF-8 is refused.

    Raises:
        InvalidInputError: not a string, blank, longer than ``max_chars`` (when given), or holding
            a NUL or a lone surrogate (which SQLite cannot store as UTF-8; on POSIX a command-line
            argument that is not valid UTF-8 arrives with such surrogates).
    """
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidInputError(f"{what} must not be blank")
    if "\x00" in value or _SURROGATE.search(value):
        raise InvalidInputError(f"{what} must not contain NUL characters or lone surrogates (invalid UTF-8)")
    if max_chars is not None and len(value) > max_chars:
        raise InvalidInputError(f"{what} must be at most {max_chars} characters, got {len(value)}")
    return value


def check_text(text: Any, what: str) -> str:
    """The text to write or look up: NULs removed, lone surrogates replaced by U+FFFD.

    Raises:
        InvalidInputError: not a string.
        EmptyInputError: nothing visible left (only whitespace, control or format characters).
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"{what} must be a string, got {type(text).__name__}")
    text = _SURROGATE.sub("\ufffd", text.replace("\x00", ""))
    if not any(not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf") for c in text):
        raise EmptyInputError(f"{what} is empty or only whitespace")
    return text


def check_record_id(record_id: Any) -> int:
    """A record id: an ``int`` (not a bool) from 1 to 2**63 - 1 (SQLite's largest integer).

    Raises:
        InvalidInputError: not an int, or out of that range (no such record can exist).
    """
    if isinstance(record_id, bool) or not isinstance(record_id, int):
        raise InvalidInputError(f"record_id must be an int, got {type(record_id).__name__}")
    if not 1 <= record_id <= _MAX_SQLITE_INT:
        raise InvalidInputError(f"record_id must be between 1 and {_MAX_SQLITE_INT}, got {record_id}")
    return record_id


def check_kinds(kinds: Any) -> list[str] | None:
    """Record kinds to filter on: None (all), or a list/tuple/set of "chunk", "note", "turn".

    Raises:
        InvalidInputError: a string or non-collection was given, or an unknown kind.
    """
    if kinds is None:
        return None
    if isinstance(kinds, (str, bytes)) or not isinstance(kinds, (list, tuple, set, frozenset)):
        raise InvalidInputError(f"kinds must be a list of {', '.join(KINDS)}; got {kinds!r:.80}")
    if not all(isinstance(k, str) and k in KINDS for k in kinds):
        raise InvalidInputError(f"kinds must be among {', '.join(KINDS)}; got {list(kinds)!r:.80}")
    return list(kinds)


def check_patterns(patterns: Any, what: str) -> list[str] | None:
    """Glob patterns (``include`` / ``exclude``): None, one string, or a list/tuple of strings.

    Raises:
        InvalidInputError: another type, or a pattern that is not a string.
    """
    if patterns is None:
        return None
    if isinstance(patterns, str):
        return [patterns]
    if not isinstance(patterns, (list, tuple)):
        raise InvalidInputError(f"{what} must be a list of glob patterns, got {type(patterns).__name__}")
    if not all(isinstance(p, str) for p in patterns):
        raise InvalidInputError(f"{what} patterns must be strings")
    return list(patterns)


def _depth_exceeds(value: Any, limit: int) -> bool:
    """True when dicts and lists nest deeper than ``limit`` (iterative: no recursion limit)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def check_metadata(metadata: Any) -> dict[str, Any]:
    """A JSON copy of the caller's metadata (keys become strings, tuples lists).

    Raises:
        InvalidInputError: not a dict, nested deeper than :data:`MAX_METADATA_DEPTH`, or not
            JSON-serialisable (sets, datetimes, NaN or infinite floats, non-string keys that JSON
            cannot convert).
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidInputError("metadata must be a dict")
    if _depth_exceeds(metadata, MAX_METADATA_DEPTH):
        raise InvalidInputError(f"metadata nests deeper than {MAX_METADATA_DEPTH} levels")
    try:
        return json.loads(json.dumps(metadata, allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInputError(f"metadata must be JSON-serialisable: {exc}") from exc


def as_utc(ts: dt.datetime | str | None) -> dt.datetime:
    if ts is None:
        return utcnow()
    if isinstance(ts, str):
        try:
            ts = dt.datetime.fromisoformat(ts.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidInputError(f"timestamp {ts!r} is not ISO 8601") from exc
    if not isinstance(ts, dt.datetime):
        raise InvalidInputError("timestamp must be a datetime or an ISO 8601 string")
    try:
        return ts.replace(tzinfo=dt.timezone.utc) if ts.tzinfo is None else ts.astimezone(dt.timezone.utc)
    except (OverflowError, ValueError) as exc:
        raise InvalidInputError(f"timestamp {ts.isoformat()} is out of range in UTC") from exc
