"""Commands that read memory and change nothing: ``recall`` (the best hits for a query),
``turns`` (a session's transcript) and ``stats`` (a namespace's counts, and every namespace).

Each refuses a database that does not exist yet instead of creating it."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

import click
from titans_agent.cli.options import json_option, name_arg, pass_settings, read_text
from titans_agent.cli.output import echo_json, echo_rows, hit_body, hit_header, printable

from titans_agent import DEFAULT_NAMESPACE, KINDS, InvalidInputError, display_url, matches_filter

if TYPE_CHECKING:
    from titans_agent.cli.app import _Settings

__all__ = ["recall", "stats", "turns"]


def where_arg(_ctx: click.Context, _param: click.Parameter, value: str | None) -> dict[str, Any] | None:
    """Callback of ``--where JSON``: the metadata filter as a dict, checked before any model loads."""
    if value is None:
        return None
    try:
        where = json.loads(value)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}") from None
    except RecursionError:
        raise click.BadParameter("JSON nested too deeply") from None
    try:
        matches_filter({}, where)  # checks the filter (an unknown operator, a bad path or operand)
    except InvalidInputError as exc:
        raise click.BadParameter(str(exc)) from None
    return where


def listed(names: list[str], at_most: int = 10) -> str:
    """Names for a message: the first ``at_most``, then how many more (a database of a chatbot
    holds a namespace per user)."""
    more = f", ... ({len(names) - at_most} more)" if len(names) > at_most else ""
    return ", ".join(names[:at_most]) + more


@click.command()
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(min=1), default=5, show_default=True, help="Number of hits.")
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(KINDS),
    help="Only records of this kind (repeatable).",
)
@click.option("--source", metavar="SOURCE", callback=name_arg, help="Only chunks of this file or named text.")
@click.option("--session", metavar="SESSION", callback=name_arg, help="Only turns of this conversation.")
@click.option("--as-of", "as_of", metavar="TIME", help="Recall what was known at this time (ISO 8601; naive = UTC).")
@click.option("--since", metavar="TIME", help="Only records with an occurrence at or after this time (ISO 8601).")
@click.option("--until", metavar="TIME", help="Only records with an occurrence at or before this time (ISO 8601).")
@click.option(
    "--drop-superseded",
    is_flag=True,
    help="Leave out records a newer statement updated as a whole; a message still partly current "
    '("superseded in part": one of its facts changed) is kept.',
)
@click.option(
    "--where",
    metavar="JSON",
    callback=where_arg,
    help='Only records whose metadata passes this filter, e.g. \'{"court": "NY", "year": {"$gte": 2020}}\'.',
)
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
    where: dict[str, Any] | None,
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
        titans-agent recall "privilege review" --where '{"court": "NY", "privileged": true}'
    """
    query = read_text(query, "query")
    with settings.agent(read_only=True) as agent:
        names = require_namespace(agent, settings)
        hits = agent.recall(
            query,
            k,
            namespace=settings.namespace,
            kinds=list(kinds) or None,
            source=source,  # a file by any path to it: the library finds how it was stored
            session_id=session,
            as_of=as_of,
            since=since,
            until=until,
            include_superseded=not drop_superseded,
            filter=where,
            missing_ok=True,  # the default namespace before its first write, or one dropped meanwhile
        )
    if as_json:
        echo_json([h.model_dump(mode="json") for h in hits])
        return
    if not hits:
        # the default namespace (or an empty database) with no memories yet: said so
        missing = ""
        if names and settings.namespace not in names:
            missing = f" (no such namespace yet; the database has: {listed(names)})"
        click.echo(f"No memories match in namespace {settings.namespace!r}{missing}.", err=True)
        return
    for rank, hit in enumerate(hits, start=1):
        if rank > 1:
            click.echo()
        click.echo(hit_header(rank, hit))
        click.echo("\n".join(hit_body(hit.text)))


@click.command()
@click.argument("session", callback=name_arg)
@json_option
@pass_settings
def turns(settings: _Settings, session: str, as_json: bool) -> None:
    """Print the transcript of conversation SESSION in order.

    Examples:

    \b
        titans-agent turns s1
        titans-agent -n support turns ticket-4711 --json
    """
    with settings.agent(read_only=True) as agent:
        require_namespace(agent, settings)
        rows = agent.turns(session, namespace=settings.namespace, missing_ok=True)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo(f"No turns in session {session!r} (namespace {settings.namespace!r}).", err=True)
        return
    for row in rows:
        ts = row["timestamp"]
        when = f"{ts:%Y-%m-%d %H:%M}" if isinstance(ts, dt.datetime) else str(ts or "")
        role, content = printable(row["role"]), printable(row["content"])
        click.echo(f"{row['seq']:>4}  {when}  {role}: {content}")


def require_namespace(agent: Any, settings: _Settings) -> list[str]:
    """The database's namespaces; a read of a namespace it lacks is an error naming those it has
    (exit 1, as a query of a missing table is in sqlite-utils), except the default namespace
    (always there, empty before its first write) and any name in an empty database (its zeros)."""
    names = agent.namespaces()
    if names and settings.namespace not in names and settings.namespace != DEFAULT_NAMESPACE:
        raise click.ClickException(
            f"no namespace {settings.namespace!r} in {display_url(settings.db)} (it has: {listed(names)})"
        )
    return names


@click.command()
@json_option
@pass_settings
def stats(settings: _Settings, as_json: bool) -> None:
    """Show a namespace's counts and memory state, and every namespace.

    Examples:

    \b
        titans-agent stats
        titans-agent --db team.db -n alice stats --json
    """
    with settings.agent(read_only=True) as agent:
        names = require_namespace(agent, settings)
        st = agent.stats(settings.namespace, missing_ok=True)  # (a missing one is refused above)
    if as_json:
        echo_json({**st.model_dump(mode="json"), "database": settings.db, "namespaces": names})
        return
    mean = "-" if st.mean_surprise is None else f"{st.mean_surprise:.4f}"
    echo_rows(
        [
            ("database", settings.db),
            ("namespace", st.namespace),
            ("records", f"{st.records} distinct texts"),
            (
                "written",
                f"{_count(st.chunks, 'chunk')}, {_count(st.notes, 'note')}, {_count(st.turns, 'turn')} "
                "(a repeat shares its record)",
            ),
            ("documents", st.documents),
            ("sessions", st.sessions),
            ("memory step", st.memory_step),
            ("mean surprise", mean),
            ("embedder", f"{st.embedder} (dim {st.dim})"),
            ("namespaces", ", ".join(names) if names else "(none)"),
        ]
    )


def _count(n: int, noun: str) -> str:
    """``"1 note"``, ``"3 notes"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
