"""A chatbot's memory in the agent loop, with the real default embedder: for six of the agent-loop
benchmark's development users (stored as the LangChain middleware stores a run: every user message
and reply, questions included), the statement of the current fact ranks first and no stored
question ranks above it. The whole suite and its held-out users are in benchmarks/agent_loop.py."""

from __future__ import annotations

import pytest
from conftest import load_benchmark

from titans_agent import MemoryAgent

pytestmark = pytest.mark.integration

loop = load_benchmark("agent_loop")
USERS = ("alice", "bruno", "gustav", "nadia", "xavier", "yara")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    users = [u for u in loop.load_users(loop._data("agent_loop_users")) if u.name in USERS]
    assert {u.name for u in users} == set(USERS)
    out = []
    with MemoryAgent.open(tmp_path_factory.mktemp("loop") / "m.db") as agent:
        for user in users:
            loop.write_replay(agent, user)
        for user in users:
            for probe in user.probes:
                hits = agent.recall(probe.query, k=10, namespace=user.name)
                out.append(loop.score(probe, [h.text for h in hits], user.questions, user.replies))
    return out


def test_the_current_fact_ranks_first(outcomes):
    missed = [(o.probe.user, o.probe.query) for o in outcomes if o.probe.changed and not o.top1]
    assert missed == []


def test_no_stored_question_ranks_above_the_answer(outcomes):
    assert [(o.probe.user, o.probe.query) for o in outcomes if o.q_above] == []
