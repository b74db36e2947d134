"""benchmarks/longmemeval.py on a tiny LongMemEval-shaped data set (offline, fake embedder)."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import load_benchmark

FILLER = (
    "Here is a long answer about gardening. " * 60  # a reply longer than the window: several pieces
)


def _item(qid: str, qtype: str, pet: str, blank: bool) -> dict:
    sessions, ids, dates = [], [], []
    for s in range(4):
        turns = [
            {"role": "user", "content": f"Can you suggest some tomatoes to plant, session {s}?"},
            {"role": "assistant", "content": FILLER},
        ]
        if s == 2:
            turns[0] = {"role": "user", "content": f"My new {pet} is called Biscuit.", "has_answer": True}
            if blank:
                turns.append({"role": "user", "content": "\u200b"})
        sessions.append(turns)
        ids.append(f"{qid}_s{s}")
        dates.append(f"2023/05/{20 + s} (Sat) 02:21")
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": f"What is the name of my {pet}?",
        "answer": "Biscuit",
        "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_session_ids": ids,
        "haystack_dates": dates,
        "haystack_sessions": sessions,
        "answer_session_ids": [ids[2]],
    }


@pytest.fixture(scope="module")
def lme():
    return load_benchmark("longmemeval")


def test_stratified_order_and_folds(lme, tmp_path):
    raw = [_item(f"m{i}", "multi-session", "dog", False) for i in range(3)]
    raw += [_item(f"k{i}", "knowledge-update", "cat", False) for i in range(2)]
    path = tmp_path / "d.json.gz"
    path.write_bytes(gzip.compress(json.dumps(raw).encode()))
    items = lme.load_items(path)
    assert [it.qid for it in items] == ["m0", "k0", "m1", "k1", "m2"]  # round robin over the types
    assert [it.fold for it in items] == [0, 1, 2, 3, 4]
    assert [it.qid for it in lme.load_items(path, 2)] == ["m0", "k0"]
    # a held-out slice: the questions after the first two
    assert [it.qid for it in lme.load_items(path, None, skip=2)] == ["m1", "k1", "m2"]
    assert [it.qid for it in lme.load_items(path, 1, skip=2)] == ["m1"]


def test_blank_turns_are_left_out_and_counted(lme, tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps([_item("q", "multi-session", "dog", True)]), encoding="utf-8")
    (it,) = lme.load_items(path)
    assert it.blank == 1 and it.blank_evidence == 0
    assert it.evidence == ["D2:0"] and len(it.turns) == 8
    assert lme.parse_date("2023/05/20 (Sat) 02:21").day == 20 and lme.parse_date("soon") is None
    assert not lme.visible("\u200b \n") and lme.visible("\u200bok")


def test_scores_and_out_of_fold_choice(lme):
    good, bad = lme.Scores(), lme.Scores()
    for g in range(5):
        good.add("multi-session", ["a", "b"], ["a"], g)
        bad.add("multi-session", ["b", "a"], ["a"], g)
    s = good.summary()
    assert (s["r1"], s["r10"], s["mrr"], s["n"]) == (1.0, 1.0, 1.0, 5)
    assert bad.summary()["r1"] == 0.0 and bad.summary()["mrr"] == 0.5
    # the better point wins on every fold: the held-out rows are its rows
    chosen_rows, chosen = lme.fold_select({"bad": bad, "good": good})
    assert set(chosen.values()) == {"good"} and chosen_rows.rows == good.rows
    # a point best only on fold 0 is never chosen for fold 0 (chosen on the others)
    odd = lme.Scores()
    for g in range(5):
        odd.add("multi-session", ["a"] if g == 0 else ["z"], ["a"], g)
    rows, chosen = lme.fold_select({"odd": odd, "bad": bad})
    assert chosen[0] == "bad" and rows.rows[0] == bad.rows[0]


def test_end_to_end_tiny(lme, tmp_path, fake_embedder):
    raw = [
        _item(f"q{i}", t, pet, i == 0)
        for i, (t, pet) in enumerate([("multi-session", "dog"), ("knowledge-update", "cat")])
    ]
    data = tmp_path / "d.json.gz"
    data.write_bytes(gzip.compress(json.dumps(raw).encode()))
    out = tmp_path / "out"
    results = lme.main(
        ["--data", str(data), "--out", str(out), "--db-dir", str(tmp_path), "--no-tuning"], embedder=fake_embedder
    )
    assert {lme.BM25_ROW, lme.DENSE_ROW, lme.RRF_NB_ROW, lme.DEFAULT_ROW} <= set(results)
    for sc in results.values():
        assert len(sc.rows) == 2 and all(0.0 <= v <= 1.0 for row in sc.rows for v in row[1:])
    assert results[lme.BM25_ROW].summary()["r1"] == 1.0  # only the evidence turn names the pet
    assert results[lme.DEFAULT_ROW].summary()["r10"] == 1.0
    md = (out / "longmemeval.md").read_text(encoding="utf-8")
    assert "blank turns left out" in md and ": 1, of which flagged has_answer: 0" in md
