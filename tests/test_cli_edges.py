"""The command line's rough edges, as a new user meets them (issue 18): a model loaded only when a
command needs it, ingest's missing paths, size limit and Ctrl-C, and databases opened read-only.

The lazy-model tests replace the default embedder's loader with the fake embedder of conftest.py
(the database is written by a fake that bears the default model's name), so they check when the
model is loaded, not the model; one integration test loads the real one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner, Result
from conftest import FakeEmbedder, SmallFakeEmbedder, query
from sqlalchemy.exc import DBAPIError
from titans_agent.cli import app as cli_app

from titans_agent import (
    DEFAULT_EMBEDDER,
    AgentConfig,
    EmbedderMismatchError,
    MemoryAgent,
    ReadOnlyError,
    SchemaOutdatedError,
    StoreError,
    export_jsonl,
    import_jsonl,
)
from titans_agent.embeddings import SentenceTransformerEmbedder

TESTS = Path(__file__).resolve().parent


class AsDefault(FakeEmbedder):
    """The fake embedder under the default model's name: what a database written by the real
    default model looks like to an agent opened with the default (lazy) embedder."""

    name = DEFAULT_EMBEDDER


class SmallAsDefault(SmallFakeEmbedder):
    name = DEFAULT_EMBEDDER


@pytest.fixture
def loads(monkeypatch) -> list[str]:
    """Replace the default embedder's model loading with the fake embedder; the names loaded."""
    seen: list[str] = []

    def fake_load(self: SentenceTransformerEmbedder) -> None:
        seen.append(self.name)
        fake = FakeEmbedder()
        self._model = SimpleNamespace(tokenizer=fake.tokenizer, encode=lambda texts, **_kw: fake.embed(list(texts)))
        self._dim, self._max_tokens = fake.dim, fake.max_tokens

    monkeypatch.setattr(SentenceTransformerEmbedder, "_load", fake_load)
    return seen


def write_default_db(path: Path, embedder: FakeEmbedder | None = None) -> int:
    """A database as the default model would have written it; the id of its note."""
    with MemoryAgent.open(path, AgentConfig(device="cpu"), embedder=embedder or AsDefault()) as agent:
        agent.add_turn("s1", "user", "Please call me Dana.")
        agent.ingest("Deploys go out on Tuesdays after the review.", source="notes/deploy")
        return agent.remember("The staging server listens on port 8443.").record_id


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_error_line(result: Result, code: int = 1) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


# ---------------------------------------------------------------------- the model, when needed
def test_reading_rows_never_loads_the_model(tmp_path, loads):
    db = tmp_path / "m.db"
    note = write_default_db(db)
    with MemoryAgent.open(db, AgentConfig(device="cpu")) as agent:
        assert isinstance(agent.embedder, SentenceTransformerEmbedder) and not agent.embedder.loaded
        assert agent.namespaces() == ["default"]
        st = agent.stats()
        assert (st.records, st.turns, st.memory_step, st.dim, st.embedder) == (3, 1, 3, 384, DEFAULT_EMBEDDER)
        assert [t["content"] for t in agent.turns("s1")] == ["Please call me Dana."]
        assert len(agent.records()) == 3
        assert agent.update_metadata({"team": "ops"}, source="notes/deploy") == 1
        assert agent.forget(source="notes/deploy") == 1
        assert agent.forget(record_id=note) == 1
        assert loads == [] and not agent.embedder.loaded
        assert agent.recall("what should I call the user?", k=1)[0].text == "Please call me Dana."
        agent.recall("Dana", k=1)
        assert loads == [DEFAULT_EMBEDDER] and agent.embedder.loaded  # loaded once, at the first recall


def test_a_lazy_embedder_is_checked_by_name_at_open_and_by_dimension_when_it_loads(tmp_path, loads):
    other = tmp_path / "other.db"
    with MemoryAgent.open(other, embedder=FakeEmbedder()) as agent:
        agent.remember("written by another embedder")
    with pytest.raises(EmbedderMismatchError, match="fake-hash-384"):
        MemoryAgent.open(other)
    small = tmp_path / "small.db"
    write_default_db(small, SmallAsDefault())  # the default's name, another dimension
    with MemoryAgent.open(small, AgentConfig(device="cpu")) as agent:
        assert agent.stats().dim == 32 and loads == []
        with pytest.raises(EmbedderMismatchError, match="dim 32"):
            agent.recall("Dana")
    assert loads == [DEFAULT_EMBEDDER]


