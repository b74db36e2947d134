"""Concurrent writers and readers on one database (C4 of docs/failure-cases.md), on every backend.

What must hold: no "database is locked" or other error reaches a caller; every turn is stored
exactly once; two writers to the same namespace never lose a memory update (the final step count
equals the units written by all of them); a reader never loads a memory state that does not match
the committed records. The memory runs in 32 dimensions (SmallFakeEmbedder) so that each of the
thousands of transactions stays small; the harder 4 processes x 4 threads x 500 writes run is
benchmarks/postgres.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import FakeEmbedder, SmallFakeEmbedder, digest, load_benchmark, query
from sqlalchemy import event, select, update

from titans_agent import MemoryAgent, StoreError, TitansAgentError
from titans_agent.store import NamespaceRow, Store

TESTS = Path(__file__).parent
pytestmark = pytest.mark.backends()

_WRITER = """
import json, os, sys, time
sys.path.insert(0, {tests!r})
import torch
torch.set_num_threads(1)
from conftest import SmallFakeEmbedder
from titans_agent import MemoryAgent

with MemoryAgent.open({url!r}, embedder=SmallFakeEmbedder()) as agent:
    print("ready", flush=True)
    while not os.path.exists({go!r}):  # both writers start together
        time.sleep(0.005)
    seqs = []
    for b in range(0, {n}, {batch}):  # small transactions of {batch} turns, interleaved with the other
        turns = [({session!r}, "user", f"process p{{sys.argv[1]}} says number n{{i}}") for i in range(b, b + {batch})]
        seqs += [r.turn_seq for r in agent.add_turns(turns)]
    print(json.dumps(seqs))
"""


class _Reader(threading.Thread):
    """Recalls in a loop until stopped, checking each memory state it loads against the committed
    records: every unit written here has its own set of words (never merged into another record),
    so in any committed snapshot the memory's step equals the number of records. Records only grow
    here, so the state read between two counts must have a step between them."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.stop, self.errors, self.recalls = url, threading.Event(), [], 0

    def run(self) -> None:
        try:
            with MemoryAgent.open(self.url, embedder=SmallFakeEmbedder()) as agent:
                while not self.stop.is_set():
                    agent.recall("says number turn", k=3)
                    ((before,),) = query(agent, "SELECT count(*) FROM records")
                    state = agent.memory_state("default")
                    ((after,),) = query(agent, "SELECT count(*) FROM records")
                    if state is not None and not before <= state.step <= after:
                        self.errors.append(f"state step {state.step} read between {before} and {after} records")
                    self.recalls += 1
                    time.sleep(0.01)
        except Exception as exc:  # any error reaching the caller fails the test
            self.errors.append(repr(exc))


def _check_sessions(agent: MemoryAgent, sessions: dict[str, list[str]]) -> None:
    """Every session holds exactly its turns, once each, with sequence numbers 1..n."""
    for session, contents in sessions.items():
        turns = agent.turns(session)
        assert [t["seq"] for t in turns] == list(range(1, len(contents) + 1))
        assert [t["content"] for t in turns] == contents
    n = sum(len(c) for c in sessions.values())
    assert query(agent, "SELECT count(*) FROM occurrences WHERE kind = 'turn'") == [(n,)]
    assert query(agent, "SELECT count(*) FROM records") == [(n,)]
    assert agent.stats().memory_step == n  # no lost update: every unit moved the one shared state


@pytest.mark.slow
def test_c4_eight_threads_add_200_turns_each_while_another_recalls(db_url):
    """Eight writer threads, each with its own MemoryAgent (as eight workers of an app server), all
    in one namespace, each in its own session (20 transactions of 10 turns each); a ninth thread
    recalls throughout."""
    MemoryAgent.open(db_url, embedder=SmallFakeEmbedder()).close()  # the database exists
    n_threads, n_turns, batch = 8, 200, 10
    errors: list[str] = []
    barrier = threading.Barrier(n_threads)

    def write(t: int) -> None:
        try:
            with MemoryAgent.open(db_url, embedder=SmallFakeEmbedder()) as agent:
                barrier.wait()
                for b in range(0, n_turns, batch):  # 20 transactions per thread, interleaved
                    agent.add_turns([(f"s{t}", "user", f"thread t{t} says number n{i}") for i in range(b, b + batch)])
        except Exception as exc:
            errors.append(repr(exc))

    reader = _Reader(db_url)
    reader.start()
    writers = [threading.Thread(target=write, args=(t,)) for t in range(n_threads)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(timeout=300)
    reader.stop.set()
    reader.join(timeout=60)
    assert errors == [] and reader.errors == []
    assert reader.recalls > 0
    with MemoryAgent.open(db_url, embedder=SmallFakeEmbedder()) as agent:
        _check_sessions(agent, {f"s{t}": [f"thread t{t} says number n{i}" for i in range(n_turns)] for t in range(8)})


@pytest.mark.slow
def test_c4_two_processes_add_200_turns_each_to_one_namespace_without_losing_an_update(db_url, tmp_path):
    """Two processes start together on a database that does not exist yet (they race to create
    its schema and the namespace), each adds 200 turns to its own session of the same namespace,
    while a thread of this process recalls. The final step is 400: no update was lost."""
    n, go = 200, tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WRITER.format(tests=str(TESTS), url=db_url, go=str(go), session=f"p{p}", n=n, batch=5),
                str(p),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        for p in range(2)
    ]
    for proc in procs:  # wait until both have loaded torch and opened the database
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.communicate()[1][-3000:]
    reader = _Reader(db_url)
    reader.start()
    go.touch()
    outs = [p.communicate(timeout=300) for p in procs]
    reader.stop.set()
    reader.join(timeout=60)
    for proc, (out, err) in zip(procs, outs):
        assert proc.returncode == 0, err[-3000:]
        assert json.loads(out.strip().splitlines()[-1]) == list(range(1, n + 1))
        assert "database is locked" not in err
    assert reader.errors == []
    with MemoryAgent.open(db_url, embedder=SmallFakeEmbedder()) as agent:
        _check_sessions(agent, {f"p{p}": [f"process p{p} says number n{i}" for i in range(n)] for p in range(2)})


