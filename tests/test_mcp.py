"""The MCP server: ``titans_agent.adapters.mcp`` (its tools, in-process through the SDK's own client)
and ``titans-agent mcp`` (the command; one subprocess test drives it over stdio with the real model).

In-process tests connect ``mcp.Client`` straight to the ``MCPServer`` object: the same request
handlers as over stdio (argument validation, tool errors), without a process or JSON framing.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import torch
from click.testing import CliRunner
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from titans_agent.adapters.mcp import MemoryTools, create_server
from titans_agent.adapters.mcp.transport import request_id
from titans_agent.cli import app as cli_app

from titans_agent import AgentConfig, MemoryAgent, StoreError, TitansAgentError

NS = "mcp-test"


@pytest.fixture(autouse=True)
def one_torch_thread():
    # A new namespace builds a NeuralMemory (a QR per projection): slow under a busy thread pool.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def server(agent):
    return create_server(agent, namespace=NS)


def calls(server, *requests: tuple[str, dict[str, Any]]) -> list[Any]:
    """Each (tool, arguments) called in order on one client session; the CallToolResults."""

    async def go() -> list[Any]:
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in requests]

    return anyio.run(go)


def ok(result) -> dict[str, Any]:
    """A successful call's structured result (the text content holds the same JSON)."""
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def error_text(result) -> str:
    assert result.is_error, result
    return result.content[0].text


# ---------------------------------------------------------------------- the tools
def test_the_server_lists_the_five_tools_with_their_arguments(server):
    async def go():
        async with Client(server) as client:
            return {t.name: t for t in (await client.list_tools()).tools}

    tools = anyio.run(go)
    assert set(tools) == {"remember", "recall", "add_turn", "ingest", "forget"}
    recall = tools["recall"].input_schema
    assert recall["required"] == ["query"]
    assert set(recall["properties"]) == {"query", "k", "filter", "kinds", "session_id"}
    assert "note" in json.dumps(recall["properties"]["kinds"])
    assert tools["add_turn"].input_schema["required"] == ["session_id", "role", "content"]
    assert set(tools["ingest"].input_schema["properties"]) == {"path", "text", "source", "metadata"}
    assert set(tools["forget"].input_schema["properties"]) == {"source", "record_id", "unlearn"}
    assert tools["recall"].annotations.read_only_hint and tools["forget"].annotations.destructive_hint
    assert all(t.description for t in tools.values())


def test_remember_then_recall_gives_structured_hits(server, agent):
    fact = "The staging server listens on port 8443."
    wrote, found = calls(
        server,
        ("remember", {"text": fact, "metadata": {"topic": "ops"}}),
        ("recall", {"query": "which port does the staging server listen on", "k": 3}),
    )
    wrote = ok(wrote)
    assert wrote["decision"] == "new" and wrote["namespace"] == NS and isinstance(wrote["record_id"], int)
    hit = ok(found)["hits"][0]
    assert hit["id"] == wrote["record_id"] and hit["text"] == fact and hit["kind"] == "note"
    assert hit["source"] is None and hit["metadata"] == {"topic": "ops"} and hit["score"] > 0
    assert "location" not in hit and "session_id" not in hit  # only what is set
    assert agent.recall(fact, namespace="default") == []  # the server's namespace only


def test_recall_passes_the_metadata_filter_through(server):
    results = calls(
        server,
        ("remember", {"text": "The deploy runs every Friday at noon.", "metadata": {"team": "ops", "year": 2024}}),
        ("remember", {"text": "The deploy of the website runs on Mondays.", "metadata": {"team": "web", "year": 2021}}),
        ("recall", {"query": "when does the deploy run", "filter": {"team": "web"}}),
        ("recall", {"query": "when does the deploy run", "filter": {"year": {"$gte": 2022}}}),
        ("recall", {"query": "when does the deploy run", "filter": {"year": {"$bogus": 1}}}),
    )
    assert [h["metadata"]["team"] for h in ok(results[2])["hits"]] == ["web"]
    assert [h["metadata"]["team"] for h in ok(results[3])["hits"]] == ["ops"]
    assert "$bogus" in error_text(results[4])


