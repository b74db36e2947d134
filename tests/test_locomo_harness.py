"""Unit tests of benchmarks/locomo.py's metrics and parsing, on tiny synthetic data (no model, no LoCoMo)."""

from __future__ import annotations

import json

import pytest
from conftest import load_benchmark

pytest.importorskip("numpy")


@pytest.fixture(scope="module")
def locomo():
    return load_benchmark("locomo")


def test_recall_at_k(locomo):
    ranked = ["D1:1", "D1:2", "D1:3", "D2:1"]
    assert locomo.recall_at_k(ranked, ["D1:2"], 1) == 0.0
    assert locomo.recall_at_k(ranked, ["D1:2"], 2) == 1.0
    assert locomo.recall_at_k(ranked, ["D1:1", "D2:1"], 2) == 0.5
    assert locomo.recall_at_k(ranked, ["D1:1", "D2:1"], 10) == 1.0
    assert locomo.recall_at_k(ranked, ["D9:9"], 10) == 0.0
    assert locomo.recall_at_k(ranked, [], 10) == 0.0


def test_mrr(locomo):
    ranked = ["a", "b", "c"]
    assert locomo.mrr(ranked, ["a"]) == 1.0
    assert locomo.mrr(ranked, ["c", "b"]) == 0.5  # the first evidence turn found counts
    assert locomo.mrr(ranked, ["z"]) == 0.0


def test_parse_evidence_malformed_and_missing(locomo):
    valid = {"D1:3", "D8:6", "D9:17"}
    ids, dropped = locomo.parse_evidence(["D8:6; D9:17", "D1:3", "D30:5", "D1:3", " "], valid)
    assert ids == ["D8:6", "D9:17", "D1:3"]
    assert dropped == ["D30:5"]
    assert locomo.parse_evidence([], valid) == ([], [])


def test_rrf_and_dedupe(locomo):
    assert locomo.dedupe(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]
    fused = locomo.rrf([["a", "b", "c"], ["b", "c", "a"]], k=60)
    assert fused[0] == "b"
    assert set(fused) == {"a", "b", "c"}


def test_scores_per_category(locomo):
    sc = locomo.Scores()
    sc.add(1, ["x", "y"], ["y"])
    sc.add(2, ["x", "y"], ["z"])
    overall = sc.summary()
    assert overall["n"] == 2
    assert overall["r10"] == pytest.approx(0.5)
    assert overall["mrr"] == pytest.approx(0.25)
    assert sc.summary(1)["r5"] == 1.0
    assert sc.summary(3)["n"] == 0


def test_load_conversations(locomo, tmp_path):
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_2_date_time": "9:00 am on 2 June, 2023",
            "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "Back again."}],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bob!"},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "Look.", "blip_caption": "a photo of a dog"},
            ],
        },
        "qa": [
            {"question": "q1", "answer": "a", "evidence": ["D1:2; D2:1"], "category": 1},
            {"question": "q2", "answer": "a", "evidence": ["D1:1", "D7:7"], "category": 4},
            {"question": "q3", "answer": "a", "evidence": [], "category": 3},
            {"question": "q4", "answer": "a", "evidence": ["D5:5"], "category": 2},
            {"question": "q5", "evidence": ["D1:1"], "category": 5, "adversarial_answer": "x"},
        ],
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    (conv,) = locomo.load_conversations(path)
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1"]  # sessions in numeric order
    assert conv.turns[1].text == "Look. [image: a photo of a dog]"
    assert conv.turns[0].timestamp.isoformat() == "2023-05-08T13:56:00"
    assert conv.turns[0].baseline_text == "[1:56 pm on 8 May, 2023] Ann: Hi Bob!"
    assert [(q.question, q.category, q.evidence) for q in conv.questions] == [
        ("q1", 1, ["D1:2", "D2:1"]),
        ("q2", 4, ["D1:1"]),
    ]
    assert conv.skipped == [("q3", "empty evidence"), ("q4", "no valid evidence id")]
    assert conv.dropped_ids == [("q2", "D7:7"), ("q4", "D5:5")]


