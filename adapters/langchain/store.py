"""A LangGraph ``BaseStore`` backed by a :class:`~titans_agent.MemoryAgent`.

Each LangGraph namespace tuple is one MemoryAgent namespace (see :func:`namespace_key`); each item
is one note written through the surprise gate with ``source="key:<key>"`` and the item's value,
key and timestamps in its metadata. ``search(query=...)`` goes through :meth:`MemoryAgent.recall`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base.embed import get_text_at_path, tokenize_path
from titans_agent.adapters.langchain.store_filters import (
    check_filter,
    list_keys,
    pushable,
    store_matches,
)

from titans_agent import Hit, MemoryAgent

__all__ = ["TitansStore", "namespace_key", "namespace_tuple"]

NAMESPACE_PREFIX = "lg:"
"""Prefix of the MemoryAgent namespaces that hold LangGraph namespaces."""

_KEY_SOURCE = "key:"


def namespace_key(namespace: tuple[str, ...]) -> str:
    """The MemoryAgent namespace that holds a LangGraph namespace.

    Each segment is percent-encoded (``urllib.parse.quote(segment, safe="")``, so "/" and "%" are
    escaped), the segments are joined with "/" and the result is prefixed with ``"lg:"``. The map
    is reversible (:func:`namespace_tuple`) and keeps segments whole: ("org", "lumen") and
    ("org", "lumen-labs") are different names, and a prefix test on decoded tuples never confuses
    them.

    Args:
        namespace: a non-empty tuple of non-empty strings.

    Returns:
        The MemoryAgent namespace name, e.g. ``"lg:org/lumen"``.

    Raises:
        InvalidNamespaceError: the tuple is empty or a segment is not a non-empty string.
    """
    if not isinstance(namespace, tuple) or not namespace:
        raise InvalidNamespaceError(f"namespace must be a non-empty tuple of strings, got {namespace!r}")
    for seg in namespace:
        if not isinstance(seg, str) or not seg:
            raise InvalidNamespaceError(f"namespace segments must be non-empty strings, got {namespace!r}")
    return NAMESPACE_PREFIX + "/".join(quote(seg, safe="") for seg in namespace)


def namespace_tuple(name: str) -> tuple[str, ...] | None:
    """The LangGraph namespace held by a MemoryAgent namespace (inverse of :func:`namespace_key`).

    Args:
        name: a MemoryAgent namespace name.

    Returns:
        The decoded tuple, or None when ``name`` is not a LangGraph namespace: no ``"lg:"`` prefix,
        or not the canonical encoding that :func:`namespace_key` writes (``"lg:org/lum%65n"``,
        ``"lg:a//b"``, ``"lg:org/%2f"``, a raw character that ``quote`` escapes). Such a look-alike
        name, written through another face, is never shown as the store namespace it decodes to.
    """
    if not name.startswith(NAMESPACE_PREFIX) or len(name) == len(NAMESPACE_PREFIX):
        return None
    namespace = tuple(unquote(seg) for seg in name[len(NAMESPACE_PREFIX) :].split("/"))
    if not all(namespace) or NAMESPACE_PREFIX + "/".join(quote(seg, safe="") for seg in namespace) != name:
        return None
    return namespace


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _expires_at(meta: Mapping[str, Any]) -> dt.datetime | None:
    """When an item's note expires (its ``expires_at`` metadata), or None if it never does."""
    value = meta.get("expires_at")
    return _as_datetime(value, None) if value else None


#: The longest ttl and sweep interval, in minutes (100 years): an expiry stays a valid date and
#: a sweeper's wait within what a thread can wait.
MAX_TTL_MINUTES = 100 * 525_960


def _check_ttl(ttl: Any) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0 or ttl == float("inf"):
        raise ValueError(f"ttl must be a positive number of minutes, got {ttl!r}")
    if ttl > MAX_TTL_MINUTES:
        raise ValueError(
            f"ttl must be at most {MAX_TTL_MINUTES:,} minutes (100 years; ttl=None never expires), got {ttl!r}"
        )
    return float(ttl)


def _as_datetime(value: Any, default: Any) -> Any:
    if isinstance(value, str):
        try:
            ts = dt.datetime.fromisoformat(value)
        except ValueError:
            return default
        return ts if ts.tzinfo else ts.replace(tzinfo=dt.timezone.utc)
    return default


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path))
    else:
        raise ValueError(f"unsupported match type: {condition.match_type!r}")
    return all(p == "*" or n == p for n, p in pairs)


