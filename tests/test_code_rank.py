"""The code ranking's pure parts (file signal, auxiliary prior) and what recall makes of them on a
real ingested tree (SQLite, the deterministic test embedder)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from titans_agent import AgentConfig, MemoryAgent, RetrievalConfig
from titans_agent.bm25 import BM25Index, idf_nonnegative, term_score
from titans_agent.code_rank import (
    MAX_MENTIONS,
    MENTION_PARTS,
    CodeFiles,
    Mention,
    asks_for_auxiliary,
    demote_auxiliary,
    demote_import_blocks,
    file_scores,
    file_signal,
    is_auxiliary_path,
    is_import_block,
    named_files,
    path_mentions,
    without_environment,
)
from titans_agent.text import index_terms


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_auth.py",
        "src/pkg/tests/helpers.py",
        "pkg/testing/util.py",
        "docs/conf.py",
        "examples/demo.py",
        "conftest.py",
        "pkg/auth_test.go",
        "web/src/button.spec.ts",
        "web/src/__tests__/x.js",
        "asv_bench/benchmarks/io.py",
        "C:\\repo\\Tests\\x.py",
    ],
)
def test_test_doc_and_example_paths_are_auxiliary(path: str) -> None:
    assert is_auxiliary_path(path)


@pytest.mark.parametrize(
    "path",
    ["src/_pytest/python.py", "requests/auth.py", "pkg/latest.py", "pkg/contest.py", "testament.py", "", "pkg/"],
)
def test_library_paths_are_not_auxiliary(path: str) -> None:
    assert not is_auxiliary_path(path)


@pytest.mark.parametrize(
    "query",
    [
        "Which tests cover the basic auth header?",
        "is rebuild_auth tested anywhere",
        "show me an example of a custom transport adapter",
        "where is the test file for sessions",
        "what does the documentation say about timeouts?",
        "where is the retry policy documented?",
        "what test checks the redirect limit?",
    ],
)
def test_a_query_asking_for_tests_or_examples_lifts_the_prior(query: str) -> None:
    assert asks_for_auxiliary(query)


@pytest.mark.parametrize(
    "query",
    [
        "How is the HTTP Basic Authorization header built?",
        "Session.rebuild_auth strips the header on redirect\n\ndef test_foo():\n    assert s.get(url)",
        "pytest crashes when collecting a module with a syntax error",
        "I wrote a test that fails: the example in the docs is not documented properly, see the tests",
        "Here is an example of the bug; unit test attached. This is not documented.",
    ],
)
def test_a_query_about_the_code_keeps_the_prior(query: str) -> None:
    assert not asks_for_auxiliary(query)


def _index(rows: list[tuple[int, str]]) -> BM25Index:
    index = BM25Index()
    index.add((rid, text, "") for rid, text in rows)
    return index


def test_file_scores_are_bm25_over_the_whole_file() -> None:
    # file 10: chunks 1 and 2; file 20: chunk 3; file 30: chunk 4
    rows = [(1, "class Session"), (2, "def rebuild_auth strip header"), (3, "session cookie jar"), (4, "parse url")]
    index = _index(rows)
    files = CodeFiles.build({10: "a.py", 20: "b.py", 30: "c.py"}, [(1, 10), (2, 10), (3, 20), (4, 30)])
    terms = [t for w in ["session", "rebuild_auth", "header"] for t in index_terms(w)]
    got = file_scores(index, files, terms)
    texts = [" ".join(x for r, x in rows if r in c) for c in ({1, 2}, {3}, {4})]
    lengths = np.array([float(len(index_terms(t))) for t in texts])  # each file's terms, over its chunks
    avg = lengths.mean()
    want = np.zeros(3)
    for t in dict.fromkeys(terms):
        holds = np.array([t in index_terms(" ".join(x for r, x in rows if r in c)) for c in ({1, 2}, {3}, {4})])
        tf = np.array([sum(index_terms(x).count(t) for r, x in rows if r in c) for c in ({1, 2}, {3}, {4})])
        w = idf_nonnegative(3, int(holds.sum()))
        want[holds] += term_score(w, tf[holds].astype(float), lengths[holds], avg)
    np.testing.assert_allclose(got, want)
    assert got[0] > got[1] > got[2] == 0.0  # the file holding every word first


def test_file_scores_ignore_dead_positions_and_other_records() -> None:
    index = _index([(1, "alpha beta"), (2, "alpha"), (5, "alpha alpha alpha")])  # 5: a turn, no file
    index.add([(2, "gamma", "")])  # record 2 indexed again: its old "alpha" is dead
    files = CodeFiles.build({7: "x.py", 8: "y.py"}, [(1, 7), (2, 8)])
    got = file_scores(index, files, ["alpha"])
    assert got[0] > 0 and got[1] == 0.0
    assert file_scores(index, files, []).tolist() == [0.0, 0.0]
    assert file_scores(index, CodeFiles.build({}, []), ["alpha"]).shape == (0,)


def test_file_signal_standardises_over_files_and_names_the_top_files_chunks() -> None:
    files = CodeFiles.build({7: "x.py", 8: "y.py", 9: "z.py"}, [(1, 7), (2, 7), (3, 8), (4, 9)])
    ids, values, mean, std, top = file_signal(np.array([3.0, 1.0, 0.0]), files, 2)
    assert ids.tolist() == [1, 2, 3, 4] and values.tolist() == [3.0, 3.0, 1.0, 0.0]
    assert mean == pytest.approx(1.0)  # three files and one background file scoring 0
    assert std == pytest.approx(np.std([3.0, 1.0, 0.0, 0.0]))
    assert top == [1, 2, 3]  # the best file's chunks, then the next; a file scoring 0 is never a top file


def test_demote_auxiliary_touches_only_test_doc_and_example_files() -> None:
    files = CodeFiles.build({7: "pkg/auth.py", 8: "tests/test_auth.py"}, [(1, 7), (2, 8)])
    scores = {1: 1.0, 2: 3.0, 9: 2.0}  # 9: not a code chunk (a note)
    assert demote_auxiliary(scores, files, 0.5) == {1: 1.0, 2: 1.5, 9: 2.0}
    assert demote_auxiliary(scores, files, 1.0) == scores
    assert scores == {1: 1.0, 2: 3.0, 9: 2.0}


AUTH = (Path(__file__).parent / "fixtures" / "basic_auth.py.txt").read_text()  # a module of code, as text

TEST_AUTH = """
def test_basic_auth_str():
    assert _basic_auth_str("user", "pass") == "Basic dXNlcjpwYXNz"


