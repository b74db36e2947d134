"""Breaker reproductions for the code ranking (file signal, auxiliary prior, environment dumps):
real SQLite files under tmp_path, the deterministic test embedder."""

from __future__ import annotations

from pathlib import Path

import pytest

from titans_agent import AgentConfig, MemoryAgent, RetrievalConfig
from titans_agent.code_rank import CodeFiles, demote_auxiliary, is_import_block

AUTH = (Path(__file__).parent / "fixtures" / "basic_auth.py.txt").read_text()  # a module of code, as text


def _project(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "auth.py").write_text(AUTH)
    (root / "pkg" / "cookies.py").write_text("def merge_cookies(jar, cookies):\n    return jar\n")
    return root


# --- 1. the folders above the ingested tree made every file a test, doc or example ---------------


@pytest.mark.parametrize("above", ["examples", "docs", "tests", "demo", "bench"])
def test_folders_every_code_file_shares_do_not_make_it_auxiliary(above: str) -> None:
    files = CodeFiles.build(
        {
            1: f"/home/u/{above}/proj/pkg/auth.py",
            2: f"/home/u/{above}/proj/tests/test_auth.py",
            3: f"/home/u/{above}/proj/tests/helpers.py",
        },
        [(10, 1), (11, 2), (12, 3)],
    )
    assert files.auxiliary.tolist() == [False, True, True]


def test_a_lone_file_keeps_its_own_folder_for_the_prior() -> None:
    files = CodeFiles.build({1: "/repo/tests/helpers.py"}, [(10, 1)])
    assert files.auxiliary.tolist() == [True]  # the folder it was ingested from still says "tests"


def _code_score(tmp_path: Path, fake_embedder, base: str) -> tuple[float, float]:
    root = _project(tmp_path / base / "proj")
    with MemoryAgent.open(tmp_path / base / "m.db", AgentConfig(device="cpu"), embedder=fake_embedder) as agent:
        agent.ingest(root)
        agent.remember("The basic auth header is built by hand in our deploy script, not the library.")
        hits = agent.recall("how is the basic auth header built?", k=5)
    code = next(h.score for h in hits if str(h.source).endswith("auth.py"))
    note = next(h.score for h in hits if h.kind == "note")
    return code, note


def test_a_project_under_a_folder_named_examples_ranks_as_anywhere_else(tmp_path, fake_embedder) -> None:
    plain_code, plain_note = _code_score(tmp_path, fake_embedder, "plain")
    ex_code, ex_note = _code_score(tmp_path, fake_embedder, "examples")
    assert ex_note == pytest.approx(plain_note, rel=0.05)
    # was 0.728 against 1.456: every chunk of the project halved as an "example"
    assert ex_code == pytest.approx(plain_code, rel=0.05)


# --- 2. a chunk shared by library code and a test file took the test file's prior ----------------

SHARED = "def compute_checksum(payload):\n    digest = hashlib.sha1(payload).hexdigest()\n    return digest\n"


def test_demote_auxiliary_spares_a_record_also_held_by_library_code() -> None:
    # record 1 is in the test file (lower document id: its "first" file) and in the library file
    files = CodeFiles.build({7: "r/tests/test_a.py", 8: "r/pkg/a.py", 9: "r/tests/test_b.py"}, [(1, 7), (1, 8), (2, 9)])
    assert demote_auxiliary({1: 2.0, 2: 2.0}, files, 0.5) == {1: 2.0, 2: 1.0}


def test_recall_does_not_demote_library_code_that_a_test_file_repeats(tmp_path, fake_embedder) -> None:
    root = tmp_path / "r"
    (root / "tests").mkdir(parents=True)
    (root / "pkg").mkdir()
    (root / "tests" / "test_a.py").write_text(SHARED)
    (root / "pkg" / "a.py").write_text(SHARED)  # the same text: one record, two files
    (root / "pkg" / "b.py").write_text("def unrelated(y):\n    return y * 2\n")
    q = "how is the checksum digest of a payload computed?"
    with MemoryAgent.open(tmp_path / "m.db", AgentConfig(device="cpu"), embedder=fake_embedder) as agent:
        agent.ingest([root / "tests" / "test_a.py"])  # the test file first: it holds the record first
        agent.ingest(root / "pkg")
        agent.remember("The payload checksum digest is computed by the gateway, see the runbook.")
        scores = {}
        for w in (0.5, 1.0):
            agent.config = AgentConfig(device="cpu", retrieval=RetrievalConfig(auxiliary_weight=w))
            hits = agent.recall(q, k=5, source=str(root / "pkg" / "a.py"))
            assert len(hits) == 1 and str(hits[0].source).endswith("pkg/a.py")
            scores[w] = hits[0].score
        agent.config = AgentConfig(device="cpu")
        top = agent.recall(q, k=5)[0]
    assert scores[0.5] == pytest.approx(scores[1.0])  # was halved: 1.611 against 3.223
    assert top.kind == "chunk"  # the library code above the note, as without the prior


