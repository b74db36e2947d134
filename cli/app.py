"""The ``titans-agent`` command line: a click group over one :class:`~titans_agent.MemoryAgent`.

Each command opens the agent itself through :func:`open_agent` (so ``--help`` never loads a model)
and closes it when done. User errors (:class:`~titans_agent.TitansAgentError`, ``ValueError``,
``OSError``, database errors) become one ``Error: <message>`` line on stderr and exit status 1;
see :class:`_Group`.

The commands live by what they do with the memory: :mod:`~titans_agent.cli.write` (ingest,
remember, add-turn, import-chat), :mod:`~titans_agent.cli.read` (recall, turns, stats),
:mod:`~titans_agent.cli.manage` (forget, rebuild-memory, drop-namespace, export, import),
:mod:`~titans_agent.cli.train` and :mod:`~titans_agent.cli.mcp_server` (mcp: the MCP server on stdio).
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from titans_agent.cli.manage import drop_namespace, export_cmd, forget, import_cmd, rebuild_memory
from titans_agent.cli.mcp_server import mcp_cmd
from titans_agent.cli.output import one_line
from titans_agent.cli.read import recall, stats, turns
from titans_agent.cli.train import train
from titans_agent.cli.write import add_turn, import_chat, ingest, remember

from titans_agent import DEFAULT_EMBEDDER, DEFAULT_NAMESPACE, TitansAgentError

if TYPE_CHECKING:
    from titans_agent import MemoryAgent

__all__ = ["APP_NAME", "DEFAULT_DB", "cli", "main", "open_agent"]

APP_NAME = "titans-agent"
DEFAULT_DB = Path(click.get_app_dir(APP_NAME)) / "memory.db"


def open_agent(
    db: str,
    namespace: str,
    embedder: str,
    device: str,
    *,
    read_only: bool = False,
    threads: int | None = 1,
    create: bool = True,
) -> MemoryAgent:
    """Open the agent every command works on (tests replace this function).

    Args:
        db: SQLite file path (created with its folders) or SQLAlchemy URL.
        namespace: the namespace the command will use (the agent serves every namespace; it is
            passed so a replacement can see it).
        embedder: sentence-transformers model name or local path (loaded when first needed).
        device: "auto", "cpu", "cuda" or "cuda:N".
        read_only: open it read-only (passed only by the commands that read: recall, turns,
            stats, export), so a database on a read-only file system can be read; a database at
            an older schema is opened writable once instead, which migrates it.
        threads: torch's intra-op threads (:attr:`AgentConfig.threads`; None leaves torch's own).
        create: False (the commands that only read or delete) refuses a database that does not
            exist instead of creating it.

    Raises:
        DatabaseNotFoundError: ``create=False`` or ``read_only``, and there is no such database.
        StoreError, EmbedderMismatchError, EmbedderLoadError: see :meth:`MemoryAgent.open`.
    """
    from titans_agent import AgentConfig, MemoryAgent, SchemaOutdatedError

    config = AgentConfig(embedder=embedder, device=device, threads=threads)
    try:
        return MemoryAgent.open(db, config, read_only=read_only, create=create)
    except SchemaOutdatedError:
        # a database of an older titans-agent: a read-only open never migrates, so one writable
        # open migrates it (as any write would); on a read-only file system that open says so
        return MemoryAgent.open(db, config, create=False)


# ---------------------------------------------------------------------- errors
_USER_ERRORS = (TitansAgentError, ValueError, OSError)


def _is_user_error(exc: Exception) -> bool:
    """A mistake in the input or the environment, not a bug: a titans-agent error, ``ValueError``,
    ``OSError``, or a database error (an exception class of SQLAlchemy, told by its module: only the
    library's store imports SQLAlchemy)."""
    if isinstance(exc, _USER_ERRORS):
        return True
    return any(cls.__module__.partition(".")[0] == "sqlalchemy" for cls in type(exc).__mro__)


_GROUP_OPTIONS = frozenset({"--db", "-n", "--namespace", "--embedder", "--device", "--threads"})


class _Group(click.Group):
    """A click group that turns user errors raised by any command into one ``Error:`` line and
    exit status 1 (click's own usage errors keep status 2), never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:  # "forget ... -n ana": the group's own option after the command
            if exc.option_name in _GROUP_OPTIONS and exc.ctx is not None and exc.ctx.parent is ctx:
                hint = (
                    f"{exc.message.rstrip('.')}. {exc.option_name} is an option of {APP_NAME} itself: give it "
                    f"before the command ({APP_NAME} {exc.option_name} VALUE {exc.ctx.info_name} ...)"
                )
                raise click.NoSuchOption(exc.option_name, message=hint, ctx=exc.ctx) from None
            raise
        except click.ClickException:
            raise
        except Exception as exc:
            if not _is_user_error(exc):
                raise
            if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
                raise  # click.BaseCommand.main handles a closed pipe quietly
            raise click.ClickException(one_line(exc)) from None


def _utf8_streams() -> None:
    """Make stdin, stdout and stderr UTF-8 whatever the locale (unencodable text is replaced)."""
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(encoding="utf-8", errors="replace")


# ---------------------------------------------------------------------- the group
@dataclass
class _Settings:
    """The group's options: the context object every command receives first."""

    db: str
    namespace: str
    embedder: str
    device: str
    threads: int | None = 1

    @contextlib.contextmanager
    def agent(self, *, must_exist: bool = False, read_only: bool = False) -> Iterator[MemoryAgent]:
        """Open the agent; ``must_exist`` (for commands that only read or delete) refuses to create
        a new database; ``read_only`` (for commands that only read) implies it and opens the
        database read-only (nothing is created, migrated or written)."""
        from titans_agent import DatabaseNotFoundError, display_url

        options: dict[str, Any] = {"threads": self.threads}
        if read_only:
            options["read_only"] = True
        if must_exist or read_only:
            options["create"] = False
        try:
            agent = open_agent(self.db, self.namespace, self.embedder, self.device, **options)
        except DatabaseNotFoundError:
            if options.get("create", True):  # a write to a PostgreSQL database the server lacks
                raise
            raise click.ClickException(
                f"no memory database at {display_url(self.db)}; "
                "write to it first (ingest, remember, add-turn or import-chat)"
            ) from None
        try:
            yield agent
        finally:
            agent.close()


_GROUP_HELP = f"""Long-term memory for AI applications: a Titans neural memory kept in SQLite or PostgreSQL.

Every write (an ingested chunk, a note, a conversation turn) passes the memory's
surprise gate; recall ranks records by keywords (BM25) and embeddings, then by
their session and neighbours (the memory's read-out is off by default). Nothing
is downloaded: the default embedder ships with the package.

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
    default=DEFAULT_NAMESPACE,
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
@click.option(
    "--threads",
    envvar="TITANS_AGENT_THREADS",
    show_envvar=True,
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    metavar="N",
    help="CPU threads for embedding and the memory (0: torch's default, one per core). One is "
    "fastest for a query and under other load; more can speed up a large ingest on an idle machine.",
)
@click.version_option(package_name="titans-agent", prog_name=APP_NAME)
@click.pass_context
def cli(ctx: click.Context, db: str, namespace: str, embedder: str, device: str, threads: int) -> None:
    ctx.obj = _Settings(db=db, namespace=namespace, embedder=embedder, device=device, threads=threads or None)


for _command in (ingest, recall, remember, add_turn, import_chat, turns, stats, forget, export_cmd, import_cmd, train):
    cli.add_command(_command)
cli.add_command(rebuild_memory)
cli.add_command(drop_namespace)
cli.add_command(mcp_cmd)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``titans-agent`` console script."""
    _utf8_streams()
    # An application may set its process's environment (the library never does): no tokenizer
    # thread pool forked behind click, no Hugging Face hub lookups, no download progress bars.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    # And its garbage collector: importing torch and sentence-transformers makes millions of
    # objects, which the default thresholds (700 allocations) walk over and over (about 1 s of a
    # command's start) and the interpreter's exit once more (another 1 s). Collect less often, and
    # freeze what is left when the command is done: exit then tears the modules down without it.
    gc.set_threshold(50_000, 10, 10)
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name=APP_NAME)
    finally:
        gc.freeze()


if __name__ == "__main__":
    main()
