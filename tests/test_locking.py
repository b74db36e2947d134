"""AgentLocks: namespaces in parallel, one namespace in order, the agent-wide side exclusive.

Pure threading (no database, no model). Each test would hang or fail under one agent-wide lock or
under no lock: the waits have timeouts, so a broken lock fails instead of hanging.
"""

from __future__ import annotations

import threading
import time

from titans_agent.locking import AgentLocks

T = 5.0  # seconds a thread may wait before the test calls it a failure


def _run(*targets) -> list[threading.Thread]:
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for t in threads:
        t.start()
    return threads


def _join(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.join(T)
        assert not t.is_alive(), "a thread is still blocked"


def test_two_namespaces_are_held_at_once():
    locks = AgentLocks()
    both = threading.Barrier(2, timeout=T)  # breaks (BrokenBarrierError) unless both are inside together
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            with locks.namespace(name):
                both.wait()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    _join(_run(lambda: work("alice"), lambda: work("bob")))
    assert errors == []
    assert locks.held_names() == 0  # nothing is left behind for the next 10,000 users


def test_one_namespace_is_held_by_one_thread_at_a_time():
    locks = AgentLocks()
    inside, most = 0, 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        for _ in range(50):
            with locks.namespace("alice"):
                with guard:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0.0005)
                with guard:
                    inside -= 1

    _join(_run(*[work] * 4))
    assert most == 1


def test_exclusive_waits_for_namespaces_and_keeps_new_ones_out():
    locks = AgentLocks()
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []

    def reader() -> None:
        with locks.namespace("alice"):
            entered.set()
            release.wait(T)
            order.append("reader done")

    def closer() -> None:
        with locks.exclusive():
            order.append("exclusive")

    def late() -> None:
        with locks.namespace("bob"):
            order.append("late reader")

    threads = _run(reader)
    assert entered.wait(T)
    threads += _run(closer)
    time.sleep(0.05)  # the closer is waiting now
    threads += _run(late)
    time.sleep(0.05)
    assert order == []  # the late reader waits behind the waiting exclusive caller
    release.set()
    _join(threads)
    assert order == ["reader done", "exclusive", "late reader"]


def test_a_thread_may_nest_namespaces_and_take_the_exclusive_side_inside_one():
    locks = AgentLocks()
    with locks.namespace("alice"):
        with locks.namespace("alice"), locks.namespace("bob"):
            pass
        with locks.exclusive():  # a callback closing the agent: no deadlock with itself
            with locks.namespace("carol"):
                pass
    assert locks.held_names() == 0
    done = threading.Event()

    def other() -> None:  # the shared count was restored: another thread can take the exclusive side
        with locks.exclusive():
            done.set()

    _join(_run(other))
    assert done.is_set()