def test_a_write_racing_another_writer_continues_from_its_state(db_url, make_db_url):
    """While this agent embeds (outside any lock), another agent commits a write to the namespace.
    The racing write is not refused: under the namespace lock it sees the new revision, reloads
    the memory state and applies its update on top, so the final state is bit for bit the state of
    the three writes made one after the other."""
    other = MemoryAgent.open(db_url, embedder=FakeEmbedder())
    other.remember("the namespace exists")

    class Racing(FakeEmbedder):
        def embed(self, texts):
            if "racing write" in texts[0]:
                other.remember("the other process got in first")
            return super().embed(texts)

    try:
        with MemoryAgent.open(db_url, embedder=Racing()) as agent:
            agent.recall("namespace", k=1)  # load the namespace: its cached state is now stale
            result = agent.remember("racing write")
            assert result.stored
            assert agent.stats().memory_step == 3
            texts = {h.text for h in agent.recall("write process namespace", k=10)}
            raced = digest(agent.memory_state("default"))
        assert texts == {"the namespace exists", "the other process got in first", "racing write"}
        assert digest(other.memory_state("default")) == raced  # the other agent reloads it too
    finally:
        other.close()
    with MemoryAgent.open(make_db_url("serial"), embedder=FakeEmbedder()) as serial:
        for note in ("the namespace exists", "the other process got in first", "racing write"):
            serial.remember(note)
        assert digest(serial.memory_state("default")) == raced


def _hold_write_lock(store: Store, ns_id: int, seconds: float, held: threading.Event) -> None:
    """Take the namespace's write lock in another connection and keep it for ``seconds``."""
    with store.engine.connect() as conn:
        if store.is_sqlite:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.execute(select(NamespaceRow.id).where(NamespaceRow.id == ns_id).with_for_update())
        held.set()
        time.sleep(seconds)
        conn.rollback()


@pytest.mark.parametrize("busy_s, hold_s, ok", [(0.5, 0.8, True), (0.3, 3.0, False)])
def test_a_held_lock_is_waited_out_and_retried_then_reported_as_busy(db_url, busy_s, hold_s, ok):
    """With a 0.5 s lock wait (retry budget 1.5 s), a lock held for 0.8 s is outlasted by a retry
    (the write commits once); with a 0.3 s wait (budget 0.9 s), one held for 3 s exhausts the budget
    and raises StoreError, writing nothing. Margins of 0.7 s and 2.1 s keep this steady on a busy
    machine."""
    with MemoryAgent.open(db_url, embedder=SmallFakeEmbedder()) as agent:
        agent.remember("the namespace exists")
        ((ns_id,),) = query(agent, "SELECT id FROM namespaces WHERE name = :n", n="default")
    store = Store(db_url, busy_timeout_s=busy_s)
    held = threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(store, ns_id, hold_s, held))
    holder.start()
    held.wait(timeout=30)
    attempts = 0
    try:
        for attempt in store.write_attempts():
            with attempt:
                attempts = attempt.retry_state.attempt_number
                with store.write_session(ns_id) as s:
                    bump = update(NamespaceRow).where(NamespaceRow.id == ns_id)
                    s.execute(bump.values(revision=NamespaceRow.revision + 1))
                    s.commit()
        assert ok and attempts > 1
    except StoreError as exc:
        assert not ok and "busy" in str(exc)
    finally:
        holder.join()
    with store.session() as s:
        assert s.execute(select(NamespaceRow.revision).where(NamespaceRow.id == ns_id)).scalar_one() == 1 + ok
    store.close()


