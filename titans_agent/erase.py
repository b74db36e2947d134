"""Erasure: what forgetting removes from a namespace, in one transaction.

``forget`` removes occurrences (of a source, or every occurrence of one record), the transcript
lines of forgotten turns with them, a forgotten source's document row, and then every record left
without an occurrence; the namespace's revision goes up, so every process reloads its index. The
neural weights are not touched: they keep what the memory learned from forgotten text (a trained
network cannot unlearn exactly); recall only ranks stored records.
"""

from __future__ import annotations

from titans_agent.errors import RecordNotFoundError
from titans_agent.runtime import Runtime, Runtimes
from titans_agent.store import Store, repository

__all__ = ["forget"]


def forget(store: Store, runtimes: Runtimes, rt: Runtime, *, source: str | None, record_id: int | None) -> int:
    """Forget a source's occurrences or one record's; returns how many occurrences went.

    Args:
        source: a checked source name, or None.
        record_id: a checked record id, or None (exactly one of the two is given).

    Raises:
        RecordNotFoundError: no record ``record_id`` in the namespace.
        StoreError: the namespace stayed locked past the retry budget (nothing was removed).
    """
    for attempt in store.write_attempts():
        with attempt, store.write_session(rt.ns_id) as s:
            if record_id is not None and not repository.record_in_namespace(s, rt.ns_id, record_id):
                raise RecordNotFoundError(f"no record {record_id} in namespace {rt.name!r}")
            n = repository.delete_occurrences(s, rt.ns_id, source=source, record_id=record_id)
            repository.bump_revision(s, rt.ns_id)
            s.commit()
    runtimes.reload(rt)
    return n
