"""The ``titans-agent`` command line: a click group over one :class:`~titans_agent.MemoryAgent`.

Each command opens the agent itself through :func:`open_agent` (so ``--help`` never loads a model)
and closes it when done. User errors (:class:`~titans_agent.errors.TitansAgentError`,
``ValueError``, ``OSError``, database errors) become one ``Error: <message>`` line on stderr and
exit status 1; see :class:`_Group`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from titans_agent.cli.train import train

from titans_agent.errors import EmptyInputError, InvalidInputError, TitansAgentError

if TYPE_CHECKING:
    from rich.progress import Progress

    from titans_agent.agent import IngestProgress, MemoryAgent

__all__ = ["DEFAULT_DB", "cli", "main", "open_agent"]

APP_NAME = "titans-agent"
DEFAULT_DB = Path(click.get_app_dir(APP_NAME)) / "memory.db"
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"  # the same as titans_agent.config.DEFAULT_EMBEDDER
KINDS = ("chunk", "note", "turn")
MAX_LINES = 12  # lines of a hit's text shown by `recall` in text mode
MAX_LINE_CHARS = 240
IMPORT_BLOCK = 256  # turns per batched write in import-chat
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def open_agent(db: str, namespace: str, embedder: str, device: str) -> MemoryAgent:
    """Open the agent every command works on (tests replace this function).

    Args:
        db: SQLite file path (created with its folders) or SQLAlchemy URL.
        namespace: the namespace the command will use (the agent serves every namespace; it is
            passed so a replacement can see it).
        embedder: sentence-transformers model name or local path.
        device: "auto", "cpu", "cuda" or "cuda:N".

    Raises:
        StoreError, EmbedderMismatchError, EmbedderLoadError: see :meth:`MemoryAgent.open`.
    """
    from titans_agent.agent import MemoryAgent
    from titans_agent.config import AgentConfig

    return MemoryAgent.open(db, AgentConfig(embedder=embedder, device=device))


# ---------------------------------------------------------------------- errors and output
def _user_errors() -> tuple[type[BaseException], ...]:
    errors: tuple[type[BaseException], ...] = (TitansAgentError, ValueError, OSError)
    try:
        from sqlalchemy.exc import SQLAlchemyError
    except ImportError:  # pragma: no cover - a hard dependency
        return errors
    return (*errors, SQLAlchemyError)


def _one_line(exc: BaseException) -> str:
    message = re.sub(r"\(Background on this error at: \S+\)", "", str(exc))
    return " ".join(message.split()) or type(exc).__name__


class _Group(click.Group):
    """A click group that turns user errors raised by any command into one ``Error:`` line and
    exit status 1 (click's own usage errors keep status 2), never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException:
            raise
        except _user_errors() as exc:
            if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
                raise  # click.BaseCommand.main handles a closed pipe quietly
            raise click.ClickException(_one_line(exc)) from None


def _utf8_streams() -> None:
    """Make stdin, stdout and stderr UTF-8 whatever the locale (unencodable text is replaced)."""
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(encoding="utf-8", errors="replace")


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=_json_default))


def _echo_rows(rows: Sequence[tuple[str, Any]]) -> None:
    """Print ``key  value`` lines with the values aligned."""
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key:<{width}}  {value}")


def _printable(text: str) -> str:
    return _CONTROL.sub("\ufffd", text)


def _display_path(path: str) -> str:
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


def _read_text(text: str, what: str) -> str:
    """The argument itself, or standard input when it is ``-``.

    Raises:
        EmptyInputError: the text is blank (checked here so no model is loaded for nothing).
    """
    if text == "-":
        text = sys.stdin.read()
    if not text.strip():
        raise EmptyInputError(f"{what} is empty or only whitespace")
    return text


def _parse_meta(_ctx: click.Context, _param: click.Parameter, values: Sequence[str]) -> dict[str, str]:
    meta: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE")
        meta[key.strip()] = value
    return meta