def test_parse_date(locomo):
    assert locomo.parse_date("10:37 am on 27 June, 2023").hour == 10
    assert locomo.parse_date("not a date") is None
    assert locomo.parse_date(None) is None


def _scores(locomo, rows):
    sc = locomo.Scores()
    for group, category, ranked, evidence in rows:
        sc.add(category, ranked, evidence, group)
    return sc


def test_neighbour_expand_stays_in_the_session(locomo):
    np = pytest.importorskip("numpy")
    out = locomo.neighbour_expand(np.array([0.0, 2.0, 0.0, 1.0]), ["s1", "s1", "s2", "s2"], 0.5)
    assert out.tolist() == [1.0, 2.0, 0.5, 1.0]  # turn 2 is in another session than turn 1


def test_loco_select_picks_on_the_other_conversations(locomo):
    grid = {
        "a": _scores(locomo, [("c1", 1, ["x"], ["x"]), ("c2", 1, ["y"], ["x"]), ("c3", 1, ["y"], ["x"])]),
        "b": _scores(locomo, [("c1", 1, ["x"], ["x", "z"]), ("c2", 1, ["x"], ["x"]), ("c3", 1, ["x"], ["x"])]),
    }
    held, chosen = locomo.loco_select(grid, ["c1", "c2", "c3"])
    assert chosen == {"c1": "b", "c2": "b", "c3": "b"}  # b wins on every pair of others
    assert held.r10().tolist() == [0.5, 1.0, 1.0]  # so c1 is scored with b, not with a (1.0 there)


def test_paired_bootstrap_interval(locomo):
    a = _scores(locomo, [("c", 1, ["x"], ["x"])] * 50 + [("c", 1, ["y"], ["x"])] * 50)
    b = _scores(locomo, [("c", 1, ["y"], ["x"])] * 100)
    mean, lo, hi = locomo.paired_bootstrap(a, b, n=2000)
    assert mean == pytest.approx(0.5)
    assert 0.35 < lo < 0.5 < hi < 0.65
    same = locomo.paired_bootstrap(a, a, n=200)
    assert same == (0.0, 0.0, 0.0)


def test_cached_embedder_embeds_each_text_once(locomo, tmp_path, fake_embedder):
    cached = locomo.CachedEmbedder(fake_embedder, cache_dir=tmp_path, tag="t")
    first = cached.embed(["a b", "c d"])
    calls = fake_embedder.calls
    assert (cached.embed(["c d", "a b"]) == first[::-1]).all() and fake_embedder.calls == calls
    cached.save()
    again = locomo.CachedEmbedder(fake_embedder, cache_dir=tmp_path, tag="t")
    assert (again.embed(["a b"]) == first[:1]).all() and fake_embedder.calls == calls
    assert cached.name == fake_embedder.name and cached.dim == fake_embedder.dim


def test_tokenize_drops_stopwords(locomo):
    assert locomo.tokenize("What did Caroline do on 8 May?") == ["caroline", "8", "may"]


def test_tolerant_recall_counts_a_turn_next_to_the_evidence(locomo):
    assert locomo.tolerant_recall(["D1:4", "D2:9"], ["D1:3", "D2:1"], k=10) == 0.5  # D1:4 is next to D1:3
    assert locomo.tolerant_recall(["D1:5"], ["D1:3"], k=10) == 0.0  # two turns off: not found
    assert locomo.tolerant_recall(["D2:3"], ["D1:3"], k=10) == 0.0  # another session
    assert locomo.tolerant_recall(["x", "D1:3"], ["D1:3"], k=1) == 0.0
    assert locomo.recall_at_k(["D1:4"], ["D1:3"], 10) == 0.0  # the exact metric does not tolerate it


def test_loco_select_keeps_the_tolerant_recall_of_its_choices(locomo):
    grid = {"a": _scores(locomo, [("c1", 1, ["D1:2"], ["D1:1"]), ("c2", 1, ["D1:1"], ["D1:1"])])}
    held, _ = locomo.loco_select(grid, ["c1", "c2"])
    assert held.tolerant == [1.0, 1.0] and held.summary()["r10_tol"] == 1.0
