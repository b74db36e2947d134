"""Standard input and output for the MCP server, with a bound on what one message may cost.

The ``mcp`` SDK's stdio transport reads each line whole, whatever its length, and drops (with a
debug log) a line it cannot parse: a request nested deeper than its JSON parser's limit (200
levels) or not JSON at all was never answered, and its client waited forever. Here the SDK's
transport still writes the answers and parses the lines, but:

- the lines come from :class:`_Lines`, which reads a line longer than ``max_message_bytes`` in
  pieces and throws it away (the memory stays bounded whatever comes in), and in its place passes
  on a private notification that carries the request's id;
- the server reads through :class:`_Answering`, which answers that notification with a JSON-RPC
  "Invalid Request" error naming the limit, and a line the SDK could not parse or validate with a
  "Parse error" or "Invalid Request" naming why, when the line is a request whose id can be told
  (from its first 64 KiB, or its last member); a JSON-RPC batch (a JSON array, which MCP's
  current protocol revisions do not have) with one "Invalid Request" error of id null, at once.
  Nothing else is changed.

Standard input is read from the process's file descriptor 0 as it is (the SDK, reading it itself,
points fd 0 at the null device meanwhile; nothing the tools run reads standard input).
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import sys
from collections.abc import Awaitable, Callable
from typing import IO, Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["MAX_MESSAGE_BYTES", "request_id", "serve_bounded_stdio"]

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The default for the longest message (one line of JSON, in bytes) the server reads: far above
a note or a turn at its character limit, however it is escaped; a longer document is ingested by
its path."""

_HEAD = 64 * 1024  # bytes kept of an over-long line's start, where its id is looked for
_TAIL = 1024  # and of its end
_PIECE = 1024 * 1024  # how much of an over-long line is read at a time
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s"{}\[\]:,]+')
_LAST_ID = re.compile(r',\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$')


def request_id(head: str, tail: str = "") -> int | str | None:
    """The id of the JSON-RPC request whose first characters are ``head`` (and last ``tail``),
    told without parsing it whole: its top-level ``"id"`` in ``head``, or the last member of its
    object in ``tail``. None when there is no id, or when the message is no request (it has no
    top-level ``"method"`` in ``head``): a response's id is the peer's own, never to be answered."""
    found: dict[str, str] = {}
    depth, prev, key = 0, "", None
    for tok in _TOKEN.findall(head):
        if tok in ("{", "["):
            key = None if depth == 1 else key
            depth += 1
        elif tok in ("}", "]"):
            depth -= 1
            if depth <= 0:
                break
        elif depth == 1:
            if tok not in (",", ":") and prev == ":" and key is not None:
                found.setdefault(key, tok)
                key = None
            elif tok.startswith('"') and prev in ("{", ","):
                key = tok
        prev = tok
    if '"method"' not in found:
        return None
    raw = found.get('"id"')
    if raw is None:
        last = _LAST_ID.search(tail)
        raw = last.group(1) if last else None
    try:
        value = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    return value if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)) else None


class _Lines:
    """The lines of ``stream`` as text (UTF-8, undecodable bytes replaced, as the SDK reads them),
    each read in a worker thread; a line over ``max_bytes`` becomes a ``refused`` notification."""

    def __init__(self, stream: IO[bytes], max_bytes: int, refused: str) -> None:
        self._stream = stream
        self._max = max_bytes
        self._refused = refused

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await anyio.to_thread.run_sync(self._read)
        if line is None:
            raise StopAsyncIteration
        return line

    def _read(self) -> str | None:
        data = self._stream.readline(self._max + 1)
        if not data:
            return None
        if len(data) <= self._max or data.endswith(b"\n"):
            return data.decode("utf-8", "replace")
        head, tail, size = data[:_HEAD], data[-_TAIL:], len(data)
        while not data.endswith(b"\n"):  # the rest of the line, a piece at a time, thrown away
            data = self._stream.readline(_PIECE)
            if not data:
                break
            size += len(data)
            tail = (tail + data)[-_TAIL:]
        rid = request_id(head.decode("utf-8", "replace"), tail.decode("utf-8", "replace"))
        params = {"id": rid, "bytes": size - tail.endswith(b"\n")}
        return json.dumps({"jsonrpc": "2.0", "method": self._refused, "params": params}) + "\n"