def test_add_turn_and_recall_one_session_of_turns(server):
    results = calls(
        server,
        ("add_turn", {"session_id": "s1", "role": "user", "content": "Please call me Dana from now on."}),
        ("add_turn", {"session_id": "s1", "role": "assistant", "content": "Sure, Dana."}),
        ("add_turn", {"session_id": "s2", "role": "user", "content": "Call me Robin, please."}),
        ("remember", {"text": "The user wants to be called by name."}),
        ("recall", {"query": "what should I call the user", "kinds": ["turn"], "session_id": "s1"}),
    )
    first, second = ok(results[0]), ok(results[1])
    assert first["turn_seq"] == 1 and second["turn_seq"] == 2 and first["session_id"] == "s1"
    hits = ok(results[4])["hits"]
    assert hits and {h["session_id"] for h in hits} == {"s1"} and {h["kind"] for h in hits} == {"turn"}
    dana = next(h for h in hits if "Dana from now on" in h["text"])
    assert dana["role"] == "user" and dana["source"] == "session:s1" and "timestamp" in dana


def test_ingest_a_file_and_a_named_text_with_their_locations(server, tmp_path):
    doc = tmp_path / "guide.md"
    doc.write_text("# Guide\n\n## Keys\n\nRotate the API keys every ninety days.\n", encoding="utf-8")
    results = calls(
        server,
        ("ingest", {"path": str(doc), "metadata": {"kind": "guide"}}),
        ("ingest", {"text": "Lunch is served at half past twelve.", "source": "notes/lunch"}),
        ("recall", {"query": "how often are API keys rotated", "kinds": ["chunk"], "k": 1}),
        ("recall", {"query": "when is lunch served", "k": 1}),
    )
    report = ok(results[0])
    assert report["files"] == 1 and report["stored"] >= 1 and report["skipped"] == []
    assert ok(results[1])["files"] == 1
    chunk = ok(results[2])["hits"][0]
    assert chunk["source"] == os.path.realpath(doc) and chunk["metadata"]["kind"] == "guide"
    assert chunk["location"] and "Keys" in chunk["doc_location"]["headings"]
    assert ok(results[3])["hits"][0]["source"] == "notes/lunch"


def test_forget_a_source_and_a_record(server):
    results = calls(
        server,
        ("ingest", {"text": "The old office was on Elm Street.", "source": "notes/office"}),
        ("remember", {"text": "The printer on floor two is broken."}),
        ("forget", {"source": "notes/office"}),
        ("recall", {"query": "where was the old office", "k": 5}),
    )
    assert ok(results[2]) == {"namespace": NS, "deleted": 1}
    hits = ok(results[3])["hits"]
    assert all("Elm Street" not in h["text"] for h in hits)
    note_id = ok(results[1])["record_id"]
    again = calls(server, ("forget", {"record_id": note_id}), ("forget", {"record_id": note_id}))
    assert ok(again[0])["deleted"] == 1 and f"no record {note_id}" in error_text(again[1])


