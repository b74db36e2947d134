"""Recall's ranking: reciprocal-rank fusion, locality (neighbour expansion) and time filters.

Real SQLite files under tmp_path; only the embedder is fake (tests/conftest.py)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
import torch

from titans_agent import AgentConfig, MemoryAgent, RetrievalConfig
from titans_agent.retrieval import (
    ScoreVector,
    SignalScores,
    about_oneself,
    add_group_bonus,
    content_words,
    demote_other_people,
    expand_neighbours,
    fuse_scores,
    fuse_standardised,
    neighbour_shares,
    successors_above,
    top_k,
)
from titans_agent.runtime import unit_rows
from titans_agent.updates import UpdateLinks

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


def test_sparse_scores_are_standardised_with_the_unmatched_records_and_a_background_one():
    sig = SignalScores.sparse({1: 4.0, 2: 2.0}, n=3)  # record 3 matched nothing: 0, and one background 0
    vals = np.array([4.0, 2.0, 0.0, 0.0])
    assert sig.mean == pytest.approx(vals.mean()) and sig.std == pytest.approx(vals.std())
    assert sig.fill == 0.0
    one = SignalScores.sparse({7: 3.0}, n=1)  # a namespace of one record still has a spread
    assert one.std == pytest.approx(1.5) and one.mean == pytest.approx(1.5)
    assert SignalScores.sparse({}, n=5).std == 0.0


def test_dense_scores_skip_masked_and_non_finite_similarities():
    ids = np.array([2, 5, 9, 11])
    sims = np.array([0.5, np.inf, 0.1, 0.3])
    sig = SignalScores.dense(ids, sims, keep=np.array([True, True, True, False]))
    vals = np.array([0.5, 0.1, 0.0])  # the infinite one and the masked one left out; a background 0
    assert sig.mean == pytest.approx(vals.mean()) and sig.std == pytest.approx(vals.std())
    assert sig.values[2] == 0.5 and 5 not in sig.values and 11 not in sig.values
    assert sig.values.get(11, sig.fill) == sig.fill == sig.mean
    assert list(sig.values) == [2, 9] and len(sig.values) == 2


def test_score_vector_is_a_mapping_over_sorted_ids():
    v = ScoreVector(np.array([3, 8, 20]), np.array([0.1, 0.2, 0.3]))
    assert v[8] == 0.2 and v.get(4) is None and 21 not in v and dict(v) == {3: 0.1, 8: 0.2, 20: 0.3}
    with pytest.raises(KeyError):
        v[0]


def test_score_fusion_keeps_the_margins_that_rank_fusion_loses():
    """BM25 far ahead for record 1, dense barely ahead for record 2: standardised scores keep
    record 1 first, reciprocal ranks (one place each) would tie them."""
    lex = SignalScores({1: 10.0, 2: 1.0}, mean=1.0, std=3.0)
    dense = SignalScores({1: 0.50, 2: 0.51}, mean=0.2, std=0.1)
    fused = fuse_standardised({"lexical": lex, "dense": dense}, {"lexical": 1.0, "dense": 1.0}, [1, 2])
    z1, z2 = (10 - 1) / 3 + (0.50 - 0.2) / 0.1, (1 - 1) / 3 + (0.51 - 0.2) / 0.1
    assert fused[1] == pytest.approx(np.logaddexp(0, z1)) and fused[2] == pytest.approx(np.logaddexp(0, z2))
    assert fused[1] > fused[2] > 0
    ranks = {1: {"lexical": 1, "dense": 2}, 2: {"lexical": 2, "dense": 1}}
    rrf = fuse_scores(ranks, {"lexical": 1.0, "dense": 1.0}, rrf_k=60)
    assert rrf[1] == pytest.approx(rrf[2])
    # a weight of 0 or a signal without spread takes no part; a record a signal missed takes its fill
    flat = SignalScores({1: 1.0, 2: 1.0}, mean=1.0, std=0.0)
    only = fuse_standardised({"lexical": lex, "dense": flat}, {"lexical": 1.0, "dense": 5.0}, [1, 2, 3])
    assert only[3] == pytest.approx(np.logaddexp(0, (0 - 1) / 3))
    assert fuse_standardised({"lexical": lex}, {"lexical": 0.0}, [1]) == {1: pytest.approx(np.log(2))}


def test_group_bonus_adds_a_share_of_the_best_score_of_the_session():
    scores = {1: 4.0, 2: 1.0, 3: 2.0, 4: 3.0}
    groups = {1: {("session", 1)}, 2: {("session", 1)}, 3: {("session", 2)}, 4: {("session", 2), ("document", 9)}}
    out = add_group_bonus(scores, groups, 0.5)
    assert out == {1: 6.0, 2: 3.0, 3: 3.5, 4: 4.5}
    assert add_group_bonus(scores, groups, 0.0) == scores
    assert add_group_bonus({5: 1.0}, groups, 0.5) == {5: 1.0}  # in no group: unchanged


def test_unit_rows_rescales_only_rows_off_unit_norm():
    good = torch.nn.functional.normalize(torch.randn(3, 8), dim=-1)
    assert unit_rows(good) is good
    bad = torch.cat([good, good[:1] * 1e20, torch.zeros(1, 8)])
    fixed = unit_rows(bad)
    assert torch.equal(fixed[:3], good)
    assert torch.allclose(fixed[3], good[0], atol=1e-6) and torch.equal(fixed[4], torch.zeros(8))
    assert torch.equal(bad[3], good[0] * 1e20)  # the input is not changed


def test_session_locality_lifts_the_turns_of_the_matching_session(tmp_path, fake_embedder):
    query = "favourite dish to cook"
    ranked = {}
    for sw in (0.0, 0.5):
        cfg = AgentConfig(retrieval=RetrievalConfig(neighbour_weight=0.0, session_weight=sw, question_weight=1.0))
        with MemoryAgent.open(tmp_path / f"g{sw}.db", cfg, embedder=fake_embedder) as agent:
            _chat(agent)
            ranked[sw] = {h.text: h.score for h in agent.recall(query, k=20)}
    question = "What is your favourite dish to cook?"
    best_s1 = ranked[0.0][question]  # the best turn of session s1
    for text in (question, "Lasagna, definitely."):
        assert ranked[0.5][text] == pytest.approx(ranked[0.0][text] + 0.5 * best_s1)
    carbonara = "Pasta carbonara takes ten minutes."  # alone in session s2: its own score only
    assert ranked[0.5][carbonara] == pytest.approx(1.5 * ranked[0.0][carbonara])


def test_rank_fusion_stays_available(tmp_path, fake_embedder):
    retrieval = RetrievalConfig(fusion="rank", lexical_weight=1.5, session_weight=0.0, question_weight=1.0)
    cfg = AgentConfig(retrieval=retrieval)
    with MemoryAgent.open(tmp_path / "r.db", cfg, embedder=fake_embedder) as agent:
        _chat(agent)
        hits = agent.recall("favourite dish to cook", k=3)
    assert hits[0].text == "What is your favourite dish to cook?"
    assert hits[0].score < 0.1  # reciprocal-rank scale: at most (1.5 + 1) / 61 before locality


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
        cfg = AgentConfig(retrieval=RetrievalConfig(neighbour_weight=nw, session_weight=0.0, question_weight=1.0))
        with MemoryAgent.open(tmp_path / f"m{nw}.db", cfg, embedder=fake_embedder) as agent:
            _chat(agent)
            ranked[nw] = agent.recall(query, k=10)
    question, answer = "What is your favourite dish to cook?", "Lasagna, definitely."
    assert ranked[0.5][0].text == ranked[0.0][0].text == question
    score = {nw: {h.text: h.score for h in hits} for nw, hits in ranked.items()}
    # the answer shares no word with the query (only its lexical context, the question before
    # it, does); its only neighbour is the question
    assert score[0.5][answer] == pytest.approx(score[0.0][answer] + 0.5 * score[0.0][question])
    assert _rank(ranked[0.5], answer) == 2
    # the question's own neighbour (the answer) scored little: it gains half of that
    assert score[0.5][question] == pytest.approx(score[0.0][question] + 0.5 * score[0.0][answer])


def test_a_reply_is_found_by_the_words_of_the_turn_before_it(tmp_path, fake_embedder):
    """A turn is indexed with the words of the turn before it in its session (as lexical context,
    at half weight): without any locality bonus, the reply ranks on the question's words, whether
    the two turns came in one call or one by one."""
    cfg = AgentConfig(
        retrieval=RetrievalConfig(neighbour_weight=0.0, session_weight=0.0, use_dense=False, question_weight=1.0)
    )
    for one_by_one in (False, True):
        with MemoryAgent.open(tmp_path / f"c{one_by_one}.db", cfg, embedder=fake_embedder) as agent:
            if one_by_one:
                agent.add_turn("s", "user", "Which vaccine did the clinic give the toddler?")
                agent.add_turn("s", "assistant", "The measles one, last Tuesday.")
                agent.add_turn("t", "user", "Nothing related here at all.")
            else:
                agent.add_turns(
                    [
                        ("s", "user", "Which vaccine did the clinic give the toddler?"),
                        ("s", "assistant", "The measles one, last Tuesday."),
                        ("t", "user", "Nothing related here at all."),
                    ]
                )
            hits = agent.recall("vaccine for the toddler", k=3)
            texts = [h.text for h in hits]
            assert texts[:2] == ["Which vaccine did the clinic give the toddler?", "The measles one, last Tuesday."]
            assert hits[1].signals.get("lexical") == 2
            # the first turn of a session has no turn before it: a new session does not inherit one
            assert "Nothing related here at all." not in texts[:2]


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


def test_content_free_turns_take_no_session_share_and_no_turn_before(tmp_path, fake_embedder):
    """ "ok" and "Thanks!" answer nothing: the session bonus skips them as the neighbour bonus
    does, and they are not indexed with the words of the turn before them."""
    with MemoryAgent.open(tmp_path / "m.db", embedder=fake_embedder) as agent:
        agent.add_turns([("s1", "user", "I live in Lisbon."), ("s1", "assistant", "ok"), ("s1", "user", "Thanks!")])
        agent.remember("My brother wants to live in Berlin one day.")
        hits = {h.text: h for h in agent.recall("where do I live", k=5)}
        with_session = hits["Thanks!"].score
    cfg = AgentConfig(retrieval=RetrievalConfig(session_weight=0.0))
    with MemoryAgent.open(tmp_path / "m.db", cfg, embedder=fake_embedder) as agent:
        without = {h.text: h.score for h in agent.recall("where do I live", k=5)}
    assert with_session == pytest.approx(without["Thanks!"])
    assert "lexical" not in hits["ok"].signals  # "Lisbon" and "live" are not in its context
    assert hits["My brother wants to live in Berlin one day."].score > hits["Thanks!"].score


def test_large_weights_never_drop_hits(tmp_path, fake_embedder):
    texts = ["I like pizza with olives", "The weather is sunny today", "My sister lives in Paris", "Pizza is great"]
    cfg = AgentConfig(retrieval=RetrievalConfig(lexical_weight=900.0, dense_weight=2000.0))
    with MemoryAgent.open(tmp_path / "m.db", cfg, embedder=fake_embedder) as agent:
        for t in texts:
            agent.remember(t)
        hits = agent.recall("pizza", k=10)
    assert len(hits) == len(texts) and all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_a_non_finite_query_embedding_is_an_error(tmp_path, fake_embedder):
    from titans_agent.errors import StoreError

    class NanQuery:
        name, dim, max_tokens, tokenizer = (
            fake_embedder.name,
            fake_embedder.dim,
            fake_embedder.max_tokens,
            fake_embedder.tokenizer,
        )

        def embed(self, texts):
            out = fake_embedder.embed(texts)
            return out * np.nan if texts == ["broken"] else out

    with MemoryAgent.open(tmp_path / "m.db", embedder=NanQuery()) as agent:
        agent.remember("a note")
        with pytest.raises(StoreError, match="non-finite query embedding"):
            agent.recall("broken")
        assert agent.recall("a note")[0].text == "a note"


def test_successors_rank_above_what_they_supersede_after_the_locality_bonuses():
    """A session bonus can lift an old statement above its successor; the last step puts every
    successor just above it, oldest link first, so a chain ranks newest first."""
    links = UpdateLinks(superseded_by={1: [2], 2: [3]}, supersedes={2: [1], 3: [2]})
    out = successors_above({1: 2.5, 2: 2.4, 3: 0.1, 9: 3.0}, links)
    assert [rid for _, rid in top_k(out, 4)] == [9, 3, 2, 1]
    assert out[9] == 3.0 and out[2] > 2.5 and out[3] > out[2]
    # a successor the filters exclude is not brought in, and one already above keeps its score
    assert 2 not in successors_above({1: 2.5}, links, allowed={1, 3})
    assert successors_above({1: 1.0, 2: 4.0}, links)[2] == 4.0
    # an unscored old record lifts nothing
    assert successors_above({5: 1.0}, links) == {5: 1.0}


def test_other_people_demoted_unless_the_query_names_them():
    texts = {
        1: "By the way, my cat's name is Luna, and she's a sweetie.",
        2: "My partner's manager is Elena.",
        3: "My manager is Priya.",
    }
    scores = {1: 2.0, 2: 2.0, 3: 2.0}
    assert about_oneself("What is the name of my cat?") and about_oneself("Who is my manager?")
    # the cat is whom the query asks about: not another person
    assert demote_other_people(scores, texts, 0.5, "What is the name of my cat?") == {1: 2.0, 2: 1.0, 3: 2.0}
    # the partner is not asked about: demoted; the asker's own statement is not
    assert demote_other_people(scores, texts, 0.5, "Who is my manager?") == {1: 1.0, 2: 1.0, 3: 2.0}
    assert demote_other_people(scores, texts, 0.5) == {1: 1.0, 2: 1.0, 3: 2.0}  # no query: every other person
