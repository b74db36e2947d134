"""Crash safety: ingest killed with SIGKILL at random moments (benchmarks/crash.py, 5 trials).

The harness's checks are described in benchmarks/crash.py; a second test shows they catch damage.
"""

from __future__ import annotations

import sqlite3
import sys

import pytest
from conftest import load_benchmark

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")


@pytest.fixture(scope="module")
def crash():
    return load_benchmark("crash")


@pytest.mark.slow
def test_sigkill_mid_ingest_loses_nothing_and_resumes_cleanly(crash, tmp_path):
    ref, results = crash.run(trials=5, seed=1, work=tmp_path, n_files=12)
    assert len(ref.occurrences) > 100 and ref.n_docs == 12
    assert [r.problems for r in results] == [[]] * 5
    assert any(0 < r.in_db < len(ref.occurrences) for r in results), "no kill landed mid-ingest"


def test_checks_detect_damage(crash, tmp_path):
    folder = tmp_path / "corpus"
    crash.make_corpus(folder, seed=2, n_files=4)
    ref = crash.reference_run(folder, tmp_path / "ref.db")
    db = tmp_path / "ref-steps.db"  # the complete database of the reference run
    assert crash.check_database(db, ref, committed=len(ref.occurrences), finished=True) == []
    con = sqlite3.connect(db)
    con.execute("PRAGMA foreign_keys=ON")
    last = con.execute("SELECT max(id) FROM occurrences").fetchone()[0]
    con.execute("DELETE FROM turns WHERE occurrence_id = ?", (last,))
    con.execute("DELETE FROM occurrences WHERE id = ?", (last,))
    con.commit()
    con.close()
    problems = crash.check_database(db, ref, committed=len(ref.occurrences), finished=True)
    joined = " ".join(problems)
    assert "reported committed" in joined
    assert "step column" in joined  # the state counts one more unit than there are occurrences
    assert any("complete" in p for p in problems)  # a complete document misses its last chunk


def test_corpus_is_deterministic(crash, tmp_path):
    crash.make_corpus(tmp_path / "a", seed=3, n_files=3)
    crash.make_corpus(tmp_path / "b", seed=3, n_files=3)
    for f in (tmp_path / "a").iterdir():
        assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes()
