"""The titans-agent command line, through click's CliRunner against a real SQLite file.

Every test but the last replaces ``titans_agent.cli.app.open_agent`` so the agent gets the
deterministic FakeEmbedder of conftest.py; the last runs the real CLI with the real default model.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import click
import pytest
import torch
from click.testing import CliRunner, Result
from titans_agent.cli import app as cli_app
from titans_agent.cli import output as cli_output

from titans_agent import AgentConfig, MemoryAgent, StoreError

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = sorted(cli_app.cli.commands)


class CLI:
    """Runs commands against ``tmp_path/memory.db`` with the fake embedder."""

    def __init__(self, db: Path, embedder) -> None:
        self.db = db
        self.embedder = embedder
        self.runner = CliRunner()
        self.opened: list[tuple[str, str, str, str]] = []
        self.agents: list[MemoryAgent] = []
        self.threads: list[int | None] = []

    def open_agent(
        self,
        db: str,
        namespace: str,
        embedder: str,
        device: str,
        read_only: bool = False,
        threads: int | None = 1,
        create: bool = True,
    ) -> MemoryAgent:
        self.opened.append((db, namespace, embedder, device))
        self.threads.append(threads)
        config = AgentConfig(device="cpu")
        agent = MemoryAgent.open(db, config, embedder=self.embedder, read_only=read_only, create=create)
        self.agents.append(agent)
        return agent

    def __call__(self, *args: str, input: str | bytes | None = None, env=None) -> Result:
        # catch_exceptions=False: an uncaught exception fails the test instead of reading as exit 1
        return self.runner.invoke(
            cli_app.cli,
            ["--db", str(self.db), *args],
            input=input,
            env=env,
            catch_exceptions=False,
        )

    def json(self, *args: str, input: str | None = None):
        result = self(*args, "--json", input=input)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)


@pytest.fixture
def cli(tmp_path, monkeypatch, fake_embedder):
    c = CLI(tmp_path / "memory.db", fake_embedder)
    monkeypatch.setattr(cli_app, "open_agent", c.open_agent)
    # Every command builds a NeuralMemory (a QR per projection); on a busy small machine torch's
    # thread pool makes that ~50x slower than one thread. Tests here check the CLI, not speed.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield c
    finally:
        torch.set_num_threads(threads)
    for agent in c.agents:  # every command closes the agent it opened
        with pytest.raises(StoreError, match="closed"):
            agent.stats()


def assert_one_error_line(result: Result, code: int = 1) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def count(db: Path, sql: str) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


# ---------------------------------------------------------------------- help and docs
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_examples_in_help(command, monkeypatch):
    def no_agent(*args):
        raise AssertionError("--help must not open the agent")

    monkeypatch.setattr(cli_app, "open_agent", no_agent)
    result = CliRunner().invoke(cli_app.cli, [command, "--help"], catch_exceptions=False)
    assert result.exit_code == 0
    assert "Examples:" in result.output
    assert f"titans-agent {command}" in result.output or f" {command} " in result.output


def test_group_help_documents_default_database_and_env_vars():
    result = CliRunner().invoke(cli_app.cli, ["--help"])
    assert result.exit_code == 0
    for text in (
        "Examples:",
        "TITANS_AGENT_DB",
        "TITANS_AGENT_NAMESPACE",
        str(cli_app.DEFAULT_DB),
    ):
        assert text in result.output
    assert set(COMMANDS) >= {
        "ingest", "recall", "remember", "add-turn", "import-chat", "stats", "forget", "turns",
    }  # fmt: skip


def test_version():
    result = CliRunner().invoke(cli_app.cli, ["--version"])
    assert result.exit_code == 0 and re.search(r"titans-agent, version \d", result.output)


def test_cli_guide_documents_every_command():
    path = ROOT / "docs" / "guides" / "cli.md"
    assert path.is_file(), "docs/guides/cli.md is missing; it must show every command"
    guide = path.read_text(encoding="utf-8")
    lines = [line for line in guide.splitlines() if "titans-agent" in line]
    missing = [c for c in COMMANDS if not any(re.search(rf"(?<![\w-]){c}(?![\w-])", ln) for ln in lines)]
    assert not missing, f"docs/guides/cli.md shows no `titans-agent ... <command>` line for: {missing}"


# ---------------------------------------------------------------------- remember and recall
def test_remember_then_recall_json(cli):
    out = cli.json("remember", "The staging server listens on port 8443.", "--meta", "team=ops")
    assert out["decision"] == "new" and out["record_id"] >= 1 and out["surprise"] >= 0
    cli.json("remember", "Backups run every night at 02:00 UTC.")
    hits = cli.json("recall", "which port does the staging server use?", "-k", "2")
    assert len(hits) == 2
    assert hits[0]["text"] == "The staging server listens on port 8443."
    assert hits[0]["metadata"] == {"team": "ops"} and hits[0]["kind"] == "note"
    assert hits[0]["score"] >= hits[1]["score"]
    assert count(cli.db, "SELECT count(*) FROM records") == 2  # a real SQLite file


def test_remember_text_output_stdin_and_repeat(cli):
    first = cli("remember", "Zoë's café — 東京")
    assert first.exit_code == 0
    assert re.search(r"^decision\s+new$", first.stdout, re.M)
    assert re.search(r"^record\s+1$", first.stdout, re.M)
    assert re.search(r"^surprise\s+\d+\.\d{4}$", first.stdout, re.M)
    again = cli("remember", "-", input="  zoë's CAFÉ — 東京 \n")
    assert again.exit_code == 0 and re.search(r"^decision\s+repeat$", again.stdout, re.M)
    result = cli("recall", "café 東京")
    assert "Zoë's café — 東京" in result.stdout


def test_remember_rejects_malformed_meta(cli):
    result = cli("remember", "x", "--meta", "novalue")
    assert result.exit_code == 2 and "KEY=VALUE" in result.output and "Traceback" not in result.output
    twice = cli("remember", "x", "--meta", "a=1", "--meta", " a=2")  # the first was silently dropped
    assert twice.exit_code == 2 and "'a' is given twice" in twice.output


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_blank_query_is_one_error_line(cli, query):
    line = assert_one_error_line(cli("recall", query))
    assert line == "Error: query is empty or only whitespace"
    assert cli.opened == []  # refused before any model is loaded


def test_recall_empty_namespace(cli):
    cli("-n", "other", "remember", "a note elsewhere")  # the database exists; namespace default is empty
    result = cli("recall", "anything")
    assert result.exit_code == 0 and result.stdout == ""
    assert "No memories" in result.stderr
    # a mistyped -n reads as such, not as an empty memory
    assert "no such namespace yet; the database has: other" in result.stderr
    assert cli.json("recall", "anything") == []


def test_reads_in_a_namespace_the_database_lacks_are_errors(cli):
    """recall, turns and stats in a namespace the database lacks (a mistyped -n) are one error line
    naming the namespaces it has, exit 1, as a missing table is in sqlite-utils; the default
    namespace (always there) and an empty database answer as empty."""
    cli("-n", "alice", "remember", "Alice owns the billing service.")
    for args in (("recall", "billing"), ("recall", "billing", "--json"), ("turns", "s1"), ("stats",)):
        line = assert_one_error_line(cli("-n", "alise", *args))
        assert "no namespace 'alise'" in line and "alice" in line, (args, line)
    default = cli("turns", "s1")  # the default namespace, never written: empty, not an error
    assert default.exit_code == 0 and default.stdout == "" and "No turns in session 's1'" in default.stderr
    assert cli.json("stats")["records"] == 0
    assert cli("drop-namespace", "alice", "--yes").exit_code == 0
    assert cli.json("-n", "alise", "recall", "billing") == []  # an empty database: nothing to mistype
    st = cli.json("-n", "carol", "stats")  # an empty database shows its zeros
    assert st["namespace"] == "carol" and st["records"] == 0 and st["namespaces"] == []


def test_recall_filters(cli):
    cli("remember", "Dana likes green tea.")
    cli("add-turn", "s1", "user", "Dana asked about green tea prices.")
    cli("add-turn", "s2", "user", "Sam asked about green tea storage.")
    assert {h["kind"] for h in cli.json("recall", "green tea", "--kind", "note")} == {"note"}
    turns = cli.json("recall", "green tea", "--session", "s2")
    assert [h["session_id"] for h in turns] == ["s2"]
    result = cli("recall", "green tea", "--kind", "turn", "-k", "5")
    assert "session:s1 (user, " in result.stdout and "turn #" in result.stdout
    assert cli("recall", "tea", "--kind", "bogus").exit_code == 2
    assert cli("recall", "tea", "-k", "0").exit_code == 2


# ---------------------------------------------------------------------- ingest
def write_docs(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    lines = [f"Step {i}: deploy service {i}." for i in range(1, 17)]  # 16 lines, one chunk
    (docs / "guide.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (docs / "empty.txt").write_text("", encoding="utf-8")
    (docs / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (docs / "keep.py").write_text("def rotate_keys():\n    return 'rotated'\n", encoding="utf-8")
    return docs


def test_ingest_summary_skipped_and_unchanged(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_docs(tmp_path)
    result = cli("ingest", "docs")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert re.search(r"^files\s+2$", out, re.M)
    assert re.search(r"^stored\s+\d+ \(\d+ known\)$", out, re.M)
    for key in ("unchanged", "chunks", "merged", "repeats", "skipped"):
        assert re.search(rf"^{key}\s+\d+", out, re.M), key
    assert "empty.txt: empty" in out and "logo.png: binary (image/png)" in out

    report = cli.json("ingest", "docs")
    assert report["unchanged"] == 2 and report["files"] == 0 and report["stored"] == 0


def test_ingest_a_missing_path_is_skipped_like_the_api_does(cli, tmp_path, monkeypatch):
    """A missing path among others is reported as skipped and the rest is ingested (as
    MemoryAgent.ingest does); when nothing can be read the exit status is 1, and when every path is
    missing nothing is opened."""
    monkeypatch.chdir(tmp_path)
    write_docs(tmp_path)
    line = assert_one_error_line(cli("ingest", "missing.md", "gone/"))
    assert "nothing could be read" in line and "missing.md, gone/" in line
    assert not cli.db.exists()
    result = cli("ingest", "missing.md", "docs")
    assert result.exit_code == 0, result.output
    assert "missing.md: does not exist" in result.stdout and re.search(r"^files\s+2$", result.stdout, re.M)
    bad = cli("ingest", "docs/logo.png", "missing.md")
    assert bad.exit_code == 1 and "logo.png: binary" in bad.stdout
    assert bad.stderr.strip() == "Error: nothing could be read: all 2 files were skipped"


@pytest.mark.parametrize("command", [["recall", "anything"], ["stats"], ["turns", "s1"], ["forget", "--id", "1", "-y"]])
def test_read_commands_never_create_a_database(cli, command):
    line = assert_one_error_line(cli(*command))
    assert "no memory database" in line
    assert not cli.db.exists()


def test_ingest_include_exclude(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_docs(tmp_path)
    report = cli.json("ingest", "docs", "--include", "*.py", "--include", "*.md", "--exclude", "g*")
    assert report["files"] == 1
    hits = cli.json("recall", "rotate keys")
    assert hits and all(h["source"].endswith("keep.py") for h in hits)


def test_recall_shows_relative_path_line_range_and_truncates(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_docs(tmp_path)
    cli("ingest", "docs/guide.md")
    result = cli("recall", "deploy service steps", "-k", "1")
    assert result.exit_code == 0
    header, *body = result.stdout.splitlines()
    assert re.fullmatch(r"1\.  \d\.\d{4}  docs/guide\.md:1-16  chunk #1", header), header
    assert body[0] == "    Step 1: deploy service 1."
    assert len(body) == cli_output.MAX_LINES + 1 and body[-1].startswith("    … (4 more lines")
    full = cli.json("recall", "deploy service steps", "-k", "1")[0]
    assert full["text"].count("\n") == 15 and full["start_line"] == 1 and full["end_line"] == 16


def test_ingest_progress_bar_stays_off_the_captured_output(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_docs(tmp_path)
    result = cli("ingest", "docs", "--json")  # stderr is not a terminal here: no progress bar
    assert result.stderr == ""
    json.loads(result.stdout)


# ---------------------------------------------------------------------- conversations
def test_add_turn_and_turns(cli):
    first = cli.json("add-turn", "s1", "user", "Please call me Dana.", "--timestamp", "2024-05-01T10:00:00Z")
    assert first["turn_seq"] == 1 and first["decision"] == "new"
    second = cli("add-turn", "s1", "assistant", "-", input="Noted, Dana.")
    assert second.exit_code == 0 and re.search(r"^turn\s+2$", second.stdout, re.M)
    rows = cli.json("turns", "s1")
    assert [(r["seq"], r["role"], r["content"]) for r in rows] == [
        (1, "user", "Please call me Dana."),
        (2, "assistant", "Noted, Dana."),
    ]
    assert rows[0]["timestamp"].startswith("2024-05-01T10:00:00")
    text = cli("turns", "s1").stdout.splitlines()
    assert text[0] == "   1  2024-05-01 10:00  user: Please call me Dana."
    nobody = cli("turns", "nobody")
    assert nobody.exit_code == 0 and nobody.stdout == "" and "No turns" in nobody.stderr


def test_add_turn_bad_timestamp_is_one_error_line(cli):
    line = assert_one_error_line(cli("add-turn", "s1", "user", "hi", "--timestamp", "yesterday"))
    assert "ISO 8601" in line


def test_import_chat_skips_malformed_lines(cli, tmp_path):
    lines = [
        b'{"session_id": "s1", "role": "user", "content": "Please call me Dana.", "timestamp": "2024-05-01T10:00:00Z"}',
        b"   ",
        b'{"session": "s1", "role": "assistant", "text": "Noted, Dana."}',
        b"this is not json",
        b'{"session_id": "s2", "content": "no role here"}',
        b'{"session_id": "s2", "role": "user", "content": "   "}',
        b'{"session_id": "s2", "role": "user", "content": "bad time", "timestamp": "yesterday"}',
        b'{"session_id": 7, "role": "user", "content": "a numeric session id", "timestamp": 0}',
        b"[1, 2]",
        b'{"session_id": "s3", "role": "user", "content": "caf\xe9"}',
        b'{"session_id": "s1", "role": "user", "content": "Please call me Dana."}',
    ]
    path = tmp_path / "chat.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\n")
    out = cli.json("import-chat", str(path))
    assert out["turns"] == 4 and out["sessions"] == 2
    assert out["decisions"] == {"new": 3, "known": 0, "merged": 0, "repeat": 1}
    assert [s["line"] for s in out["skipped"]] == [4, 5, 6, 7, 9, 10]
    reasons = {s["line"]: s["reason"] for s in out["skipped"]}
    assert "not valid JSON" in reasons[4] and "'role'" in reasons[5] and "empty" in reasons[6]
    assert "ISO 8601" in reasons[7] and "JSON object" in reasons[9] and "UTF-8" in reasons[10]
    assert [r["content"] for r in cli.json("turns", "s1")] == [
        "Please call me Dana.", "Noted, Dana.", "Please call me Dana.",
    ]  # fmt: skip
    assert cli.json("turns", "7")[0]["timestamp"].startswith("1970-01-01T00:00:00")


def test_import_chat_text_summary_from_stdin(cli):
    data = '{"session_id": "s1", "role": "user", "content": "hello there"}\n{broken\n'
    result = cli("import-chat", "-", input=data)
    assert result.exit_code == 0
    assert re.search(r"^turns\s+1$", result.stdout, re.M)
    assert re.search(r"^new\s+1$", result.stdout, re.M)
    assert re.search(r"^skipped\s+1$", result.stdout, re.M)
    assert "line 2: not valid JSON" in result.stdout


def test_import_chat_with_every_line_skipped_exits_1(cli):
    # found by an attacker: every line invalid, exit 0 (a script could not tell nothing was imported)
    result = cli("import-chat", "-", input="{broken\n[1, 2]\n")
    assert result.exit_code == 1 and "line 1: not valid JSON" in result.stdout and "line 2:" in result.stdout
    assert result.stderr.strip() == "Error: nothing could be imported: all 2 lines were skipped"


def test_import_chat_missing_file(cli, tmp_path):
    line = assert_one_error_line(cli("import-chat", str(tmp_path / "nope.jsonl")))
    assert "nope.jsonl" in line


# ---------------------------------------------------------------------- stats and forget
def test_stats_lists_namespaces(cli):
    cli("-n", "alice", "remember", "Alice owns the billing service.")
    cli("-n", "bob", "add-turn", "s1", "user", "Bob prefers short answers.")
    st = cli.json("-n", "alice", "stats")
    assert st["namespace"] == "alice" and st["records"] == 1 and st["notes"] == 1
    assert st["namespaces"] == ["alice", "bob"] and st["embedder"] == "fake-hash-384"
    assert st["database"] == str(cli.db) and st["memory_step"] >= 1
    text = cli("-n", "bob", "stats").stdout
    assert re.search(r"^records\s+1 distinct texts$", text, re.M)
    assert re.search(r"^written\s+0 chunks, 0 notes, 1 turn ", text, re.M)
    assert re.search(r"^namespaces\s+alice, bob$", text, re.M)
    # a namespace the database does not have is an error naming those it has, not zeros
    line = assert_one_error_line(cli("-n", "carol", "stats"))
    assert "no namespace 'carol'" in line and "alice, bob" in line


def test_namespace_and_db_from_environment(cli, tmp_path):
    other = tmp_path / "env.db"
    env = {"TITANS_AGENT_DB": str(other), "TITANS_AGENT_NAMESPACE": "from-env"}
    result = cli.runner.invoke(cli_app.cli, ["remember", "set by env"], env=env, catch_exceptions=False)
    assert result.exit_code == 0
    assert cli.opened[-1] == (str(other), "from-env", "all-MiniLM-L6-v2", "auto")
    assert other.exists() and not cli.db.exists()


def test_options_reach_open_agent(cli):
    cli("--embedder", "/models/mine", "--device", "cpu", "-n", "ns1", "remember", "hello")
    assert cli.opened == [(str(cli.db), "ns1", "/models/mine", "cpu")]
    assert cli.threads == [1]  # the default: one torch thread


def test_threads_option_reaches_the_config(cli):
    cli("--threads", "2", "remember", "two threads")
    cli("--threads", "0", "remember", "torch's own default")
    assert cli.threads == [2, None]
    bad = cli("--threads", "-1", "remember", "x")
    assert bad.exit_code == 2 and "--threads" in bad.stderr


def test_forget_by_source_and_id(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_docs(tmp_path)
    cli("ingest", "docs")
    note = cli.json("remember", "Forget me soon.")
    notes_sql = "SELECT count(*) FROM occurrences WHERE kind = 'note'"
    chunks_sql = "SELECT count(*) FROM occurrences WHERE kind = 'chunk'"
    chunks = count(cli.db, chunks_sql)
    assert chunks >= 2

    declined = cli("forget", "--id", str(note["record_id"]), input="n\n")
    assert declined.exit_code == 1 and "Aborted" in declined.output
    assert count(cli.db, notes_sql) == 1

    result = cli("forget", "--id", str(note["record_id"]), input="y\n")
    assert result.exit_code == 0 and "Forgot 1 item (chunks, notes or turns)." in result.stdout
    assert count(cli.db, notes_sql) == 0
    assert cli.json("forget", "--source", "docs/guide.md", "--yes") == {"deleted": 1}
    assert count(cli.db, chunks_sql) == chunks - 1
    assert cli.json("recall", "rotate keys", "--source", "docs/keep.py")

    line = assert_one_error_line(cli("forget", "--id", "9999", "--yes"))
    assert "no record 9999" in line


def test_forget_in_a_namespace_not_there_is_an_error_not_zero(cli):
    # an erasure run without -n (its session lives in namespace eve) must not read as done
    cli("-n", "eve", "add-turn", "s1", "user", "I live in Paris.")
    for args in (["forget", "--source", "session:s1", "--yes"], ["-n", "evee", "forget", "--id", "1", "--yes"]):
        line = assert_one_error_line(cli(*args))
        assert "no namespace" in line and "it has: eve" in line and "nothing forgotten" in line
    assert count(cli.db, "SELECT count(*) FROM occurrences") == 1
    missing = cli("-n", "eve", "forget", "--source", "session:s2", "--yes")
    assert missing.exit_code == 0
    assert "Forgot 0 items: namespace 'eve' holds no record of source 'session:s2'." in missing.stdout
    assert cli.json("-n", "eve", "forget", "--source", "session:s1", "--yes") == {"deleted": 1}


@pytest.mark.parametrize("args", [[], ["--source", "a", "--id", "1"]])
def test_forget_needs_exactly_one_target(cli, args):
    result = cli("forget", "--yes", *args)
    assert result.exit_code == 2 and "exactly one of --source or --id" in result.output
    assert cli.opened == []


# ---------------------------------------------------------------------- errors, real open_agent
def test_database_that_is_a_folder_is_one_error_line(tmp_path):
    result = CliRunner().invoke(cli_app.cli, ["--db", str(tmp_path), "stats"], catch_exceptions=False)
    assert "is a directory" in assert_one_error_line(result)


def test_not_a_titans_database_is_one_error_line(tmp_path):
    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    result = CliRunner().invoke(cli_app.cli, ["--db", str(db), "stats"], catch_exceptions=False)
    assert "not a titans-agent database" in assert_one_error_line(result)


def test_unknown_device_is_one_error_line(tmp_path):
    args = ["--db", str(tmp_path / "m.db"), "--device", "quantum", "remember", "hello"]
    result = CliRunner().invoke(cli_app.cli, args, catch_exceptions=False)
    assert "quantum" in assert_one_error_line(result)


def test_multi_line_messages_become_one_line():
    exc = ValueError("first line\n  second line\n(Background on this error at: https://sqlalche.me/e/20/x)")
    assert cli_output.one_line(exc) == "first line second line"
    with pytest.raises(click.ClickException, match="^bad$"):
        group = cli_app._Group(callback=lambda: None)

        @group.command()
        def boom() -> None:
            raise OSError("bad")

        group.main(["boom"], standalone_mode=False)


# ---------------------------------------------------------------------- the real thing
@pytest.mark.integration
def test_real_cli_end_to_end_with_default_model(tmp_path):
    """The installed CLI in a subprocess, real model, an ASCII stdio encoding: output is UTF-8."""
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "TITANS_AGENT_DB": str(tmp_path / "real.db")}
    env.pop("TITANS_AGENT_NAMESPACE", None)
    cmd = [sys.executable, "-m", "titans_agent.cli.app", "--device", "cpu"]
    fact = "Zoë's café — 東京 opens at 7:30 every weekday."

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*cmd, *args], env=env, capture_output=True, timeout=300, cwd=tmp_path)

    wrote = run("remember", fact, "--json")
    assert wrote.returncode == 0, wrote.stderr.decode("utf-8", "replace")
    assert json.loads(wrote.stdout.decode("utf-8"))["decision"] == "new"
    run("remember", "The quarterly report is due on the first Monday of April.")

    found = run("recall", "When does the café in Tokyo open?", "--json", "-k", "2")
    assert found.returncode == 0, found.stderr.decode("utf-8", "replace")
    out = found.stdout.decode("utf-8")
    assert fact in out  # unescaped: ensure_ascii=False and a UTF-8 stream
    hits = json.loads(out)
    assert hits[0]["text"] == fact and hits[0]["kind"] == "note"

    blank = run("recall", "  ")
    assert blank.returncode == 1 and blank.stdout == b""
    assert blank.stderr.decode("utf-8").splitlines() == ["Error: query is empty or only whitespace"]


def test_recall_time_and_superseded_options(cli):
    old_text = "My code editor is Vim, I have used it for years."
    new_text = "I switched editors: my code editor is now Helix."
    cli.json("add-turn", "s1", "user", old_text, "--timestamp", "2024-01-01T09:00:00Z")
    cli.json("add-turn", "s2", "user", "I went hiking in the mountains.", "--timestamp", "2024-01-05T09:00:00Z")
    cli.json("add-turn", "s3", "user", new_text, "--timestamp", "2024-02-01T09:00:00Z")
    hits = cli.json("recall", "which code editor do I use", "-k", "5")
    by_text = {h["text"]: h for h in hits}
    assert hits[0]["text"] == new_text
    assert by_text[old_text]["superseded_by"] == [hits[0]["id"]]
    shown = cli("recall", "which code editor do I use", "-k", "5").stdout
    assert f"superseded by #{hits[0]['id']}" in shown
    dropped = [h["text"] for h in cli.json("recall", "which code editor do I use", "-k", "5", "--drop-superseded")]
    assert old_text not in dropped and new_text in dropped
    # As of mid-January the update had not been said yet: the old statement is current again.
    then = cli.json("recall", "which code editor do I use", "-k", "5", "--as-of", "2024-01-15")
    assert new_text not in [h["text"] for h in then]
    assert next(h for h in then if h["text"] == old_text)["superseded_by"] == []
    window = cli.json("recall", "hiking", "-k", "5", "--since", "2024-01-02", "--until", "2024-01-31")
    assert [h["text"] for h in window] == ["I went hiking in the mountains."]
    assert "ISO 8601" in assert_one_error_line(cli("recall", "editor", "--as-of", "last week"))


def test_train_prints_a_table_per_model_and_writes_json(tmp_path):
    from typing import get_args

    from titans_agent.cli.train import ARCHITECTURES, MEMORY_READS

    from titans_agent.models import ARCHITECTURES as MODEL_ARCHITECTURES
    from titans_agent.models import ModelConfig

    assert tuple(ARCHITECTURES) == tuple(MODEL_ARCHITECTURES)
    assert MEMORY_READS == get_args(ModelConfig.model_fields["memory_read"].annotation)
    out = tmp_path / "train.json"
    args = ["train", "--arch", "lmm", "--arch", "swa", "--steps", "3", "--width", "16", "--layers", "1"]
    args += ["--window", "16", "--pairs", "2", "--eval-sequences", "4", "--quiet", "--out", str(out)]
    result = CliRunner().invoke(cli_app.cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("recall: chance ")
    assert re.search(r"^\| LMM \|", result.stdout, re.M) and re.search(r"^\| SWA \|", result.stdout, re.M)
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [r["architecture"] for r in data["results"]] == ["lmm", "swa"]
    assert all(0.0 <= a <= 1.0 for r in data["results"] for a in r["accuracy"].values())
    chunked = CliRunner().invoke(
        cli_app.cli, [*args[:-2], "--memory-read", "chunk", "--gate-rank", "2"], catch_exceptions=False
    )
    assert chunked.exit_code == 0, chunked.output
    assert re.search(r"^\| LMM \|", chunked.stdout, re.M) and "memory reads as of the chunk start" in chunked.stdout
    assert "memory reads as of each token" in result.stdout
    bad = CliRunner().invoke(cli_app.cli, [*args[:-2], "--memory-read", "lagged"])
    assert bad.exit_code == 2 and "--memory-read" in bad.output


def test_train_bad_settings_are_one_error_line():
    result = CliRunner().invoke(cli_app.cli, ["train", "--window", "4", "--pairs", "200", "--steps", "1"])
    assert result.exit_code != 0
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--window", "5"], "multiple of the memory's chunk"),
        (["--width", "5"], "multiple of the 2 heads"),
        (["--out", "/nonexistent-dir/x.json"], "cannot write"),
    ],
)
def test_train_refuses_unusable_settings_before_training(args, words):
    """Checked up front, so a long run does not fail at its end (a reviewer's --out case)."""
    result = CliRunner().invoke(cli_app.cli, ["train", "--arch", "swa", "--steps", "100000", *args])
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output


@pytest.mark.backends("sqlite", "postgresql")
@pytest.mark.parametrize("command", [["recall", "anything"], ["stats"], ["turns", "s1"]])
def test_read_commands_create_nothing_on_any_backend(backend, db_url, command):
    from sqlalchemy import create_engine, inspect

    result = CliRunner().invoke(cli_app.cli, ["--db", db_url, *command])
    line = assert_one_error_line(result)
    assert "no memory database" in line
    if backend == "sqlite":
        assert not Path(db_url).exists()
    else:
        engine = create_engine(db_url)
        try:
            assert inspect(engine).get_table_names() == []  # found by a user: stats created 8 tables
        finally:
            engine.dispose()
