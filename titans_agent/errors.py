"""Exceptions raised by titans-agent.

Every exception derives from :class:`TitansAgentError`. Mistakes in what the caller passed also
derive from the matching built-in, so ``except ValueError`` keeps working::

    TitansAgentError
    ├── InvalidInputError (ValueError)        bad argument: blank query, bad namespace, bad k ...
    │   └── EmptyInputError                   a query or a write that holds no text
    ├── RecordNotFoundError (KeyError)        no record with that id in the namespace
    ├── NamespaceNotFoundError (KeyError)     a read in a namespace the database does not have
    ├── EmbedderMismatchError (ValueError)    database made with another embedder name or dimension
    ├── ChunkingMismatchError (ValueError)    a namespace's documents were cut with other chunk sizes
    ├── EmbedderLoadError (ImportError)       the embedding model cannot be loaded (offline, missing)
    ├── StoreError                            the database cannot be opened or written
    │   ├── DatabaseNotFoundError (FileNotFoundError)  open(create=False) or read_only of a missing database
    │   ├── ReadOnlyError                     a write through an agent opened with read_only=True
    │   └── CorruptBlobError (also InvalidInputError)  a stored memory blob is corrupt or crafted
    └── NonFiniteStateError                   a memory update produced NaN or Inf (it is rejected)
"""

from __future__ import annotations

__all__ = [
    "ChunkingMismatchError",
    "CorruptBlobError",
    "DatabaseNotFoundError",
    "EmbedderLoadError",
    "EmbedderMismatchError",
    "EmptyInputError",
    "InvalidInputError",
    "NamespaceNotFoundError",
    "NonFiniteStateError",
    "ReadOnlyError",
    "RecordNotFoundError",
    "StoreError",
    "TitansAgentError",
]


class TitansAgentError(Exception):
    """Base class of every error titans-agent raises."""


class InvalidInputError(TitansAgentError, ValueError):
    """An argument is not acceptable (blank query, malformed namespace, k < 1, ...)."""


class EmptyInputError(InvalidInputError):
    """A query or a write holds no text once whitespace is removed."""


class RecordNotFoundError(TitansAgentError, KeyError):
    """No record with the given id exists in the namespace."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else "record not found"


class NamespaceNotFoundError(TitansAgentError, KeyError):
    """A read (recall, stats, records, turns, memory_state) or a forget/update_metadata named a
    namespace that does not exist in the database (names match exactly: a typo, or a user who has
    not written anything yet). The default namespace always exists. Pass ``missing_ok=True`` to
    read a missing namespace as an empty one; :meth:`MemoryAgent.namespaces` lists them."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else "namespace not found"


class EmbedderMismatchError(TitansAgentError, ValueError):
    """The database was written with another embedder (name or dimension) than the one configured."""


class ChunkingMismatchError(TitansAgentError, ValueError):
    """A namespace's documents were chunked with another configuration (chunk tokens, overlap, the
    embedder's window) than the agent's: ingesting with it would cut every document anew and
    replace its records. Open the database with the namespace's configuration (the message names
    it), or ingest into another namespace."""


class EmbedderLoadError(TitansAgentError, ImportError):
    """The embedding model could not be loaded from local files."""


class StoreError(TitansAgentError):
    """The database cannot be opened, migrated or written."""


class DatabaseNotFoundError(StoreError, FileNotFoundError):
    """``MemoryAgent.open(..., create=False)`` or ``read_only=True`` of a database that does not
    exist: no SQLite file at the path, a PostgreSQL database the server does not have, or one that
    holds no titans-agent tables. Nothing was created (no file, folder or table)."""


class ReadOnlyError(StoreError):
    """A write (remember, add_turn, ingest, forget, import, ...) through an agent opened with
    ``MemoryAgent.open(..., read_only=True)``: nothing was written. Open the database without
    ``read_only`` to write to it."""


class SchemaOutdatedError(StoreError):
    """A read-only open of a database at an older schema revision: a read-only open never migrates.
    Open it once without ``read_only`` (any command that writes) to migrate it."""


class NonFiniteStateError(TitansAgentError):
    """A memory update produced a non-finite (NaN or Inf) weight or momentum; it was rejected."""


class CorruptBlobError(StoreError, InvalidInputError):
    """A stored state or parameter blob is not a valid titans-agent safetensors blob: truncated,
    corrupted (checksum mismatch), crafted (odd header, shapes or names), or of the wrong kind.
    Nothing in it is executed: blobs are parsed only as safetensors."""