def test_forget_a_named_text_that_is_also_a_file_name_and_unlearn(server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("never ingested", encoding="utf-8")  # the name resolves to a file
    results = calls(
        server,
        ("ingest", {"text": "The launch code is 0000.", "source": "notes.txt"}),
        ("forget", {"source": "notes.txt", "unlearn": True}),
        ("recall", {"query": "launch code", "k": 5}),
    )
    assert ok(results[1]) == {"namespace": NS, "deleted": 1}
    assert all("launch code" not in h["text"] for h in ok(results[2])["hits"])


@pytest.mark.parametrize(
    "tool, args, message",
    [
        pytest.param("recall", {"query": "   "}, "query is empty", id="empty-query"),
        pytest.param("recall", {"query": "x", "kinds": ["bogus"]}, "'chunk', 'note' or 'turn'", id="unknown-kind"),
        pytest.param("recall", {"query": "x", "k": 0}, "greater than or equal to 1", id="k-zero"),
        pytest.param("recall", {}, "query", id="no-query"),
        pytest.param("ingest", {"path": "/no/such/place"}, "no such file or folder: /no/such/place", id="missing-path"),
        pytest.param("ingest", {"path": "/tmp", "text": "x", "source": "y"}, "exactly one of path", id="path-and-text"),
        pytest.param("ingest", {}, "exactly one of path", id="neither-path-nor-text"),
        pytest.param("ingest", {"text": "a text"}, "text needs a source", id="text-without-source"),
        pytest.param("forget", {}, "exactly one of source or record_id", id="forget-nothing"),
        pytest.param("remember", {"text": " "}, "empty", id="empty-note"),
        pytest.param("remember", {"text": "x" * 100_001}, "over the limit of 100,000", id="note-too-long"),
        pytest.param(
            "add_turn", {"session_id": "s", "role": "u", "content": "x" * 100_001}, "ingest", id="turn-too-long"
        ),
        pytest.param("no_such_tool", {}, "Unknown tool", id="unknown-tool"),
    ],
)
def test_a_bad_call_is_a_tool_error_and_the_server_goes_on(server, tool, args, message):
    bad, good = calls(server, (tool, args), ("remember", {"text": "Still here after a bad call."}))
    assert message in error_text(bad)
    assert ok(good)["decision"] == "new"


def test_an_unexpected_exception_is_a_tool_error(server, agent, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("the index fell over")

    monkeypatch.setattr(agent, "recall", boom)
    bad, good = calls(server, ("recall", {"query": "anything"}), ("remember", {"text": "Writes still work."}))
    assert "unexpected error (RuntimeError): the index fell over" in error_text(bad)
    assert ok(good)["decision"] == "new"


def test_a_namespace_not_written_yet_reads_as_empty(agent):
    """A server for a namespace that does not exist yet: recall finds nothing and forget removes
    nothing (MemoryAgent alone would raise NamespaceNotFoundError); nothing is created."""
    agent.remember("Ana lives in Lisbon.", namespace="someone-else")
    results = calls(
        create_server(agent, namespace="new-user"),
        ("recall", {"query": "where does Ana live", "k": 3}),
        ("forget", {"source": "notes/office"}),
        ("forget", {"record_id": 1}),
    )
    assert ok(results[0]) == {"namespace": "new-user", "hits": []}
    assert ok(results[1]) == {"namespace": "new-user", "deleted": 0}
    assert "no record 1" in error_text(results[2])
    assert agent.namespaces() == ["someone-else"]


def test_tools_are_plain_functions_too(agent):
    tools = MemoryTools(lambda: agent, namespace=NS)  # an agent source: called on every call
    wrote = tools.remember("Ana lives in Lisbon.", {"who": "ana"})
    assert tools.recall("where does Ana live", k=1)["hits"][0]["id"] == wrote["record_id"]
    with pytest.raises(ValueError, match="exactly one of path"):
        tools.ingest()


# ---------------------------------------------------------------------- the command
@pytest.fixture
def opened(monkeypatch, fake_embedder):
    """The command's open_agent replaced by one with the fake embedder; what it opened."""
    seen: list[tuple[str, str, MemoryAgent]] = []

    def open_agent(db: str, namespace: str, embedder: str, device: str, **kw: object) -> MemoryAgent:
        agent = MemoryAgent.open(db, AgentConfig(device="cpu"), embedder=fake_embedder)
        seen.append((db, namespace, agent))
        return agent

    monkeypatch.setattr(cli_app, "open_agent", open_agent)
    return seen


def test_the_command_serves_the_given_database_and_namespace(tmp_path, monkeypatch, opened):
    served: list[Any] = []

    def serve_stdio(get_agent, *, namespace):  # what the client would do: one call, then hang up
        served.append((namespace, MemoryTools(get_agent, namespace).remember("Served over stdio.")))

    monkeypatch.setattr("titans_agent.adapters.mcp.server.serve_stdio", serve_stdio)
    db = tmp_path / "served.db"
    result = CliRunner().invoke(cli_app.cli, ["mcp", "--db", str(db), "--namespace", "alice"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert served[0][0] == "alice" and served[0][1]["decision"] == "new"
    assert opened[0][:2] == (str(db), "alice")
    with pytest.raises(StoreError, match="closed"):  # closed when the server stopped
        opened[0][2].stats()
    assert "namespace 'alice'" in result.stderr


def test_the_command_reports_a_memory_that_cannot_be_opened_on_each_call(tmp_path, monkeypatch):
    def open_agent(*args, **kw):
        raise StoreError("not a titans-agent database")

    def serve_stdio(get_agent, *, namespace):
        for _ in range(2):
            with pytest.raises(TitansAgentError, match="could not be opened .*not a titans-agent database"):
                get_agent()

    monkeypatch.setattr(cli_app, "open_agent", open_agent)
    monkeypatch.setattr("titans_agent.adapters.mcp.server.serve_stdio", serve_stdio)
    result = CliRunner().invoke(cli_app.cli, ["--db", str(tmp_path / "x.db"), "mcp"], catch_exceptions=False)
    assert result.exit_code == 0 and "Error: cannot open the memory: not a titans-agent database" in result.stderr


def test_the_command_without_the_extra_names_the_pip_line(monkeypatch, tmp_path):
    for name in [m for m in sys.modules if m.partition(".")[0] in ("mcp", "mcp_types")]:
        monkeypatch.setitem(sys.modules, name, None)  # `import mcp...` raises ImportError
    monkeypatch.delitem(sys.modules, "titans_agent.adapters.mcp.server")
    result = CliRunner().invoke(cli_app.cli, ["--db", str(tmp_path / "m.db"), "mcp"])
    assert result.exit_code == 1, result.output
    assert "pip install 'titans-agent[mcp]'" in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "m.db").exists()


# ---------------------------------------------------------------------- the real thing
@pytest.mark.integration
@pytest.mark.slow
def test_real_server_over_stdio_with_default_model(tmp_path):
    """``titans-agent mcp`` in a subprocess, the real embedder, driven by the SDK's stdio client."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TITANS_AGENT_")}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "titans_agent.cli.app", "--device", "cpu", "mcp", "--db", str(tmp_path / "real.db")],
        env=env,
        cwd=str(tmp_path),
    )
    fact = "Zoë's café — 東京 opens at 7:30 every weekday."

    async def go() -> None:
        with (tmp_path / "server.log").open("w", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                with anyio.fail_after(300):
                    await session.initialize()
                    tools = await session.list_tools()
                    assert {t.name for t in tools.tools} == {"remember", "recall", "add_turn", "ingest", "forget"}
                    wrote = await session.call_tool("remember", {"text": fact, "metadata": {"city": "Tokyo"}})
                    assert not wrote.is_error, wrote.content
                    await session.call_tool("remember", {"text": "The quarterly report is due in April."})
                    found = await session.call_tool("recall", {"query": "When does the café in Tokyo open?", "k": 2})
                    assert not found.is_error, found.content
                    hit = found.structured_content["hits"][0]
                    assert hit["text"] == fact and hit["kind"] == "note" and hit["metadata"] == {"city": "Tokyo"}
                    bad = await session.call_tool("recall", {"query": "  "})
                    assert bad.is_error and "query is empty" in bad.content[0].text
                    again = await session.call_tool("recall", {"query": "quarterly report", "k": 1})
                    assert not again.is_error and "April" in again.structured_content["hits"][0]["text"]

    try:
        anyio.run(go)
    except BaseException:
        print(Path(tmp_path / "server.log").read_text(encoding="utf-8", errors="replace"))
        raise


# ---------------------------------------------------------------------- bounds over stdio
SERVE = """
import resource, sys
sys.path.insert(0, sys.argv[1])
from conftest import FakeEmbedder
from titans_agent import AgentConfig, MemoryAgent
from titans_agent.adapters.mcp import serve_stdio

with MemoryAgent.open(sys.argv[2], AgentConfig(device="cpu"), embedder=FakeEmbedder()) as agent:
    agent.remember("A note written before serving.", namespace=sys.argv[4])  # the memory is built
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    serve_stdio(agent, namespace=sys.argv[4], max_message_bytes=int(sys.argv[3]))
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(f"peak memory grew by {grown} KiB while serving", file=sys.stderr)
"""
CAP = 1024 * 1024


@pytest.fixture
def served(tmp_path):
    """The server over stdio in a subprocess (the fake embedder, messages capped at 1 MiB): its
    parameters, and its stderr once it has stopped."""
    script = tmp_path / "serve.py"
    script.write_text(SERVE, encoding="utf-8")
    tests = str(Path(__file__).resolve().parent)
    args = [str(script), tests, str(tmp_path / "served.db"), str(CAP), NS]
    params = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ), cwd=str(tmp_path))
    log = tmp_path / "server.log"
    return params, lambda: log.read_text(encoding="utf-8", errors="replace"), log


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.slow
def test_over_stdio_a_huge_message_and_a_deep_one_are_answered_at_once(served):
    params, server_log, log = served
    from mcp import MCPError

    huge = "Marguerite keeps the ledger. " * (48 * 1024 * 1024 // 29)  # 48 MiB
    errors: list[str] = []

    async def go() -> None:
        with log.open("w", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                with anyio.fail_after(120):
                    await session.initialize()
                with anyio.fail_after(60):  # 48 MiB are read in pieces and thrown away
                    with pytest.raises(MCPError) as too_long:
                        await session.call_tool("remember", {"text": huge})
                errors.append(str(too_long.value))
                with anyio.fail_after(30):  # the parser stops at 200 levels: answered, not dropped
                    with pytest.raises(MCPError) as too_deep:
                        await session.call_tool("remember", {"text": "x", "metadata": {"a": nested(240)}})
                errors.append(str(too_deep.value))
                with anyio.fail_after(30):
                    over = await session.call_tool(
                        "add_turn", {"session_id": "s", "role": "u", "content": "y" * 100_001}
                    )
                    assert over.is_error and "over the limit of 100,000" in over.content[0].text
                    deep = await session.call_tool("remember", {"text": "x", "metadata": {"a": nested(100)}})
                    assert deep.is_error and "nests deeper than 64" in deep.content[0].text
                    fine = await session.call_tool("remember", {"text": "Still serving after all that."})
                    assert not fine.is_error and fine.structured_content["decision"] == "new"

    try:
        anyio.run(go)
    except BaseException:
        print(server_log())
        raise
    assert f"over this server's limit of {CAP:,} bytes" in errors[0] and "ingest it by its path" in errors[0]
    assert "nested too deeply" in errors[1]
    grown = int(server_log().rsplit("peak memory grew by ", 1)[1].split()[0])
    assert grown < 32 * 1024, f"serving a 48 MiB message grew the peak memory by {grown} KiB"


def _raw_exchange(served, raw: str, *, last_id: Any) -> list[dict[str, Any]]:
    """Send ``raw`` (JSON-RPC lines) to a real server over stdio and read its answers until the one
    with id ``last_id`` (two minutes at most); the server's log is printed when that fails."""
    params, server_log, log = served

    async def go() -> list[dict[str, Any]]:
        answers: list[dict[str, Any]] = []
        with log.open("w", encoding="utf-8") as errlog:
            async with await anyio.open_process([params.command, *params.args], stderr=errlog) as proc:
                await proc.stdin.send(raw.encode())
                buffer = b""
                with anyio.fail_after(120):
                    while not any(a.get("id") == last_id for a in answers):
                        buffer += await proc.stdout.receive()
                        *done, buffer = buffer.split(b"\n")
                        answers += [json.loads(line) for line in done]
                await proc.stdin.aclose()
                await proc.wait()
        return answers

    try:
        return anyio.run(go)
    except BaseException:
        print(server_log())
        raise


@pytest.mark.slow
def test_over_stdio_a_request_nested_100_000_deep_is_answered(served):
    """The SDK's client cannot write such a request (its serialiser stops first): raw lines."""
    deep = "[" * 100_000 + "]" * 100_000
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    raw = "\n".join(json.dumps(x) for x in lines) + "\n"
    raw += '{"jsonrpc":"2.0","id":"deep-7","method":"tools/call","params":{"name":"remember","arguments":'
    raw += '{"text":"x","metadata":{"a":' + deep + "}}}}\n"
    raw += json.dumps({"jsonrpc": "2.0", "id": 8, "method": "ping"}) + "\n"

    answers = {a.get("id"): a for a in _raw_exchange(served, raw, last_id=8)}
    error = answers["deep-7"]["error"]
    assert error["code"] == -32700 and "nested too deeply" in error["message"], error
    assert answers[8]["result"] == {}


@pytest.mark.slow
def test_over_stdio_a_batch_is_refused_at_once_and_serving_goes_on(served):
    """MCP's current protocol revisions have no JSON-RPC batches: one Invalid Request, id null."""
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        [{"jsonrpc": "2.0", "id": 2, "method": "ping"}, {"jsonrpc": "2.0", "id": 3, "method": "ping"}],
        [],
        {"jsonrpc": "2.0", "id": 8, "method": "ping"},
    ]
    raw = "".join(json.dumps(x) + "\n" for x in lines)

    answers = _raw_exchange(served, raw, last_id=8)
    refused = [a for a in answers if a.get("id") is None]
    assert len(refused) == 2, answers
    for answer in refused:
        assert answer["error"]["code"] == -32600 and "batches" in answer["error"]["message"], answer
    assert [a["id"] for a in answers if a.get("id") is not None] == [1, 8]
    assert answers[-1]["result"] == {}


@pytest.mark.slow
def test_over_stdio_a_request_whose_params_are_no_object_is_answered_with_its_id(served):
    """ "params": "x" (or a number, or a list) is no valid request: an Invalid Request answer with
    the request's own id, so that the client does not wait for it forever."""
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 206, "method": "tools/call", "params": "x"},
        {"jsonrpc": "2.0", "id": 207, "method": "tools/call", "params": 5},
        {"jsonrpc": "2.0", "id": "q", "method": "tools/list", "params": ["remember", "x"]},
        {"jsonrpc": "2.0", "id": 8, "method": "ping"},
    ]
    raw = "".join(json.dumps(x) + "\n" for x in lines)

    answers = {a.get("id"): a for a in _raw_exchange(served, raw, last_id=8)}
    for rid in (206, 207, "q"):
        error = answers[rid]["error"]
        assert error["code"] == -32600 and "params" in error["message"], error
    assert answers[8]["result"] == {}


@pytest.mark.parametrize(
    "head, tail, expected",
    [
        ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"a":[[[', "", 7),
        ('{"method": "tools/call", "params": {"id": 1, "x": [[', ', "id": "abc"}\n', "abc"),
        ('{"jsonrpc":"2.0","params":{"id":3},"method":"ping","id":"q\\"1"}', "", 'q"1'),
        ('{"jsonrpc":"2.0","id":7,"result":{"a":[[[', "", None),  # a response: never answered
        ('{"jsonrpc":"2.0","id":true,"method":"ping"}', "", None),
        ('{"jsonrpc":"2.0","method":"tools/call","params":{"text":"\\"id\\": 5', "", None),
        ("[[[[", "", None),
    ],
)
def test_the_id_of_a_request_too_large_or_deep_to_parse(head, tail, expected):
    assert request_id(head, tail) == expected
