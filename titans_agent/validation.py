"""Checks and normal forms of what callers pass to MemoryAgent (texts, namespaces, metadata, times).

Every function raises :class:`~titans_agent.errors.InvalidInputError` (a ``ValueError``) or its
subclass :class:`~titans_agent.errors.EmptyInputError` for bad input, never anything else.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import unicodedata
from typing import Any

from titans_agent.errors import EmptyInputError, InvalidInputError
from titans_agent.store import utcnow

__all__ = ["as_utc", "check_metadata", "check_namespace", "check_text", "normalise", "text_hash", "word_set"]

_WORDS = re.compile(r"\w+", re.UNICODE)
_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str, a surrogate code point is always a lone one


def normalise(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


def text_hash(text: str) -> str:
    return hashlib.sha256(normalise(text).encode("utf-8", "surrogatepass")).hexdigest()


def word_set(text: str) -> frozenset[str]:
    return frozenset(_WORDS.findall(normalise(text)))


def check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str):
        raise InvalidInputError(f"namespace must be a string, got {type(namespace).__name__}")
    if not namespace.strip():
        raise InvalidInputError("namespace must not be blank")
    if len(namespace) > 512 or any(unicodedata.category(c) == "Cc" for c in namespace):
        raise InvalidInputError("namespace must be at most 512 characters without control characters")
    return namespace


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


def check_metadata(metadata: Any) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidInputError("metadata must be a dict")
    try:
        return json.loads(json.dumps(metadata, allow_nan=False))
    except (TypeError, ValueError) as exc:
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
