"""Commands that write to memory: ``ingest`` (files and folders), ``remember`` (a note),
``add-turn`` (one conversation turn) and ``import-chat`` (turns from a JSON Lines file)."""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from titans_agent.cli.options import json_option, meta_option, name_arg, pass_settings, quiet_option, read_text
from titans_agent.cli.output import display_path, echo_json, echo_rows, printable, progress_bar, short

if TYPE_CHECKING:
    from titans_agent.cli.app import _Settings

    from titans_agent import IngestProgress

__all__ = ["add_turn", "import_chat", "ingest", "remember"]

IMPORT_BLOCK = 256  # turns per batched write in import-chat


# ---------------------------------------------------------------------- ingest
@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--include", multiple=True, metavar="GLOB", help="Only files matching GLOB (repeatable).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Leave out files matching GLOB (repeatable).")
@click.option(
    "--max-file-bytes",
    type=click.IntRange(min=1),
    metavar="N",
    help="Skip files larger than N bytes.  [default: 4194304 (4 MiB)]",
)
@meta_option("every chunk")
@json_option
@quiet_option
@pass_settings
def ingest(
    settings: _Settings,
    paths: tuple[str, ...],
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    max_file_bytes: int | None,
    metadata: dict[str, Any],
    as_json: bool,
    quiet: bool,
) -> None:
    """Ingest files and folders (recursively) into memory.

    Each file is split into chunks that fit the embedder (code at functions and
    classes, prose at paragraphs), and each chunk is written through the surprise
    gate. A file already ingested with the same content is skipped ("unchanged");
    a changed file replaces its old chunks. Missing, unreadable, binary, empty or
    too large files are listed as skipped with the reason and the others are
    ingested; the exit status is 1 only when nothing could be read.

    Chunks are committed in batches. Interrupted (Ctrl-C, exit status 130), an
    ingest keeps what it committed; running it again skips the files already
    complete and resumes a partly written one after its last committed chunk.

    Examples:

    \b
        titans-agent ingest README.md docs/
        titans-agent ingest src/ --include '*.py' --exclude 'tests/*'
        titans-agent ingest big-exports/ --max-file-bytes 20000000
        titans-agent ingest contracts/ --meta court=NY --meta privileged=true
        titans-agent -n project-x ingest notes/ --json
    """
    from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

    progress = progress_bar(
        quiet,
        SpinnerColumn(),
        TextColumn("{task.fields[files]} files"),
        TextColumn("{task.fields[chunks]} chunks ({task.fields[stored]} stored)"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[current]}", markup=False),
    )
    missing = [p for p in paths if not os.path.lexists(p)]
    if len(missing) == len(paths):  # nothing to read: no database is opened (or created)
        raise click.ClickException("nothing could be read: no such file or folder: " + ", ".join(missing))
    seen: list[IngestProgress] = []
    try:
        report = _ingest(settings, progress, seen, list(paths), include, exclude, max_file_bytes, metadata)
    except KeyboardInterrupt:
        p = seen[-1] if seen else None  # the pipeline's own progress object: its latest counts
        kept = (
            "nothing was committed"
            if p is None or not (p.chunks or p.complete)
            else (
                f"kept what was committed: {p.complete} file{'' if p.complete == 1 else 's'} complete, "
                f"{p.chunks} chunk{'' if p.chunks == 1 else 's'} in all ({p.stored} stored)"
            )
        )
        click.echo(f"Interrupted: {kept}. Run the same command again to resume where it stopped.", err=True)
        raise click.exceptions.Exit(130) from None
    _echo_ingest(report, as_json)
    if report.skipped and not (report.files or report.unchanged):
        raise click.ClickException(f"nothing could be read: all {len(report.skipped)} files were skipped")


def _ingest(
    settings: _Settings,
    progress: Any,
    seen: list[IngestProgress],
    paths: list[str],
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    max_file_bytes: int | None,
    metadata: dict[str, Any] | None = None,
) -> Any:
    """Run the ingest under the progress bar; ``seen`` gets the pipeline's progress object."""
    with settings.agent() as agent, progress:
        task = progress.add_task("ingest", total=None, files=0, chunks=0, stored=0, rate="", current="")
        t0 = time.perf_counter()

        def on_progress(p: IngestProgress) -> None:
            if not seen:
                seen.append(p)
            elapsed = time.perf_counter() - t0
            rate = f"{p.chunks / elapsed:.1f} chunks/s" if elapsed > 0 else ""
            progress.update(
                task,
                files=p.files,
                chunks=p.chunks,
                stored=p.stored,
                rate=rate,
                current=short(display_path(p.current)),
            )

        return agent.ingest(
            paths,
            namespace=settings.namespace,
            include=list(include) or None,
            exclude=list(exclude) or None,
            progress=on_progress,
            max_file_bytes=max_file_bytes,
            metadata=metadata or None,
        )