def test_opening_retries_a_lock_met_while_connecting_to_a_new_database(tmp_path, monkeypatch):
    """SQLite can answer "database is locked" to the WAL pragma of a NEW connection at once (no
    busy handler) while another process creates the same file: seen as a flaky C4 run where the
    second process died in Store(). Opening retries that like any lock conflict."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    calls = {"n": 0}
    original = Store._create_schema

    def locked_twice(self):
        calls["n"] += 1
        if calls["n"] <= 2:
            raise OperationalError("PRAGMA journal_mode=WAL", {}, sqlite3.OperationalError("database is locked"))
        return original(self)

    monkeypatch.setattr(Store, "_create_schema", locked_twice)
    store = Store(tmp_path / "new.db", busy_timeout_s=2.0)
    assert calls["n"] == 3
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    store.engine.dispose()

    def always_locked(self):
        raise OperationalError("PRAGMA journal_mode=WAL", {}, sqlite3.OperationalError("database is locked"))

    monkeypatch.setattr(Store, "_create_schema", always_locked)
    started = time.monotonic()
    with pytest.raises(StoreError, match="busy"):
        Store(tmp_path / "other.db", busy_timeout_s=0.2)
    assert time.monotonic() - started < 5  # gives up after 3 x the busy timeout, with a clear error


# ---------------------------------------------------------------------- a namespace dropped under a writer
def _on_next_write_lock(agent: MemoryAgent, action) -> list[str]:
    """Run ``action`` once, just before ``agent`` next asks the database for a write lock (the first
    statement of its next write transaction: SQLite ``BEGIN IMMEDIATE``, PostgreSQL ``SET LOCAL
    lock_timeout``). By then the agent has looked its namespace up, so what ``action`` does to the
    namespace falls between the look-up and the lock, every time: no timing luck. Returns the
    statements it fired before (one, once it has)."""
    fired: list[str] = []

    def before(conn, cursor, statement, params, context, executemany):
        if not fired and (statement.startswith("BEGIN IMMEDIATE") or "lock_timeout" in statement):
            fired.append(statement)
            action()

    event.listen(agent.store.engine, "before_cursor_execute", before)
    return fired


_CROSS_NAMESPACE = {
    "turn in another namespace's session": "SELECT count(*) FROM turns t JOIN sessions s ON s.id = t.session_pk "
    "JOIN occurrences o ON o.id = t.occurrence_id WHERE s.namespace_id <> o.namespace_id",
    "occurrence of another namespace's record": "SELECT count(*) FROM occurrences o JOIN records r "
    "ON r.id = o.record_id WHERE o.namespace_id <> r.namespace_id",
    "occurrence of another namespace's document": "SELECT count(*) FROM occurrences o JOIN documents d "
    "ON d.id = o.document_id WHERE o.namespace_id <> d.namespace_id",
    "session without a turn": "SELECT count(*) FROM sessions s WHERE NOT EXISTS "
    "(SELECT 1 FROM turns t WHERE t.session_pk = s.id)",
}


def _namespace_rows(agent: MemoryAgent, name: str) -> dict[str, list]:
    """What a namespace holds, by name: its sessions, record texts, occurrence sources and metadata."""
    q = "FROM {} x JOIN namespaces n ON n.id = x.namespace_id WHERE n.name = :n"
    return {
        "sessions": sorted(r[0] for r in query(agent, "SELECT x.session_id " + q.format("sessions"), n=name)),
        "texts": sorted(r[0] for r in query(agent, "SELECT x.text " + q.format("records"), n=name)),
        "sources": sorted(r[0] for r in query(agent, "SELECT x.source " + q.format("occurrences"), n=name)),
        "metadata": sorted(
            json.dumps(json.loads(m) if isinstance(m, str) else m, sort_keys=True)
            for (m,) in query(agent, "SELECT x.metadata " + q.format("occurrences"), n=name)
        ),
    }


def _error_of(call) -> object:
    """What ``call`` returns, or the name of the project error it raises."""
    try:
        return call()
    except TitansAgentError as exc:
        return type(exc).__name__


# op -> (what warms the writer's look-up of "x", the write racing the drop, what it returns, what "x" then holds)
_RACING_WRITES = {
    "add_turn": (
        lambda a: a.add_turn("x-warm", "user", "tenant x warms up its session", namespace="x"),
        lambda a: a.add_turn("x-s1", "user", "tenant x opens a new session", namespace="x").turn_seq,
        1,
        ["x-s1"],
    ),
    "add_turns": (
        lambda a: a.remember("tenant x warms up", namespace="x"),
        lambda a: [
            r.turn_seq
            for r in a.add_turns([("x-s1", "user", "first of x"), ("x-s2", "user", "second of x")], namespace="x")
        ],
        [1, 1],
        ["x-s1", "x-s2"],
    ),
    "remember": (
        lambda a: a.remember("tenant x warms up", namespace="x"),
        lambda a: a.remember("tenant x's new note", source="shared", namespace="x").stored,
        True,
        [],
    ),
    "ingest": (
        lambda a: a.remember("tenant x warms up", namespace="x"),
        lambda a: a.ingest("Tenant x's handbook says the pager rotates weekly.", source="shared", namespace="x").chunks,
        1,
        [],
    ),
    "update_metadata": (
        lambda a: a.remember("tenant x's shared note", source="shared", namespace="x"),
        lambda a: _error_of(lambda: a.update_metadata({"owner": "tenant x"}, source="shared", namespace="x")),
        "NamespaceNotFoundError",
        None,
    ),
    "forget": (
        lambda a: a.remember("tenant x's shared note", source="shared", namespace="x"),
        lambda a: _error_of(lambda: a.forget(source="shared", namespace="x")),
        "NamespaceNotFoundError",
        None,
    ),
    "forget_unlearn": (
        lambda a: a.remember("tenant x's shared note", source="shared", namespace="x"),
        lambda a: _error_of(lambda: a.forget(source="shared", namespace="x", unlearn=True)),
        "NamespaceNotFoundError",
        None,
    ),
    "rebuild_memory": (
        lambda a: a.remember("tenant x's shared note", source="shared", namespace="x"),
        lambda a: a.rebuild_memory("x"),
        0,
        None,
    ),
}


@pytest.mark.parametrize("op", sorted(_RACING_WRITES))
def test_a_write_whose_namespace_is_dropped_after_its_look_up_never_touches_another_namespace(db_url, backend, op):
    """Agent A looks namespace "x" up (a write warms its cache), then, between A's next look-up and
    its write lock, agent B drops "x" and makes "y", which on SQLite gets x's old id. A's write acts
    on "x" as it is when A holds the lock: a write that creates its namespace makes "x" again and
    writes there (as a first write does); forget and update_metadata find no "x"
    (NamespaceNotFoundError, as for a namespace that never existed), rebuild_memory has nothing to
    rebuild (0). No row of A's lands in "y", "y" is untouched, and no driver error reaches A."""
    warm, act, returns, x_sessions = _RACING_WRITES[op]
    a = MemoryAgent.open(db_url, embedder=FakeEmbedder())
    b = MemoryAgent.open(db_url, embedder=FakeEmbedder())
    try:
        b.remember("an older tenant", namespace="w")  # x is made last: its id is the highest
        warm(a)
        ((x_id,),) = query(a, "SELECT id FROM namespaces WHERE name = 'x'")

        def drop_x_make_y() -> None:
            assert b.drop_namespace("x")
            b.remember("tenant y's note", source="shared", metadata={"owner": "tenant y"}, namespace="y")
            b.add_turn("y-s", "user", "tenant y's own turn", namespace="y")

        fired = _on_next_write_lock(a, drop_x_make_y)
        assert act(a) == returns
        assert fired  # the drop happened between A's look-up and its lock
        ((y_id,),) = query(a, "SELECT id FROM namespaces WHERE name = 'y'")
        if backend == "sqlite":
            assert y_id == x_id  # SQLite reused the dropped namespace's id: the stale id now names y
        assert _namespace_rows(a, "y") == {
            "sessions": ["y-s"],
            "texts": ["tenant y's note", "tenant y's own turn"],
            "sources": ["session:y-s", "shared"],
            "metadata": ['{"owner": "tenant y"}', "{}"],
        }
        x = query(a, "SELECT id FROM namespaces WHERE name = 'x'")
        if x_sessions is None:  # nothing made "x" again
            assert x == []
        else:
            assert x and x[0][0] != y_id
            assert _namespace_rows(a, "x")["sessions"] == x_sessions
        for what, sql in _CROSS_NAMESPACE.items():
            assert query(a, sql) == [(0,)], what
        assert b.stats("y").records == 2 and b.recall("tenant y's note", k=1, namespace="y")
    finally:
        a.close()
        b.close()


@pytest.mark.slow
def test_five_processes_writing_dropping_and_importing_for_5_s_leave_no_row_in_another_namespace(capsys):
    """benchmarks/tenancy_stress.py on SQLite for 5 s (5 processes over 3 shared namespaces): no
    unexpected error class and no cross-namespace or orphan row at the end (it exits 0)."""
    stress = load_benchmark("tenancy_stress")
    assert stress.main(["--seconds", "5", "--backends", "sqlite", "--out", ""]) == 0, capsys.readouterr().out[-4000:]
    out = capsys.readouterr().out
    assert "| **all** |" in out and "sqlite: no violation" in out
