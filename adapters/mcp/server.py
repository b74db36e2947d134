"""The MCP server: :class:`~titans_agent.adapters.mcp.tools.MemoryTools` registered as tools of an
``mcp`` SDK ``MCPServer``, and :func:`serve_stdio` to run it over standard input and output.

Every tool call that fails comes back as a tool error (``isError: true`` and a one-line message for
the model); the server keeps serving. Bad input (an empty query, a missing path, an unknown kind,
arguments that do not fit the schema) names what is wrong; an unexpected exception is logged with
its traceback on stderr and reported as ``unexpected error (<type>): <message>``.
"""

# No `from __future__ import annotations`: the SDK reads the tools' Annotated hints at run time.

import contextlib
import logging
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field
from titans_agent.adapters.mcp.tools import MemoryTools
from titans_agent.adapters.mcp.transport import MAX_MESSAGE_BYTES, serve_bounded_stdio

from titans_agent import DEFAULT_NAMESPACE, TitansAgentError, __version__

if TYPE_CHECKING:  # the agent imports torch: not before a server is made
    from titans_agent import MemoryAgent

__all__ = ["SERVER_NAME", "create_server", "serve_stdio"]

log = logging.getLogger(__name__)

SERVER_NAME = "titans-agent"

_INSTRUCTIONS = """Long-term memory that persists across conversations (titans-agent).
Use `recall` before answering anything that may depend on what was said or stored earlier
(the user's preferences, facts about their projects, documents ingested before). Use `remember`
for durable facts worth keeping (one self-contained sentence each) and `add_turn` to keep a
conversation's turns. `ingest` stores a file, a folder or a named text; `forget` removes them."""

Kind = Literal["chunk", "note", "turn"]
Metadata = Annotated[
    dict[str, Any] | None, Field(description="JSON object kept with the record and returned with its hits.")
]


def _one_line(exc: BaseException) -> str:
    message = re.sub(r"\(Background on this error at: \S+\)", "", str(exc))
    return " ".join(message.split()) or type(exc).__name__


def _expected(exc: Exception) -> bool:
    """Bad input or a broken environment, not a bug: a titans-agent error, ``ValueError``,
    ``OSError``, or a database error (SQLAlchemy's, told by its module)."""
    if isinstance(exc, (TitansAgentError, ValueError, OSError)):
        return True
    return any(cls.__module__.partition(".")[0] == "sqlalchemy" for cls in type(exc).__mro__)


@contextlib.contextmanager
def _tool_errors(tool: str) -> Iterator[None]:
    """Turn what a tool raises into a ToolError (the SDK answers it with ``isError: true``)."""
    try:
        yield
    except ToolError:
        raise
    except Exception as exc:
        if _expected(exc):
            raise ToolError(_one_line(exc)) from exc
        log.exception("tool %s raised an unexpected exception", tool)
        raise ToolError(f"unexpected error ({type(exc).__name__}): {_one_line(exc)}") from exc


