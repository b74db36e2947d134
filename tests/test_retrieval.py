"""Recall's ranking: reciprocal-rank fusion, locality (neighbour expansion) and time filters.

Real SQLite files under tmp_path; only the embedder is fake (tests/conftest.py)."""

from __future__ import annotations

import datetime as dt

import pytest

from titans_agent import AgentConfig, MemoryAgent, RetrievalConfig
from titans_agent.retrieval import content_words, expand_neighbours, fuse_scores, neighbour_shares, top_k

DISTRACTORS = [  # those that share a word with the queries are not adjacent to each other
    "I like to cook on weekends with friends.",
    "The cat sleeps on the sofa all day.",
    "Remember to water the plants.",
    "The dish washer broke again.",
    "We should book the train tickets soon.",
    "My favourite season is autumn.",
]


def _rank(hits, text: str) -> int | None:
    return next((i for i, h in enumerate(hits, 1) if h.text == text), None)


def test_fuse_scores_and_top_k_are_weighted_rrf():
    ranks = {1: {"lexical": 1, "dense": 3}, 2: {"dense": 1}, 3: {"neural": 1}}
    scores = fuse_scores(ranks, {"lexical": 2.0, "dense": 1.0, "neural": 0.0}, rrf_k=60)
    assert scores[1] == pytest.approx(2 / 61 + 1 / 63)
    assert scores[2] == pytest.approx(1 / 61)
    assert 3 not in scores  # ranked only by a signal of weight 0
    assert top_k(scores, 1) == [(scores[1], 1)]


def test_expand_neighbours_adds_a_share_of_the_best_adjacent_score():
    scores = {1: 1.0, 3: 0.2}
    adjacent = {1: {2}, 2: {1, 3}, 3: {2}}
    out = expand_neighbours(scores, adjacent, 0.5)
    assert out[1] == pytest.approx(1.0)  # its only neighbour scored nothing
    assert out[2] == pytest.approx(0.5)  # unranked, enters through its best neighbour
    assert out[3] == pytest.approx(0.2)
    assert expand_neighbours(scores, adjacent, 0.5, allowed={1, 3}).get(2) is None
    assert expand_neighbours(scores, adjacent, 0.0) == scores
    assert scores == {1: 1.0, 3: 0.2}  # the input is not changed


def test_a_record_takes_only_its_share_of_the_neighbour_bonus():
    scores = {1: 1.0, 3: 0.2}
    adjacent = {1: {2}, 2: {1, 3}, 3: {2}}
    assert 2 not in expand_neighbours(scores, adjacent, 0.5, share={2: 0.0})
    assert expand_neighbours(scores, adjacent, 0.5, share={2: 0.5})[2] == pytest.approx(0.25)
    assert expand_neighbours(scores, adjacent, 0.5, share={})[2] == pytest.approx(0.5)  # missing: full share
    assert content_words("ok") == content_words("Thanks!") == content_words("Yes, sure :)") == 0
    assert content_words("Please call me Dana.") == 2  # call, dana
    texts = {1: "ok", 2: "Paris.", 3: "We flew to Paris in May"}
    shares = neighbour_shares({rid: content_words(t) for rid, t in texts.items()}, 2)
    assert shares == {1: 0.0, 2: 0.5, 3: 1.0}
    assert neighbour_shares({1: 0}, 0) == {}


def _chat(agent: MemoryAgent) -> None:
    t0 = dt.datetime(2024, 3, 1, 12, 0)
    turns = [("other", "user", d, t0 + dt.timedelta(minutes=i)) for i, d in enumerate(DISTRACTORS)]
    turns += [
        ("s1", "user", "What is your favourite dish to cook?", t0 + dt.timedelta(days=1)),
        ("s1", "assistant", "Lasagna, definitely.", t0 + dt.timedelta(days=1, minutes=1)),
        ("s2", "assistant", "Pasta carbonara takes ten minutes.", t0 + dt.timedelta(days=5)),
    ]
    agent.add_turns(turns)


def test_a_turn_is_found_through_its_adjacent_turn(tmp_path, fake_embedder):
    query = "favourite dish to cook"
    ranked = {}
    for nw in (0.0, 0.5):
        cfg = AgentConfig(retrieval=RetrievalConfig(neighbour_weight=nw))
        with MemoryAgent.open(tmp_path / f"m{nw}.db", cfg, embedder=fake_embedder) as agent:
            _chat(agent)
            ranked[nw] = agent.recall(query, k=10)
    question, answer = "What is your favourite dish to cook?", "Lasagna, definitely."
    assert ranked[0.5][0].text == ranked[0.0][0].text == question
    score = {nw: {h.text: h.score for h in hits} for nw, hits in ranked.items()}
    # the answer shares no word with the query; its only neighbour is the question
    assert score[0.5][answer] == pytest.approx(score[0.0][answer] + 0.5 * score[0.0][question])
    assert _rank(ranked[0.5], answer) < _rank(ranked[0.0], answer)
    # the question's own neighbour (the answer) scored little: it gains half of that
    assert score[0.5][question] == pytest.approx(score[0.0][question] + 0.5 * score[0.0][answer])