@pytest.mark.slow
def test_help_and_row_reads_import_neither_torch_nor_the_model(tmp_path):
    db = tmp_path / "m.db"
    write_default_db(db)
    code = (
        "import sys; from titans_agent.cli.app import cli\n"
        "heavy = ('torch', 'transformers', 'sentence_transformers')\n"
        "for args in (['--help'], ['--db', sys.argv[1], 'stats'], ['--db', sys.argv[1], 'turns', 's1']):\n"
        "    try:\n"
        "        cli.main(args, standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "    print('LOADED', args[-1], [m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert [ln for ln in out.stdout.splitlines() if ln.startswith("LOADED")] == [
        "LOADED --help []",
        "LOADED stats []",
        "LOADED s1 []",
    ]
    assert "Please call me Dana." in out.stdout and "records        3" in out.stdout


@pytest.mark.integration
def test_the_default_embedder_loads_its_model_at_first_use():
    emb = SentenceTransformerEmbedder(device="cpu")
    assert emb.name == DEFAULT_EMBEDDER and not emb.loaded
    assert emb.embed(["hello"]).shape == (1, 384) and emb.loaded
    assert (emb.dim, emb.max_tokens) == (384, 254)


# ---------------------------------------------------------------------- ingest
@pytest.fixture
def cli(tmp_path, monkeypatch):
    """CliRunner on tmp_path/memory.db; open_agent uses ``state.embedder`` and batches of 2."""
    state = SimpleNamespace(embedder=FakeEmbedder(), db=tmp_path / "memory.db", opened=[])

    def open_agent(db, namespace, embedder, device, read_only=False, **kw):
        state.opened.append(read_only)
        return MemoryAgent.open(
            db, AgentConfig(device="cpu", batch_size=2), embedder=state.embedder, read_only=read_only
        )

    monkeypatch.setattr(cli_app, "open_agent", open_agent)
    monkeypatch.chdir(tmp_path)
    state.run = lambda *args: CliRunner().invoke(cli_app.cli, ["--db", str(state.db), *args], catch_exceptions=False)
    return state


def test_max_file_bytes_skips_larger_files(cli, tmp_path):
    (tmp_path / "big.md").write_text("word " * 1000, encoding="utf-8")  # 5,000 bytes
    (tmp_path / "small.md").write_text("A small file about apples.", encoding="utf-8")
    result = cli.run("ingest", "big.md", "small.md", "--max-file-bytes", "1000", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["files"] == 1 and report["skipped"] == [
        {"path": "big.md", "reason": "too large (5,000 bytes > 1,000)"}
    ]
    assert json.loads(cli.run("ingest", "big.md", "--json").stdout)["files"] == 1  # the default is 4 MiB
    bad = cli.run("ingest", "small.md", "--max-file-bytes", "0")
    assert bad.exit_code == 2 and "--max-file-bytes" in bad.output
    assert "[default: 4194304 (4 MiB)]" in " ".join(cli.run("ingest", "--help").stdout.split())


class InterruptingEmbedder(FakeEmbedder):
    """Raises KeyboardInterrupt (as Ctrl-C does) in its ``at``-th embedding call."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at

    def embed(self, texts):
        if self.calls + 1 == self.at:
            self.calls += 1
            raise KeyboardInterrupt
        return super().embed(texts)


def test_ctrl_c_keeps_what_was_committed_and_a_rerun_resumes(cli, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(5):
        (docs / f"{i}.md").write_text(f"Document {i} is about topic number {i}.", encoding="utf-8")
    cli.embedder = InterruptingEmbedder(at=2)  # the first batch of two files is committed
    stopped = cli.run("ingest", "docs")
    assert stopped.exit_code == 130
    assert stopped.stderr.strip().splitlines()[-1] == (
        "Interrupted: kept what was committed: 2 files complete, 2 chunks in all (2 stored). "
        "Run the same command again to resume where it stopped."
    )
    con = sqlite3.connect(cli.db)
    assert con.execute("SELECT count(*) FROM occurrences").fetchone()[0] == 2
    con.close()
    cli.embedder = FakeEmbedder()
    again = json.loads(cli.run("ingest", "docs", "--json").stdout)
    assert (again["unchanged"], again["files"], again["chunks"]) == (2, 3, 3)
    cli.embedder = InterruptingEmbedder(at=1)
    (docs / "5.md").write_text("A sixth document.", encoding="utf-8")
    nothing = cli.run("ingest", "docs/5.md")
    assert nothing.exit_code == 130 and "Interrupted: nothing was committed." in nothing.stderr


# ---------------------------------------------------------------------- read-only
@pytest.mark.backends()
def test_a_read_only_agent_reads_and_refuses_every_write(backend, db_url, tmp_path, fake_embedder):
    with MemoryAgent.open(db_url, embedder=fake_embedder) as agent:
        agent.add_turn("s1", "user", "Please call me Dana.")
        note = agent.remember("The staging server listens on port 8443.", source="crm").record_id
    before = digest(Path(db_url)) if backend == "sqlite" else None
    backup = tmp_path / "backup.jsonl"
    with MemoryAgent.open(db_url, embedder=fake_embedder, read_only=True) as ro:
        assert ro.store.read_only and ro.namespaces() == ["default"] and ro.stats().records == 2
        assert ro.recall("which port does staging use?", k=1)[0].id == note
        assert ro.turns("s1")[0]["content"] == "Please call me Dana." and len(ro.records()) == 2
        assert export_jsonl(ro, backup).records == 2
        writes = {
            "remember": lambda: ro.remember("a new note"),
            "add_turn": lambda: ro.add_turn("s1", "user", "hello again"),
            "add_turns": lambda: ro.add_turns([("s2", "user", "hi")]),
            "ingest": lambda: ro.ingest("a text", source="t"),
            "update_metadata": lambda: ro.update_metadata({"a": "b"}, source="crm"),
            "forget source": lambda: ro.forget(source="crm"),
            "forget id": lambda: ro.forget(record_id=note),
            "new namespace": lambda: ro.remember("x", namespace="other"),
            "import": lambda: import_jsonl(ro, backup),
        }
        for write in writes.values():
            with pytest.raises(ReadOnlyError, match="read-only"):
                write()
        with pytest.raises(DBAPIError, match="read.?only"):  # the database itself refuses, too
            query(ro, "DELETE FROM records")
        assert ro.stats().records == 2 and ro.namespaces() == ["default"]
    if before is not None:
        assert digest(Path(db_url)) == before


def test_a_read_only_open_never_creates_or_migrates(tmp_path, fake_embedder):
    from test_migrations import _empty_v1

    missing = tmp_path / "sub" / "none.db"
    with pytest.raises(StoreError, match="no database at .*never creates"):
        MemoryAgent.open(missing, embedder=fake_embedder, read_only=True)
    assert not missing.parent.exists()
    old = tmp_path / "old.db"
    _empty_v1(old)
    before = digest(old)
    with pytest.raises(SchemaOutdatedError, match="older schema revision '0001'.*open it writable once"):
        MemoryAgent.open(old, embedder=fake_embedder, read_only=True)
    assert digest(old) == before and sorted(p.name for p in tmp_path.iterdir()) == ["old.db"]
    MemoryAgent.open(old, embedder=fake_embedder).close()  # writable: migrated
    MemoryAgent.open(old, embedder=fake_embedder, read_only=True).close()
    # the CLI's read commands open an older database writable once instead (which migrates it)
    older = tmp_path / "older.db"
    _empty_v1(older)
    agent = cli_app.open_agent(str(older), "default", DEFAULT_EMBEDDER, "cpu", read_only=True)
    try:
        assert agent.stats().records == 0 and not agent.store.read_only
    finally:
        agent.close()
    MemoryAgent.open(older, embedder=fake_embedder, read_only=True).close()  # now at the head


def test_cli_read_commands_open_read_only_and_writes_are_one_error_line(cli, tmp_path):
    assert cli.run("remember", "The staging server listens on port 8443.").exit_code == 0
    cli.run("add-turn", "s1", "user", "Please call me Dana.")
    before, cli.opened[:] = digest(cli.db), []
    for args in (["stats"], ["turns", "s1"], ["recall", "staging port"], ["export", str(tmp_path / "b.jsonl")]):
        result = cli.run(*args)
        assert result.exit_code == 0, (args, result.output)
    assert cli.opened == [True, True, True, True] and digest(cli.db) == before
    cli_app_open = cli_app.open_agent
    try:  # every write through a read-only agent: one line, no traceback
        cli_app.open_agent = lambda db, ns, emb, dev, **_kw: cli_app_open(db, ns, emb, dev, read_only=True)
        line = one_error_line(cli.run("remember", "one more"))
    finally:
        cli_app.open_agent = cli_app_open
    assert "read-only" in line and "nothing was written" in line


READ_ONLY_RUN = """
import json, sys
sys.path.insert(0, sys.argv[1])
from click.testing import CliRunner
from conftest import FakeEmbedder
from titans_agent.cli import app
from titans_agent import AgentConfig, MemoryAgent

emb = FakeEmbedder()
app.open_agent = lambda db, ns, e, d, read_only=False, **kw: MemoryAgent.open(
    db, AgentConfig(device="cpu"), embedder=emb, read_only=read_only
)
out = {}
for name, args in json.loads(sys.argv[2]).items():
    r = CliRunner().invoke(app.cli, args)
    out[name] = [r.exit_code, r.stdout, r.stderr]
print(json.dumps(out))
"""


def _without_write_permission(folder: Path) -> list[str] | None:
    """The command prefix that runs a process which cannot write to the read-only ``folder``:
    none for a normal user; as root (which ignores permissions), ``setpriv`` without the capability
    that lets root write anywhere; None when that cannot be done here."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    prefix = [setpriv, "--bounding-set=-dac_override", "--"]
    code = f"import os; print(os.access({str(folder)!r}, os.W_OK))"
    probe = subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True)
    return prefix if probe.returncode == 0 and probe.stdout.strip() == "False" else None


@pytest.mark.slow
def test_a_database_in_a_read_only_folder_can_be_read(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "memory.db"
    with MemoryAgent.open(db, embedder=FakeEmbedder()) as agent:
        agent.add_turn("s1", "user", "Please call me Dana.")
        agent.remember("The staging server listens on port 8443.")
    assert sorted(p.name for p in folder.iterdir()) == ["memory.db"]  # no -wal or -shm left
    db.chmod(0o444)
    folder.chmod(0o555)
    try:
        prefix = _without_write_permission(folder)
        if prefix is None:
            pytest.skip("running as root, and setpriv cannot drop root's right to write anywhere")
        base = ["--db", str(db)]
        commands = {
            "stats": [*base, "stats", "--json"],
            "turns": [*base, "turns", "s1"],
            "recall": [*base, "recall", "staging port", "-k", "1"],
            "export": [*base, "export", str(tmp_path / "backup.jsonl")],
            "remember": [*base, "remember", "cannot be written"],
        }
        run = subprocess.run(
            [*prefix, sys.executable, "-c", READ_ONLY_RUN, str(TESTS), json.dumps(commands)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout)
        for name in ("stats", "turns", "recall", "export"):
            assert out[name][0] == 0, (name, out[name])
        assert json.loads(out["stats"][1])["records"] == 2
        assert "Please call me Dana." in out["turns"][1] and "port 8443" in out["recall"][1]
        code, _, err = out["remember"]
        assert code == 1 and err.startswith("Error: ") and "Traceback" not in err
        assert "read-only" in err and "read_only=True" in err
        assert sorted(p.name for p in folder.iterdir()) == ["memory.db"]
    finally:
        folder.chmod(0o755)
        db.chmod(0o644)


# ---------------------------------------------------------------------- --meta values
def test_meta_values_that_json_reads_but_cannot_store_are_strings(cli):
    """NaN, Infinity and -Infinity are what Python's json module reads, not JSON numbers: given
    to ``--meta`` they are strings (as the help says of any value that is not JSON), not an error."""
    args = ["--meta", "score=NaN", "--meta", "peak=Infinity", "--meta", "low=-Infinity", "--meta", "year=2021"]
    result = cli.run("remember", "The benchmark score was never measured.", *args, "--json")
    assert result.exit_code == 0, result.output
    found = cli.run("recall", "benchmark score", "--where", '{"score": "NaN"}', "--json")
    assert found.exit_code == 0, found.output
    (hit,) = json.loads(found.stdout)
    assert hit["metadata"] == {"score": "NaN", "peak": "Infinity", "low": "-Infinity", "year": 2021}


def test_a_group_option_after_the_command_says_where_it_goes(tmp_path):
    result = CliRunner().invoke(cli_app.cli, ["--db", str(tmp_path / "m.db"), "forget", "--yes", "-n", "ana"])
    assert result.exit_code == 2
    assert "-n is an option of titans-agent itself: give it before the command" in result.output
    other = CliRunner().invoke(cli_app.cli, ["--db", str(tmp_path / "m.db"), "forget", "--bogus"])
    assert other.exit_code == 2 and "option of titans-agent itself" not in other.output
    assert not (tmp_path / "m.db").exists()


def test_hostile_numbers_and_nesting_are_user_errors(tmp_path):
    from titans_agent import AgentConfig, InvalidInputError
    from titans_agent.ingest.chat import parse_chat_line

    with pytest.raises(InvalidInputError, match="not readable JSON"):  # more digits than Python converts
        parse_chat_line('{"session_id": ' + "9" * 5000 + ', "role": "user", "content": "hi"}')
    deep = '{"a":' * 1500 + "1" + "}" * 1500
    result = CliRunner().invoke(cli_app.cli, ["--db", str(tmp_path / "m.db"), "recall", "x", "--where", deep])
    assert result.exit_code == 2 and "nested too deeply" in result.output
    with pytest.raises(ValueError, match="less than or equal to 512"):
        AgentConfig(threads=100_000)
