"""Chat transcripts as JSON Lines: one conversation turn per line (``titans-agent import-chat``).

Each line is a JSON object with::

    "session_id" (or "session")   the conversation: a string, or an integer (made a string)
    "role"                        who spoke
    "content" (or "text")         what was said
    "timestamp" (optional)        an ISO 8601 string or Unix seconds (an int or a float)

:func:`parse_chat_line` turns one line into the arguments of
:meth:`~titans_agent.MemoryAgent.add_turn`; the agent checks the values themselves (blank text, a
bad ISO string) when the turn is written.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from titans_agent.errors import InvalidInputError

__all__ = ["parse_chat_line"]


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
        InvalidInputError: the line is not valid JSON, is nested too deeply, is not a JSON object,
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
