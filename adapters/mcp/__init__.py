"""A Model Context Protocol server for titans-agent (``pip install "titans-agent[mcp]"``).

``titans-agent mcp`` serves one namespace of a memory database over stdio to any MCP client
(Claude Desktop, IDE agents, agent frameworks), with the tools ``remember``, ``recall``,
``add_turn``, ``ingest`` and ``forget``. In Python::

    from titans_agent import MemoryAgent
    from titans_agent.adapters.mcp import create_server

    with MemoryAgent.open("memory.db") as agent:
        create_server(agent, namespace="alice").run("stdio")

:class:`MemoryTools` holds the same tools as plain functions (no SDK needed). ``import
titans_agent`` never imports the SDK; :func:`create_server` and :func:`serve_stdio` do, and raise
:class:`AdapterImportError` naming the pip line when the extra is missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from titans_agent.adapters.extras import AdapterImportError, lazy_exports

INSTALL_HINT = "titans-agent's MCP server needs the extra: pip install 'titans-agent[mcp]'"

_EXPORTS = {
    "MemoryTools": "tools",
    "hit_dict": "tools",
    "SERVER_NAME": "server",
    "create_server": "server",
    "serve_stdio": "server",
}

__all__ = [
    "INSTALL_HINT",
    "SERVER_NAME",
    "AdapterImportError",
    "MemoryTools",
    "create_server",
    "hit_dict",
    "serve_stdio",
]

if TYPE_CHECKING:
    from titans_agent.adapters.mcp.server import SERVER_NAME, create_server, serve_stdio
    from titans_agent.adapters.mcp.tools import MemoryTools, hit_dict


__getattr__ = lazy_exports(__name__, _EXPORTS, {"mcp", "mcp_types"}, INSTALL_HINT)
