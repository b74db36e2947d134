"""``titans-agent mcp``: serve one namespace of the memory to MCP clients over stdio.

The module is not named ``mcp.py``: with ``cli/`` first on ``sys.path`` (``python cli/app.py``) it
would shadow the ``mcp`` SDK. The SDK is imported only when the command runs; without the extra
the command fails with the pip line (:data:`titans_agent.adapters.mcp.INSTALL_HINT`).

The memory opens at start-up in a background thread while the server already answers the client's
handshake and ``tools/list``: a tool call waits for it only as long as the embedder is still loading,
so the first call after start-up costs no model load of its own, and the handshake never waits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

import click
from titans_agent.cli.options import pass_settings
from titans_agent.cli.output import one_line

from titans_agent import TitansAgentError

if TYPE_CHECKING:
    from titans_agent.cli.app import _Settings

    from titans_agent import MemoryAgent

__all__ = ["mcp_cmd"]


@click.command("mcp")
@click.option(
    "--db", metavar="PATH", default=None, help="SQLite database file or SQLAlchemy URL (default: the group's --db)."
)
@click.option("-n", "--namespace", default=None, help="Namespace the tools use (default: the group's --namespace).")
@pass_settings
def mcp_cmd(settings: _Settings, db: str | None, namespace: str | None) -> None:
    """Serve the memory to MCP clients (Model Context Protocol) over stdio.

    An MCP client (Claude Desktop, an IDE agent, an agent framework) starts
    this command and talks JSON-RPC over its standard input and output. The
    tools, all on one namespace: remember(text, metadata), recall(query, k,
    filter, kinds, session_id), add_turn(session_id, role, content),
    ingest(path | text + source, metadata) and forget(source | record_id). A
    bad call comes back as a tool error; the server keeps serving. A message
    over 16 MiB, or one nested too deeply to parse, is answered with an error
    (a note or turn may hold 100,000 characters; ingest a longer text). Logs go
    to stderr. Needs the extra: pip install 'titans-agent[mcp]'.

    Examples:

    \b
        titans-agent mcp
        titans-agent mcp --db ~/memory/team.db --namespace alice
    """
    from titans_agent.adapters.mcp import serve_stdio  # the SDK; AdapterImportError names the pip line

    from titans_agent import display_url

    if db is not None:
        settings = dataclasses.replace(settings, db=db)
    if namespace is not None:
        settings = dataclasses.replace(settings, namespace=namespace)
    where = f"{display_url(settings.db)}, namespace {settings.namespace!r}"
    click.echo(f"titans-agent MCP server on stdio: {where}; opening the memory", err=True)

    opened: Future[MemoryAgent] = Future()
    with contextlib.ExitStack() as stack:

        def open_memory() -> None:
            t0 = time.perf_counter()
            try:
                agent = stack.enter_context(settings.agent())
            except BaseException as exc:
                click.echo(f"Error: cannot open the memory: {one_line(exc)}", err=True)
                opened.set_exception(exc)
            else:
                click.echo(f"memory open in {time.perf_counter() - t0:.1f} s", err=True)
                opened.set_result(agent)

        def get_agent() -> MemoryAgent:
            try:
                return opened.result()
            except Exception as exc:
                raise TitansAgentError(f"the memory could not be opened ({where}): {one_line(exc)}") from exc

        opener = threading.Thread(target=open_memory, name="titans-agent-open", daemon=True)
        opener.start()
        try:
            serve_stdio(get_agent, namespace=settings.namespace)
        finally:
            opener.join()  # then the stack closes the agent