def _echo_ingest(report: Any, as_json: bool) -> None:
    if as_json:
        echo_json(report.model_dump(mode="json"))
        return
    echo_rows(
        [
            ("files", report.files),
            ("unchanged", report.unchanged),
            ("replaced", f"{report.replaced} (changed since the last ingest: old chunks removed)"),
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
            click.echo(f"  {printable(display_path(s.path))}: {s.reason}")
    if report.warnings:
        click.echo("\nWarnings:")
        for w in report.warnings:
            click.echo(f"  {printable(w)}")


# ---------------------------------------------------------------------- remember, add-turn
def _echo_write(result: Any, as_json: bool) -> None:
    if as_json:
        echo_json(result.model_dump(mode="json"))
        return
    rows: list[tuple[str, Any]] = [
        ("decision", result.decision),
        ("surprise", f"{result.surprise:.4f}"),
        ("record", result.record_id),
    ]
    if result.turn_seq is not None:
        rows.append(("turn", result.turn_seq))
    echo_rows(rows)


@click.command()
@click.argument("text")
@meta_option("the note")
@json_option
@pass_settings
def remember(settings: _Settings, text: str, metadata: dict[str, Any], as_json: bool) -> None:
    """Write one note to memory.

    TEXT "-" reads the note from standard input. Prints the surprise gate's
    decision (new, known, merged or repeat), the surprise, and the id of the
    record that holds the note. A note over 100,000 characters is refused:
    store a longer text as a document with ingest.

    Examples:

    \b
        titans-agent remember "The staging server listens on port 8443."
        titans-agent remember "Dana prefers email" --meta source=crm --meta team=sales
        echo "Backups run at 02:00 UTC" | titans-agent remember - --json
    """
    text = read_text(text, "text")
    with settings.agent() as agent:
        result = agent.remember(text, metadata or None, namespace=settings.namespace)
    _echo_write(result, as_json)


@click.command("add-turn")
@click.argument("session", callback=name_arg)
@click.argument("role", callback=name_arg)
@click.argument("text")
@click.option("--timestamp", metavar="ISO", help="When it was said (ISO 8601, naive = UTC); default now.")
@json_option
@pass_settings
def add_turn(settings: _Settings, session: str, role: str, text: str, timestamp: str | None, as_json: bool) -> None:
    """Append a turn to conversation SESSION and write it to memory.

    ROLE is who spoke (user, assistant, a name). TEXT "-" reads standard input.
    Prints the decision, surprise, record id and the turn's position. A turn
    over 100,000 characters is refused.

    Examples:

    \b
        titans-agent add-turn s1 user "Please call me Dana."
        titans-agent add-turn s1 assistant "Noted, Dana." --timestamp 2024-05-01T10:00:00Z
        titans-agent turns s1
    """
    text = read_text(text, "text")
    with settings.agent() as agent:
        result = agent.add_turn(session, role, text, timestamp, namespace=settings.namespace)
    _echo_write(result, as_json)


# ---------------------------------------------------------------------- import-chat
@click.command("import-chat")
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
    the others are imported. The exit status is 1 when every line was skipped.

    Examples:

    \b
        titans-agent import-chat history.jsonl
        titans-agent -n support import-chat export.jsonl --json
        jq -c '.messages[]' dump.json | titans-agent import-chat -
    """
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from titans_agent import read_chat

    data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    decisions: Counter[str] = Counter()
    sessions: set[str] = set()
    progress = progress_bar(quiet, TextColumn("turns"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with settings.agent() as agent, progress:
        # the library parses and checks every line as add_turns would: a bad one is skipped, not the batch
        chat = read_chat(data, max_text_chars=agent.config.max_text_chars)
        task = progress.add_task("import", total=len(chat.turns))
        for start in range(0, len(chat.turns), IMPORT_BLOCK):
            block = chat.turns[start : start + IMPORT_BLOCK]  # one batched write per block (the progress bar's step)
            for turn, result in zip(block, agent.add_turns(block, namespace=settings.namespace)):
                decisions[result.decision] += 1
                sessions.add(turn.session_id)
            progress.advance(task, len(block))
    skipped = [{"line": s.line, "reason": s.reason} for s in chat.skipped]
    counts = {d: decisions[d] for d in ("new", "known", "merged", "repeat")}
    _echo_import(counts, len(sessions), skipped, as_json)
    if skipped and not chat.turns:  # as ingest: the exit status is 1 only when nothing could be read
        raise click.ClickException(f"nothing could be imported: all {len(skipped)} lines were skipped")


def _echo_import(counts: dict[str, int], sessions: int, skipped: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        echo_json({"turns": sum(counts.values()), "sessions": sessions, "decisions": counts, "skipped": skipped})
        return
    echo_rows(
        [
            ("turns", sum(counts.values())),
            ("sessions", sessions),
            *counts.items(),
            ("skipped", len(skipped)),
        ]
    )
    if skipped:
        click.echo("\nSkipped lines:")
        for s in skipped:
            click.echo(f"  line {s['line']}: {printable(s['reason'])}")