def test_neighbours_never_cross_sessions_or_filters(tmp_path, fake_embedder):
    with MemoryAgent.open(tmp_path / "m.db", embedder=fake_embedder) as agent:
        _chat(agent)
        agent.remember("Lasagna needs a long bake.")
        hits = agent.recall("favourite dish to cook", k=10, session_id="s1")
        assert {h.session_id for h in hits} == {"s1"}
        assert all(h.kind == "note" for h in agent.recall("favourite dish to cook", k=10, kinds=["note"]))


def test_a_chunk_is_found_through_its_adjacent_chunk(tmp_path, fake_embedder):
    paragraphs = [
        "Section one. The deployment pipeline builds containers.",
        "Section two. Rollback procedure for failed releases.",
        "Run the revert script, then page the on-call engineer.",
        "Section four. Monitoring dashboards and alert thresholds.",
    ]
    # Chunk locality is opt-in (neighbour_kinds): measured only on conversations so far.
    cfg = AgentConfig(chunk_tokens=16, retrieval=RetrievalConfig(neighbour_kinds=("turn", "chunk")))
    with MemoryAgent.open(tmp_path / "m.db", cfg, embedder=fake_embedder) as agent:
        agent.ingest("\n\n".join(paragraphs), source="runbook.md")
        agent.remember("A failed release of the bakery's bread.")
        hits = agent.recall("rollback procedure for failed releases", k=3, kinds=["chunk"])
        assert hits[0].text == paragraphs[1]
        assert _rank(hits, paragraphs[2]) == 2  # the next chunk of the same document


def test_chunk_locality_is_off_by_default(tmp_path, fake_embedder):
    paragraphs = [
        "Section one. The deployment pipeline builds containers.",
        "Section two. Rollback procedure for failed releases.",
        "Run the revert script, then page the on-call engineer.",
        "Section four. Monitoring dashboards and alert thresholds.",
    ]
    db = tmp_path / "m.db"
    scores = {}
    for kinds in (("turn",), ("turn", "chunk")):
        cfg = AgentConfig(chunk_tokens=16, retrieval=RetrievalConfig(neighbour_kinds=kinds))
        with MemoryAgent.open(db, cfg, embedder=fake_embedder) as agent:
            agent.ingest("\n\n".join(paragraphs), source="runbook.md")
            hits = agent.recall("rollback procedure for failed releases", k=4, kinds=["chunk"])
            assert hits[0].text == paragraphs[1]
            scores[kinds] = {h.text: h.score for h in hits}
    assert RetrievalConfig().neighbour_kinds == ("turn",)
    # the chunk after the best one is lifted by it only when chunks take part in locality
    assert scores[("turn",)][paragraphs[2]] < scores[("turn", "chunk")][paragraphs[2]]


def test_since_until_and_as_of_filter_by_turn_time(tmp_path, fake_embedder):
    with MemoryAgent.open(tmp_path / "m.db", embedder=fake_embedder) as agent:
        _chat(agent)
        late = agent.recall("pasta dish", k=10, since="2024-03-04T00:00:00")
        assert [h.text for h in late] == ["Pasta carbonara takes ten minutes."]
        early = agent.recall("pasta dish", k=20, until=dt.datetime(2024, 3, 1, 23, 0))
        assert early and all(h.timestamp <= dt.datetime(2024, 3, 1, 23, 0, tzinfo=dt.timezone.utc) for h in early)
        known = agent.recall("pasta dish", k=20, as_of="2024-03-03T00:00:00")
        assert "Pasta carbonara takes ten minutes." not in {h.text for h in known}
        assert len(known) == len(DISTRACTORS) + 2
        with pytest.raises(ValueError):
            agent.recall("pasta", since="not a date")


def test_recall_is_deterministic_and_survives_reopen(tmp_path, fake_embedder):
    db = tmp_path / "m.db"
    with MemoryAgent.open(db, embedder=fake_embedder) as agent:
        _chat(agent)
        first = [(h.id, h.score) for h in agent.recall("favourite dish", k=8)]
    with MemoryAgent.open(db, embedder=fake_embedder) as agent:
        assert [(h.id, h.score) for h in agent.recall("favourite dish", k=8)] == first
