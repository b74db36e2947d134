"""The library owns a file's identity and a database's existence: ``recall``, ``records`` and
``forget`` find an ingested file by any spelling of its path (the CLI and the MCP tools pass it
through), and ``MemoryAgent.open(..., create=False)`` refuses a missing database, creating nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import make_url
from titans_agent.adapters.mcp import MemoryTools
from titans_agent.cli import app as cli_app

from titans_agent import AgentConfig, DatabaseNotFoundError, MemoryAgent, StoreError


def _docs(root: Path, names: tuple[str, ...] = ("a", "b", "c", "d")) -> Path:
    docs = root / "work" / "docs"
    docs.mkdir(parents=True)
    for i, name in enumerate(names):
        (docs / f"{name}.md").write_text(f"Service {name} listens on port {8000 + i} behind the gateway.\n")
    return docs


def _spellings(docs: Path) -> dict[str, str]:
    """From tmp_path/other: a relative path, an absolute one, a ./ one and a ~ one (HOME is tmp_path)."""
    return {"a": "../work/docs/a.md", "b": str(docs / "b.md"), "c": "./../work/docs/c.md", "d": "~/work/docs/d.md"}


def _elsewhere(tmp_path: Path, monkeypatch) -> None:
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(other)
    monkeypatch.setenv("HOME", str(tmp_path))


# ---------------------------------------------------------------------- the library
@pytest.mark.backends("sqlite", "postgresql")
def test_recall_records_and_forget_find_a_file_by_any_spelling_of_its_path(agent, tmp_path, monkeypatch):
    docs = _docs(tmp_path)
    monkeypatch.chdir(docs.parent)
    assert agent.ingest("docs").files == 4
    _elsewhere(tmp_path, monkeypatch)
    for name, spelling in _spellings(docs).items():
        real = os.path.realpath(docs / f"{name}.md")
        assert [h.source for h in agent.records(source=spelling)] == [real], spelling
        hits = agent.recall("which port does the service listen on", k=5, source=spelling)
        assert [h.source for h in hits] == [real], spelling
    for spelling in _spellings(docs).values():
        assert agent.forget(source=spelling) == 1, spelling
    assert agent.records() == []


@pytest.mark.backends("sqlite")
def test_a_name_as_stored_comes_first_then_the_file_even_one_deleted_since(agent, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("notes.md").write_text("The file says the backup runs at noon.\n")
    agent.ingest("notes.md")
    agent.ingest("The named text says the backup runs at midnight.", source="notes.md")
    assert [h.text for h in agent.records(source="notes.md")] == ["The named text says the backup runs at midnight."]
    assert agent.forget(source="notes.md") == 1  # the named text
    Path("notes.md").unlink()  # the file is gone from the disk, its chunks are not
    assert [h.source for h in agent.records(source="notes.md")] == [str(tmp_path.resolve() / "notes.md")]
    assert agent.forget(source="./notes.md") == 1
    assert agent.records() == [] and agent.forget(source="notes.md") == 0
    with pytest.raises(ValueError, match="source"):
        agent.records(source="a\x00b")


# ---------------------------------------------------------------------- the faces
def _run(db: Path, *args: str):
    result = CliRunner().invoke(cli_app.cli, ["--db", str(db), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def cli_db(tmp_path, monkeypatch, fake_embedder) -> Path:
    def open_agent(db, namespace, embedder, device, read_only=False, threads=1, create=True):
        config = AgentConfig(device="cpu")
        return MemoryAgent.open(db, config, embedder=fake_embedder, read_only=read_only, create=create)

    monkeypatch.setattr(cli_app, "open_agent", open_agent)
    return tmp_path / "memory.db"


def test_the_cli_recalls_and_forgets_a_file_ingested_from_another_directory(cli_db, tmp_path, monkeypatch):
    docs = _docs(tmp_path)
    monkeypatch.chdir(docs.parent)
    assert _run(cli_db, "ingest", "docs", "--json")["files"] == 4
    _elsewhere(tmp_path, monkeypatch)
    (docs / "d.md").unlink()  # recalled and forgotten by its path all the same
    for name, spelling in _spellings(docs).items():
        hits = _run(cli_db, "recall", "which port does the service listen on", "--source", spelling, "--json")
        assert [h["source"] for h in hits] == [os.path.realpath(docs / f"{name}.md")], spelling
        assert _run(cli_db, "forget", "--source", spelling, "--yes", "--json") == {"deleted": 1}, spelling


def test_the_mcp_forget_tool_finds_a_file_ingested_from_another_directory(agent, tmp_path, monkeypatch):
    docs = _docs(tmp_path)
    tools = MemoryTools(agent)
    monkeypatch.chdir(docs.parent)
    assert tools.ingest(path="docs")["files"] == 4
    _elsewhere(tmp_path, monkeypatch)
    for spelling in _spellings(docs).values():
        assert tools.forget(source=spelling) == {"namespace": "default", "deleted": 1}, spelling
    assert tools.recall("which port does the service listen on")["hits"] == []


# ---------------------------------------------------------------------- open(create=False)
@pytest.mark.backends("sqlite", "postgresql")
def test_open_create_false_refuses_a_missing_database_and_creates_nothing(backend, db_url, fake_embedder):
    for options in ({"create": False}, {"read_only": True}):
        with pytest.raises(DatabaseNotFoundError, match="no (titans-agent )?database at") as caught:
            MemoryAgent.open(db_url, embedder=fake_embedder, **options)
        assert isinstance(caught.value, StoreError) and isinstance(caught.value, FileNotFoundError)
        if backend == "sqlite":
            assert not Path(db_url).exists()
        else:
            engine = create_engine(db_url)
            try:
                assert inspect(engine).get_table_names() == []
            finally:
                engine.dispose()
    MemoryAgent.open(db_url, embedder=fake_embedder).close()  # made by a plain open
    with MemoryAgent.open(db_url, embedder=fake_embedder, create=False) as agent:
        assert agent.remember("Written to a database that exists.").decision == "new"


def test_open_create_false_makes_no_folder(tmp_path, fake_embedder):
    for db in (tmp_path / "new" / "folder" / "m.db", f"sqlite:///{tmp_path / 'new' / 'm.db'}", "sqlite://"):
        with pytest.raises(DatabaseNotFoundError, match="open\\(create=False\\) never creates one"):
            MemoryAgent.open(db, embedder=fake_embedder, create=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.backends("postgresql")
def test_a_database_the_server_lacks_is_not_found_on_any_open(backend, pg_database, fake_embedder):
    url = make_url(pg_database).set(database="titans_no_such_database").render_as_string(hide_password=False)
    for options in ({"create": False}, {"read_only": True}, {}):
        with pytest.raises(DatabaseNotFoundError, match='database "titans_no_such_database" does not exist'):
            MemoryAgent.open(url, embedder=fake_embedder, **options)


def test_create_false_refuses_an_empty_sqlite_file_and_leaves_it_empty(tmp_path, fake_embedder):
    """An empty file is no database: ``create=False`` refuses it as it refuses an empty
    PostgreSQL database, and writes no schema into it."""
    empty = tmp_path / "memory.db"
    empty.touch()
    with pytest.raises(DatabaseNotFoundError):
        MemoryAgent.open(empty, embedder=fake_embedder, create=False)
    assert empty.stat().st_size == 0
