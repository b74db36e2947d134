"""One MemoryAgent shared by threads, as an app server shares it between its users' requests.

Calls on different namespaces run at once (a barrier inside the embedder passes only when two
threads are embedding together); calls on one namespace run one after the other (every turn kept,
in order, the memory's step counts them all); closing waits for the calls in flight and later calls
get a clear error. The embedder is the only fake (deterministic hashing, from conftest).
"""

from __future__ import annotations

import threading
import time

import pytest
from conftest import query

from titans_agent import AgentConfig, EmptyInputError, MemoryAgent, NamespaceNotFoundError, StoreError
from titans_agent.locking import AgentLocks

T = 10.0


class MeetingEmbedder:
    """Wraps the fake embedder; while ``meet`` is set, every embed call waits at that barrier, so a
    call can only finish when enough threads are embedding at the same time."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.dim, self.max_tokens = inner, inner.name, inner.dim, inner.max_tokens
        self.tokenizer = inner.tokenizer
        self.meet: threading.Barrier | None = None

    def embed(self, texts):
        if self.meet is not None:
            self.meet.wait()
        return self.inner.embed(texts)


def _threads(targets) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - collected and asserted
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guarded(fn), daemon=True) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(T * 3)
        assert not t.is_alive(), "a thread is still blocked"
    return errors


def test_recalls_in_different_namespaces_run_at_once(db_url, fake_embedder):
    emb = MeetingEmbedder(fake_embedder)
    with MemoryAgent.open(db_url, embedder=emb) as agent:
        for ns in ("alice", "bob"):
            agent.add_turns(
                [("s", "user", f"{ns} keeps a cat named Tom"), ("s", "user", f"{ns} likes tea")], namespace=ns
            )
        emb.meet = threading.Barrier(2, timeout=T)  # one agent-wide lock would break it
        hits: dict[str, list] = {}
        errors = _threads(
            [lambda ns=ns: hits.__setitem__(ns, agent.recall("cat", k=1, namespace=ns)) for ns in ("alice", "bob")]
        )
        assert errors == []
        assert hits["alice"][0].text == "alice keeps a cat named Tom"
        assert hits["bob"][0].text == "bob keeps a cat named Tom"


@pytest.mark.backends()
def test_the_first_namespaces_of_a_fresh_database_are_created_at_once(db_url, fake_embedder):
    """Creators of different namespaces hold different locks; the first ones of a database all
    insert the shared outer parameters: one row is kept and no write is refused."""
    agents = [MemoryAgent.open(db_url, embedder=fake_embedder) for _ in range(2)]
    try:
        start = threading.Barrier(6, timeout=T)

        def first_note(i: int) -> None:
            start.wait()
            agents[i % 2].remember(f"first note of user {i}", namespace=f"user{i}")

        assert _threads([lambda i=i: first_note(i) for i in range(6)]) == []
        assert sorted(agents[0].namespaces()) == [f"user{i}" for i in range(6)]
        assert all(agents[0].stats(f"user{i}").records == 1 for i in range(6))
        assert query(agents[0], "SELECT count(*) FROM memory_parameters") == [(1,)]
    finally:
        for a in agents:
            a.close()


def test_one_namespace_takes_its_writers_in_turn(db_url, fake_embedder):
    with MemoryAgent.open(db_url, embedder=fake_embedder) as agent:

        def writer(t: int):
            return lambda: [agent.add_turn(f"s{t}", "user", f"writer w{t} says number n{i}") for i in range(15)]

        reader = lambda: [agent.recall("number", k=3) for _ in range(10)]  # noqa: E731
        assert _threads([writer(t) for t in range(4)] + [reader]) == []
        for t in range(4):
            assert [x["content"] for x in agent.turns(f"s{t}")] == [f"writer w{t} says number n{i}" for i in range(15)]
        assert agent.stats().memory_step == 60  # no write was lost or applied twice


def test_many_namespaces_written_by_threads_match_a_sequential_run(db_url, make_db_url, fake_embedder):
    def fill(agent: MemoryAgent, ns: str) -> None:
        agent.add_turns([("s", "user", f"{ns} turn {i} about topic {i % 3}") for i in range(8)], namespace=ns)

    names = [f"user-{i}" for i in range(6)]
    with MemoryAgent.open(db_url, embedder=fake_embedder) as agent:
        assert _threads([lambda ns=ns: fill(agent, ns) for ns in names]) == []
        threaded = {
            ns: [(h.text, round(h.score, 6)) for h in agent.recall("topic 1", k=4, namespace=ns)] for ns in names
        }
        states = {ns: agent.memory_state(ns) for ns in names}
    with MemoryAgent.open(make_db_url("sequential"), embedder=fake_embedder) as agent:
        for ns in names:
            fill(agent, ns)
        for ns in names:
            assert [(h.text, round(h.score, 6)) for h in agent.recall("topic 1", k=4, namespace=ns)] == threaded[ns]
            st = agent.memory_state(ns)
            assert all((a == b).all() for a, b in zip(st.weights, states[ns].weights))


def test_close_waits_for_calls_in_flight_and_later_calls_fail_clearly(db_url, fake_embedder):
    emb = MeetingEmbedder(fake_embedder)
    agent = MemoryAgent.open(db_url, embedder=emb)
    agent.add_turn("s", "user", "the door code is 4312")
    emb.meet = threading.Barrier(2, timeout=T)  # the recall waits inside the embedder for the test
    result: list = []
    t = threading.Thread(target=lambda: result.append(agent.recall("door code", k=1)), daemon=True)
    t.start()
    deadline = time.monotonic() + T
    while emb.meet.n_waiting == 0 and time.monotonic() < deadline:  # until the recall is in flight (it may import)
        time.sleep(0.01)
    closer = threading.Thread(target=agent.close, daemon=True)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # close waits for the recall in flight
    emb.meet.wait()  # let the recall finish
    t.join(T)
    closer.join(T)
    assert not closer.is_alive() and result and result[0][0].text == "the door code is 4312"
    with pytest.raises(StoreError, match="closed"):
        agent.recall("door code")


def test_close_from_a_callback_while_another_thread_waits_for_its_namespace(tmp_path, fake_embedder):
    """A progress callback closes the agent while a second thread calls into the ingest's namespace:
    nothing waits for ever. The ingest stops at its next batch with a clear error; the recall either
    ran before the close (the callback holds no lock) or fails clearly too."""
    agent = MemoryAgent.open(tmp_path / "m.db", AgentConfig(batch_size=2), embedder=fake_embedder)
    agent.remember("seed", namespace="a")
    waiting, results = threading.Event(), {}

    def progress(_p) -> None:
        if not waiting.is_set():
            waiting.set()
            time.sleep(0.3)  # the other thread now calls into namespace "a"
            agent.close()

    def ingest() -> None:
        text = "\n\n".join(f"Paragraph {i} of the handbook: " + " ".join(f"w{j}" for j in range(60)) for i in range(10))
        results["ingest"] = agent.ingest(text, source="d", namespace="a", progress=progress).stored

    def recall() -> None:
        waiting.wait(T)
        results["recall"] = agent.recall("paragraph", namespace="a")

    errors = _threads([ingest, recall])  # joins with a timeout and asserts no thread is blocked
    assert "ingest" not in results and errors
    assert all(isinstance(e, StoreError) and "closed" in str(e) for e in errors)
    assert len(errors) == 2 - ("recall" in results)


def test_progress_callbacks_that_recall_in_each_others_namespace_do_not_deadlock(tmp_path, fake_embedder):
    """Two threads ingest, each into its own namespace, with a progress callback that recalls in the
    other's namespace while the other thread is inside its own callback: a callback runs outside
    every lock of the agent, so neither waits for the other. The threads are joined with a timeout:
    a regression fails here instead of hanging."""
    agent = MemoryAgent.open(tmp_path / "m.db", AgentConfig(batch_size=2), embedder=fake_embedder)
    for ns in ("a", "b"):
        agent.remember(f"the seed note of {ns}", namespace=ns)
    both_inside = threading.Barrier(2, timeout=T)
    recalled: dict[str, str] = {}

    def ingest(mine: str, other: str):
        def progress(_p) -> None:
            if mine not in recalled:
                both_inside.wait()  # both threads are in their callbacks now
                recalled[mine] = agent.recall("seed note", k=1, namespace=other)[0].text

        def run() -> None:
            text = "\n\n".join(f"{mine} paragraph {i}: " + " ".join(f"w{j}" for j in range(60)) for i in range(4))
            agent.ingest(text, source="handbook", namespace=mine, progress=progress)

        return run

    assert _threads([ingest("a", "b"), ingest("b", "a")]) == []  # asserts that no thread is blocked
    assert recalled == {"a": "the seed note of b", "b": "the seed note of a"}
    assert agent.stats("a").chunks == agent.stats("b").chunks == 4 and agent._locks.held_names() == 0
    agent.close()


def test_agent_locks_are_released_after_every_call(agent):
    agent.add_turn("s", "user", "hello there")
    with pytest.raises(NamespaceNotFoundError):
        agent.recall("hello", namespace="nobody")  # a call that raised released its lock
    with pytest.raises(EmptyInputError):
        agent.recall("")  # a rejected call releases its lock too
    assert isinstance(agent._locks, AgentLocks) and agent._locks.held_names() == 0


@pytest.mark.integration
def test_the_real_embedder_serves_four_threads_in_four_namespaces(tmp_path):
    """The real all-MiniLM-L6-v2 shared by four threads (one torch thread each by default):
    the hits are those of the same calls made one by one."""
    names = [f"user-{i}" for i in range(4)]
    facts = ["I work as a nurse in Lyon", "My cat is called Tom", "I switched to green tea", "I play the cello"]
    questions = ["What is my job?", "What pet do I have?", "What do I drink?", "Which instrument do I play?"]
    with MemoryAgent.open(tmp_path / "m.db") as agent:
        for i, ns in enumerate(names):
            agent.add_turns([("s", "user", facts[(i + j) % 4]) for j in range(4)], namespace=ns)
        alone = {(ns, q): [h.id for h in agent.recall(q, k=4, namespace=ns)] for ns in names for q in questions}
        together: dict = {}

        def ask(ns: str):
            return lambda: [
                together.__setitem__((ns, q), [h.id for h in agent.recall(q, k=4, namespace=ns)]) for q in questions * 3
            ]

        assert _threads([ask(ns) for ns in names]) == []
        assert together == alone