# --- 3. forgetting a file's first chunk made the rest of the file stop being code ----------------


def test_forgetting_the_first_chunk_of_a_test_file_keeps_the_rest_of_it_code(tmp_path, fake_embedder) -> None:
    root = tmp_path / "r"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "a.py").write_text(SHARED)
    words = " ".join(f"w{j}" for j in range(60))
    (root / "tests" / "test_a.py").write_text(
        "\n\n".join(
            f"def test_checksum_{i}():\n    '''Check the checksum of payload {i}: {words}.'''\n"
            f"    assert compute_checksum(b'{i}')\n"
            for i in range(8)
        )
    )
    q = "how is the checksum of a payload computed?"
    with MemoryAgent.open(tmp_path / "m.db", AgentConfig(device="cpu"), embedder=fake_embedder) as agent:
        agent.ingest(root)
        first = next(h for h in agent.recall("test_checksum_0", k=20) if h.start_line == 1 and "tests" in h.source)
        agent.forget(record_id=first.id)

        def test_hits(weight: float) -> dict[int, float]:
            agent.config = AgentConfig(device="cpu", retrieval=RetrievalConfig(auxiliary_weight=weight))
            return {h.id: h.score for h in agent.recall(q, k=10) if "tests" in str(h.source)}

        demoted, plain = test_hits(0.5), test_hits(1.0)
        agent.config = AgentConfig(device="cpu")
        signals = [h.signals for h in agent.recall(q, k=10) if "tests" in str(h.source)]
    assert demoted and demoted.keys() == plain.keys()
    assert all(demoted[r] < plain[r] for r in demoted)  # still a test file: the prior applies
    assert any("file" in s for s in signals)  # and it still has a file signal


# --- 4. the environment-dump rule changed recall in namespaces without code ----------------------

PRICES = "Apples: 1.99\nBread: 2.49\nMilk: 0.99\nEggs: 3.29\nButter: 4.50\n"


def test_a_list_of_prices_keeps_its_lexical_signal_without_code(tmp_path, fake_embedder) -> None:
    with MemoryAgent.open(tmp_path / "m.db", AgentConfig(device="cpu"), embedder=fake_embedder) as agent:
        agent.remember("Butter and eggs come from the farm shop on Saturdays.")
        agent.remember("The car is due for its inspection in May.")
        agent.add_turn("s1", "user", "I paid too much for milk and bread at the corner store.")
        hits = agent.recall(PRICES + "where do I buy these?", k=3)
    # "conversations and prose documents rank as before": the words of the list are looked up
    assert "lexical" in hits[0].signals
    assert any("lexical" in h.signals for h in hits if h.kind == "turn")


# --- 5. import blocks of Go, Java and multi-line ES modules were not recognised ------------------


@pytest.mark.parametrize(
    "text",
    [
        'package main\n\nimport (\n\t"fmt"\n\tlog "github.com/sirupsen/logrus"\n)\n',
        "package com.example.app;\n\nimport java.util.List;\nimport java.util.Map;\n",
        'import {\n  a,\n  b,\n} from "./x";\n',
    ],
)
def test_is_import_block_reads_go_java_and_es_module_imports(text: str) -> None:
    assert is_import_block(text)


@pytest.mark.parametrize("text", ['package main\n\nfunc main() {\n\tfmt.Println("hi")\n}\n', 'x = "fmt"\ny = 1\n'])
def test_is_import_block_still_refuses_code(text: str) -> None:
    assert not is_import_block(text)


# --- 6. a named file with no live chunk took one of the top files' places ------------------------


def test_a_named_file_without_chunks_does_not_take_a_top_files_place() -> None:
    from titans_agent.bm25 import BM25Index
    from titans_agent.code_rank import Mention, file_scores, file_signal

    index = BM25Index()
    index.add([(1, "def get", ""), (2, "def get", ""), (3, "def get", "")])
    # file 6 (pkg/empty.py) holds no chunk of its own: its only record is held by file 5 first
    files = CodeFiles.build(
        {5: "pkg/a.py", 6: "pkg/empty.py", 7: "pkg/b.py", 8: "pkg/c.py"}, [(1, 5), (1, 6), (2, 7), (3, 8)]
    )
    per_file = file_scores(index, files, ["get"], [Mention(("pkg", "empty"), True)])
    assert per_file[1] == 0.0
    *_, top = file_signal(per_file, files, 3)
    assert top == [1, 2, 3]
