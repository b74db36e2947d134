"""The neural memory's blobs: outer parameters stored once per database, states as checkpoints.

- Outer parameters (W_K, W_V, W_Q, the gates, M_0; safetensors bytes) live in
  ``memory_parameters``, one row per distinct set, found by the sha256 of their tensors
  (:func:`parameters_key`): every namespace made with one configuration references the same row.
- A namespace's test-time state lives in ``memory_checkpoints`` (at most one row per namespace):
  the state as of the write of ``revision``, which had applied the namespace's occurrences up to id
  ``position``. Its occurrences after ``position`` are the log that :mod:`titans_agent.runtime`
  replays to continue from it (:func:`titans_agent.store.erasure.write_groups`).

Why ``position`` is safe as a log cursor: a new occurrence gets an id above every id in the table
(SQLite's rowid is the largest plus one; PostgreSQL's sequence only grows), so it lands after
``position`` while the occurrence at ``position`` exists; every operation that deletes occurrences
of a namespace writes a new checkpoint in the same transaction, with ``position`` the highest id
left (:func:`last_occurrence_id`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from titans_agent.rows import CheckpointHead
from titans_agent.store.schema import MemoryCheckpoint, MemoryParameters, Occurrence
from titans_agent.types import utcnow

__all__ = [
    "checkpoint_head",
    "checkpoint_state",
    "find_parameters",
    "last_occurrence_id",
    "parameters_blob",
    "parameters_id",
    "parameters_key",
    "save_checkpoint",
]


def parameters_key(params: bytes) -> str:
    """What identifies a parameter set: the sha256 of its tensors that the safetensors header
    carries (``__metadata__.sha256``, :func:`titans_agent.core.memory.tensors_digest`), so equal
    tensors serialised twice share a row even when their headers list the metadata in another
    order; the sha256 of the bytes for a blob without one."""
    try:
        n = int.from_bytes(params[:8], "little")
        digest = json.loads(params[8 : 8 + n].decode("utf-8")).get("__metadata__", {}).get("sha256")
    except (ValueError, UnicodeDecodeError, AttributeError):
        digest = None
    if isinstance(digest, str) and len(digest) == 64:
        return digest
    return hashlib.sha256(params).hexdigest()


def parameters_id(s: Session, params: bytes, memory_config: dict[str, Any], key: str | None = None) -> int:
    """The id of the ``memory_parameters`` row of ``params`` (safetensors bytes; found by
    :func:`parameters_key`, or ``key`` when the caller has it already), inserted when the database
    has none (the caller holds a write lock and commits)."""
    sha = key or parameters_key(params)
    found = find_parameters(s, sha)
    if found is not None:
        return found
    # Creators of different namespaces hold different locks (PostgreSQL: an advisory lock on the
    # name), so two may insert the same set at once: the second waits for the first's commit and
    # inserts nothing, then reads its row (a new statement: READ COMMITTED sees it).
    insert = postgresql.insert if s.get_bind().dialect.name == "postgresql" else sqlite.insert
    s.execute(
        insert(MemoryParameters)
        .values(sha256=sha, memory_config=memory_config, params=params, created_at=utcnow())
        .on_conflict_do_nothing(index_elements=["sha256"])
    )
    return int(s.execute(select(MemoryParameters.id).where(MemoryParameters.sha256 == sha)).scalar_one())


def find_parameters(s: Session, params_sha256: str) -> int | None:
    """The id of the parameter set of this :func:`parameters_key`, or None."""
    found = s.execute(select(MemoryParameters.id).where(MemoryParameters.sha256 == params_sha256)).scalar()
    return None if found is None else int(found)


def parameters_blob(s: Session, pid: int) -> bytes:
    """The outer parameters of row ``pid`` (safetensors bytes).

    Raises:
        LookupError: there is no such row.
    """
    blob = s.execute(select(MemoryParameters.params).where(MemoryParameters.id == pid)).scalar()
    if blob is None:
        raise LookupError(f"memory parameters {pid} are missing from the database")
    return bytes(blob)


def checkpoint_head(s: Session, ns_id: int) -> CheckpointHead | None:
    """Where the namespace's checkpoint stands (no blob is read), or None: it has none (its state
    is M_0 followed by every occurrence)."""
    c = MemoryCheckpoint
    row = s.execute(select(c.revision, c.position, c.step).where(c.namespace_id == ns_id)).one_or_none()
    return None if row is None else CheckpointHead(row.revision, row.position, row.step)


def checkpoint_state(s: Session, ns_id: int) -> tuple[CheckpointHead, bytes] | None:
    """The namespace's checkpoint and its state blob, or None when it has none."""
    c = MemoryCheckpoint
    row = s.execute(select(c.revision, c.position, c.step, c.state).where(c.namespace_id == ns_id)).one_or_none()
    return None if row is None else (CheckpointHead(row.revision, row.position, row.step), bytes(row.state))


def save_checkpoint(s: Session, ns_id: int, state: bytes, head: CheckpointHead, now: dt.datetime | None = None) -> None:
    """Replace the namespace's checkpoint with ``state`` at ``head`` (in the caller's transaction)."""
    s.execute(delete(MemoryCheckpoint).where(MemoryCheckpoint.namespace_id == ns_id))
    s.add(
        MemoryCheckpoint(
            namespace_id=ns_id,
            revision=head.revision,
            position=head.position,
            step=head.step,
            state=state,
            created_at=now or utcnow(),
        )
    )
    s.flush()


def last_occurrence_id(s: Session, ns_id: int) -> int:
    """The namespace's highest occurrence id (0 when it has none): a checkpoint's ``position``."""
    return int(s.execute(select(func.max(Occurrence.id)).where(Occurrence.namespace_id == ns_id)).scalar() or 0)
