"""The locks of one MemoryAgent: one per namespace, and an agent-wide side for what spans them.

A chatbot server gives every user a namespace and serves many users from one process, so the
recalls and writes of different namespaces must not wait on each other, while everything done to
one namespace stays in order. :class:`AgentLocks` gives:

- :meth:`AgentLocks.namespace`: a re-entrant lock per namespace name, made on first use and
  dropped when no thread holds or waits for it (10,000 users leave no 10,000 locks behind). Two
  threads in different namespaces run at once; two in the same one run one after the other.
  Writes of other processes are serialised by the database's own per-namespace write lock.
- :meth:`AgentLocks.exclusive`: the agent-wide side, for what spans namespaces (closing the agent,
  importing a file): it waits until no thread is inside a namespace and keeps new ones out until
  it is done. Waiting exclusive callers go first, so a stream of recalls cannot starve ``close``.

No code of the caller runs under these locks: the ingest takes its namespace's lock for each unit
of work (a batch's commit, a document's opening) and calls its ``progress`` callback between them,
holding none, so a callback may call the agent in any namespace, or close it. No order is kept
between namespaces' locks, and none is needed: a thread holds one namespace at a time. Both sides
are re-entrant for the thread that holds them (one agent call made inside another).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["AgentLocks"]


class AgentLocks:
    """Per-namespace locks under one agent-wide reader-writer lock. Thread-safe."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._inside = 0  # threads inside namespace sections (the shared side), outermost calls only
        self._owner: int | None = None  # the thread holding the exclusive side
        self._owner_depth = 0
        self._waiting = 0  # threads waiting for the exclusive side
        self._names: dict[str, list] = {}  # name -> [RLock, threads holding or waiting for it]
        self._local = threading.local()

    def _depth(self) -> int:
        return getattr(self._local, "depth", 0)

    @contextmanager
    def namespace(self, name: str | None) -> Iterator[None]:
        """Hold ``name``'s lock (and the shared side of the agent-wide lock) for the block.

        ``None`` takes only the shared side: for reads that touch no namespace's memory (listing
        the namespaces). Blocks while another thread holds ``name`` or the exclusive side.
        """
        me = threading.get_ident()
        depth = self._depth()
        counted = depth == 0 and self._owner != me
        entry = None
        with self._cond:
            if name is not None:
                entry = self._names.setdefault(name, [threading.RLock(), 0])
                entry[1] += 1
        try:
            if counted:
                self._enter_shared(entry[0] if entry is not None else None)
            elif entry is not None:
                entry[0].acquire()
        except BaseException:
            self._leave(name, entry, counted=False, held=False)
            raise
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth
            self._leave(name, entry, counted, held=entry is not None)

    def _enter_shared(self, lock: threading.RLock | None) -> None:
        """Count this thread inside (the shared side) and hold ``lock``. It never waits for the
        agent-wide side while holding a namespace lock, and is never counted inside while it waits
        for one: a thread that holds a namespace and calls :meth:`exclusive` from a callback would
        otherwise wait for a thread that waits for it."""
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._owner is None and self._waiting == 0)
                if lock is None or lock.acquire(blocking=False):
                    self._inside += 1
                    return
            lock.acquire()  # uncounted while it waits
            with self._cond:
                if self._owner is None and self._waiting == 0:
                    self._inside += 1
                    return
            lock.release()  # an exclusive caller came first: let it run, then try again

    def _leave(self, name: str | None, entry: list | None, counted: bool, held: bool) -> None:
        if held and entry is not None:
            entry[0].release()
        with self._cond:
            if entry is not None:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._names[name]  # type: ignore[arg-type]
            if counted:
                self._inside -= 1
                if self._inside == 0:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the agent-wide lock for the block: no other thread is inside any namespace.

        Called by a thread that is itself inside a namespace section (from a callback), it waits
        for the others only.
        """
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._owner_depth += 1
            else:
                mine = 1 if self._depth() > 0 else 0
                self._waiting += 1
                try:
                    self._cond.wait_for(lambda: self._owner is None and self._inside - mine == 0)
                finally:
                    self._waiting -= 1
                self._owner, self._owner_depth = me, 1
                if mine:  # this thread's own shared hold no longer counts while it owns the agent
                    self._inside -= 1
                    self._local.restore = True
        try:
            yield
        finally:
            with self._cond:
                self._owner_depth -= 1
                if self._owner_depth == 0:
                    self._owner = None
                    if getattr(self._local, "restore", False):
                        self._inside += 1
                        self._local.restore = False
                    self._cond.notify_all()

    def held_names(self) -> int:
        """How many namespace locks exist now (held or waited for): 0 when the agent is idle."""
        with self._cond:
            return len(self._names)