def create_server(
    agent: "MemoryAgent | Callable[[], MemoryAgent]",
    *,
    namespace: str = DEFAULT_NAMESPACE,
    name: str = SERVER_NAME,
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING",
) -> MCPServer:
    """An MCP server whose tools read and write ``namespace`` of ``agent``.

    Args:
        agent: an open MemoryAgent, or a function returning one (called on each tool call; see
            :class:`MemoryTools`). The server never closes it.
        namespace: the one namespace the tools use.
        name: the server's name in the MCP handshake.
        log_level: the SDK's logging level (its logs go to stderr).

    Returns:
        An ``mcp.server.mcpserver.MCPServer`` with the tools remember, recall, add_turn, ingest and
        forget; run it with ``server.run("stdio")`` or :func:`serve_stdio`.
    """
    tools = MemoryTools(agent, namespace)
    server = MCPServer(name=name, version=__version__, instructions=_INSTRUCTIONS, log_level=log_level)
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

    @server.tool(annotations=writes)
    def remember(
        text: Annotated[str, Field(description="The fact, as a self-contained sentence.")],
        metadata: Metadata = None,
    ) -> dict[str, Any]:
        """Store a note in long-term memory so it can be recalled in later conversations.

        Use it for durable facts about the user, their projects or preferences, one fact per
        call. A fact the memory already holds is not stored twice (decision "repeat" or "merged").
        Returns the record id, the decision ("new", "known", "merged", "repeat") and the surprise.
        """
        with _tool_errors("remember"):
            return tools.remember(text, metadata)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def recall(
        query: Annotated[str, Field(description="What to look for, in words.")],
        k: Annotated[int, Field(ge=1, le=100, description="How many hits at most.")] = 5,
        filter: Annotated[
            dict[str, Any] | None,
            Field(
                description='Only records whose metadata matches: {"topic": "ops"} (equality), '
                '{"year": {"$gte": 2020}} (operators $eq $ne $gt $gte $lt $lte $in $nin $exists), '
                '"client.region" (a dotted path), several keys (all must hold), {"$or": [...]}, {"$and": [...]}.'
            ),
        ] = None,
        kinds: Annotated[
            list[Kind] | None,
            Field(description='Only these kinds: "chunk" (ingested documents), "note" (remember), "turn".'),
        ] = None,
        session_id: Annotated[str | None, Field(description="Only turns of this conversation.")] = None,
    ) -> dict[str, Any]:
        """Search long-term memory for what best answers a question, best match first.

        Returns {"hits": [...]}, each hit with id, score, text, kind ("chunk", "note", "turn"),
        source (file, named text, "session:<id>", or null for notes), metadata, created_at, date
        (when it was said, else written: "2024-03-01") and superseded (true when a later memory
        replaced it: trust the later one for what is true now), and where present location (line
        range), doc_location (page, headings, section, citation), session_id, role and timestamp
        of a turn, superseded_by (ids of newer records that update this one) and stale_clauses
        (when set, a later memory replaced only these clauses: the rest is still true).
        """
        with _tool_errors("recall"):
            return tools.recall(query, k, filter, kinds, session_id)

    @server.tool(annotations=writes)
    def add_turn(
        session_id: Annotated[str, Field(description="The conversation's id (any non-blank string).")],
        role: Annotated[str, Field(description='Who spoke: "user", "assistant" or a name.')],
        content: Annotated[str, Field(description="What was said.")],
    ) -> dict[str, Any]:
        """Append a conversation turn to a session and write it to long-term memory.

        Returns the record id, the decision, the surprise and the turn's position in its session.
        """
        with _tool_errors("add_turn"):
            return tools.add_turn(session_id, role, content)

    @server.tool(annotations=writes)
    def ingest(
        path: Annotated[
            str | None,
            Field(description="A file or folder on the server's machine (absolute, or relative to its directory)."),
        ] = None,
        text: Annotated[str | None, Field(description="A text to ingest instead of a path; needs source.")] = None,
        source: Annotated[
            str | None, Field(description="The name of the text (recall and forget find it by this name).")
        ] = None,
        metadata: Metadata = None,
    ) -> dict[str, Any]:
        """Ingest a document into long-term memory: a file, a folder (recursively), or a named text.

        Give path, or text with source. Documents are split into chunks (code at functions,
        prose at paragraphs); a file ingested before with the same content is skipped, a changed
        one replaces its old chunks. Returns counts of files, chunks and stored records, and the
        files skipped with their reasons.
        """
        with _tool_errors("ingest"):
            return tools.ingest(path, text, source, metadata)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False))
    def forget(
        source: Annotated[
            str | None, Field(description='A file path, a named text, or a session as "session:<id>".')
        ] = None,
        record_id: Annotated[int | None, Field(description="The id of one record (a hit's id).")] = None,
        unlearn: Annotated[
            bool,
            Field(description="Also rebuild the memory's weights without it (slower: replays the namespace)."),
        ] = False,
    ) -> dict[str, Any]:
        """Forget everything stored from a source, or one record (give exactly one).

        Forgotten text is never recalled again; with unlearn, the neural memory's weights keep no
        trace of it either. Returns how many items (chunks, notes, turns) went.
        """
        with _tool_errors("forget"):
            return tools.forget(source, record_id, unlearn)

    return server


def serve_stdio(
    agent: "MemoryAgent | Callable[[], MemoryAgent]",
    *,
    namespace: str = DEFAULT_NAMESPACE,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
) -> None:
    """Serve the tools over standard input and output until the client closes the stream.

    A message (one line of JSON) longer than ``max_message_bytes`` (default 16 MiB) is read in
    pieces, thrown away and answered with a JSON-RPC error naming the limit, in constant memory; a
    request the SDK cannot parse (nested too deeply, not JSON) is answered with an error too
    (:mod:`titans_agent.adapters.mcp.transport`). A note or a turn longer than the agent's
    ``AgentConfig.max_text_chars`` is refused by the tool before anything is written.
    """
    anyio.run(serve_bounded_stdio, create_server(agent, namespace=namespace), max_message_bytes)