def _name_arg(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Check a session id, role or source given on the command line (see ``check_name``): on POSIX
    an argument that is not valid UTF-8 arrives with lone surrogates, which cannot be stored."""
    if value is None:
        return None
    from titans_agent.validation import check_name

    try:
        return check_name(value, param.human_readable_name)
    except InvalidInputError as exc:
        raise click.BadParameter(str(exc)) from None


def _progress(quiet: bool, *columns: Any) -> Progress:
    """A rich progress display on stderr; disabled with --quiet or when stderr is not a terminal."""
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    return Progress(*columns, console=console, disable=quiet or not console.is_terminal)


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1) :]


# ---------------------------------------------------------------------- the group
@dataclass
class _Settings:
    db: str
    namespace: str
    embedder: str
    device: str

    @contextlib.contextmanager
    def agent(self, *, must_exist: bool = False) -> Iterator[MemoryAgent]:
        """Open the agent; ``must_exist`` (for commands that only read or delete) refuses to create
        a new database file."""
        if must_exist and not _database_exists(self.db):
            raise click.ClickException(
                f"no memory database at {_hide_password(self.db)}; "
                "write to it first (ingest, remember, add-turn or import-chat)"
            )
        agent = open_agent(self.db, self.namespace, self.embedder, self.device)
        try:
            yield agent
        finally:
            agent.close()


def _hide_password(db: str) -> str:
    if "://" not in db:
        return db
    from sqlalchemy.engine import make_url

    try:
        return make_url(db).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a malformed URL is reported when it is opened
        return db


def _database_exists(db: str) -> bool:
    """Whether ``db`` (a path or a SQLAlchemy URL) already holds a titans-agent database, checked
    without creating anything: a file must exist; a server database must have the ``meta`` table."""
    if "://" not in db:
        return Path(db).expanduser().exists()
    from sqlalchemy import create_engine, inspect
    from sqlalchemy.engine import make_url

    url = make_url(db)
    if url.get_backend_name() == "sqlite":
        return bool(url.database) and url.database != ":memory:" and Path(url.database).expanduser().exists()
    engine = create_engine(url)
    try:
        return inspect(engine).has_table("meta")
    finally:
        engine.dispose()


_GROUP_HELP = f"""Long-term memory for AI applications: a Titans neural memory kept in SQLite.

Every write (an ingested chunk, a note, a conversation turn) passes the memory's
surprise gate; recall ranks records by keywords, embeddings and the memory's
read-out. Nothing is downloaded: the default embedder ships with the package.

\b
The database is, in order:
  --db PATH
  the environment variable TITANS_AGENT_DB
  the default {DEFAULT_DB}

Namespaces (--namespace, or TITANS_AGENT_NAMESPACE) share nothing: each has its
own memory, records and sessions. A database keeps the embedder it was written
with; open it with the same --embedder.

Examples:

\b
    titans-agent ingest docs/ src/ --include '*.md' --include '*.py'
    titans-agent recall "how do I rotate the API keys?" -k 3
    titans-agent remember "The staging server listens on port 8443."
    titans-agent --db team.db -n alice stats --json
"""


@click.group(cls=_Group, help=_GROUP_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    envvar="TITANS_AGENT_DB",
    show_envvar=True,
    default=str(DEFAULT_DB),
    show_default=True,
    metavar="PATH",
    help="SQLite database file (created with its folders), or a SQLAlchemy URL.",
)
@click.option(
    "-n",
    "--namespace",
    envvar="TITANS_AGENT_NAMESPACE",
    show_envvar=True,
    default="default",
    show_default=True,
    help="Namespace to read and write.",
)
@click.option(
    "--embedder",
    envvar="TITANS_AGENT_EMBEDDER",
    show_envvar=True,
    default=DEFAULT_EMBEDDER,
    show_default=True,
    metavar="MODEL",
    help="sentence-transformers model name (in the local cache) or local path.",
)
@click.option(
    "--device",
    envvar="TITANS_AGENT_DEVICE",
    show_envvar=True,
    default="auto",
    show_default=True,
    metavar="DEVICE",
    help="auto (CUDA when available), cpu, cuda or cuda:N.",
)
@click.version_option(package_name="titans-agent", prog_name=APP_NAME)
@click.pass_context
def cli(ctx: click.Context, db: str, namespace: str, embedder: str, device: str) -> None:
    ctx.obj = _Settings(db=db, namespace=namespace, embedder=embedder, device=device)


pass_settings = click.make_pass_decorator(_Settings)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress bar.")


# ---------------------------------------------------------------------- ingest
@cli.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--include", multiple=True, metavar="GLOB", help="Only files matching GLOB (repeatable).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Leave out files matching GLOB (repeatable).")
@json_option
@quiet_option
@pass_settings
def ingest(
    settings: _Settings,
    paths: tuple[str, ...],
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    as_json: bool,
    quiet: bool,
) -> None:
    """Ingest files and folders (recursively) into memory.

    Each file is split into chunks that fit the embedder (code at functions and
    classes, prose at paragraphs), and each chunk is written through the surprise
    gate. A file already ingested with the same content is skipped ("unchanged");
    a changed file replaces its old chunks. Unreadable, binary, empty or too large
    files are listed as skipped with the reason; the exit status is still 0.

    Examples:

    \b
        titans-agent ingest README.md docs/
        titans-agent ingest src/ --include '*.py' --exclude 'tests/*'
        titans-agent -n project-x ingest notes/ --json
    """
    from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

    progress = _progress(
        quiet,
        SpinnerColumn(),
        TextColumn("{task.fields[files]} files"),
        TextColumn("{task.fields[chunks]} chunks ({task.fields[stored]} stored)"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[current]}", markup=False),
    )
    missing = [p for p in paths if not os.path.lexists(p)]
    if missing:
        raise click.ClickException("no such file or folder: " + ", ".join(missing))
    with settings.agent() as agent, progress:
        task = progress.add_task("ingest", total=None, files=0, chunks=0, stored=0, rate="", current="")
        t0 = time.perf_counter()

        def on_progress(p: IngestProgress) -> None:
            elapsed = time.perf_counter() - t0
            rate = f"{p.chunks / elapsed:.1f} chunks/s" if elapsed > 0 else ""
            progress.update(
                task,
                files=p.files,
                chunks=p.chunks,
                stored=p.stored,
                rate=rate,
                current=_short(_display_path(p.current)),
            )

        report = agent.ingest(
            list(paths),
            namespace=settings.namespace,
            include=list(include) or None,
            exclude=list(exclude) or None,
            progress=on_progress,
        )
    if as_json:
        _echo_json(report.model_dump(mode="json"))
        return
    _echo_rows(
        [
            ("files", report.files),
            ("unchanged", report.unchanged),
            ("chunks", report.chunks),
            ("stored", f"{report.stored} ({report.known} known)"),
            ("merged", report.merged),
            ("repeats", report.repeats),
            ("skipped", len(report.skipped)),
            ("warnings", len(report.warnings)),
            ("seconds", f"{report.seconds:.1f}"),
        ]
    )
    if report.skipped:
        click.echo("\nSkipped:")
        for s in report.skipped:
            click.echo(f"  {_printable(_display_path(s.path))}: {s.reason}")
    if report.warnings:
        click.echo("\nWarnings:")
        for w in report.warnings:
            click.echo(f"  {_printable(w)}")


# ---------------------------------------------------------------------- recall
def _hit_header(rank: int, hit: Any) -> str:
    if hit.kind == "turn":
        when = f", {hit.timestamp:%Y-%m-%d %H:%M} UTC" if hit.timestamp else ""
        where = f"{hit.source or 'session:' + str(hit.session_id)} ({hit.role}{when})"
    elif hit.source:
        where = _display_path(hit.source)
        if hit.start_line is not None:
            where += f":{hit.start_line}-{hit.end_line}"
        citation = hit.metadata.get("citation") if isinstance(hit.metadata, dict) else None
        if isinstance(citation, str) and citation:
            where += f" ({citation})"
    else:
        where = ""
    parts = [f"{rank}.", f"{hit.score:.4f}", _printable(where), f"{hit.kind} #{hit.id}"]
    if hit.superseded_by:
        parts.append("superseded by " + ", ".join(f"#{i}" for i in hit.superseded_by))
    return "  ".join(p for p in parts if p)


def _hit_body(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.strip("\n").splitlines()] or [""]
    out = []
    for line in lines[:MAX_LINES]:
        if len(line) > MAX_LINE_CHARS:
            line = line[: MAX_LINE_CHARS - 1] + "…"
        out.append("    " + _printable(line))
    if len(lines) > MAX_LINES:
        out.append(f"    … ({len(lines) - MAX_LINES} more lines; --json shows all)")
    return out


def _source_key(source: str) -> str:
    """Ingested files are stored under their real absolute path: map an existing file, given as
    the user typed it, to that; anything else (a named text, a deleted file) stays as given."""
    p = Path(source).expanduser()
    return os.path.realpath(p) if p.exists() else source


@cli.command()
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(min=1), default=5, show_default=True, help="Number of hits.")
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(KINDS),
    help="Only records of this kind (repeatable).",
)
@click.option("--source", metavar="SOURCE", callback=_name_arg, help="Only chunks of this file or named text.")
@click.option("--session", metavar="SESSION", callback=_name_arg, help="Only turns of this conversation.")
@click.option("--as-of", "as_of", metavar="TIME", help="Recall what was known at this time (ISO 8601; naive = UTC).")
@click.option("--since", metavar="TIME", help="Only records with an occurrence at or after this time (ISO 8601).")
@click.option("--until", metavar="TIME", help="Only records with an occurrence at or before this time (ISO 8601).")
@click.option("--drop-superseded", is_flag=True, help="Leave out records a newer statement updated.")
@json_option
@pass_settings
def recall(
    settings: _Settings,
    query: str,
    k: int,
    kinds: tuple[str, ...],
    source: str | None,
    session: str | None,
    as_of: str | None,
    since: str | None,
    until: str | None,
    drop_superseded: bool,
    as_json: bool,
) -> None:
    """Print the memories that best answer QUERY, best first.

    QUERY "-" reads standard input. Each hit shows its rank, fused score,
    where it came from (file:lines, session, or note) and its text, cut to 12
    lines; --json prints every field and the full text.

    Examples:

    \b
        titans-agent recall "how are API keys rotated?"
        titans-agent recall "deployment" -k 10 --kind chunk --source docs/deploy.md
        titans-agent recall "what did the user ask for?" --session s1 --json
        titans-agent recall "where does Ana live?" --as-of 2024-03-01 --drop-superseded
    """
    query = _read_text(query, "query")
    with settings.agent(must_exist=True) as agent:
        hits = agent.recall(
            query,
            k,
            namespace=settings.namespace,
            kinds=list(kinds) or None,
            source=_source_key(source) if source is not None else None,
            session_id=session,
            as_of=as_of,
            since=since,
            until=until,
            include_superseded=not drop_superseded,
        )
    if as_json:
        _echo_json([h.model_dump(mode="json") for h in hits])
        return
    if not hits:
        click.echo(f"No memories match in namespace {settings.namespace!r}.", err=True)
        return
    for rank, hit in enumerate(hits, start=1):
        if rank > 1:
            click.echo()
        click.echo(_hit_header(rank, hit))
        click.echo("\n".join(_hit_body(hit.text)))


# ---------------------------------------------------------------------- remember, add-turn
def _echo_write(result: Any, as_json: bool) -> None:
    if as_json:
        _echo_json(result.model_dump(mode="json"))
        return
    rows: list[tuple[str, Any]] = [
        ("decision", result.decision),
        ("surprise", f"{result.surprise:.4f}"),
        ("record", result.record_id),
    ]
    if result.turn_seq is not None:
        rows.append(("turn", result.turn_seq))
    _echo_rows(rows)


@cli.command()
@click.argument("text")
@click.option(
    "--meta",
    "metadata",
    multiple=True,
    metavar="KEY=VALUE",
    callback=_parse_meta,
    help="Metadata kept with the note (repeatable).",
)
@json_option
@pass_settings
def remember(settings: _Settings, text: str, metadata: dict[str, str], as_json: bool) -> None:
    """Write one note to memory.

    TEXT "-" reads the note from standard input. Prints the surprise gate's
    decision (new, known, merged or repeat), the surprise, and the id of the
    record that holds the note.

    Examples:

    \b
        titans-agent remember "The staging server listens on port 8443."
        titans-agent remember "Dana prefers email" --meta source=crm --meta team=sales
        echo "Backups run at 02:00 UTC" | titans-agent remember - --json
    """
    text = _read_text(text, "text")
    with settings.agent() as agent:
        result = agent.remember(text, metadata or None, namespace=settings.namespace)
    _echo_write(result, as_json)


@cli.command("add-turn")
@click.argument("session", callback=_name_arg)
@click.argument("role", callback=_name_arg)
@click.argument("text")
@click.option("--timestamp", metavar="ISO", help="When it was said (ISO 8601, naive = UTC); default now.")
@json_option
@pass_settings
def add_turn(settings: _Settings, session: str, role: str, text: str, timestamp: str | None, as_json: bool) -> None:
    """Append a turn to conversation SESSION and write it to memory.

    ROLE is who spoke (user, assistant, a name). TEXT "-" reads standard input.
    Prints the decision, surprise, record id and the turn's position.

    Examples:

    \b
        titans-agent add-turn s1 user "Please call me Dana."
        titans-agent add-turn s1 assistant "Noted, Dana." --timestamp 2024-05-01T10:00:00Z
        titans-agent turns s1
    """
    text = _read_text(text, "text")
    with settings.agent() as agent:
        result = agent.add_turn(session, role, text, timestamp, namespace=settings.namespace)
    _echo_write(result, as_json)


# ---------------------------------------------------------------------- import-chat
def _chat_field(obj: dict[str, Any], *names: str) -> Any:
    for name in names:
        if obj.get(name) is not None:
            return obj[name]
    raise ValueError(f"missing {' or '.join(repr(n) for n in names)}")


def _parse_chat_line(line: str) -> tuple[str, str, str, str | dt.datetime | None]:
    """``(session, role, content, timestamp)`` of one JSONL line.

    Raises:
        ValueError: the line is not a JSON object with the required string fields.
    """
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    session = _chat_field(obj, "session_id", "session")
    if isinstance(session, int) and not isinstance(session, bool):
        session = str(session)
    role = _chat_field(obj, "role")
    content = _chat_field(obj, "content", "text")
    for name, value in (("session_id", session), ("role", role), ("content", content)):
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string, got {type(value).__name__}")
    ts = obj.get("timestamp")
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        try:
            ts = dt.datetime.fromtimestamp(ts, tz=dt.timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"timestamp {ts!r} is out of range") from None
    elif ts is not None and not isinstance(ts, str):
        raise ValueError(f"timestamp must be an ISO 8601 string, got {type(ts).__name__}")
    return session, role, content, ts


@cli.command("import-chat")
@click.argument("file", metavar="FILE.jsonl", type=click.Path(dir_okay=False, allow_dash=True))
@json_option
@quiet_option
@pass_settings
def import_chat(settings: _Settings, file: str, as_json: bool, quiet: bool) -> None:
    """Import conversation turns from a JSON Lines file.

    FILE.jsonl "-" reads standard input.

    \b
    Each line is one turn, a JSON object with:
      "session_id" (or "session")   the conversation
      "role"                        who spoke
      "content" (or "text")         what was said
      "timestamp" (optional)        ISO 8601 string or Unix seconds

    Blank lines are ignored. A line that is malformed (not JSON, a field missing
    or blank, a bad timestamp) is reported with its line number and skipped;
    the others are imported.

    Examples:

    \b
        titans-agent import-chat history.jsonl
        titans-agent -n support import-chat export.jsonl --json
        jq -c '.messages[]' dump.json | titans-agent import-chat -
    """
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    data = data.removeprefix(b"\xef\xbb\xbf")
    lines = [(n, raw) for n, raw in enumerate(data.split(b"\n"), start=1) if raw.strip()]
    decisions: Counter[str] = Counter()
    sessions: set[str] = set()
    skipped: list[dict[str, Any]] = []
    columns = (TextColumn("turns"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    progress = _progress(quiet, *columns)
    parsed: list[tuple[int, tuple[str, str, str, Any]]] = []
    for n, raw in lines:
        try:
            parsed.append((n, _parse_chat_line(raw.decode("utf-8").rstrip("\r"))))
        except UnicodeDecodeError:
            skipped.append({"line": n, "reason": "not UTF-8"})
        except (InvalidInputError, ValueError) as exc:
            skipped.append({"line": n, "reason": _one_line(exc)})
    with settings.agent() as agent, progress:
        task = progress.add_task("import", total=len(parsed))
        for start in range(0, len(parsed), IMPORT_BLOCK):
            block = parsed[start : start + IMPORT_BLOCK]
            try:  # one batched write per block: turns are embedded and committed together
                results = agent.add_turns([turn for _, turn in block], namespace=settings.namespace)
                done = list(zip(block, results))
            except InvalidInputError:  # find the offending line(s); write the others one by one
                done = []
                for n, turn in block:
                    try:
                        done.append(((n, turn), agent.add_turn(*turn, namespace=settings.namespace)))
                    except InvalidInputError as exc:
                        skipped.append({"line": n, "reason": _one_line(exc)})
            for (_, turn), result in done:
                decisions[result.decision] += 1
                sessions.add(turn[0])
            progress.advance(task, len(block))
    skipped.sort(key=lambda item: item["line"])
    counts = {d: decisions[d] for d in ("new", "known", "merged", "repeat")}
    if as_json:
        _echo_json(
            {
                "turns": sum(counts.values()),
                "sessions": len(sessions),
                "decisions": counts,
                "skipped": skipped,
            }
        )
        return
    _echo_rows(
        [
            ("turns", sum(counts.values())),
            ("sessions", len(sessions)),
            *counts.items(),
            ("skipped", len(skipped)),
        ]
    )
    if skipped:
        click.echo("\nSkipped lines:")
        for s in skipped:
            click.echo(f"  line {s['line']}: {_printable(s['reason'])}")


# ---------------------------------------------------------------------- turns, stats, forget
@cli.command()
@click.argument("session", callback=_name_arg)
@json_option
@pass_settings
def turns(settings: _Settings, session: str, as_json: bool) -> None:
    """Print the transcript of conversation SESSION in order.

    Examples:

    \b
        titans-agent turns s1
        titans-agent -n support turns ticket-4711 --json
    """
    with settings.agent(must_exist=True) as agent:
        rows = agent.turns(session, namespace=settings.namespace)
    if as_json:
        _echo_json(rows)
        return
    if not rows:
        click.echo(f"No turns in session {session!r} (namespace {settings.namespace!r}).", err=True)
        return
    for row in rows:
        ts = row["timestamp"]
        when = f"{ts:%Y-%m-%d %H:%M}" if isinstance(ts, dt.datetime) else str(ts or "")
        role, content = _printable(row["role"]), _printable(row["content"])
        click.echo(f"{row['seq']:>4}  {when}  {role}: {content}")


@cli.command()
@json_option
@pass_settings
def stats(settings: _Settings, as_json: bool) -> None:
    """Show a namespace's counts and memory state, and every namespace.

    Examples:

    \b
        titans-agent stats
        titans-agent --db team.db -n alice stats --json
    """
    with settings.agent(must_exist=True) as agent:
        st = agent.stats(settings.namespace)
        names = agent.namespaces()
    if as_json:
        _echo_json({**st.model_dump(mode="json"), "database": settings.db, "namespaces": names})
        return
    mean = "-" if st.mean_surprise is None else f"{st.mean_surprise:.4f}"
    _echo_rows(
        [
            ("database", settings.db),
            ("namespace", st.namespace),
            ("records", f"{st.records} ({st.chunks} chunks, {st.notes} notes, {st.turns} turns)"),
            ("documents", st.documents),
            ("sessions", st.sessions),
            ("memory step", st.memory_step),
            ("mean surprise", mean),
            ("embedder", f"{st.embedder} (dim {st.dim})"),
            ("namespaces", ", ".join(names) if names else "(none)"),
        ]
    )


@cli.command()
@click.option(
    "--source",
    metavar="SOURCE",
    callback=_name_arg,
    help="Forget a file, a named text, or a session as session:<id>.",
)
@click.option("--id", "record_id", type=int, metavar="N", help="Forget the record with this id, wherever it occurs.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@pass_settings
def forget(settings: _Settings, source: str | None, record_id: int | None, yes: bool, as_json: bool) -> None:
    """Forget everything written from a source, or one record.

    Give exactly one of --source or --id. Asks for confirmation unless --yes.
    A text that another source also holds stays for that source. Forgotten text
    is never recalled again, and its transcript lines go too (the neural memory
    keeps what it learned from it; only stored records are ranked). Prints how
    many items (chunks, notes or turns) were forgotten.

    Examples:

    \b
        titans-agent forget --source docs/old-guide.md
        titans-agent forget --source session:s1 --yes
        titans-agent forget --id 42 --yes
    """
    if (source is None) == (record_id is None):
        raise click.UsageError("give exactly one of --source or --id")
    what = f"record {record_id}" if record_id is not None else f"every record of source {source!r}"
    if not yes:
        click.confirm(f"Forget {what} in namespace {settings.namespace!r}?", abort=True, err=True)
    with settings.agent(must_exist=True) as agent:
        if record_id is not None:
            n = agent.forget(record_id=record_id, namespace=settings.namespace)
        else:
            source = str(source)
            n = agent.forget(source=_source_key(source), namespace=settings.namespace)
            real = os.path.realpath(Path(source).expanduser())
            if n == 0 and real != _source_key(source):  # a file deleted since it was ingested
                n = agent.forget(source=real, namespace=settings.namespace)
    if as_json:
        _echo_json({"deleted": n})
    else:
        click.echo(f"Forgot {n} item{'' if n == 1 else 's'} (chunks, notes or turns).")


# ---------------------------------------------------------------------- export, import
def _echo_transfer(verb: str, file: str, report: Any, as_json: bool) -> None:
    if as_json:
        _echo_json({"file": file, **report.model_dump()})
        return
    _echo_rows(
        [
            (verb, file),
            ("namespaces", ", ".join(report.namespaces) if report.namespaces else "(none)"),
            ("records", report.records),
            ("occurrences", report.occurrences),
            ("documents", report.documents),
            ("sessions", report.sessions),
            ("turns", report.turns),
        ]
    )


@cli.command("export")
@click.argument("file", metavar="FILE.jsonl", type=click.Path(dir_okay=False, writable=True))
@click.option("--only", "only", multiple=True, metavar="NAMESPACE", help="Export only this namespace (repeatable).")
@json_option
@pass_settings
def export_cmd(settings: _Settings, file: str, only: tuple[str, ...], as_json: bool) -> None:
    """Export the database (every namespace, or --only ones) to a JSON Lines file.

    The file holds the embedder's name and dimension and, per namespace, its
    memory configuration and state, records, documents, sessions and turns. It is
    deterministic: exporting again after an import gives the same bytes. The file
    is written under a temporary name and renamed when complete.

    Examples:

    \b
        titans-agent export backup.jsonl
        titans-agent --db team.db export alice.jsonl --only alice
    """
    from titans_agent.transfer import export_jsonl

    with settings.agent(must_exist=True) as agent:
        report = export_jsonl(agent, file, namespaces=list(only) if only else None)
    _echo_transfer("exported", file, report, as_json)


@cli.command("import")
@click.argument("file", metavar="FILE.jsonl", type=click.Path(exists=True, dir_okay=False, readable=True))
@json_option
@pass_settings
def import_cmd(settings: _Settings, file: str, as_json: bool) -> None:
    """Import a file written by `titans-agent export` (one transaction).

    Every line and memory blob is checked (safetensors with checksums) before
    anything is committed; on any error nothing is written. The database must use
    the same embedder as the file, and must not already hold any of its
    namespaces (import never merges).

    Examples:

    \b
        titans-agent --db restored.db import backup.jsonl
        titans-agent --db new.db --embedder all-MiniLM-L6-v2 import alice.jsonl --json
    """
    from titans_agent.transfer import import_jsonl

    new_file = None if "://" in settings.db else Path(settings.db).expanduser()
    if new_file is not None and new_file.exists():
        new_file = None
    try:
        with settings.agent() as agent:
            report = import_jsonl(agent, file)
    except BaseException:
        if new_file is not None:  # a failed import into a new database leaves no empty file behind
            for suffix in ("", "-wal", "-shm"):
                Path(f"{new_file}{suffix}").unlink(missing_ok=True)
        raise
    _echo_transfer("imported", file, report, as_json)


cli.add_command(train)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``titans-agent`` console script."""
    _utf8_streams()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cli.main(args=list(argv) if argv is not None else None, prog_name=APP_NAME)


if __name__ == "__main__":
    main()