def test_basic_auth_header_is_set():
    r = HTTPBasicAuth("user", "pass")(Request())
    assert r.headers["Authorization"].startswith("Basic ")
"""


@pytest.fixture
def tree(tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "tests").mkdir()
    (src / "pkg" / "auth.py").write_text(AUTH)
    (src / "pkg" / "cookies.py").write_text("def merge_cookies(jar, cookies):\n    return jar\n")
    (src / "tests" / "test_auth.py").write_text(TEST_AUTH)
    (src / "NOTES.md").write_text("# Notes\n\nThe tests folder holds the basic auth tests.\n")
    return src


def _first_paths(agent: MemoryAgent, query: str, src) -> list[str]:
    return [str(h.source).removeprefix(str(src) + "/") for h in agent.recall(query, k=5)]


def test_recall_puts_library_code_above_its_tests_unless_tests_are_asked_for(tmp_path, tree, fake_embedder) -> None:
    with MemoryAgent.open(tmp_path / "m.db", AgentConfig(device="cpu"), embedder=fake_embedder) as agent:
        agent.ingest(tree)
        assert _first_paths(agent, "how is the basic auth header built?", tree)[0] == "pkg/auth.py"
        assert _first_paths(agent, "which tests cover the basic auth header?", tree)[0] == "tests/test_auth.py"
        agent.config = AgentConfig(device="cpu", retrieval=RetrievalConfig(auxiliary_weight=1.0, file_weight=0.0))
        plain = agent.recall("how is the basic auth header built?", k=5)
        agent.config = AgentConfig(device="cpu")
        ranked = agent.recall("how is the basic auth header built?", k=5)
    # the prior only rescales: every hit is still returned
    assert {h.id for h in plain} == {h.id for h in ranked}


def test_the_file_signal_is_off_without_code_and_at_weight_zero(tmp_path, fake_embedder) -> None:
    with MemoryAgent.open(tmp_path / "m.db", AgentConfig(device="cpu"), embedder=fake_embedder) as agent:
        agent.ingest("Our tests folder is under review.", source="tests/notes.txt")
        agent.add_turn("s1", "user", "I wrote the tests for the basic auth header today.")
        hits = agent.recall("basic auth header tests", k=5)
        assert len(hits) == 2  # a prose document under tests/ is not code: never demoted
        assert all("file" not in h.signals for h in hits)


def test_path_mentions_read_file_paths_tracebacks_and_dotted_names() -> None:
    query = (
        'Traceback (most recent call last):\n  File "/usr/lib/python3/site-packages/django/db/models/query.py",'
        ' line 12, in get\n  File "C:\\app\\views.py", line 3\nSee requests.sessions.Session.rebuild_auth, '
        "`django.db.models`, utils.py, ./setup.py, v1.2.3 and models.query.py"
    )
    got = path_mentions(query)
    assert got == [
        Mention(("usr", "lib", "python3", "site-packages", "django", "db", "models", "query"), True),
        Mention(("app", "views"), True),
        Mention(("requests", "sessions", "session", "rebuild_auth"), False),
        Mention(("django", "db", "models"), False),
        Mention(("models", "query"), False),
    ]
    assert path_mentions("no paths here, just words. And a sentence.") == []
    assert len(path_mentions(" ".join(f"a{i}.b{i}" for i in range(500)))) == MAX_MENTIONS


def test_named_files_match_two_parts_or_more_at_the_right_place() -> None:
    files = CodeFiles.build(
        {
            1: "/x/django/db/models/query.py",
            2: "/x/django/db/models/__init__.py",
            3: "/x/requests/sessions.py",
            4: "/x/other/query.py",
            5: "web/src/components/index.ts",
        },
        [],
    )
    mentions = [
        Mention(("site-packages", "django", "db", "models", "query"), True),
        Mention(("django", "db", "models", "query"), False),  # the package and its module
        Mention(("requests", "sessions", "session"), False),
        Mention(("db", "models"), True),  # a file path ends with its file: models/__init__ is not "db/models.py"
        Mention(("src", "components"), False),
        Mention(("query",), False),
    ]
    assert named_files(files, mentions) == [(0,), (0, 1), (2,), (1,), (4,), ()]


def test_a_named_file_adds_its_idf_to_the_file_signal() -> None:
    index = _index([(1, "def get"), (2, "def get"), (3, "def get")])
    files = CodeFiles.build({7: "pkg/query.py", 8: "pkg/views.py", 9: "other/query.py"}, [(1, 7), (2, 8), (3, 9)])
    plain = file_scores(index, files, ["get"])
    named = file_scores(index, files, ["get"], [Mention(("pkg", "query"), True), Mention(("x", "query"), True)])
    assert plain[0] == plain[1] == plain[2] > 0  # "get" is in every file
    assert named[0] == pytest.approx(plain[0] + idf_nonnegative(3, 1)) and named[1] == named[2] == plain[0]


def test_dense_coverage_scales_the_dense_signal_of_a_long_query_only(tmp_path, fake_embedder) -> None:
    with MemoryAgent.open(tmp_path / "m.db", AgentConfig(device="cpu"), embedder=fake_embedder) as agent:
        for i in range(6):
            agent.remember(f"note {i}: the parser reads token {i} and the lexer emits symbol {i * 7}")
        short = "which token does the parser read?"
        long = short + " " + " ".join(f"word{i}" for i in range(600))  # past the 254-token window

        def scores(query: str, coverage: bool) -> list[float]:
            agent.config = AgentConfig(device="cpu", retrieval=RetrievalConfig(dense_coverage=coverage))
            return [h.score for h in agent.recall(query, k=6)]

        assert scores(short, True) == scores(short, False)
        assert scores(long, True) != scores(long, False)


@pytest.mark.parametrize("query", ["a/" * 50_000, "/a" * 50_000, "a." * 50_000, "a.b/" * 25_000, "\\" * 100_000])
def test_path_mentions_read_a_hostile_query_in_linear_time(query: str) -> None:
    import time

    start = time.perf_counter()
    got = path_mentions(query)
    assert time.perf_counter() - start < 5.0  # a backtracking pattern took about a minute on these
    assert all(2 <= len(m.parts) <= MENTION_PARTS for m in got)


def test_without_environment_drops_dumps_of_five_version_lines_or_more() -> None:
    dump = "numpy: 1.18.5\r\nnetCDF4: None\r\n\r\n  pandas    1.0.5\r\n| sphinx | 3.1.2 |\r\nscipy==1.5.0\r\n"
    query = "Dataset.update computes a chunked array\r\n" + dump + "see xarray/core/merge.py"
    got = without_environment(query)
    assert "numpy" not in got and "sphinx" not in got and "pandas" not in got
    assert got.startswith("Dataset.update computes") and got.endswith("see xarray/core/merge.py")
    short = "I use numpy: 1.18.5\nand pandas: 1.0.5\nwith scipy 1.5.0 on Python 3.8.3\nplease help"
    assert without_environment(short) == short  # three version lines: not a dump
    assert without_environment("one line") == "one line"
    prose = "\n".join(["a line of prose about the bug"] * 10)
    assert without_environment(prose) == prose


@pytest.mark.parametrize(
    ("text", "imports"),
    [
        ("import os\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .models import (\n"
         "        Request,\n        Response,\n    )\n", True),
        ("try:\n    import simplejson as json\nexcept ImportError:\n    import json\n", True),
        ("use std::fmt;\nuse serde::{Deserialize, Serialize};\n", True),
        ("const { join } = require('path');\n// paths\n", True),
        ("def f():\n    import os\n    return os.getcwd()\n", False),
        ('"""The requests module."""\nimport os\n', False),  # a module docstring says what it is
        ("import os\nreturn x\ny\nz\n", False),  # mostly not imports
        ("", False),
    ],
)  # fmt: skip
def test_is_import_block(text: str, imports: bool) -> None:
    assert is_import_block(text) is imports


def test_demote_import_blocks_touches_only_code_chunks_that_only_import() -> None:
    files = CodeFiles.build({7: "pkg/models.py"}, [(1, 7), (2, 7)])
    texts = {1: "import os\nimport sys\n", 2: "def get(self):\n    return self.x\n", 9: "import os\n"}
    got = demote_import_blocks({1: 2.0, 2: 1.0, 9: 1.0, 3: 1.0}, files, texts, 0.5)
    assert got == {1: 1.0, 2: 1.0, 9: 1.0, 3: 1.0}  # 9: a note, not code; 3: no text read


def test_asking_where_something_is_imported_keeps_import_blocks() -> None:
    assert asks_for_auxiliary("where is RequestsCookieJar imported?")
    assert not asks_for_auxiliary("import xarray as xr\nds = xr.Dataset()\nds.update(x) computes the array")


def test_dense_coverage_is_skipped_for_an_embedder_without_a_fast_tokenizer(tmp_path, fake_embedder) -> None:
    config = AgentConfig(device="cpu", retrieval=RetrievalConfig(dense_coverage=True))
    with MemoryAgent.open(tmp_path / "m.db", config, embedder=fake_embedder) as agent:
        agent.remember("the parser reads tokens")
        fake_embedder.tokenizer = object()  # no backend_tokenizer: the chunker cannot be made
        agent._chunker = None
        long = "which token does the parser read? " + " ".join(f"w{i}" for i in range(600))
        assert [h.text for h in agent.recall(long, k=1)] == ["the parser reads tokens"]
