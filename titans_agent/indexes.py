"""Recall's in-memory indexes of a namespace, built from what one snapshot of the database holds.

A :class:`~titans_agent.runtime.Runtime` keeps them (:meth:`~titans_agent.runtime.Runtime.lexical_index`,
:meth:`~titans_agent.runtime.Runtime.document_index`) at its revision; this module builds them:

- the lexical index (:class:`~titans_agent.bm25.BM25Index`) of every record's text and lexical
  context, brought forward by the records a later write changed;
- the document index (:class:`~titans_agent.retrieval.DocumentIndex`): each document's header, as
  the ingest derives it (:func:`titans_agent.ingest.headers.document_header`), over its chunks.
"""

from __future__ import annotations

from typing import Any

from titans_agent.bm25 import BM25Index
from titans_agent.ingest.headers import NOT_CODE, document_header
from titans_agent.retrieval import DocumentIndex
from titans_agent.store import context as context_reads
from titans_agent.store.documents import document_chunks, document_openings, document_sources

__all__ = ["document_index", "lexical_index"]


def lexical_index(s: Any, ns_id: int, index: BM25Index | None, revision: int) -> BM25Index:
    """The namespace's BM25 index at ``revision``, read in the snapshot ``s`` (which shows it), from
    the index ``index`` a runtime kept (None: none yet).

    Built from every record when there is none (the namespace's first recall in this process, or
    records were deleted since), or when more than half its positions are dead (records indexed
    again after their contexts grew). Else, when the namespace moved on (a commit of this process
    or another), only the records a later write set are read and indexed (again):
    ``records.changed_revision`` above the index's revision, through its index."""
    if index is None or index.dead > len(index):
        index = BM25Index()
        index.add(context_reads.lexical_rows(s, ns_id))
    elif index.revision != revision:
        index.add(context_reads.lexical_rows(s, ns_id, changed_after=index.revision))
    index.revision = revision
    return index


def document_index(s: Any, ns_id: int) -> DocumentIndex:
    """The namespace's document index as the snapshot ``s`` shows it: each document's header
    (:func:`titans_agent.ingest.headers.document_header` of its source and its first chunk) and its
    chunks. Source code files are left out: an issue or a question about code names many modules,
    and lifting the files it names lowered file-level R@10 on SWE-bench Lite (benchmarks/code.py,
    .775 -> .700 over 40 issues); a code chunk is still found by its module's and its classes'
    names through the lexical context. They are indexed for the file signal instead
    (:class:`titans_agent.code_rank.CodeFiles`)."""
    from titans_agent.ingest.chunking import language_for_path  # loaded by any ingest

    headers, code = {}, {}
    openings = document_openings(s, ns_id)
    for doc, (source, first) in openings.items():
        if not _is_code(language_for_path(source)):  # source code takes no part (see above)
            headers[doc] = document_header(source, first, False)
    # every code file, its first chunk forgotten or not: the rest of a test file is still a test
    for doc, source in document_sources(s, ns_id).items():
        if _is_code(language_for_path(source)):  # but has the file signal of its own (titans_agent.code_rank)
            code[doc] = source
    chunks = document_chunks(s, ns_id) if openings or code else ()
    return DocumentIndex.build(headers, chunks, len(openings), code)


def _is_code(language: Any) -> bool:
    """Whether a chunker language (None: prose) is source code, not a markup one (:data:`NOT_CODE`)."""
    return language is not None and language.value not in NOT_CODE
