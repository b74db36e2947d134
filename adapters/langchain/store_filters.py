"""The LangGraph store's filter language, evaluated for :class:`~titans_agent.adapters.langchain.TitansStore`.

A store filter maps a key of an item's value (a dotted path) to a value, an operator dict
(``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$in``, ``$nin``, ``$exists``) or a list
(compared element by element), combined with ``$and``/``$or``. What the project's own filter
language can express is pushed to SQL (:func:`pushable`); list conditions are decided here.
Every key is checked first (:func:`check_filter`): a malformed one raises ``ValueError`` whose
message holds "Invalid filter key".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from titans_agent import matches_filter

__all__ = ["at_path", "check_filter", "list_keys", "matches", "pushable", "store_matches"]


def _apply_operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return value == operand
    if operator == "$ne":
        return value != operand
    try:
        a, b = float(value), float(operand)
    except (TypeError, ValueError):
        return False
    if operator == "$gt":
        return a > b
    if operator == "$gte":
        return a >= b
    if operator == "$lt":
        return a < b
    return a <= b  # $lte


def matches(item_value: Any, condition: Any) -> bool:
    """JSONB-like comparison, as LangGraph's InMemoryStore does it (kept for list conditions)."""
    if isinstance(condition, dict):
        if any(isinstance(k, str) and k.startswith("$") for k in condition):
            return all(_apply_operator(item_value, op, operand) for op, operand in condition.items())
        if not isinstance(item_value, dict):
            return False
        return all(matches(item_value.get(k), v) for k, v in condition.items())
    if isinstance(condition, (list, tuple)):
        return (
            isinstance(item_value, (list, tuple))
            and len(item_value) == len(condition)
            and all(matches(iv, cv) for iv, cv in zip(item_value, condition))
        )
    return item_value == condition


def _logical(key: Any, cond: Any) -> bool:
    """A well-formed ``$and``/``$or``: a non-empty list of non-empty dicts (else recall's parser names the fault)."""
    return (
        key in ("$and", "$or")
        and isinstance(cond, (list, tuple))
        and bool(cond)
        and all(isinstance(sub, Mapping) and sub for sub in cond)
    )


def pushable(filter: Mapping[Any, Any], prefix: str) -> dict[Any, Any] | None:
    """The part of a store filter that recall's filter language states, on the paths under
    ``prefix``; every item the whole filter passes passes it (None: it restricts nothing).

    A list condition (compared element by element, as InMemoryStore does) is left to
    :func:`_store_matches`: dropped from an AND, and an ``$or`` with such a branch restricts nothing.
    Anything malformed is kept as it is, for recall's parser to name.
    """
    out: dict[Any, Any] = {}
    for key, cond in filter.items():
        if _logical(key, cond):
            subs = [pushable(sub, prefix) for sub in cond]
            if key == "$and" and any(subs):
                out[key] = [sub for sub in subs if sub]
            elif key == "$or" and all(subs):
                out[key] = subs
        elif not isinstance(key, str) or key.startswith("$"):
            out[key] = cond
        elif not isinstance(cond, (list, tuple)):
            out[prefix + key] = cond
    return out or None


def list_keys(filter: Mapping[Any, Any]) -> Iterator[str]:
    """The keys of the list conditions of a store filter, in ``$and``/``$or`` too."""
    for key, cond in filter.items():
        if _logical(key, cond):
            for sub in cond:
                yield from list_keys(sub)
        elif isinstance(key, str) and not key.startswith("$") and isinstance(cond, (list, tuple)):
            yield key


def check_filter(filter: Any) -> None:
    """Raises InvalidInputError (a ValueError) naming an unknown operator, a malformed key
    ("Invalid filter key") or a malformed condition, wherever it is in the filter."""
    if filter is None or not isinstance(filter, Mapping):
        matches_filter({}, filter)  # None passes; anything else but a dict is refused
        return
    matches_filter({}, pushable(filter, ""))
    for key in list_keys(filter):
        matches_filter({}, {key: {"$exists": True}})  # the key's form alone


def store_matches(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """Whether an item's value passes a checked store filter: recall's rules, list conditions
    compared element by element, ``$and``/``$or`` over filters of this same kind."""
    for key, cond in filter.items():
        if key in ("$and", "$or"):
            passed = (store_matches(value, sub) for sub in cond)
            ok = all(passed) if key == "$and" else any(passed)
        elif isinstance(cond, (list, tuple)):
            ok = matches(at_path(value, key), cond)
        else:
            ok = matches_filter(value, {key: cond})
        if not ok:
            return False
    return True


def at_path(value: Mapping[str, Any], key: str) -> Any:
    """``value[key]``, else the value at the dotted path ``key`` (None when missing)."""
    if key in value:
        return value[key]
    at: Any = value
    for step in key.split("."):
        if not isinstance(at, Mapping):
            return None
        at = at.get(step)
    return at
