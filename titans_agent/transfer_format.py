"""The export file's lines, as models both ways, and the strict reader import uses.

Each line type of :mod:`titans_agent.transfer`'s format is a pydantic model here: export writes its
fields, import validates a line against it. The models hold what a write would accept, so that a
line that validates can be stored on either database and read back, filtered and exported:

- integers within the columns' range (PostgreSQL's ``INTEGER``: 32 bits), counts non-negative;
  counts and positions (turn sequence numbers, chunk indexes, a session's or document's counts,
  hits, steps, refs) at most :data:`MAX_COUNT`, so that what the code adds to them (the next turn,
  the neighbour turn or chunk, a repeat's hit) stays within 32 bits;
- floats finite (no NaN or Infinity, neither as JSON constants nor as strings like ``"nan"``);
- times that exist in UTC (stored as naive UTC);
- texts as :func:`~titans_agent.validation.check_text` leaves them (not blank), names (sources,
  session ids, roles) as :func:`~titans_agent.validation.check_name` accepts them (roles at most
  :data:`~titans_agent.validation.MAX_ROLE_CHARS` characters), namespace names as
  :func:`~titans_agent.validation.check_namespace` does;
- metadata as :func:`~titans_agent.validation.check_metadata` accepts it (JSON, nested at most
  :data:`~titans_agent.validation.MAX_METADATA_DEPTH` levels), and the memory and chunking
  configurations JSON-safe the same way; the chunking as ingest records it (:class:`Chunking`:
  exactly its three keys, of their types).

:func:`read_lines` reads the file as UTF-8, line by line, parsing JSON with NaN, Infinity and
overflowing floats refused, then looks through the whole line (every string, key and number, at any
depth) for what neither database stores: a NUL, a lone surrogate, an integer beyond 64 bits. Every
error is an :class:`~titans_agent.errors.InvalidInputError` naming the file, the line, its type and
the field.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Generator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from titans_agent.errors import InvalidInputError
from titans_agent.types import Location
from titans_agent.validation import MAX_ROLE_CHARS, as_utc, check_metadata, check_name, check_namespace, check_text

__all__ = [
    "COUNTERS",
    "EXPORT_FORMAT",
    "MAX_COUNT",
    "EXPORT_VERSION",
    "MODELS",
    "TYPES",
    "Chunking",
    "DocumentLine",
    "EndLine",
    "HeaderLine",
    "Line",
    "NamespaceLine",
    "OccurrenceLine",
    "RecordLine",
    "SessionLine",
    "SupersessionLine",
    "TransferReport",
    "TurnLine",
    "read_lines",
]

EXPORT_FORMAT = "titans-agent-export"
EXPORT_VERSION = 3
"""The export format version written; import reads 1 (without ``chunking`` and ``location``), 2
(without ``write_revision`` and ``embedding``) and 3."""

_INT32 = 2**31 - 1  # PostgreSQL's INTEGER, the type of every integer column
MAX_COUNT = 10**9
"""The largest count or position a file may hold (a turn's ``seq``, a session's ``n_turns``, a
chunk's ``chunk_index``, a document's ``n_chunks``, ``hits``, ``step``, refs): far below 32 bits, so
that the next turn (``n_turns + 1``), the neighbour turns and chunks (``seq + 1``, ``chunk_index +
1``) and later writes stay within PostgreSQL's ``INTEGER``."""
_INT64 = 2**63  # SQLite's integers (and JSON numbers a filter compares) are below this in magnitude
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # a NUL, or a lone surrogate (a str holds no pairs)


class TransferReport(BaseModel):
    """What an export or import moved: counts over every namespace in the file."""

    namespaces: list[str] = Field(default_factory=list)
    records: int = 0
    occurrences: int = 0
    supersessions: int = 0
    documents: int = 0
    sessions: int = 0
    turns: int = 0


# ---------------------------------------------------------------------- field types
def _text(value: str) -> str:
    if check_text(value, "text") != value:  # check_text only removes NULs and lone surrogates
        raise ValueError("text holds a NUL or a lone surrogate")
    return value


def _utc(value: dt.datetime) -> dt.datetime:
    return as_utc(value)