def _value_text(value: Mapping[str, Any], fields: Sequence[str] | None) -> str:
    """The text that represents a value in the memory (what is embedded and searched)."""
    if fields:
        parts: list[str] = []
        for field in fields:
            parts.extend(get_text_at_path(value, tokenize_path(field)))
        return "\n".join(p for p in parts if p.strip())
    for name in ("text", "content"):
        if isinstance(value.get(name), str) and value[name].strip():
            return value[name]
    lines = []
    for k, v in value.items():
        shown = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)
        lines.append(f"{k}: {shown}")
    return "\n".join(lines)


class TitansStore(BaseStore):
    """LangGraph long-term memory (``create_agent(store=...)``) kept in a MemoryAgent.

    - **Namespaces**: each namespace tuple is its own MemoryAgent namespace (:func:`namespace_key`),
      so namespaces share nothing and match by whole segments: ("org", "lumen") never sees
      ("org", "lumen-labs"), and "%" or "_" in a segment are literal.
    - **put** writes the value's text (the ``index_fields`` of the value, or its ``"text"`` /
      ``"content"`` field, else its fields as ``"name: value"`` lines) through the surprise-gated
      :meth:`MemoryAgent.remember` with ``source="key:<key>"`` and the value, key and timestamps
      in the metadata; replacing a key forgets its old note first. ``value=None`` deletes.
      A value with no text (``{}``, or ``index=False``) is written as its key. The value is the
      note's metadata, so it is bounded as metadata is: the value with its key and timestamps,
      serialised as JSON (UTF-8), must fit ``MAX_METADATA_BYTES`` (1 MiB), else put raises
      ``InvalidInputError`` (a ValueError) and nothing is written.
    - **Namespace names**: a MemoryAgent namespace is shown as a store namespace only when its
      name is exactly what :func:`namespace_key` writes; a look-alike written through another
      face (``"lg:org/lum%65n"``) is not a store namespace.
    - **get** lists the key's note (one item even if a long text was written as several chunks).
    - **search** with a query ranks through :meth:`MemoryAgent.recall` (BM25 + dense fusion) in
      every namespace under the prefix and returns :class:`SearchItem` with the fused score
      (scores are comparable within one namespace; across namespaces they are merged as they
      are). Without a query it lists items in the order written. Filters are recall's
      (:func:`~titans_agent.matches_filter`; with a query they restrict the candidates in SQL):
      equality, ``$eq $ne $gt $gte $lt $lte $in $nin $exists``, nested dicts and dotted paths
      (``{"user.access-level": "nested"}``), ``{"$and": [...]}`` and ``{"$or": [...]}`` of such
      filters, numbers compared with numbers only (a bool is not a number; integers exactly,
      ``inf``/``-inf`` above/below every number, NaN equal to nothing), a value holding NUL equal
      to nothing, and a missing key matching only ``$ne``/``$nin``/``$exists: false``; a list
      condition compares element by element, as InMemoryStore does. A malformed key raises
      ValueError ("Invalid filter key ...").
    - **TTL** (``supports_ttl = True``): ``put(..., ttl=minutes)`` stores the item's
      ``ttl_minutes`` and its expiry time ``expires_at`` (UTC ISO 8601) in the note's metadata;
      ``ttl`` not given falls back to ``ttl_config["default_ttl"]``, ``ttl=None`` never expires
      (a ``PutOp`` passed to :meth:`batch` directly is taken as it is). get, search and
      list_namespaces never return an expired item, and forget it when they meet it. A read with
      ``refresh_ttl`` (default: ``ttl_config["refresh_on_read"]``, else True) moves the expiry of
      the items it returns to now + ``ttl_minutes`` without rewriting them. :meth:`sweep_ttl`
      forgets every expired item; :meth:`start_ttl_sweeper` runs it every
      ``sweep_interval_minutes`` in a daemon thread until :meth:`stop_ttl_sweeper` /
      :meth:`close`.

    Everything is persisted in the MemoryAgent's database: a store opened again on the same file,
    in any process, returns the same items and the same rankings. The agent is thread-safe, so
    :meth:`abatch` runs :meth:`batch` in a worker thread.

    Args:
        agent: the open MemoryAgent to keep items in (the store does not close it).
        index_fields: JSON paths of the value to write as text (LangGraph path syntax, e.g.
            ``["memory", "facts[*].text"]``); default: see **put** above.
        ttl: LangGraph's TTLConfig (``default_ttl`` and ``sweep_interval_minutes`` in minutes,
            ``refresh_on_read``); default: items expire only when put with a ttl.
    """

    supports_ttl = True

    def __init__(
        self, agent: MemoryAgent, *, index_fields: list[str] | None = None, ttl: TTLConfig | None = None
    ) -> None:
        self.agent = agent
        self.index_fields = list(index_fields) if index_fields else None
        if ttl is not None:
            ttl = TTLConfig(**ttl)
            if ttl.get("default_ttl") is not None:
                _check_ttl(ttl["default_ttl"])
            if ttl.get("sweep_interval_minutes") is not None:
                _check_ttl(ttl["sweep_interval_minutes"])
        self.ttl_config = ttl
        self._sweeper: threading.Thread | None = None
        self._sweeper_stop = threading.Event()
        self._sweeper_lock = threading.Lock()

    # ------------------------------------------------------------------ TTL
    def sweep_ttl(self) -> int:
        """Forget every expired item in every LangGraph namespace.

        Returns:
            How many items were forgotten.
        """
        now = _utcnow()
        removed = 0
        for name in self.agent.namespaces():
            if namespace_tuple(name) is None:
                continue
            expired = {
                hit.source
                for hit in self.agent.records(namespace=name, kinds=["note"])
                if (hit.source or "").startswith(_KEY_SOURCE) and self._expired(hit, now)
            }
            for source in expired:
                if self.agent.forget(source=source, namespace=name):
                    removed += 1
        return removed

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        """Run :meth:`sweep_ttl` every ``sweep_interval_minutes`` in a daemon thread.

        Args:
            sweep_interval_minutes: the interval; default ``ttl_config["sweep_interval_minutes"]``.
                Calling it while the sweeper runs does nothing.

        Raises:
            ValueError: no interval given or configured, or not a positive number.
        """
        interval = sweep_interval_minutes
        if interval is None:
            interval = (self.ttl_config or {}).get("sweep_interval_minutes")
        if interval is None:
            raise ValueError("no sweep interval: pass sweep_interval_minutes or set it in the TTLConfig")
        seconds = _check_ttl(interval) * 60.0
        with self._sweeper_lock:
            if self._sweeper is not None and self._sweeper.is_alive():
                return
            stop = self._sweeper_stop = threading.Event()

            def loop() -> None:
                while not stop.wait(min(seconds, threading.TIMEOUT_MAX)):  # Windows' TIMEOUT_MAX is ~50 days
                    try:
                        self.sweep_ttl()
                    except Exception:  # noqa: BLE001 - a closed agent or a failed sweep ends the sweeper
                        return

            self._sweeper = threading.Thread(target=loop, name="TitansStore-ttl-sweeper", daemon=True)
            self._sweeper.start()

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread started by :meth:`start_ttl_sweeper`.

        Args:
            timeout: seconds to wait for the thread to end (None: until it ends).

        Returns:
            True when no sweeper runs any more.
        """
        with self._sweeper_lock:
            thread, self._sweeper = self._sweeper, None
            self._sweeper_stop.set()
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def close(self) -> None:
        """Stop the TTL sweeper (the MemoryAgent stays open; the store does not own it)."""
        self.stop_ttl_sweeper()

    def _expired(self, hit: Hit, now: dt.datetime | None = None) -> bool:
        expires = _expires_at(hit.metadata)
        return expires is not None and expires <= (now or _utcnow())

    def _alive(self, hit: Hit, name: str) -> bool:
        """False for the note of an expired item, which is then forgotten."""
        if not self._expired(hit):
            return True
        self._forget_expired(hit, name)
        return False

    def _forget_expired(self, hit: Hit, name: str) -> int:
        if not (hit.source or "").startswith(_KEY_SOURCE):
            return 0
        return self.agent.forget(source=hit.source, namespace=name)

    def _refresh(self, name: str, key: str, meta: Mapping[str, Any]) -> None:
        minutes = meta.get("ttl_minutes")
        if isinstance(minutes, (int, float)) and not isinstance(minutes, bool) and meta.get("expires_at"):
            expires = _utcnow() + dt.timedelta(minutes=minutes)
            self.agent.update_metadata({"expires_at": expires.isoformat()}, source=_KEY_SOURCE + key, namespace=name)

    # ------------------------------------------------------------------ batch API
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run operations in order and return one result per operation.

        Args:
            ops: GetOp, PutOp, SearchOp and ListNamespacesOp values.

        Returns:
            For each op: an Item or None (get), None (put), a list of SearchItem (search), a list
            of namespace tuples (list_namespaces).

        Raises:
            InvalidNamespaceError: a namespace label is empty, not a string, or contains a period.
            ValueError: an unknown operation or filter operator, a malformed filter key ("Invalid
                filter key ..."), or a TTL that is not a positive number of minutes.
        """
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                _validate_labels(op.namespace)
                results.append(self._get(op.namespace, op.key, op.refresh_ttl))
            elif isinstance(op, PutOp):
                _validate_labels(op.namespace)
                if op.value is None:
                    self._delete(op.namespace, op.key)
                else:
                    self._put(op.namespace, op.key, op.value, op.index, op.ttl)
                results.append(None)
            elif isinstance(op, SearchOp):
                _validate_labels(op.namespace_prefix)
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                for cond in op.match_conditions or ():
                    _validate_labels(tuple(p for p in cond.path if p != "*"))
                results.append(self._list_namespaces(op))
            else:
                raise ValueError(f"unknown operation type: {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (the MemoryAgent is thread-safe).

        Args:
            ops: as for :meth:`batch`.

        Returns:
            As :meth:`batch`.

        Raises:
            As :meth:`batch`.
        """
        return await asyncio.to_thread(self.batch, list(ops))

    # ------------------------------------------------------------------ operations
    def _key_hits(self, ns: str, key: str) -> list[Hit]:
        return self.agent.records(namespace=ns, source=_KEY_SOURCE + key, kinds=["note"], missing_ok=True)

    def _item(self, hit: Hit, namespace: tuple[str, ...]) -> Item:
        meta = hit.metadata
        created = _as_datetime(meta.get("created_at"), hit.created_at)
        updated = _as_datetime(meta.get("updated_at"), created)
        return Item(
            namespace=namespace,
            key=str(meta.get("key", (hit.source or "")[len(_KEY_SOURCE) :])),
            value=dict(meta.get("value") or {}),
            created_at=created,
            updated_at=updated,
        )

    def _search_item(self, hit: Hit, namespace: tuple[str, ...], score: float | None = None) -> SearchItem:
        item = self._item(hit, namespace)
        return SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score)

    def _get(self, namespace: tuple[str, ...], key: str, refresh: bool = False) -> Item | None:
        name, key = namespace_key(namespace), str(key)
        hits = self._key_hits(name, key)
        if not hits or not self._alive(hits[0], name):
            return None
        if refresh:
            self._refresh(name, key, hits[0].metadata)
        return self._item(hits[0], namespace)

    def _put(
        self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], index: Any = None, ttl: Any = None
    ) -> None:
        key = str(key)
        minutes = None if ttl is None else _check_ttl(ttl)
        ns = namespace_key(namespace)
        now = _utcnow()
        old = self._key_hits(ns, key)
        if old and self._expired(old[0], now):
            self.agent.forget(source=_KEY_SOURCE + key, namespace=ns)  # an expired item is new again
            old = []
        created = _as_datetime(old[0].metadata.get("created_at"), old[0].created_at) if old else now
        if index is False:
            text = ""
        else:
            text = _value_text(value, index if isinstance(index, list) else self.index_fields)
        if not text.strip():
            text = key
        meta = {"key": key, "value": dict(value), "created_at": created.isoformat(), "updated_at": now.isoformat()}
        if minutes is not None:
            meta["ttl_minutes"] = minutes
            meta["expires_at"] = (now + dt.timedelta(minutes=minutes)).isoformat()
        # One transaction: the old value goes only together with the new one's write.
        self.agent.remember(text, metadata=meta, source=_KEY_SOURCE + key, namespace=ns, replace=bool(old))

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        self.agent.forget(source=_KEY_SOURCE + str(key), namespace=namespace_key(namespace), missing_ok=True)

    def _namespaces(self) -> list[tuple[str, tuple[str, ...]]]:
        """(MemoryAgent name, LangGraph tuple) of every LangGraph namespace that holds a live item.

        Expired items met on the way are forgotten, so the scan stops at the first live one.
        """
        out = []
        for name in self.agent.namespaces():
            ns = namespace_tuple(name)
            if ns is None:
                continue
            offset = 0
            while hits := self.agent.records(namespace=name, kinds=["note"], limit=1, offset=offset):
                if not self._expired(hits[0]):
                    out.append((name, ns))
                    break
                if not self._forget_expired(hits[0], name):
                    offset += 1  # nothing forgotten: step over it
        return out

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise ValueError("limit and offset must be non-negative")
        check_filter(op.filter)
        prefix = tuple(op.namespace_prefix)
        spaces = [(name, ns) for name, ns in self._namespaces() if ns[: len(prefix)] == prefix]
        want = op.limit + op.offset
        if want == 0:
            return []
        ttl_meta: dict[tuple[tuple[str, ...], str], Mapping[str, Any]] = {}  # items with a TTL
        found: list[tuple[float, int, SearchItem]] = []  # (score, order, item)
        for name, ns in spaces:
            if op.query:
                items = self._ranked(name, ns, op.query, op.filter, want, ttl_meta)
            else:
                items = self._listed(name, ns, op.filter, ttl_meta)
            found.extend((item.score or 0.0, len(found), item) for item in items)
        if op.query:
            found.sort(key=lambda t: (-t[0], t[1]))
        items = [item for _, _, item in found][op.offset : want]
        if op.refresh_ttl:
            for item in items:
                meta = ttl_meta.get((item.namespace, item.key))
                if meta:
                    self._refresh(namespace_key(item.namespace), item.key, meta)
        return items

    def _keep(self, item: Item, filter: Mapping[str, Any] | None) -> bool:
        return not filter or store_matches(item.value, filter)

    def _listed(
        self, name: str, ns: tuple[str, ...], filter: Mapping[str, Any] | None, ttl_meta: dict[Any, Any]
    ) -> list[SearchItem]:
        seen: set[str] = set()
        out: list[SearchItem] = []
        for hit in self.agent.records(namespace=name, kinds=["note"]):
            source = hit.source or ""
            if not source.startswith(_KEY_SOURCE) or source[len(_KEY_SOURCE) :] in seen:
                continue
            if not self._alive(hit, name):
                seen.add(source[len(_KEY_SOURCE) :])
                continue
            item = self._search_item(hit, ns)
            if hit.metadata.get("expires_at"):
                ttl_meta[(ns, item.key)] = hit.metadata
            if item.key not in seen and self._keep(item, filter):
                seen.add(item.key)
                out.append(item)
        return out

    def _ranked(
        self,
        name: str,
        ns: tuple[str, ...],
        query: str,
        filter: Mapping[str, Any] | None,
        want: int,
        ttl_meta: dict[Any, Any],
    ) -> list[SearchItem]:
        """The ``want`` best distinct items of one namespace that pass ``filter``: the filter goes to
        recall on the paths under the note's ``"value"`` metadata; list conditions are decided here."""
        pushed = pushable(filter, "value.") if filter else None
        exact = not filter or (pushed is not None and next(list_keys(filter), None) is None)
        k = want if exact else want * 4  # a filter here drops hits: ask for more
        while True:
            hits = self.agent.recall(query, k=k, namespace=name, filter=pushed, missing_ok=True)
            seen: set[str] = set()
            out: list[SearchItem] = []
            for hit in hits:
                # A text held by several keys is one record: its hit names every key's source.
                for source in [hit.source, *hit.sources]:
                    if not source or not source.startswith(_KEY_SOURCE) or source[len(_KEY_SOURCE) :] in seen:
                        continue
                    key = source[len(_KEY_SOURCE) :]
                    seen.add(key)
                    holder = hit if source == hit.source else next(iter(self._key_hits(name, key)), None)
                    if holder is None or not self._alive(holder, name):
                        continue
                    item = self._search_item(holder, ns, hit.score)
                    if holder.metadata.get("expires_at"):
                        ttl_meta[(ns, item.key)] = holder.metadata
                    if self._keep(item, filter):
                        out.append(item)
            if len(out) >= want or len(hits) < k:
                return out[:want]
            k *= 4

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = [ns for _, ns in self._namespaces()]
        if op.match_conditions:
            spaces = [ns for ns in spaces if all(_does_match(c, ns) for c in op.match_conditions)]
        if op.max_depth is not None:
            spaces = sorted({ns[: op.max_depth] for ns in spaces})
        else:
            spaces = sorted(spaces)
        return spaces[op.offset : op.offset + op.limit]


def _validate_labels(namespace: tuple[str, ...]) -> None:
    """LangGraph's label rules (strings, non-empty, no "." or NUL), for ops passed to batch directly."""
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"invalid namespace label {label!r} in {namespace!r}: labels are non-empty strings "
                "without periods or NUL bytes"
            )
