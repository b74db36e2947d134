"""UserMemory (``agent.user("alice")``): MemoryAgent's namespace-taking methods bound to one namespace."""

from __future__ import annotations

import inspect

import pytest

from titans_agent import (
    InvalidInputError,
    MemoryAgent,
    NamespaceNotFoundError,
    UserMemory,
    import_jsonl,
)

HANDLE_ONLY = {"export_jsonl"}  # titans_agent.export_jsonl of the one namespace (a function, not an agent method)
LEFT_OUT = {"user": "it makes the handle: a handle of another namespace is agent.user(name)"}


def _namespace_methods() -> dict[str, inspect.Signature]:
    """MemoryAgent's public methods that take a ``namespace`` parameter, with their signatures."""
    out = {}
    for name, member in inspect.getmembers(MemoryAgent, inspect.isfunction):
        if name.startswith("_"):
            continue
        sig = inspect.signature(member)
        if "namespace" in sig.parameters and name not in LEFT_OUT:
            out[name] = sig
    return out


def test_the_handle_covers_every_method_that_takes_a_namespace():
    methods = _namespace_methods()
    # a method added to MemoryAgent with namespace= lands here, and fails until the handle has it
    assert {"recall", "remember", "add_turn", "add_turns", "forget", "drop_namespace"} <= set(methods)
    for name, agent_sig in methods.items():
        assert hasattr(UserMemory, name), f"UserMemory has no {name}() (MemoryAgent.{name} takes namespace=)"
        handle_sig = inspect.signature(getattr(UserMemory, name))
        expected = []
        for p in agent_sig.parameters.values():
            if p.name == "namespace":
                continue
            if p.name == "missing_ok":  # a user with no memories yet reads as empty
                p = p.replace(default=True)
            expected.append(p)
        assert list(handle_sig.parameters.values()) == expected, name
        assert handle_sig.return_annotation == agent_sig.return_annotation, name
    public = {n for n, v in inspect.getmembers(UserMemory) if not n.startswith("_") and callable(v)}
    assert public == set(methods) | HANDLE_ONLY


@pytest.mark.parametrize("bad", ["", "   ", "a\x00b", "x" * 513, 7, None])
def test_a_bad_name_is_refused_when_the_handle_is_made(agent, bad):
    with pytest.raises(InvalidInputError, match="namespace"):
        agent.user(bad)
    assert agent.namespaces() == []  # nothing was made


def test_writes_and_reads_stay_in_the_users_namespace(agent):
    alice, bob = agent.user("alice"), agent.user("bob")
    assert (alice.namespace, alice.agent, repr(alice)) == ("alice", agent, "UserMemory('alice')")
    assert alice == agent.user("alice") and alice != bob and len({alice, agent.user("alice"), bob}) == 2
    alice.add_turn("s1", "user", "I live in Boston and work as a nurse.")
    alice.add_turns([("s1", "assistant", "Noted."), {"session_id": "s2", "role": "user", "content": "My cat is Tom."}])
    alice.remember("The staging server listens on port 8443.", {"team": "ops"}, source="ops")
    bob.remember("Bob's staging server listens on port 9000.")
    assert sorted(agent.namespaces()) == ["alice", "bob"]
    assert [h.text for h in alice.recall("staging server port", k=5, kinds=["note"])] == [
        "The staging server listens on port 8443."
    ]
    assert [h.text for h in agent.recall("staging server port", k=5, namespace="bob")] == [
        "Bob's staging server listens on port 9000."
    ]
    assert [t["content"] for t in alice.turns("s1")] == ["I live in Boston and work as a nurse.", "Noted."]
    assert [h.text for h in alice.records(kinds=["turn"], limit=1, offset=2)] == ["My cat is Tom."]
    assert alice.update_metadata({"team": "infra"}, source="ops") == 1
    assert alice.records(source="ops")[0].metadata == {"team": "infra"}
    stats = alice.stats()
    assert (stats.namespace, stats.turns, stats.notes) == ("alice", 3, 1)
    assert alice.memory_state() is not None and alice.memory_state().step == agent.stats("alice").memory_step
    assert alice.forget(source="session:s2") == 1
    assert alice.rebuild_memory() == 3  # two turns and the note remain
    assert agent.stats("bob").notes == 1  # bob untouched throughout
    assert alice.drop_namespace() is True and agent.namespaces() == ["bob"]
    assert alice.drop_namespace() is False


def test_a_new_user_reads_as_empty_unless_asked_to_raise(agent):
    carol = agent.user("carol")
    assert carol.recall("anything at all") == []
    assert carol.records() == [] and carol.turns("s1") == []
    assert carol.stats().records == 0 and carol.memory_state() is None
    assert carol.forget(source="nothing") == 0 and carol.update_metadata({"a": 1}, source="x") == 0
    assert carol.rebuild_memory() == 0
    with pytest.raises(NamespaceNotFoundError):
        carol.recall("anything at all", missing_ok=False)
    with pytest.raises(NamespaceNotFoundError):
        carol.stats(missing_ok=False)
    assert agent.namespaces() == []  # reading made nothing


def test_ingest_and_export_of_one_user(agent, tmp_path, fake_embedder):
    dana = agent.user("dana")
    report = dana.ingest("Parental leave is 16 weeks at full pay.", source="handbook.txt")
    assert report.stored == 1
    agent.user("erin").remember("Erin's note.")
    assert dana.export_jsonl(tmp_path / "dana.jsonl").namespaces == ["dana"]
    with MemoryAgent.open(tmp_path / "other.db", embedder=fake_embedder) as other:
        import_jsonl(other, tmp_path / "dana.jsonl")
        assert other.namespaces() == ["dana"]
        assert [h.text for h in other.user("dana").records()] == ["Parental leave is 16 weeks at full pay."]
    with pytest.raises(NamespaceNotFoundError):
        agent.user("nobody").export_jsonl(tmp_path / "nobody.jsonl")
