"""The memory's persisted form: outer parameters once per database, the state as checkpoint + log.

Real SQLite files (and PostgreSQL where marked); only the embedder is fake. What must hold:
- every namespace of one configuration references ONE ``memory_parameters`` row, and a namespace
  stores no state until ``checkpoint_units`` units were written;
- the state a process replays from the checkpoint and the log equals, bit for bit, the state the
  writer held, across checkpoints, plain forgetting, and writers in two agents taking turns;
- a parameter set is recognised by its tensors, not by the order of its header's metadata.
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import FakeEmbedder, query

from titans_agent import AgentConfig, MemoryAgent
from titans_agent.config import MemoryConfig
from titans_agent.core.memory import MemoryState, NeuralMemory, params_to_bytes
from titans_agent.store.checkpoints import parameters_key


def same(a: MemoryState | None, b: MemoryState | None) -> bool:
    assert a is not None and b is not None
    pairs = zip((*a.weights, *a.momentum, a.pending), (*b.weights, *b.momentum, b.pending))
    return a.step == b.step and all(torch.equal(x, y) for x, y in pairs)


def notes(i: int) -> list[str]:
    return [f"Note {i}.{j}: the backup of shard {i * 7 + j} runs at {j}:00 UTC." for j in range(3)]


@pytest.mark.backends()
def test_namespaces_share_one_parameter_row_and_store_no_state_until_a_checkpoint(db_url):
    config = AgentConfig(checkpoint_units=10)
    with MemoryAgent.open(db_url, config, embedder=FakeEmbedder()) as agent:
        for n in range(6):
            agent.add_turns([("s", "user", t) for t in notes(n)], namespace=f"user-{n}")
        assert query(agent, "SELECT count(*) FROM memory_parameters") == [(1,)]
        assert query(agent, "SELECT count(DISTINCT parameters_id) FROM namespaces") == [(1,)]
        assert query(agent, "SELECT count(*) FROM memory_checkpoints") == [(0,)]  # 3 units each: the log
        for i in range(3):  # 3 + 9 units: the write that reaches 10 checkpoints
            agent.add_turns([("s", "user", t) for t in notes(10 + i)], namespace="user-0")
        rows = query(agent, "SELECT c.step, c.position FROM memory_checkpoints c")
        ns = "(SELECT id FROM namespaces WHERE name = 'user-0')"
        last = query(agent, f"SELECT max(id) FROM occurrences WHERE namespace_id = {ns}")
        assert rows == [(12, last[0][0])]
        live = agent.memory_state("user-0")
    with MemoryAgent.open(db_url, config, embedder=FakeEmbedder()) as again:
        assert same(again.memory_state("user-0"), live)
        assert again.memory_state("user-5").step == 3


@pytest.mark.backends()
def test_a_replayed_state_equals_the_writers_across_checkpoints_and_forgetting(db_url):
    config = AgentConfig(checkpoint_units=4)
    with MemoryAgent.open(db_url, config, embedder=FakeEmbedder()) as agent:
        for i in range(7):
            agent.remember(notes(i)[0], source=f"n{i}")
            agent.add_turns([("s", "user", notes(i)[1]), ("s", "assistant", notes(i)[2])])
            with MemoryAgent.open(db_url, config, embedder=FakeEmbedder()) as reader:
                assert same(reader.memory_state(), agent.memory_state()), f"after write {i}"
        learned = agent.memory_state()
        assert agent.forget(source="n3") == 1  # plain: the memory keeps what it learned
        agent.remember("The staging server listens on port 8443.", source="n0")  # replaces a note
        after = agent.memory_state()
        assert after.step == learned.step + 1
    with MemoryAgent.open(db_url, config, embedder=FakeEmbedder()) as reader:
        assert same(reader.memory_state(), after)


@pytest.mark.backends()
@pytest.mark.parametrize("checkpoint_units", [2, 64])
def test_a_changed_document_keeps_what_the_memory_learned_in_every_process(db_url, checkpoint_units):
    """Re-ingesting a changed document deletes its old occurrences, which are part of the log: the
    state that learned them is checkpointed with the delete, so a reopened process (and one that
    reads the log after SQLite gave the new chunk a deleted occurrence's id) continues from it."""
    config = AgentConfig(checkpoint_units=checkpoint_units)
    with MemoryAgent.open(db_url, config, embedder=FakeEmbedder()) as agent:
        agent.remember("A note before the document.")
        agent.ingest("Version one of the handbook.", source="handbook")
        with MemoryAgent.open(db_url, config, embedder=FakeEmbedder()) as other:  # caches the log as it is
            assert same(other.memory_state(), agent.memory_state())
            agent.ingest("Version two of the handbook, rewritten.", source="handbook")
            assert agent.memory_state().step == 3  # v1 stays learned: the weights keep it
            assert same(other.memory_state(), agent.memory_state())
            with MemoryAgent.open(db_url, config, embedder=FakeEmbedder()) as reopened:
                assert same(reopened.memory_state(), agent.memory_state())
                assert reopened.stats().memory_step == 3
            other.remember("The other process writes next.")
            assert same(other.memory_state(), agent.memory_state())


@pytest.mark.backends()
def test_two_agents_taking_turns_continue_each_others_state(make_db_url):
    db_url, ref_url = make_db_url("memory"), make_db_url("reference")
    config = AgentConfig(checkpoint_units=5)
    with (
        MemoryAgent.open(db_url, config, embedder=FakeEmbedder()) as a,
        MemoryAgent.open(db_url, config, embedder=FakeEmbedder()) as b,
    ):
        for i in range(6):
            (a if i % 2 else b).add_turns([("s", "user", t) for t in notes(i)])
        assert same(a.memory_state(), b.memory_state())
        final = a.memory_state()
    with MemoryAgent.open(ref_url, config, embedder=FakeEmbedder()) as ref:
        for i in range(6):
            ref.add_turns([("s", "user", t) for t in notes(i)])
        assert same(ref.memory_state(), final)


def test_a_parameter_set_is_found_by_its_tensors_whatever_its_header_order():
    blob = params_to_bytes(NeuralMemory(MemoryConfig(dim=16, expansion=1)))
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + n])
    header["__metadata__"] = dict(reversed(list(header["__metadata__"].items())))
    raw = json.dumps(header, separators=(",", ":")).encode().ljust(n)
    reordered = blob[:8] + raw + blob[8 + n :]
    assert reordered != blob and parameters_key(reordered) == parameters_key(blob)
    assert parameters_key(b"not safetensors at all") != parameters_key(blob)
