"""The cache of live runtimes under a memory budget: the least recently used namespaces are evicted
and loaded again from the database when used, with nothing lost (same states, same recall)."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from titans_agent import AgentConfig, MemoryAgent
from titans_agent.runtime import Runtimes

NAMESPACES = ["alice", "bob", "carol"]


def _fill_and_ask(agent: MemoryAgent) -> tuple[list, list]:
    for i in range(3):
        for ns in NAMESPACES:  # round-robin: with a tiny budget every use evicts the previous one
            agent.add_turn("s1", "user", f"{ns} note {i}: the {ns} project ships in week {i + 3}.", namespace=ns)
    hits = [[h.id for h in agent.recall(f"when does the {ns} project ship", k=3, namespace=ns)] for ns in NAMESPACES]
    states = [agent.memory_state(ns) for ns in NAMESPACES]
    return hits, states


def test_a_tiny_budget_evicts_and_changes_nothing(tmp_path, fake_embedder):
    with MemoryAgent.open(tmp_path / "big.db", embedder=fake_embedder) as agent:
        want_hits, want_states = _fill_and_ask(agent)
    tiny = AgentConfig(runtime_budget_mb=0.001)  # smaller than any one runtime
    with MemoryAgent.open(tmp_path / "tiny.db", tiny, embedder=fake_embedder) as agent:
        got_hits, got_states = _fill_and_ask(agent)
    assert got_hits == want_hits
    for got, want in zip(got_states, want_states, strict=True):
        assert got.step == want.step
        assert all(torch.equal(a, b) for a, b in zip(got.weights, want.weights, strict=True))
        assert all(torch.equal(a, b) for a, b in zip(got.momentum, want.momentum, strict=True))


def test_the_cache_keeps_the_most_recent_runtimes_within_its_budget(tmp_path, fake_embedder):
    with MemoryAgent.open(tmp_path / "m.db", embedder=fake_embedder) as agent:
        for ns in NAMESPACES:
            agent.remember(f"The {ns} project ships soon.", namespace=ns)
        cfg = agent.config.memory.model_copy(update={"dim": fake_embedder.dim})
    with MemoryAgent.open(tmp_path / "m.db", embedder=fake_embedder) as agent:
        store = agent.store
        kw = {"dim": 384, "embedder": fake_embedder.name, "device": torch.device("cpu"), "memory_config": cfg}
        size = Runtimes(store, chunking=None, **kw).get("alice", create=False).nbytes
        rts = Runtimes(store, chunking=None, budget_bytes=int(size * 2.5), **kw)  # room for two
        for ns in NAMESPACES:
            assert rts.get(ns, create=False) is not None
        assert list(rts._cache) == ["bob", "carol"] and rts.evictions == 1
        rts.get("bob", create=False)  # used again: now the most recent
        rts.get("alice", create=False)  # loaded again; carol, least recent, goes
        assert list(rts._cache) == ["bob", "alice"] and rts.evictions == 2


def test_an_infinite_or_non_positive_budget_is_refused_when_configured():
    for bad in (float("inf"), float("nan"), 0.0, -1.0):
        with pytest.raises(ValidationError, match="runtime_budget_mb"):
            AgentConfig(runtime_budget_mb=bad)
