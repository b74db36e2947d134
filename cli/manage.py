"""Commands that look after the database as a whole: ``forget`` (a source, or one record; with
``--unlearn`` from the neural memory too), ``rebuild-memory``, ``drop-namespace``, ``export`` (to a
JSON Lines file) and ``import`` (such a file, into namespaces not yet there)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from titans_agent.cli.options import json_option, name_arg, pass_settings
from titans_agent.cli.output import echo_json, echo_rows

if TYPE_CHECKING:
    from titans_agent.cli.app import _Settings

__all__ = ["drop_namespace", "export_cmd", "forget", "import_cmd", "rebuild_memory"]


@click.command()
@click.option(
    "--source",
    metavar="SOURCE",
    callback=name_arg,
    help="Forget a file, a named text, or a session as session:<id>.",
)
@click.option("--id", "record_id", type=int, metavar="N", help="Forget the record with this id, wherever it occurs.")
@click.option(
    "--unlearn",
    is_flag=True,
    help="Also rebuild the neural memory without it (replays every remaining unit; see rebuild-memory).",
)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@pass_settings
def forget(
    settings: _Settings, source: str | None, record_id: int | None, unlearn: bool, yes: bool, as_json: bool
) -> None:
    """Forget everything written from a source, or one record.

    Give exactly one of --source or --id. Asks for confirmation unless --yes.
    A text that another source also holds stays for that source. Forgotten text
    is never recalled again, and its transcript lines go too. The neural memory
    keeps what it learned from it unless --unlearn, which rebuilds the memory
    from its initial weights without it, in the same transaction. Prints how
    many items (chunks, notes or turns) were forgotten.

    Examples:

    \b
        titans-agent forget --source docs/old-guide.md
        titans-agent forget --source session:s1 --yes
        titans-agent forget --id 42 --unlearn --yes
    """
    if (source is None) == (record_id is None):
        raise click.UsageError("give exactly one of --source or --id")
    what = f"record {record_id}" if record_id is not None else f"every record of source {source!r}"
    with settings.agent(must_exist=True) as agent:
        # a namespace not in the database (often a missing -n) is an error, not "Forgot 0 items":
        # an erasure that did not happen must not read as one that found nothing to erase
        names = agent.namespaces()
        if settings.namespace not in names:
            from titans_agent.cli.read import listed

            from titans_agent import display_url

            has = f"it has: {listed(names)}" if names else "it has none"
            raise click.ClickException(
                f"no namespace {settings.namespace!r} in {display_url(settings.db)} ({has}); nothing forgotten"
            )
        if not yes:
            click.confirm(f"Forget {what} in namespace {settings.namespace!r}?", abort=True, err=True)
        # a file by any path to it (deleted since too): the library finds how it was stored
        n = agent.forget(source=source, record_id=record_id, namespace=settings.namespace, unlearn=unlearn)
    if as_json:
        echo_json({"deleted": n})
    elif n == 0:
        click.echo(f"Forgot 0 items: namespace {settings.namespace!r} holds no {what.removeprefix('every ')}.")
    else:
        click.echo(f"Forgot {n} item{'' if n == 1 else 's'} (chunks, notes or turns).")


@click.command("rebuild-memory")
@json_option
@pass_settings
def rebuild_memory(settings: _Settings, as_json: bool) -> None:
    """Rebuild the namespace's neural memory from its initial weights.

    Every remaining unit (chunk, note, turn) is written again, in the original
    order and writes, so that nothing forgotten is left in the weights (what
    plain `forget`, re-ingesting a changed file or replacing a note left
    there). It replays everything, holding the namespace's write lock while it
    runs. Prints how many units were replayed.

    Examples:

    \b
        titans-agent rebuild-memory
        titans-agent -n alice rebuild-memory --json
    """
    import time

    with settings.agent(must_exist=True) as agent:
        if settings.namespace not in agent.namespaces():
            from titans_agent import display_url

            raise click.ClickException(f"no namespace {settings.namespace!r} in {display_url(settings.db)}")
        t0 = time.perf_counter()
        n = agent.rebuild_memory(settings.namespace)
        seconds = round(time.perf_counter() - t0, 3)
    if as_json:
        echo_json({"namespace": settings.namespace, "units": n, "seconds": seconds})
    else:
        click.echo(f"Rebuilt the memory of namespace {settings.namespace!r}: {n} units replayed in {seconds} s.")


@click.command("drop-namespace")
@click.argument("name", metavar="NAME")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@pass_settings
def drop_namespace(settings: _Settings, name: str, yes: bool, as_json: bool) -> None:
    """Delete the namespace NAME and everything of it.

    Its records, occurrences, documents, sessions and turns, knowledge-update
    links, lexical index entries and its neural memory (parameters and state)
    go in one transaction; other namespaces are not touched. Asks for
    confirmation unless --yes. A namespace that does not exist is an error.

    Examples:

    \b
        titans-agent drop-namespace alice
        titans-agent --db team.db drop-namespace old-project --yes
    """
    if not yes:
        click.confirm(f"Drop namespace {name!r} and everything in it?", abort=True, err=True)
    with settings.agent(must_exist=True) as agent:
        dropped = agent.drop_namespace(name)
    if not dropped:
        from titans_agent import display_url

        raise click.ClickException(f"no namespace {name!r} in {display_url(settings.db)}")
    if as_json:
        echo_json({"dropped": name})
    else:
        click.echo(f"Dropped namespace {name!r}.")


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

    with settings.agent(read_only=True) as agent:
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
