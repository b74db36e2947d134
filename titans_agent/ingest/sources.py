"""A stored file's identity from any spelling of its path: what ingest stores a file under
(:func:`file_key`) and how recall, records and forget find a source the user names
(:func:`stored_source`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, overload

from titans_agent.validation import check_name, check_namespace

if TYPE_CHECKING:
    from titans_agent.store import Store

__all__ = ["file_key", "stored_source"]


def file_key(path: str) -> str | None:
    """The identity ingest stores a file under (:attr:`SourceFile.path`), from any spelling of its
    path: the real absolute path (``~`` expanded, relative to the working directory, links
    resolved). The file need not exist any more. None when the operating system refuses the
    spelling as a path."""
    try:
        return os.path.realpath(os.path.expanduser(path))
    except (OSError, ValueError):
        return None


@overload
def stored_source(store: Store, namespace: str, source: None) -> None: ...
@overload
def stored_source(store: Store, namespace: str, source: Any) -> str: ...
def stored_source(store: Store, namespace: str, source: Any) -> str | None:
    """``source`` as ``namespace`` stores it, for recall, records and forget by source.

    A name the namespace holds as given (a named text, a note's source, ``session:<id>``, a file's
    absolute path) is itself. Otherwise, when the namespace holds the file that ``source`` spells
    as a path (relative to the working directory, with ``./`` or ``~``, through links, or of a file
    deleted since it was ingested), it is that file's identity (:func:`file_key`). Anything else is
    returned unchanged (it matches nothing). Only reads: nothing is written.

    Raises:
        InvalidInputError: ``source`` is not a non-blank string, or ``namespace`` is malformed.
    """
    if source is None:
        return None
    source = check_name(source, "source")
    key = file_key(source)
    if key is None or key == source:
        return source
    from titans_agent.store import repository

    with store.session() as s:
        ns_id = repository.namespace_id(s, check_namespace(namespace))
        if ns_id is None:
            return source  # no namespace: nothing is stored under any spelling

        def holds(name: str) -> bool:
            return bool(repository.list_occurrences(s, ns_id, source=name, kinds=None, limit=1, offset=0))

        return key if ns_id is not None and not holds(source) and holds(key) else source
