"""Chat transcripts as JSON Lines: one conversation turn per line (``titans-agent import-chat``).

Each line is a JSON object with::

    "session_id" (or "session")   the conversation: a string, or an integer (made a string)
    "role"                        who spoke
    "content" (or "text")         what was said
    "timestamp" (optional)        an ISO 8601 string or Unix seconds (an int or a float)

:func:`read_chat` reads a whole file: every turn that :meth:`~titans_agent.MemoryAgent.add_turns`
would accept, ready for it, and every other line with its number and the reason it is skipped
(blank lines are ignored). :func:`parse_chat_line` turns one line into the arguments of
:meth:`~titans_agent.MemoryAgent.add_turn`, without checking the values themselves.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass, field
from typing import IO, Any, NamedTuple

from titans_agent.config import AgentConfig
from titans_agent.errors import InvalidInputError
from titans_agent.validation import check_turns

__all__ = ["ChatLog", "ChatTurn", "SkippedLine", "parse_chat_line", "read_chat"]

_MAX_TEXT_CHARS: int = AgentConfig.model_fields["max_text_chars"].default


def _field(obj: dict[str, Any], *names: str) -> Any:
    """The value of the first of ``names`` present and not null in ``obj``."""
    for name in names:
        if obj.get(name) is not None:
            return obj[name]
    raise InvalidInputError(f"missing {' or '.join(repr(n) for n in names)}")


def parse_chat_line(line: str) -> tuple[str, str, str, str | dt.datetime | None]:
    """``(session_id, role, content, timestamp)`` of one JSON Lines chat turn.

    An integer session id becomes its decimal string; a numeric timestamp (Unix seconds) becomes an
    aware UTC datetime; a string timestamp is returned as given (``add_turn`` parses it); a missing
    or null one is ``None`` (``add_turn`` then uses the current time).

    Args:
        line: one line of the file, without its line ending.

    Returns:
        The turn, ready for ``agent.add_turn(*turn)`` or ``agent.add_turns([turn, ...])``.

    Raises:
        InvalidInputError: the line is not valid JSON, is nested too deeply, holds an integer too long
            to convert, is not a JSON object,
            lacks a field (``missing 'session_id' or 'session'``, ``missing 'role'``, ``missing
            'content' or 'text'``), has a field that is not a string, has a timestamp that is
            neither a string nor a number, or a numeric timestamp out of range.
    """
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise InvalidInputError("JSON nested too deeply") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300 by default)
        raise InvalidInputError(f"not readable JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise InvalidInputError(f"expected a JSON object, got {type(obj).__name__}")
    session = _field(obj, "session_id", "session")
    if isinstance(session, int) and not isinstance(session, bool):
        session = str(session)
    role = _field(obj, "role")
    content = _field(obj, "content", "text")
    for name, value in (("session_id", session), ("role", role), ("content", content)):
        if not isinstance(value, str):
            raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    ts = obj.get("timestamp")
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        try:
            ts = dt.datetime.fromtimestamp(ts, tz=dt.timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise InvalidInputError(f"timestamp {ts!r} is out of range") from None
    elif ts is not None and not isinstance(ts, str):
        raise InvalidInputError(f"timestamp must be an ISO 8601 string, got {type(ts).__name__}")
    return session, role, content, ts


class ChatTurn(NamedTuple):
    """One turn of a chat file, a tuple that :meth:`~titans_agent.MemoryAgent.add_turns` takes."""

    session_id: str
    role: str
    content: str
    timestamp: str | dt.datetime | None


class SkippedLine(NamedTuple):
    """A line of a chat file that is not imported: its number (from 1) and why."""

    line: int
    reason: str


@dataclass(frozen=True)
class ChatLog:
    """A chat file as read by :func:`read_chat`.

    Attributes:
        turns: the turns to write, in file order; ``agent.add_turns(log.turns)`` writes them.
        lines: the line number of each turn (``lines[i]`` is where ``turns[i]`` came from).
        skipped: the lines that are not turns, in order, each with the reason.
    """

    turns: list[ChatTurn] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    skipped: list[SkippedLine] = field(default_factory=list)


def read_chat(
    file: str | os.PathLike[str] | bytes | IO[bytes], *, max_text_chars: int | None = _MAX_TEXT_CHARS
) -> ChatLog:
    """Read a JSON Lines chat file: its turns, checked as :meth:`~titans_agent.MemoryAgent.add_turns`
    checks them, and the lines skipped with their reasons. Reads only; nothing is written.

    A UTF-8 byte-order mark and ``\\r\\n`` line endings are accepted; blank lines are ignored. A line is
    skipped (never the whole file) when it is not UTF-8 or not a turn (:func:`parse_chat_line`), or
    when ``add_turns`` would refuse it: a blank session id or role, a content with nothing visible
    (whitespace, control or format characters only, such as a zero-width space), a bad ISO 8601
    time, or a content over ``max_text_chars``.

    Args:
        file: a path, the file's bytes, or a binary file object (e.g. ``sys.stdin.buffer``).
        max_text_chars: the longest content accepted: the agent's ``config.max_text_chars`` (default
            :class:`~titans_agent.AgentConfig`'s); None accepts any length.

    Returns:
        A :class:`ChatLog`: ``turns`` for ``agent.add_turns``, their ``lines``, and ``skipped``.

    Raises:
        OSError: the file cannot be read (e.g. ``FileNotFoundError``).
        InvalidInputError: ``file`` is a ``str`` of JSON rather than a path, or of another type.
    """
    if isinstance(file, bytes):
        data = file
    elif isinstance(file, (str, os.PathLike)):
        with open(file, "rb") as f:
            data = f.read()
    elif hasattr(file, "read"):
        data = file.read()
        if not isinstance(data, bytes):
            raise InvalidInputError("read_chat needs a binary file object (opened with 'rb')")
    else:
        raise InvalidInputError(f"read_chat takes a path, bytes or a binary file, got {type(file).__name__}")
    log = ChatLog()
    for n, raw in enumerate(data.removeprefix(b"\xef\xbb\xbf").split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            turn = ChatTurn(*parse_chat_line(raw.decode("utf-8").rstrip("\r")))
            check_turns([turn], max_text_chars)  # what add_turns refuses is skipped here, one line at a time
        except UnicodeDecodeError:
            log.skipped.append(SkippedLine(n, "not UTF-8"))
        except InvalidInputError as exc:
            reason = " ".join(str(exc).split()).removeprefix("turn 0: ")
            log.skipped.append(SkippedLine(n, reason))
        else:
            log.turns.append(turn)
            log.lines.append(n)
    return log