def _json(value: dict[str, Any]) -> dict[str, Any]:
    return check_metadata(value)


Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Seq = Annotated[int, Field(ge=1, le=MAX_COUNT)]  # a turn's: add_turn numbers a session's turns 1, 2, ...
Positive = Annotated[int, Field(ge=1, le=_INT32)]
Int = Annotated[int, Field(ge=-_INT32 - 1, le=_INT32)]
Finite = Annotated[float, Field(allow_inf_nan=False)]
Time = Annotated[dt.datetime, AfterValidator(_utc)]
Text = Annotated[str, AfterValidator(_text)]
Name = Annotated[str, AfterValidator(lambda v: check_name(v, "name"))]
Role = Annotated[str, AfterValidator(lambda v: check_name(v, "role", max_chars=MAX_ROLE_CHARS))]
Json = Annotated[dict[str, Any], AfterValidator(_json)]


# ---------------------------------------------------------------------- line models
class Line(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


class HeaderLine(Line):
    type: Literal["header"]
    format: Literal["titans-agent-export"]
    version: Positive
    embedder: str
    dim: Positive


class Chunking(BaseModel):
    """A namespace's chunking, as :func:`titans_agent.ingest.pipeline.chunking_config` records it
    (ingest compares it whole with its own: any other key or type would refuse every later ingest)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    chunk_tokens: int = Field(ge=8, le=MAX_COUNT)  # the Chunker's least (MIN_MAX_TOKENS)
    chunk_overlap_tokens: int = Field(ge=0, le=MAX_COUNT)
    embedder: str

    @model_validator(mode="after")
    def _overlap_below_size(self) -> Chunking:
        if self.chunk_overlap_tokens >= self.chunk_tokens:
            raise ValueError("chunk_overlap_tokens must be smaller than chunk_tokens")
        return self


class NamespaceLine(Line):
    type: Literal["namespace"]
    name: Annotated[str, AfterValidator(check_namespace)]
    memory_config: Json
    params: str
    state: str
    step: Count
    created_at: Time
    updated_at: Time
    chunking: Chunking | None = None  # version 2 on


class DocumentLine(Line):
    type: Literal["document"]
    source: Name
    sha256: str = Field(max_length=64)
    n_chunks: Count
    chunks_done: Count
    complete: bool
    created_at: Time
    updated_at: Time


class RecordLine(Line):
    type: Literal["record"]
    ref: Count
    text: Text
    context: str
    text_hash: str = Field(max_length=64)
    embedding: str
    surprise: Finite | None
    decision: Literal["new", "known"]
    hits: Count
    created_at: Time
    last_seen_at: Time


class OccurrenceLine(Line):
    type: Literal["occurrence"]
    record: Count
    document: str | None
    kind: Literal["chunk", "note", "turn"]
    source: Name | None
    chunk_index: Count | None
    start_line: Int | None
    end_line: Int | None
    metadata: Json
    session_id: Name | None
    role: Role | None
    timestamp: Time | None
    created_at: Time
    location: Location | None = None  # version 2 on; Location.to_dict() form
    write_revision: Count | None = None  # version 3 on
    embedding: str | None = None  # version 3 on; base64 float32, only where it differs from the record's


class SupersessionLine(Line):
    type: Literal["supersession"]
    old: Count
    new: Count
    similarity: Finite
    effective_at: Time
    created_at: Time


class SessionLine(Line):
    type: Literal["session"]
    session_id: Name
    n_turns: Count
    created_at: Time
    updated_at: Time


class TurnLine(Line):
    type: Literal["turn"]
    session_id: Name
    seq: Seq
    role: Role
    content: Text
    timestamp: Time
    occurrence: Count | None = None


class EndLine(Line):
    type: Literal["end"]
    lines: Positive


MODELS: dict[str, type[Line]] = {
    "end": EndLine,
    "header": HeaderLine,
    "namespace": NamespaceLine,
    "document": DocumentLine,
    "record": RecordLine,
    "occurrence": OccurrenceLine,
    "supersession": SupersessionLine,
    "session": SessionLine,
    "turn": TurnLine,
}
TYPES = {model: kind for kind, model in MODELS.items()}
COUNTERS = {
    "occurrence": "occurrences",
    "supersession": "supersessions",
    "document": "documents",
    "session": "sessions",
    "turn": "turns",
}
"""Line type -> the :class:`TransferReport` count it adds to (records are counted apart)."""


# ---------------------------------------------------------------------- reading
class _NonFinite:
    """What the parser gives for ``NaN``, ``Infinity`` or a float that overflows (``1e999``), so
    that :func:`_unstorable` can name the field holding it."""

    def __init__(self, token: str) -> None:
        self.token = token


class _Parser:
    """``json.loads`` hooks that note (for one line) a value no database stores: a non-finite
    number (kept as a :class:`_NonFinite`) or an integer beyond 64 bits. Lines without one, and
    without an escape that makes a NUL or a surrogate (:data:`_UNSTORABLE_ESCAPE`), need no walk."""

    def __init__(self) -> None:
        self.suspect = False

    def on_constant(self, token: str) -> _NonFinite:
        self.suspect = True
        return _NonFinite(token)

    def on_float(self, token: str) -> float | _NonFinite:
        value = float(token)
        if math.isfinite(value):
            return value
        self.suspect = True
        return _NonFinite(token)

    def on_int(self, token: str) -> int:
        value = int(token)
        if not -_INT64 <= value < _INT64:
            self.suspect = True
        return value


_UNSTORABLE_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")  # how JSON text writes a NUL or a surrogate


def _unstorable(obj: Any) -> tuple[str, str] | None:
    """The first ``(field path, problem)`` of a parsed line that no database stores: a non-finite
    number, a NUL or lone surrogate in a string or a key, an integer beyond 64 bits (iterative: no
    recursion limit)."""
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            for key, child in value.items():
                path = f"{where}.{key}" if where else key
                if _UNSTORABLE.search(key):
                    return where or "(top level)", f"the key {key!r} holds a NUL or a lone surrogate"
                stack.append((path, child))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", child) for i, child in enumerate(value))
        elif isinstance(value, _NonFinite):
            return where, f"{value.token} is not a finite number (JSON has no NaN or Infinity)"
        elif isinstance(value, str):
            if _UNSTORABLE.search(value):
                return where, "the string holds a NUL or a lone surrogate, which the databases cannot store"
        elif isinstance(value, int) and not isinstance(value, bool) and not -_INT64 <= value < _INT64:
            return where, f"the integer {value} is beyond 64 bits"
    return None


def _parse(raw: bytes, where: str) -> tuple[str, dict[str, Any]]:
    """One line's type and object, every value storable."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{where}: not UTF-8 text at byte {exc.start} of the line (the file is damaged, cut short, "
            "or no titans-agent export)"
        ) from None
    hooks = _Parser()
    try:
        obj = json.loads(text, parse_constant=hooks.on_constant, parse_float=hooks.on_float, parse_int=hooks.on_int)
    except RecursionError:
        raise InvalidInputError(f"{where}: the JSON nests too deeply to read") from None
    except ValueError as exc:
        raise InvalidInputError(f"{where}: not JSON: {exc}") from None
    kind = obj.get("type") if isinstance(obj, dict) else None
    if not isinstance(kind, str) or kind not in MODELS:
        raise InvalidInputError(f"{where}: unknown line type {kind if isinstance(kind, str) else None!r:.80}")
    problem = _unstorable(obj) if hooks.suspect or _UNSTORABLE_ESCAPE.search(text) else None
    if problem is not None:
        raise InvalidInputError(f"{where}: {kind} line: {problem[0]}: {problem[1]}")
    return kind, obj


def read_lines(path: Path) -> Generator[tuple[int, Line], None, None]:
    """The lines of an export file, each ``(line number, validated model)``; blank lines skipped.

    Raises:
        InvalidInputError: a line is not UTF-8, not JSON (or nests too deeply), of an unknown type,
            holds a value no database stores (see the module docstring), or does not validate
            against its model; the message names the file, the line, its type and the field.
        OSError: the file cannot be read.
    """
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            where = f"{path}:{lineno}"
            kind, obj = _parse(raw, where)
            try:
                yield lineno, MODELS[kind].model_validate(obj)
            except ValidationError as exc:
                first = exc.errors()[0]
                field = ".".join(str(p) for p in first["loc"])
                raise InvalidInputError(f"{where}: {kind} line: {field}: {first['msg']}") from None
