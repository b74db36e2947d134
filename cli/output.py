"""What the commands print: JSON, aligned ``key  value`` rows, recall hits, progress bars, and the
helpers that keep a line printable (no control characters) and short."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.progress import Progress

__all__ = [
    "MAX_LINES",
    "MAX_LINE_CHARS",
    "display_path",
    "echo_json",
    "echo_rows",
    "hit_body",
    "hit_header",
    "one_line",
    "printable",
    "progress_bar",
    "short",
]

MAX_LINES = 12  # lines of a hit's text shown by `recall` in text mode
MAX_LINE_CHARS = 240
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (SQLAlchemy's "Background on this error" link dropped)."""
    message = re.sub(r"\(Background on this error at: \S+\)", "", str(exc))
    return " ".join(message.split()) or type(exc).__name__


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=_json_default))


def echo_rows(rows: Sequence[tuple[str, Any]]) -> None:
    """Print ``key  value`` lines with the values aligned."""
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key:<{width}}  {value}")


def printable(text: str) -> str:
    """``text`` with control characters (other than tab and newline) shown as U+FFFD."""
    return _CONTROL.sub("\ufffd", text)


def display_path(path: str) -> str:
    """``path`` relative to the current directory when it lies below it, else unchanged."""
    p = Path(path)
    if not p.is_absolute():
        return path
    try:
        bases = {Path.cwd(), Path.cwd().resolve()}
    except OSError:
        return path
    for base in bases:
        with contextlib.suppress(ValueError):
            return str(p.relative_to(base))
    return path


def short(text: str, width: int = 60) -> str:
    """``text`` cut from the left to ``width`` characters (the end of a path is what tells)."""
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def progress_bar(quiet: bool, *columns: Any) -> Progress:
    """A rich progress display on stderr; disabled with --quiet or when stderr is not a terminal."""
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    return Progress(*columns, console=console, disable=quiet or not console.is_terminal)


def hit_header(rank: int, hit: Any) -> str:
    """``rank.  score  where  kind #id  [superseded by #n [in part: clause]]`` of one recalled hit."""
    if hit.kind == "turn":
        when = f", {hit.timestamp:%Y-%m-%d %H:%M} UTC" if hit.timestamp else ""
        where = f"{hit.source or 'session:' + str(hit.session_id)} ({hit.role}{when})"
    elif hit.source:
        where = display_path(hit.source)
        if hit.start_line is not None:
            where += f":{hit.start_line}-{hit.end_line}"
        citation = hit.metadata.get("citation") if isinstance(hit.metadata, dict) else None
        if isinstance(citation, str) and citation:
            where += f" ({citation})"
    else:
        where = ""
    parts = [f"{rank}.", f"{hit.score:.4f}", printable(where), f"{hit.kind} #{hit.id}"]
    if hit.superseded_by:
        by = ", ".join(f"#{i}" for i in hit.superseded_by)
        stale = getattr(hit, "stale_clauses", None)
        parts.append(f"superseded by {by} in part: " + printable("; ".join(stale)) if stale else f"superseded by {by}")
    return "  ".join(p for p in parts if p)


def hit_body(text: str) -> list[str]:
    """A hit's text indented, cut to :data:`MAX_LINES` lines of :data:`MAX_LINE_CHARS` characters."""
    lines = [line.rstrip() for line in text.strip("\n").splitlines()] or [""]
    out = []
    for line in lines[:MAX_LINES]:
        if len(line) > MAX_LINE_CHARS:
            line = line[: MAX_LINE_CHARS - 1] + "…"
        out.append("    " + printable(line))
    if len(lines) > MAX_LINES:
        out.append(f"    … ({len(lines) - MAX_LINES} more lines; --json shows all)")
    return out
