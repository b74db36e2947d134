"""A write's update detection is bounded: each new record is tested against its MAX_CANDIDATES
most similar older records above the threshold (never every one of them), and the dense index
grows in place. Where the bound does not bind the links are those of an unbounded search.

Real SQLite files under tmp_path; only the embedder is fake (tests/conftest.py)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import torch

from titans_agent import MemoryAgent
from titans_agent.store.context import supersession_links
from titans_agent.updates import MAX_CANDIDATES, FreshRecord, find_supersessions, nearest_above, update_candidates

T0 = dt.datetime(2024, 5, 1, 9, 0, tzinfo=dt.timezone.utc)


def _reference(row: np.ndarray, threshold: float, limit: int) -> list[int]:
    """The unbounded selection: a stable sort of the whole row, cut at the threshold and the limit."""
    order = np.argsort(-row, kind="stable")
    return [int(j) for j in order if row[j] >= threshold][:limit]


def test_nearest_above_is_the_stable_sort_cut_at_the_limit():
    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(0, 60))
        row = np.round(rng.uniform(-1, 1, n), 1).astype(np.float32)  # rounded: many ties
        if n and trial % 3 == 0:
            row[rng.integers(0, n, 3)] = np.nan  # never a candidate
        for limit in (1, 3, 16, 1000):
            got = nearest_above(row, 0.3, limit)
            assert got.dtype == np.int64
            assert got.tolist() == _reference(row, 0.3, limit), (trial, limit)


def _fresh(text: str, rid: int, role: str = "user") -> FreshRecord:
    return FreshRecord(rid, text, "turn", role, T0 + dt.timedelta(days=10))


def test_only_the_nearest_candidates_are_tested():
    """MAX_CANDIDATES + 4 older records above the threshold: an assistant's near-copies (never superseded by the
    user) first, the user's old fact at rank ``rank``; it is linked only within the bound."""
    old_fact, new_fact = "My rent is 1200 dollars a month.", "My rent is now 1350 dollars a month."
    for rank in (1, MAX_CANDIDATES, MAX_CANDIDATES + 1):
        n_old = MAX_CANDIDATES + 4
        sims = np.linspace(0.95, 0.6, n_old, dtype=np.float32)  # rank r -> column r - 1
        ids = np.arange(1, n_old + 2, dtype=np.int64)  # the older records, then the fresh one
        fact_col = rank - 1
        texts = {int(i): "Your rent is now 1350 dollars a month, noted." for i in ids[:n_old]}
        texts[int(ids[fact_col])] = old_fact
        places = {int(i): [("turn", "assistant", T0)] for i in ids[:n_old]}
        places[int(ids[fact_col])] = [("turn", "user", T0)]
        row = np.concatenate([sims, [1.0]])[None, :]  # (1, n_old + 1); the last column is itself
        fresh = [_fresh(new_fact, int(ids[-1]))]
        links = find_supersessions(fresh, ids, row, texts, places, 0.5)
        unbounded = find_supersessions(fresh, ids, row, texts, places, 0.5, limit=n_old)
        assert [(o, n) for o, n, _, _ in unbounded] == [(int(ids[fact_col]), int(ids[-1]))]
        assert links == (unbounded if rank <= MAX_CANDIDATES else [])
        assert len(update_candidates(ids, row, 0.5)) == MAX_CANDIDATES
        assert update_candidates(ids, row, 0.5, limit=n_old) == {int(i) for i in ids[:n_old]}


def test_a_write_links_the_same_as_an_unbounded_search_where_the_bound_does_not_bind(tmp_path, fake_embedder):
    """Fewer than MAX_CANDIDATES similar records: every write's links (one turn at a time, and a
    batch whose later turns supersede its earlier ones) are among those of the unbounded search over
    the whole index, recomputed here from the stored records: the same records link."""
    facts = [f"My rent is now {1000 + 50 * i} dollars a month." for i in range(6)]
    chatter = [f"I had pasta with Sam at the cafe on day {i}." for i in range(6)]
    with MemoryAgent.open(tmp_path / "m.db", embedder=fake_embedder) as agent:
        turns = [("s1", "user", t, T0 + dt.timedelta(days=i)) for i, t in enumerate(chatter + facts[:3])]
        for t in turns:
            agent.add_turn(*t)
        agent.add_turns([("s2", "user", t, T0 + dt.timedelta(days=20 + i)) for i, t in enumerate(facts[3:])])
        records = sorted(agent.records(), key=lambda r: r.id)
        with agent.store.session() as s:
            stored = supersession_links(s, [r.id for r in records], None)[1]
    ids = np.array([r.id for r in records], dtype=np.int64)
    emb = fake_embedder.embed([f"user: {r.text}" for r in records])
    sims = emb @ emb.T
    texts = {r.id: r.text for r in records}
    places = {int(i): [("turn", "user", T0 + dt.timedelta(days=k if k < 9 else 11 + k))] for k, i in enumerate(ids)}
    want: dict[int, list[int]] = {}
    for k, r in enumerate(records):
        fresh = [FreshRecord(r.id, r.text, "turn", "user", places[r.id][0][2])]
        above = int((sims[k, :k] >= 0.5).sum())
        assert above < MAX_CANDIDATES  # the bound does not bind here
        for old, new, _, _ in find_supersessions(
            fresh, ids[: k + 1], sims[k : k + 1, : k + 1], texts, places, 0.5, 10**6
        ):
            want.setdefault(new, []).append(old)
    assert want  # the facts do supersede each other
    # the write skips an older record already superseded in what the new one changes and links the
    # next current one instead, so the same records supersede, each the newest statement before it
    assert set(stored) == set(want)
    assert all(max(stored[n]) < n for n in stored)


def test_the_index_grows_in_place_and_earlier_views_keep_their_rows(tmp_path, fake_embedder):
    with MemoryAgent.open(tmp_path / "m.db", embedder=fake_embedder) as agent:
        agent.add_turn("s1", "user", "first turn about the garden", T0)
        rt = agent._live("default")
        views = [rt.emb]
        texts = ["first turn about the garden"]
        for i in range(80):  # past several reallocations of the buffer
            text = f"turn {i} about tomatoes and the {i}th bed"
            agent.add_turn("s1", "user", text, T0 + dt.timedelta(minutes=i + 1))
            texts.append(text)
            views.append(rt.emb)
            if i == 40:
                rt.half_emb()  # the float16 copy then grows with it
        want = torch.from_numpy(fake_embedder.embed([f"user: {t}" for t in texts]))
        assert torch.equal(rt.emb, want)
        for v in views:  # what recall held at any moment still reads the same rows
            assert torch.equal(v, want[: v.shape[0]])
        assert rt.half is not None and rt.half[0] is rt.emb
        assert torch.equal(rt.half_emb(), want.to(torch.float16))
        assert rt.values.shape == rt.emb.shape
        assert len({v.data_ptr() for v in views}) <= 8  # appended in place: a few reallocations, not one per write
        assert rt.nbytes >= 2 * rt.emb.numel() * 4  # the buffers, room to grow included
        hits = agent.recall("tomatoes in the 7th bed", k=1)
        assert hits[0].text == "turn 7 about tomatoes and the 7th bed"
