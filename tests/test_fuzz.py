"""Fuzzing the public API and the CLI with hypothesis: odd Unicode, control characters, huge
strings, deep or odd metadata, wrong types. Every call returns or raises a titans-agent error,
never anything else, and the database stays consistent after every example.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import FakeEmbedder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from titans_agent.cli import app as cli_main

from titans_agent import MemoryAgent
from titans_agent.errors import TitansAgentError

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

# Samples of the scripts and oddities a real user sends, mixed with anything hypothesis draws.
ODD = [
    "東京の会議は三時です。",  # CJK
    "שלום עולם",  # RTL Hebrew
    "مرحبا بالعالم",  # RTL Arabic
    "e\u0301\u0308\u20dd",  # combining marks
    "👩‍👩‍👧‍👦🏳️‍🌈🙂",  # emoji with ZWJ sequences
    "\ud800 lone \udfff surrogates",
    "\x00\x01\x07\x1b[31mred\x7f\x9f",  # control characters, an ANSI escape
    "\u202eevil\u202c \ufeff\u200b",  # bidi override, BOM, zero width space
    " \t\n\r ",
    "",
]
any_char = st.characters(codec=None, exclude_categories=())  # surrogates and controls included
texts = st.one_of(
    st.sampled_from(ODD),
    st.text(any_char, max_size=80),
    st.builds(lambda s, n: s * n, st.sampled_from(["a", "🙂", "東", "word "]), st.integers(1000, 20_000)),
)
# Identifiers (sources, session ids, roles): the same odd strings, lone surrogates included.
names = texts
wrong = st.one_of(st.none(), st.integers(), st.floats(), st.binary(max_size=8), st.lists(st.integers(), max_size=2))
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(any_char, max_size=10))
metadata = st.one_of(
    st.none(),
    st.recursive(
        json_leaf,
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(any_char, max_size=5), c, max_size=3),
        max_leaves=12,
    ),
    st.integers(1, 3000).map(lambda n: _deep(n)),
    st.just({("tuple", "key"): 1}),
    st.just({"set": {1, 2}}),
    st.just({"when": dt.datetime(2024, 1, 1)}),
)


def _deep(n: int) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for _ in range(n):
        d = {"k": d}
    return d


def consistent(db) -> None:
    """The database is sound: SQLite integrity, foreign keys, no orphan, sane counters."""
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
        orphans = con.execute(
            "SELECT count(*) FROM records r WHERE NOT EXISTS (SELECT 1 FROM occurrences o WHERE o.record_id = r.id)"
        ).fetchone()[0]
        assert orphans == 0
        bad_turns = con.execute(
            "SELECT count(*) FROM turns t JOIN sessions s ON s.id = t.session_pk WHERE t.seq > s.n_turns"
        ).fetchone()[0]
        assert bad_turns == 0
        for step, (n_occ,) in (
            (row[0], con.execute("SELECT count(*) FROM occurrences WHERE namespace_id = ?", (row[1],)).fetchone())
            for row in con.execute("SELECT step, id FROM namespaces").fetchall()
        ):
            assert step >= n_occ  # every occurrence was one unit written through the memory
    finally:
        con.close()


def call(fn, *args, **kwargs) -> Any:
    """Call ``fn``: it must return or raise a TitansAgentError (anything else fails the test)."""
    try:
        return fn(*args, **kwargs)
    except TitansAgentError as exc:
        assert str(exc)  # a clear message
        return exc


@pytest.fixture
def fuzz_agent(tmp_path):
    agent = MemoryAgent.open(tmp_path / "fuzz.db", embedder=FakeEmbedder())
    agent.remember("The staging server listens on port 8443.", source="seed")
    yield agent, tmp_path / "fuzz.db"
    agent.close()


def test_writes_with_odd_text_and_metadata(fuzz_agent):
    agent, db = fuzz_agent

    @FUZZ
    @given(text=texts | wrong, meta=metadata, source=st.none() | names | wrong)
    def run(text, meta, source):
        call(agent.remember, text, meta, source=source)
        call(agent.ingest, text, source=source if source is not None else "named")
        consistent(db)

    run()
    assert agent.recall("staging port", k=1)[0].text.startswith("The staging server")


def test_turns_recall_and_housekeeping(fuzz_agent):
    agent, db = fuzz_agent

    @FUZZ
    @given(
        session=names | wrong,
        role=names | wrong,
        content=texts | wrong,
        ts=st.none() | st.datetimes() | st.text(any_char, max_size=30) | wrong,
        k=st.integers(-2, 50) | wrong,
        kinds=st.none() | st.lists(st.sampled_from(["chunk", "note", "turn", "x"]), max_size=3) | texts,
        meta=metadata,
    )
    def run(session, role, content, ts, k, kinds, meta):
        call(agent.add_turn, session, role, content, ts)
        hits = call(agent.recall, content, k=k, kinds=kinds, session_id=session if isinstance(session, str) else None)
        if isinstance(hits, list) and isinstance(k, int) and not isinstance(k, bool):
            assert len(hits) <= k
        name = session if isinstance(session, str) else "s"  # other types: see AGENT_GAPS
        call(agent.update_metadata, meta, source=session)
        call(agent.turns, name)
        call(agent.forget, source=f"session:{name}")
        if isinstance(k, int) and not isinstance(k, bool):
            call(agent.forget, record_id=k)
        consistent(db)

    run()
    agent.remember("Backups run every night at 02:00 UTC.")  # the memory still works afterwards
    assert agent.recall("when do backups run", k=1)[0].text.startswith("Backups run")


@pytest.mark.slow
def test_cli_never_crashes(tmp_path, monkeypatch):
    monkeypatch.setattr(
        cli_main,
        "open_agent",
        lambda db, *_, read_only=False, **_k: MemoryAgent.open(db, embedder=FakeEmbedder(), read_only=read_only),
    )
    db = tmp_path / "cli.db"
    runner = CliRunner()
    arg = st.one_of(st.sampled_from(ODD), st.text(any_char, min_size=1, max_size=40).filter(lambda s: "\x00" not in s))

    @FUZZ
    @given(
        command=st.sampled_from(["remember", "recall", "add-turn", "turns", "forget", "stats", "ingest"]),
        a=arg,
        b=arg,
        c=arg,
    )
    def run(command, a, b, c):
        args = {
            "remember": ["remember", a, "--meta", f"{b}={c}"],
            "recall": ["recall", a, "--source", b, "--json"],
            "add-turn": ["add-turn", a, b, c, "--timestamp", c],
            "turns": ["turns", a],
            "forget": ["forget", "--source", a, "--yes"],
            "stats": ["-n", a, "stats", "--json"],
            "ingest": ["ingest", a],
        }[command]
        result = runner.invoke(cli_main.cli, ["--db", str(db), *args])
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert result.exit_code in (0, 1, 2)
        if result.exit_code == 1:
            assert result.output.count("Error:") == 1
        if db.exists():
            consistent(db)

    run()


# What the fuzzing found: each call below crashed with a non-titans-agent error (TypeError,
# UnicodeEncodeError, OverflowError) before agent.py validated these arguments.
_S = "s\ud800"
AGENT_GAPS = {
    "remember(source=surrogate)": lambda a: a.remember("a note", source=_S),
    "add_turn(session=surrogate)": lambda a: a.add_turn(_S, "user", "hello"),
    "add_turn(role=surrogate)": lambda a: a.add_turn("s1", _S, "hello"),
    "ingest(text, source=surrogate)": lambda a: a.ingest("some text", source=_S),
    "update_metadata(source=surrogate)": lambda a: a.update_metadata({"a": 1}, source=_S),
    "turns(surrogate)": lambda a: a.turns(_S),
    "turns([])": lambda a: a.turns([]),
    "forget(source=surrogate)": lambda a: a.forget(source=_S),
    "forget(source=[])": lambda a: a.forget(source=[]),
    "forget(record_id=[])": lambda a: a.forget(record_id=[]),
    "forget(record_id=2**63)": lambda a: a.forget(record_id=2**63),
    "records(source=[])": lambda a: a.records(source=[]),
    "records(kinds=5)": lambda a: a.records(kinds=5),
    "recall(kinds=5)": lambda a: a.recall("port", kinds=5),
    "ingest(123)": lambda a: a.ingest(123),
    "ingest(include=5)": lambda a: a.ingest(".", include=5),
    "add_turns(None)": lambda a: a.add_turns(None),
    "add_turns([5])": lambda a: a.add_turns([5]),
}


@pytest.fixture(scope="module")
def gap_agent(tmp_path_factory):
    db = tmp_path_factory.mktemp("gaps") / "gaps.db"
    agent = MemoryAgent.open(db, embedder=FakeEmbedder())
    agent.remember("The staging server listens on port 8443.", source="seed")
    yield agent, db
    agent.close()


@pytest.mark.parametrize("case", sorted(AGENT_GAPS))
def test_known_gap_gives_a_clear_error(gap_agent, case):
    agent, db = gap_agent
    with pytest.raises(TitansAgentError):
        AGENT_GAPS[case](agent)
    consistent(db)


def test_validation_checks_of_the_gaps():
    from titans_agent.errors import InvalidInputError
    from titans_agent.validation import (
        MAX_METADATA_DEPTH,
        check_kinds,
        check_metadata,
        check_name,
        check_namespace,
        check_patterns,
        check_record_id,
    )

    for bad in (_S, "a\x00b", " ", [], None, 5):
        with pytest.raises(InvalidInputError):
            check_name(bad, "session_id")
    assert check_name("東京 🙂 שלום", "source") == "東京 🙂 שלום"
    for bad in ([], "1", True, 0, -1, 2**63):
        with pytest.raises(InvalidInputError):
            check_record_id(bad)
    assert check_record_id(2**63 - 1) == 2**63 - 1
    for bad in (5, "chunk", ["chunk", "x"], [1]):
        with pytest.raises(InvalidInputError):
            check_kinds(bad)
    assert check_kinds(("turn", "note")) == ["turn", "note"] and check_kinds(None) is None
    assert check_patterns("*.py", "include") == ["*.py"]
    for bad in (5, [1], b"*.py"):
        with pytest.raises(InvalidInputError):
            check_patterns(bad, "include")
    with pytest.raises(InvalidInputError, match="deeper"):
        check_metadata(_deep(MAX_METADATA_DEPTH + 1))
    assert check_metadata(_deep(MAX_METADATA_DEPTH - 1))
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(InvalidInputError):
        check_metadata(cyclic)
    with pytest.raises(InvalidInputError, match="surrogate"):
        check_namespace(_S)


def test_cli_refuses_invalid_utf8_names_clearly(tmp_path):
    db = tmp_path / "cli.db"
    runner = CliRunner()
    for args in (["add-turn", _S, "user", "hi"], ["add-turn", "s1", _S, "hi"], ["turns", _S]):
        result = runner.invoke(cli_main.cli, ["--db", str(db), *args])
        assert result.exit_code == 2 and "surrogate" in result.output
    for args in (["recall", "x", "--source", _S], ["forget", "--source", _S, "--yes"]):
        result = runner.invoke(cli_main.cli, ["--db", str(db), *args])
        assert result.exit_code == 2 and "surrogate" in result.output
    assert not db.exists()  # refused before a database was opened