class _Answering:
    """The transport's read stream, answering here what the server would drop unanswered; every
    other item passes through (with the sender's context, which the SDK's dispatcher reads)."""

    def __init__(self, inner: Any, answer: Callable[[types.JSONRPCError], Awaitable[None]], refused: str, limit: int):
        self._inner = inner
        self._answer = answer
        self._refused = refused
        self._limit = limit

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if isinstance(item, SessionMessage):
                msg = item.message
                if not (isinstance(msg, types.JSONRPCNotification) and msg.method == self._refused):
                    return item
                error = self._too_long(msg.params or {})
            elif isinstance(item, ValidationError):
                error = self._unreadable(item)
                if error is None:
                    return item  # no request to answer: the SDK logs and drops it
            else:
                return item
            if error is not None:
                await self._answer(error)

    def _too_long(self, params: dict[str, Any]) -> types.JSONRPCError | None:
        text = (
            f"the request is {params.get('bytes', 0):,} bytes, over this server's limit of {self._limit:,} bytes "
            "for one message; a long text is stored as a document: ingest it by its path"
        )
        return _error(params.get("id"), types.INVALID_REQUEST, text)

    def _unreadable(self, exc: ValidationError) -> types.JSONRPCError | None:
        errors = exc.errors()
        first: dict[str, Any] = dict(errors[0]) if errors else {}
        # a request whose members are wrong ("params": "x"): some error of the union's members
        # (a missing "result", a missing "error") holds the whole message, and with it the id
        whole = next((e["input"] for e in errors if isinstance(e.get("input"), dict) and "method" in e["input"]), None)
        if isinstance(whole, dict) and isinstance(whole.get("method"), str):
            where = ".".join(str(part) for part in first.get("loc", ())[1:]) or "the message"
            text = f"the request is not a valid JSON-RPC request: {where}: {first.get('msg', 'invalid')}"
            return _error(whole.get("id"), types.INVALID_REQUEST, text)
        line = first.get("input")
        if isinstance(line, str):  # not JSON, or nested deeper than the parser goes
            reason = str(first.get("msg", "not JSON"))
            if "recursion limit" in reason:
                reason += " (JSON nested too deeply; metadata and filters may nest at most 64 levels)"
            return _error(
                request_id(line[:_HEAD], line[-_TAIL:]), types.PARSE_ERROR, f"the request is not JSON: {reason}"
            )
        if isinstance(line, list):  # a JSON-RPC batch: MCP's protocol revisions since 2025-06-18 have none
            text = "JSON-RPC batches (a JSON array of requests) are not supported: send one request per line"
            log.warning("answered a batch with an error: %s", text)
            return types.JSONRPCError(
                jsonrpc="2.0", id=None, error=types.ErrorData(code=types.INVALID_REQUEST, message=text)
            )
        if isinstance(line, dict) and isinstance(line.get("method"), str):  # JSON, but no JSON-RPC request
            text = "the request is not a valid JSON-RPC request"
            return _error(line.get("id"), types.INVALID_REQUEST, text)
        return None

    def __aiter__(self) -> _Answering:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Answering:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _error(rid: Any, code: int, text: str) -> types.JSONRPCError | None:
    """The JSON-RPC error answering request ``rid``; None (logged) when there is no id to answer."""
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        log.warning("dropped a message that names no request id: %s", text)
        return None
    log.warning("answered request %r with an error: %s", rid, text)
    return types.JSONRPCError(jsonrpc="2.0", id=rid, error=types.ErrorData(code=code, message=text))


async def serve_bounded_stdio(server: Any, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
    """Serve ``server`` (an ``mcp.server.mcpserver.MCPServer``) over standard input and output
    until the client closes its end, reading no message longer than ``max_message_bytes``."""
    refused = f"notifications/titans-agent/refused-{secrets.token_hex(8)}"
    lines = _Lines(sys.stdin.buffer, max_message_bytes, refused)
    lowlevel = server._lowlevel_server  # the SDK's own in-process client reaches it the same way
    async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]

        async def answer(error: types.JSONRPCError) -> None:
            await write_stream.send(SessionMessage(error))

        reads = _Answering(read_stream, answer, refused, max_message_bytes)
        await lowlevel.run(reads, write_stream, lowlevel.create_initialization_options())
