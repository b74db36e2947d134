"""Checks and normal forms of what callers pass to MemoryAgent (texts, namespaces, metadata, times).

Every function raises :class:`~titans_agent.errors.InvalidInputError` (a ``ValueError``) or its
subclass :class:`~titans_agent.errors.EmptyInputError` for bad input, never anything else.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from titans_agent.config import DEFAULT_NAMESPACE
from titans_agent.errors import EmbedderMismatchError, EmptyInputError, InvalidInputError, NamespaceNotFoundError
from titans_agent.text import LONE_SURROGATE
from titans_agent.types import utcnow

__all__ = [
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "MAX_NAME_BYTES",
    "MAX_SESSION_BYTES",
    "MAX_ROLE_CHARS",
    "CheckedTurn",
    "SkippedTurn",
    "check_turn_batch",
    "check_turns",
    "as_utc",
    "check_metadata",
    "check_ingest_target",
    "check_kinds",
    "check_name",
    "check_source_name",
    "check_namespace",
    "check_page",
    "check_patterns",
    "check_query",
    "check_record_id",
    "check_text",
    "require_namespace",
]

MAX_METADATA_DEPTH = 64  # nested dicts and lists in one metadata value
#: The most bytes one metadata object may take serialised as JSON (UTF-8, non-ASCII characters not
#: escaped): 1 MiB, for every face (remember, turns, ingest, import, the LangGraph store's values).
MAX_METADATA_BYTES = 1_048_576
KINDS = ("chunk", "note", "turn")
_MAX_SQLITE_INT = 2**63 - 1


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


def require_namespace(namespace: str, found: bool, missing_ok: bool = False) -> bool:
    """``found``: whether the namespace exists. A missing one is read as empty (False is returned)
    when it is the default namespace, which every database counts as having, or with
    ``missing_ok``; otherwise :class:`NamespaceNotFoundError` is raised."""
    if found or missing_ok or namespace == DEFAULT_NAMESPACE:
        return found
    raise NamespaceNotFoundError(
        f"no namespace {namespace!r} in this database (names match exactly; MemoryAgent.namespaces() lists them; "
        "missing_ok=True reads a missing namespace as empty)"
    )


#: The longest source written, in UTF-8 bytes: sources and session ids are keys of unique indexes,
#: and PostgreSQL refuses an index entry over about 2,700 bytes (SQLite has no such limit; the two
#: backends must accept the same names). A session id is at most this less ``"session:"`` (its
#: turns' source). Checked where a name is written, not where one is looked up.
MAX_NAME_BYTES = 2048
MAX_SESSION_BYTES = MAX_NAME_BYTES - len("session:")


def check_name(value: Any, what: str, max_chars: int | None = None, max_bytes: int | None = None) -> str:
    """An identifier the caller chooses (a source, a session id, a role): returned unchanged.

    Unlike :func:`check_text`, nothing is replaced (two names must never collide), so a name that
    cannot be stored as UTF-8 is refused.

    Raises:
        InvalidInputError: not a string, blank, longer than ``max_chars`` or (in UTF-8) than
            ``max_bytes`` (when given), or holding a NUL or a lone surrogate (which SQLite cannot
            store as UTF-8; on POSIX a command-line argument that is not valid UTF-8 arrives with
            such surrogates).
    """
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidInputError(f"{what} must not be blank")
    if "\x00" in value or LONE_SURROGATE.search(value):
        raise InvalidInputError(f"{what} must not contain NUL characters or lone surrogates (invalid UTF-8)")
    if max_chars is not None and len(value) > max_chars:
        raise InvalidInputError(f"{what} must be at most {max_chars} characters, got {len(value)}")
    if max_bytes is not None and len(value) * 4 > max_bytes and len(value.encode("utf-8")) > max_bytes:
        raise InvalidInputError(
            f"{what} must be at most {max_bytes:,} bytes in UTF-8, got {len(value.encode('utf-8')):,}"
        )
    return value


def check_source_name(value: Any) -> str:
    """The ``source`` a note or named text is written under (:func:`check_name`), which must not
    start with ``session:``: that names a conversation (``forget(source="session:<id>")`` would
    forget the text with the conversation's turns).

    Raises:
        InvalidInputError: as :func:`check_name`, or a name starting with ``session:``.
    """
    value = check_name(value, "source", max_bytes=MAX_NAME_BYTES)
    if value.startswith("session:"):
        raise InvalidInputError(
            f"source {value[:80]!r}: names starting with 'session:' are a conversation's; choose another"
        )
    return value


def check_text(text: Any, what: str, max_chars: int | None = None) -> str:
    """The text to write or look up: NULs removed, lone surrogates replaced by U+FFFD.

    Args:
        max_chars: the most characters (code points) the text may hold
            (:attr:`~titans_agent.AgentConfig.max_text_chars` for a note or a turn), checked first,
            before anything else reads the text; None: no limit.

    Raises:
        InvalidInputError: not a string, or longer than ``max_chars`` (the message names the limit
            and says to ingest a longer text as a document).
        EmptyInputError: nothing visible left (only whitespace, control or format characters).
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"{what} must be a string, got {type(text).__name__}")
    if max_chars is not None and len(text) > max_chars:
        raise InvalidInputError(
            f"{what} is {len(text):,} characters, over the limit of {max_chars:,} for a note or a turn "
            "(AgentConfig.max_text_chars); store a longer text as a document with ingest (the text and a source name)"
        )
    text = LONE_SURROGATE.sub("\ufffd", text.replace("\x00", ""))
    if not any(not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf") for c in text):
        raise EmptyInputError(f"{what} is empty or only whitespace")
    return text


def check_query(query: Any, max_chars: int) -> str:
    """A recall query: :func:`check_text` with the note's limit, checked before anything embeds it.

    Args:
        max_chars: :attr:`~titans_agent.AgentConfig.max_text_chars`, the same limit as a note's.

    Raises:
        InvalidInputError: not a string, or longer than ``max_chars`` characters.
        EmptyInputError: nothing visible in it.
    """
    if isinstance(query, str) and len(query) > max_chars:
        raise InvalidInputError(
            f"query is {len(query):,} characters, over the limit of {max_chars:,} (AgentConfig.max_text_chars)"
        )
    return check_text(query, "query")


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
        InvalidInputError: not a dict, nested deeper than :data:`MAX_METADATA_DEPTH`, larger than
            :data:`MAX_METADATA_BYTES` serialised as JSON (UTF-8), or not JSON-serialisable (sets,
            datetimes, NaN or infinite floats, non-string keys that JSON cannot convert), or
            holding a NUL or a lone surrogate in a key or string, or an integer beyond 64 bits
            (what one of the two databases cannot store or filter).
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidInputError("metadata must be a dict")
    if _depth_exceeds(metadata, MAX_METADATA_DEPTH):
        raise InvalidInputError(f"metadata nests deeper than {MAX_METADATA_DEPTH} levels")
    try:
        serialised = json.dumps(metadata, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInputError(f"metadata must be JSON-serialisable: {exc}") from exc
    n_bytes = len(serialised.encode("utf-8", "surrogatepass"))
    if n_bytes > MAX_METADATA_BYTES:
        raise InvalidInputError(
            f"metadata is {n_bytes:,} bytes as JSON, over the limit of {MAX_METADATA_BYTES:,} (MAX_METADATA_BYTES)"
        )
    copy = json.loads(serialised)
    _check_metadata_values(copy, ())
    return copy


def _check_metadata_values(value: Any, path: tuple[str, ...]) -> None:
    """What both databases store and filter alike: no NUL or lone surrogate in a key or a string
    (PostgreSQL's JSON cannot hold them), no integer beyond 64 bits (SQLite's cannot)."""
    where = ".".join(path) or "(top level)"
    if isinstance(value, dict):
        for key, child in value.items():
            if "\x00" in key or LONE_SURROGATE.search(key):
                raise InvalidInputError(f"metadata key {key!r} holds a NUL or a lone surrogate")
            _check_metadata_values(child, (*path, key))
    elif isinstance(value, list):
        for child in value:
            _check_metadata_values(child, path)
    elif isinstance(value, str):
        if "\x00" in value or LONE_SURROGATE.search(value):
            raise InvalidInputError(f"metadata value at {where!r} holds a NUL or a lone surrogate")
    elif isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        raise InvalidInputError(f"metadata value at {where!r} is an integer beyond 64 bits: {value}")


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


MAX_ROLE_CHARS = 64  # the turns.role column: String(64), enforced by PostgreSQL, not by SQLite
_TURN_KEYS = {"session_id", "role", "content", "timestamp", "metadata"}


@dataclass(frozen=True)
class CheckedTurn:
    """A conversation turn that passed :func:`check_turns` (timestamp in UTC, metadata JSON)."""

    session_id: str
    role: str
    content: str
    timestamp: dt.datetime
    metadata: dict[str, Any]


@dataclass(frozen=True)
class SkippedTurn:
    """A turn of an ``add_turns`` batch left out by :func:`check_turn_batch`: its 0-based position
    in the batch and why (its content has nothing visible)."""

    position: int
    reason: str


def check_turns(turns: Any, max_chars: int | None = None, *, positions: bool = True) -> list[CheckedTurn]:
    """Check turns given as tuples ``(session_id, role, content[, timestamp[, metadata]])`` or dicts
    with those keys; a missing timestamp is now. A content longer than ``max_chars`` is invalid
    (see :func:`check_text`).

    Raises:
        EmptyInputError, InvalidInputError: a turn is invalid; the message names its position
            ("turn 3: ...") unless ``positions`` is False (one turn, ``add_turn``).
    """
    return _check_turns(turns, max_chars, skip_empty=False, positions=positions)[0]


def check_turn_batch(turns: Any, max_chars: int | None = None) -> tuple[list[CheckedTurn], list[SkippedTurn]]:
    """:func:`check_turns` for a batch that stores what it can: a turn whose content has nothing
    visible (empty, whitespace, or only control and format characters such as a zero-width space)
    but whose other fields are valid is left out and listed, in order, instead of refusing the batch.

    Returns:
        The turns to write, in order, and the ones left out (their positions in ``turns``).

    Raises:
        EmptyInputError, InvalidInputError: any other invalid turn; the message names its position.
    """
    return _check_turns(turns, max_chars, skip_empty=True)


def _check_turns(
    turns: Any, max_chars: int | None, skip_empty: bool, positions: bool = True
) -> tuple[list[CheckedTurn], list[SkippedTurn]]:
    if isinstance(turns, (str, bytes, dict)) or not isinstance(turns, Iterable):
        raise InvalidInputError(f"turns must be a list of tuples or dicts, got {type(turns).__name__}")
    checked, skipped = [], []
    for i, item in enumerate(turns):
        try:
            if not isinstance(item, (dict, tuple, list)):
                raise InvalidInputError(
                    f"expected a tuple (session_id, role, content[, timestamp[, metadata]]) or a dict, "
                    f"got {type(item).__name__}"
                )
            if isinstance(item, dict):
                unknown = set(item) - _TURN_KEYS
                if unknown:
                    raise InvalidInputError(f"unknown keys {sorted(unknown)}")
                fields = tuple(item.get(k) for k in ("session_id", "role", "content", "timestamp", "metadata"))
            else:
                if not 3 <= len(item) <= 5:
                    raise InvalidInputError("expected (session_id, role, content[, timestamp[, metadata]])")
                fields = (*item, None, None)[:5]
            session_id, role, content, timestamp, metadata = fields
            empty: EmptyInputError | None = None
            try:
                content = check_text(content, "content", max_chars)
            except EmptyInputError as exc:
                if not skip_empty:
                    raise
                empty = exc  # skipped only when the rest of the turn is valid
            session_id = check_name(session_id, "session_id", max_bytes=MAX_SESSION_BYTES)
            role = check_name(role, "role", max_chars=MAX_ROLE_CHARS)
            turn = CheckedTurn(session_id, role, str(content), as_utc(timestamp), check_metadata(metadata))
        except InvalidInputError as exc:
            raise type(exc)(f"turn {i}: {exc}" if positions else str(exc)) from None
        if empty is None:
            checked.append(turn)
        else:
            skipped.append(SkippedTurn(i, str(empty)))
    return checked, skipped


def check_ingest_target(target: Any, source: Any) -> tuple[str | None, list[str | os.PathLike[str]] | None]:
    """What ``ingest`` was given: ``(text, None)`` for a text named by ``source``, else ``(None,
    paths)``; a single path must exist (a list reports missing paths as skipped instead).

    Raises:
        EmptyInputError: ``source`` was given and the text is blank.
        InvalidInputError: a bad source name, a missing path, or a target that is no path, list
            of paths or text.
    """
    if source is not None:
        check_name(source, "source")
        return check_text(target, "text"), None
    if not isinstance(target, (str, os.PathLike)) and (isinstance(target, bytes) or not isinstance(target, Iterable)):
        raise InvalidInputError(
            f"target must be a path, a list of paths, or a text with source=; got {type(target).__name__}"
        )
    if isinstance(target, (str, os.PathLike)) and not os.path.lexists(target):
        raise InvalidInputError(f"no such file or folder: {str(target)[:200]!r}; to ingest a text, pass source=<name>")
    paths = [target] if isinstance(target, (str, os.PathLike)) else list(target)
    if not paths or not all(isinstance(p, (str, os.PathLike)) for p in paths):
        raise InvalidInputError("target must be a path, a list of paths, or a text with source=")
    return None, paths


def check_page(limit: Any, offset: Any) -> None:
    """A page of a listing: ``limit`` None or an int >= 0, ``offset`` an int >= 0.

    Raises:
        InvalidInputError: either is negative, above 2**63 - 1 (the databases' largest integer),
            or not an integer.
    """
    bad_limit = limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0)
    if bad_limit or isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInputError("limit and offset must be non-negative integers")
    if offset > _MAX_SQLITE_INT or (limit is not None and limit > _MAX_SQLITE_INT):
        raise InvalidInputError(f"limit and offset must be at most {_MAX_SQLITE_INT}")


def check_embedder_rows(rows: list[tuple[str, str, int]], embedder: str, dim: int | None, url: str) -> int | None:
    """Refuse a database whose namespaces (``rows`` of name, embedder name, dimension) were written
    with an embedder other than ``embedder`` (or of another dimension than ``dim``, when known, else
    than each other); return their dimension, or None for a database without namespaces.

    Raises:
        EmbedderMismatchError: the first namespace that differs, named with both embedders.
    """
    for name, emb, d in rows:
        if emb != embedder or d != (dim or rows[0][2]):
            raise EmbedderMismatchError(
                f"namespace {name!r} of {url} was written with embedder {emb!r} (dim {d}); "
                f"the configured embedder is {embedder!r}{f' (dim {dim})' if dim else ''}. "
                "Open it with the same embedder, or use another database."
            )
    return rows[0][2] if rows else None
