"""Commands that look after the database as a whole: ``forget`` (a source, or one record),
``export`` (to a JSON Lines file) and ``import`` (such a file, into namespaces not yet there)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from titans_agent.cli.options import json_option, name_arg, pass_settings
from titans_agent.cli.output import echo_json, echo_rows

if TYPE_CHECKING:
    from titans_agent.cli.app import _Settings

__all__ = ["export_cmd", "forget", "import_cmd"]


@click.command()
@click.option(
    "--source",
    metavar="SOURCE",
    callback=name_arg,
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
            from titans_agent import source_key

            source = str(source)
            key = source_key(source)
            n = agent.forget(source=key, namespace=settings.namespace)
            real = os.path.realpath(Path(source).expanduser())
            if n == 0 and real != key:  # a file deleted since it was ingested
                n = agent.forget(source=real, namespace=settings.namespace)
    if as_json:
        echo_json({"deleted": n})
    else:
        click.echo(f"Forgot {n} item{'' if n == 1 else 's'} (chunks, notes or turns).")


def _echo_transfer(verb: str, file: str, report: Any, as_json: bool) -> None:
    if as_json:
        echo_json({"file": file, **report.model_dump()})
        return
    echo_rows(
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


@click.command("export")
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
    from titans_agent import export_jsonl

    with settings.agent(must_exist=True) as agent:
        report = export_jsonl(agent, file, namespaces=list(only) if only else None)
    _echo_transfer("exported", file, report, as_json)


@click.command("import")
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
    from titans_agent import import_jsonl

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
