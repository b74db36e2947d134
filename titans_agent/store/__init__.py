"""Persistence: the only package that speaks SQL (SQLAlchemy 2 over SQLite or PostgreSQL).

- :mod:`~titans_agent.store.engine`: connections, locks, retries, migrations on open (:class:`Store`);
- :mod:`~titans_agent.store.schema`: every table;
- :mod:`~titans_agent.store.repository`: every SQL statement of the data flows, as named functions
  by table;
- :mod:`~titans_agent.store.dump`: what export reads and import writes, by table;
- :mod:`~titans_agent.store.erasure`: what a rebuild of the memory replays, and dropping a namespace;
- :mod:`~titans_agent.store.checkpoints`: the memory's outer parameters (once per database) and
  each namespace's state checkpoint.

Nothing outside this package imports SQLAlchemy; state blobs cross its boundary as bytes.
"""

from titans_agent.store.engine import SUPPORTED_BACKENDS, Store
from titans_agent.store.schema import (
    SCHEMA_VERSION,
    Base,
    Document,
    Meta,
    NamespaceRow,
    Occurrence,
    Record,
    SessionRow,
    Supersession,
    Turn,
    utcnow,
)

__all__ = [
    "SCHEMA_VERSION",
    "SUPPORTED_BACKENDS",
    "Base",
    "Document",
    "Meta",
    "NamespaceRow",
    "Occurrence",
    "Record",
    "SessionRow",
    "Store",
    "Supersession",
    "Turn",
    "utcnow",
]
