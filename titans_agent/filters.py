"""Metadata filters: the dict a caller passes as ``recall(filter=...)``, checked into a small typed
tree, and a pure evaluator of that tree over one metadata dict.

The SQL form of the same tree is :mod:`titans_agent.store.jsonfilter` (SQLite JSON1, PostgreSQL
JSON operators; :mod:`titans_agent.store.metaterms` the index that narrows it); both follow the
rules below, and the tests hold them to :func:`matches_filter` on a table of cases. Nothing here does I/O.

The language::

    {"court": "NY"}                          equality ($eq)
    {"year": {"$gte": 2020, "$lt": 2024}}    operators on one key (all must hold)
    {"client.region": "EU"}                  a dotted path into nested objects
    {"client": {"region": "EU"}}             the same, written nested
    {"court": "NY", "privileged": True}      several keys: all must hold
    {"$or": [{"court": "NY"}, {"court": "CA"}]}, {"$and": [...]}   lists of filters

Operators: ``$eq $ne $gt $gte $lt $lte $in $nin $exists``. Values compare like JSON: a number
only with a number (``True`` is not the number 1), a string only with a string (code point order),
``None`` is JSON null; ``$gt``/``$gte``/``$lt``/``$lte`` take a number or a string, and a stored
value of another type matches nothing; ``$in``/``$nin`` take a list of such scalars (at most
:data:`MAX_IN_VALUES`, and :data:`MAX_FILTER_VALUES` in the whole filter); ``$exists`` takes a
bool. A path that is missing (a key absent, or a step through something that is not an object)
matches nothing, except ``$exists: False``, ``$ne`` and ``$nin``. Arrays and objects are stored
values like any other: they equal no scalar and are never searched element by element; lists and
objects are not comparison operands.

Numbers compare as Python compares them: integers exactly, of any size; floats as IEEE doubles;
an integer with a float by their exact values (``2**60 == 2.0**60``, ``2**60 + 1 > 2.0**60``).
``float("inf")`` and ``-inf`` are numbers above and below every stored one; NaN equals nothing and
orders with nothing (so ``$ne``/``$nin`` with NaN pass everything). A string operand holding NUL
equals no stored value (none can hold NUL: metadata with NUL is refused) and orders as its part
before the NUL would, among NUL-free strings: ``{"$gt": "a\x00b"}`` is ``{"$gt": "a"}``.
A malformed key raises :class:`~titans_agent.errors.InvalidInputError` saying "Invalid filter key".
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from titans_agent.errors import InvalidInputError
from titans_agent.text import LONE_SURROGATE

__all__ = [
    "MAX_FILTER_VALUES",
    "MAX_IN_VALUES",
    "OPERATORS",
    "AllOf",
    "AnyOf",
    "Condition",
    "FilterNode",
    "evaluate",
    "matches_filter",
    "parse_filter",
]

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")
MAX_IN_VALUES = 1000  # values of one $in / $nin list
MAX_CONDITIONS = 200  # conditions of one filter
# values of one filter, every $in / $nin list together: each is a bound parameter of the query, and
# SQLite (32,766) and PostgreSQL (65,535) cap them; 200 full lists ran past both
MAX_FILTER_VALUES = 5000
_MAX_DEPTH = 64  # nested dicts and $and/$or lists
_ORDER_OPS = ("$gt", "$gte", "$lt", "$lte")
_NUL = "\x00"

Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class Condition:
    """One test of the value at ``path`` (object keys, outermost first).

    ``value`` is a scalar for ``$eq $ne $gt $gte $lt $lte``, a tuple of scalars for ``$in``/``$nin``
    and a bool for ``$exists``."""

    path: tuple[str, ...]
    op: str
    value: Any


@dataclass(frozen=True)
class AllOf:
    """Every part holds (several keys, several operators, ``$and``)."""

    parts: tuple[FilterNode, ...]


@dataclass(frozen=True)
class AnyOf:
    """At least one part holds (``$or``)."""

    parts: tuple[FilterNode, ...]


FilterNode = Condition | AllOf | AnyOf


# ---------------------------------------------------------------------- parsing
def parse_filter(filter: Any) -> FilterNode | None:
    """The checked tree of a filter dict; None for None or ``{}`` (no restriction).

    Raises:
        InvalidInputError: not a dict; an unknown operator; a malformed key ("Invalid filter key
            ...": not a string, a blank step, a double quote, backslash, NUL or lone surrogate);
            an operand of the wrong type (a list for ``$eq``, a bool for ``$gt``, not a list for
            ``$in``, a string with a lone surrogate); an empty condition; too many conditions or
            values. The message names the operator or the path.
    """
    if filter is None:
        return None
    if not isinstance(filter, Mapping):
        raise InvalidInputError(f"filter must be a dict, got {type(filter).__name__}")
    counter = [0, 0]  # conditions, values
    node = _parse_object(filter, (), counter, 0)
    return None if isinstance(node, AllOf) and not node.parts else node


def _shown(path: tuple[str, ...]) -> str:
    return ".".join(path) if path else "(top level)"


def _parse_object(obj: Mapping[Any, Any], prefix: tuple[str, ...], counter: list[int], depth: int) -> FilterNode:
    """A dict of ``path: condition`` pairs (and ``$and``/``$or`` at the top of a filter)."""
    if depth > _MAX_DEPTH:
        raise InvalidInputError(f"filter nests deeper than {_MAX_DEPTH} levels at {_shown(prefix)!r}")
    parts: list[FilterNode] = []
    for key, cond in obj.items():
        if not isinstance(key, str):
            raise InvalidInputError(f"Invalid filter key {key!r} at {_shown(prefix)!r}: keys must be strings")
        if key.startswith("$"):
            if prefix or key not in ("$and", "$or"):
                where = f" at {_shown(prefix)!r}" if prefix else ""
                raise InvalidInputError(f"unknown filter operator {key!r}{where}; known: {', '.join(OPERATORS)}")
            parts.append(_parse_logical(key, cond, counter, depth))
            continue
        path = prefix + _split_path(key, prefix)
        parts.append(_parse_condition(path, cond, counter, depth))
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def _parse_logical(key: str, cond: Any, counter: list[int], depth: int) -> FilterNode:
    if not isinstance(cond, (list, tuple)) or not cond:
        raise InvalidInputError(f"filter {key!r} takes a non-empty list of filters")
    parts = []
    for sub in cond:
        if not isinstance(sub, Mapping) or not sub:
            raise InvalidInputError(f"filter {key!r} takes a list of non-empty dicts, got {sub!r:.80}")
        parts.append(_parse_object(sub, (), counter, depth + 1))
    return (AllOf if key == "$and" else AnyOf)(tuple(parts))


def _split_path(key: str, prefix: tuple[str, ...]) -> tuple[str, ...]:
    steps = tuple(key.split("."))
    if any(not s.strip() for s in steps):
        raise InvalidInputError(f"Invalid filter key {'.'.join(prefix + (key,))!r}: the path has an empty step")
    if any('"' in s or "\\" in s or _NUL in s or LONE_SURROGATE.search(s) for s in steps):
        raise InvalidInputError(
            f"Invalid filter key {'.'.join(prefix + (key,))!r}: keys with double quotes, backslashes, NUL "
            "or lone surrogates cannot be filtered on"
        )
    return steps


def _parse_condition(path: tuple[str, ...], cond: Any, counter: list[int], depth: int) -> FilterNode:
    shown = _shown(path)
    if isinstance(cond, Mapping):
        if not cond:
            raise InvalidInputError(f"filter condition for {shown!r} is an empty dict")
        ops = [k for k in cond if isinstance(k, str) and k.startswith("$")]
        if ops and len(ops) != len(cond):
            raise InvalidInputError(
                f"filter condition for {shown!r} mixes operators ({', '.join(ops)}) and keys; write nested "
                "keys as a dotted path"
            )
        if not ops:  # {"client": {"region": "EU"}}: nested keys
            return _parse_object(cond, path, counter, depth + 1)
        parts = [_operator(path, op, operand, counter) for op, operand in cond.items()]
        return parts[0] if len(parts) == 1 else AllOf(tuple(parts))
    return _operator(path, "$eq", cond, counter)


def _operator(path: tuple[str, ...], op: str, operand: Any, counter: list[int]) -> Condition:
    shown = _shown(path)
    counter[0] += 1
    if counter[0] > MAX_CONDITIONS:
        raise InvalidInputError(f"filter has more than {MAX_CONDITIONS} conditions")
    if op not in OPERATORS:
        raise InvalidInputError(f"unknown filter operator {op!r} for {shown!r}; known: {', '.join(OPERATORS)}")
    if op == "$exists":
        if not isinstance(operand, bool):
            raise InvalidInputError(f"filter operator '$exists' for {shown!r} takes true or false, got {operand!r:.80}")
        return Condition(path, op, operand)
    if op in ("$in", "$nin"):
        if not isinstance(operand, (list, tuple)):
            raise InvalidInputError(f"filter operator {op!r} for {shown!r} takes a list, got {operand!r:.80}")
        if len(operand) > MAX_IN_VALUES:
            raise InvalidInputError(f"filter operator {op!r} for {shown!r} takes at most {MAX_IN_VALUES} values")
        counter[1] += len(operand)
        if counter[1] > MAX_FILTER_VALUES:
            raise InvalidInputError(f"filter has more than {MAX_FILTER_VALUES} values in its $in / $nin lists")
        values = (_scalar(path, op, v) for v in operand)
        return Condition(path, op, tuple(v for v in values if not (isinstance(v, str) and _NUL in v)))
    value = _scalar(path, op, operand)
    if op in _ORDER_OPS and (value is None or isinstance(value, bool)):
        raise InvalidInputError(f"filter operator {op!r} for {shown!r} takes a number or a string, got {value!r}")
    if isinstance(value, str) and _NUL in value:
        # no stored string holds NUL: such a value equals none, and orders as the part before its NUL
        if op in ("$eq", "$ne"):
            return Condition(path, "$in" if op == "$eq" else "$nin", ())
        before = value.split(_NUL, 1)[0]
        return Condition(path, "$gt" if op in ("$gt", "$gte") else "$lte", before)
    return Condition(path, op, value)


def _scalar(path: tuple[str, ...], op: str, value: Any) -> Scalar:
    if value is None or isinstance(value, bool):
        return value if value is None else bool(value)
    if isinstance(value, str):
        if LONE_SURROGATE.search(value):
            raise InvalidInputError(f"filter value for {_shown(path)!r} ({op}) must not contain lone surrogates")
        return str(value)  # NUL: see _operator
    if isinstance(value, numbers.Integral):
        return int(value)  # an IntEnum or numpy integer compares as its plain value
    if isinstance(value, numbers.Real):  # not Integral: handled above
        return float(value)  # a numpy float too; inf and NaN compare as Python compares them
    hint = " (a list of values goes in $in)" if isinstance(value, (list, tuple)) and op == "$eq" else ""
    raise InvalidInputError(
        f"filter operator {op!r} for {_shown(path)!r} compares with a string, number, boolean or null, "
        f"got {type(value).__name__}{hint}"
    )


# ---------------------------------------------------------------------- evaluation
_MISSING = object()


def _lookup(metadata: Any, path: tuple[str, ...]) -> Any:
    value = metadata
    for step in path:
        if not isinstance(value, Mapping) or step not in value:
            return _MISSING
        value = value[step]
    return value


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _equal(stored: Any, operand: Scalar) -> bool:
    """JSON equality of a stored value and a scalar operand (types must agree)."""
    if operand is None:
        return stored is None
    if isinstance(operand, bool):
        return isinstance(stored, bool) and stored is operand
    if isinstance(operand, str):
        return isinstance(stored, str) and stored == operand
    return _is_number(stored) and stored == operand


def _ordered(stored: Any, op: str, operand: Scalar) -> bool:
    if isinstance(operand, str):
        if not isinstance(stored, str):
            return False
    elif not _is_number(stored):
        return False
    if op == "$gt":
        return stored > operand  # type: ignore[operator]
    if op == "$gte":
        return stored >= operand  # type: ignore[operator]
    if op == "$lt":
        return stored < operand  # type: ignore[operator]
    return stored <= operand  # type: ignore[operator]


def evaluate(node: FilterNode | None, metadata: Any) -> bool:
    """Whether ``metadata`` (a dict; anything else has no keys) passes a parsed filter (None: yes)."""
    if node is None:
        return True
    if isinstance(node, AllOf):
        return all(evaluate(p, metadata) for p in node.parts)
    if isinstance(node, AnyOf):
        return any(evaluate(p, metadata) for p in node.parts)
    stored = _lookup(metadata, node.path)
    if node.op == "$exists":
        return (stored is not _MISSING) is node.value
    if stored is _MISSING:
        return node.op in ("$ne", "$nin")
    if node.op == "$eq":
        return _equal(stored, node.value)
    if node.op == "$ne":
        return not _equal(stored, node.value)
    if node.op == "$in":
        return any(_equal(stored, v) for v in node.value)
    if node.op == "$nin":
        return not any(_equal(stored, v) for v in node.value)
    return _ordered(stored, node.op, node.value)


def matches_filter(metadata: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether one metadata dict passes a recall filter, with exactly the rules recall applies in
    SQL (see this module's docstring): ``matches_filter({"court": "NY"}, {"court": "NY"})`` is
    True, ``matches_filter({"n": 1}, {"n": True})`` is False.

    Raises:
        InvalidInputError: the filter is malformed (see :func:`parse_filter`).
    """
    return evaluate(parse_filter(filter), metadata)
