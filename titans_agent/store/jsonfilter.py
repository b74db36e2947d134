"""A parsed metadata filter (:mod:`titans_agent.filters`) as one SQL condition on a JSON column.

SQLite: JSON1's ``json_type`` and ``json_extract`` with a quoted path (``$."client"."region"``);
PostgreSQL: the ``json`` column's ``->``/``->>`` one key at a time (a step through anything but an
object gives NULL there, as in SQLite), ``json_typeof``, numbers as ``numeric``, and ordering
under ``COLLATE "C"`` (code point order, as Python's). The rules are those of
:func:`titans_agent.filters.evaluate`: values of different JSON types never compare equal (a type
check wherever the value's SQL form could be mistaken for another type's: a number never equals a
bool or a string), and a missing path (SQL NULL) passes only ``$exists: false``, ``$ne`` and ``$nin``.

Numbers compare as Python compares them (integers exactly, doubles as doubles, an integer with a
double by exact value). Stored numbers are 64-bit integers or finite doubles (the write path refuses
others). SQLite compares an INTEGER with a REAL exactly, so each operand is bound as what it is (an
integer as INTEGER, a double as REAL); PostgreSQL reads a number's literal as ``numeric``, which is
exact for integers and, for a double written as Python writes it (the shortest literal that reads
back as that double), orders and equals as the double does against any operand below 2**53 in
magnitude. Beyond that, and for infinities, NaN and integers beyond 64 bits, :func:`_as_double` and
:func:`_as_integer` restate ``value op operand`` as a comparison with a double or a 64-bit integer
(or a constant), exact for every value of that kind; PostgreSQL then picks the one for the stored
literal's kind (a double's literal has a ``.`` or an exponent).

These conditions read the JSON itself; they are exact. What makes them cheap is the metadata index
(:mod:`titans_agent.store.metaterms`), which narrows the occurrences they are evaluated on.
"""

from __future__ import annotations

import json
import math
import re
from abc import ABC, abstractmethod
from typing import Any

from sqlalchemy import (
    Float,
    Integer,
    Numeric,
    Text,
    and_,
    bindparam,
    case,
    cast,
    collate,
    false,
    func,
    literal,
    not_,
    or_,
    true,
)
from sqlalchemy.dialects.postgresql import JSON
from sqlalchemy.sql.elements import ColumnElement

from titans_agent.filters import AllOf, AnyOf, Condition, FilterNode

__all__ = ["filter_condition"]

_SQLITE_NUMBER = ("integer", "real")
_NUL_ESCAPE = "\\u0000"
# \u0000 as an escape in JSON text: after an even number of backslashes (an odd one makes it the
# six characters themselves, an escaped backslash followed by "u0000")
_NUL_ESCAPE_RE = r"(^|[^\\])(\\\\)*\\u0000"
# what a JSON number, true, false, an array or an object can look like as text
_JSON_SPELLING = re.compile(r"\s*(-?\d|true\Z|false\Z|\[|\{)")
_EXACT = 2**53  # below it in magnitude every integer is a double
_INT64 = 2**63  # stored integers lie in [-_INT64, _INT64)


def filter_condition(node: FilterNode, column: Any, dialect: str) -> ColumnElement[bool]:
    """The SQL condition of ``node`` on the JSON ``column`` for ``dialect`` ("sqlite" or
    "postgresql"); never NULL where a negation needs it (``$ne``, ``$nin``)."""
    if isinstance(node, AllOf):
        return and_(*(filter_condition(p, column, dialect) for p in node.parts))
    if isinstance(node, AnyOf):
        return or_(*(filter_condition(p, column, dialect) for p in node.parts))
    leaf = _Pg(column, node) if dialect == "postgresql" else _Sqlite(column, node)
    return leaf.condition()


class _Leaf(ABC):
    """One condition; each dialect's subclass says how a value is typed, extracted and compared."""

    def __init__(self, column: Any, node: Condition) -> None:
        self.node = node
        self.column = column

    @abstractmethod
    def exists(self) -> ColumnElement[bool]:
        """The path holds a value (JSON null included)."""

    @abstractmethod
    def equal(self, values: tuple[Any, ...]) -> ColumnElement[bool]:
        """The value equals one of ``values`` (JSON types must agree); NULL when the path is missing."""

    @abstractmethod
    def ordered(self, op: str, value: Any) -> ColumnElement[bool]:
        """The value compares to ``value`` by ``op`` ($gt ...), a number or a string of the same type."""

    def condition(self) -> ColumnElement[bool]:
        op, value = self.node.op, self.node.value
        if op == "$exists":
            return self.exists() if value else not_(self.exists())
        if op in ("$eq", "$in"):
            return self.equal((value,) if op == "$eq" else value)
        if op in ("$ne", "$nin"):
            # NULL (a missing path) is "not equal": coalesce before negating
            return not_(func.coalesce(self.equal((value,) if op == "$ne" else value), false()))
        return self.ordered(op, value)


def _apply(op: str, left: Any, right: Any) -> ColumnElement[bool]:
    if op == "$gt":
        return left > right
    if op == "$gte":
        return left >= right
    if op == "$lt":
        return left < right
    return left <= right


def _infinite(op: str, positive: bool) -> bool:
    """Whether every stored number compares to +inf (``positive``) or -inf by ``op``."""
    return op in (("$lt", "$lte") if positive else ("$gt", "$gte"))


def _as_double(op: str, operand: int | float) -> tuple[str, float] | bool:
    """``x op operand`` for every finite double ``x``, as ``x op' d`` with a double ``d``, or a constant.

    An integer ``n`` goes to its nearest double ``d``: no double lies strictly between them, so
    ``x != d`` orders ``x`` against ``n`` as against ``d``, and ``x == d`` as ``d`` against ``n``
    (known here, where Python compares an integer and a double exactly)."""
    if isinstance(operand, float):
        if math.isnan(operand):
            return False
        return _infinite(op, operand > 0) if math.isinf(operand) else (op, operand)
    try:
        d = float(operand)
    except OverflowError:
        return _infinite(op, operand > 0)
    if op == "$eq":
        return (op, d) if d == operand else False
    if op in ("$lt", "$lte"):
        return ("$lte" if (d < operand if op == "$lt" else d <= operand) else "$lt"), d
    return ("$gte" if (d > operand if op == "$gt" else d >= operand) else "$gt"), d


def _as_integer(op: str, operand: int | float) -> tuple[str, int] | bool:
    """``x op operand`` for every 64-bit integer ``x``, as ``x op' n`` with a 64-bit integer ``n``,
    or a constant (a double goes up or down to the integer that decides the same way)."""
    if isinstance(operand, float):
        if math.isnan(operand):
            return False
        if math.isinf(operand):
            return _infinite(op, operand > 0)
        if op == "$eq":
            if not operand.is_integer():
                return False
            n = int(operand)
        else:  # x < o iff x < ceil(o); x >= o iff x >= ceil(o); x <= o iff x <= floor(o); x > o iff x > floor(o)
            n = math.ceil(operand) if op in ("$lt", "$gte") else math.floor(operand)
    else:
        n = operand
    if not -_INT64 <= n < _INT64:
        return _infinite(op, n > 0)
    return op, n


def _small(value: int | float) -> bool:
    """A finite number below 2**53 in magnitude: any stored number compares with it alike as a
    double and as PostgreSQL's ``numeric`` of its literal."""
    return (isinstance(value, int) or math.isfinite(value)) and -_EXACT < value < _EXACT


def _partition(values: tuple[Any, ...]) -> tuple[list[str], list[float | int], list[bool], bool]:
    strings = [v for v in values if isinstance(v, str)]
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    bools = sorted({v for v in values if isinstance(v, bool)})
    return strings, numbers, bools, any(v is None for v in values)


class _Sqlite(_Leaf):
    type: Any  # the JSON type of the value at the path (a function, or a CASE over two spellings)
    value: Any  # the value at the path, extracted

    def __init__(self, column: Any, node: Condition) -> None:
        super().__init__(column, node)
        path = "$" + "".join(f'."{step}"' for step in node.path)
        # Stored JSON is ASCII-escaped ({"\u043a...": 1}); SQLite up to 3.44 compares a path's
        # key with the key's text as written, so a key outside printable ASCII is also looked up
        # in its escaped spelling (and, for a SQLite that decodes keys, as it is)
        escaped = "$" + "".join(f'."{json.dumps(step)[1:-1]}"' for step in node.path)
        if escaped == path:
            self.type = func.json_type(column, path)
            self.value = func.json_extract(column, path)
        else:
            self.type = func.coalesce(func.json_type(column, escaped), func.json_type(column, path))
            self.value = case(
                (func.json_type(column, escaped).is_not(None), func.json_extract(column, escaped)),
                else_=func.json_extract(column, path),
            )

    def exists(self) -> ColumnElement[bool]:
        return self.type.is_not(None)

    def equal(self, values: tuple[Any, ...]) -> ColumnElement[bool]:
        # json_extract gives TEXT for a string (its value), an array or an object (its JSON text,
        # which starts with "[" or "{"), INTEGER or REAL for a number, 1 or 0 for true or false.
        # A TEXT never equals a number here (no affinity), so the type guard (a second parse of the
        # JSON per row) is needed only for strings that could be such JSON text and for 0 and 1.
        strings, numbers, bools, null = _partition(values)
        parts = []
        if strings:
            found = self.value.in_(strings)
            guarded = any(v.startswith(("[", "{")) for v in strings)
            parts.append(and_(self.type == "text", found) if guarded else found)
        if numbers:
            # integers bound as INTEGER, doubles as REAL (one list would bind all as its first's type)
            ints = {v for v in numbers if isinstance(v, int) and -_INT64 <= v < _INT64}
            sides = [_as_double("$eq", v) for v in numbers if v not in ints]  # a larger integer: its double
            doubles = {side[1] for side in sides if not isinstance(side, bool)}
            numeric = [
                self.value.in_(bindparam(None, vs, type_=t, expanding=True))
                for vs, t in ((sorted(ints), Integer()), (sorted(doubles), Float()))
                if vs
            ]
            if numeric:
                guarded = any(v in (0, 1) for v in (*ints, *doubles))
                parts.append(and_(self.type.in_(_SQLITE_NUMBER), or_(*numeric)) if guarded else or_(*numeric))
        names = [("true" if b else "false") for b in bools] + (["null"] if null else [])
        if names:
            parts.append(self.type.in_(names))
        return or_(*parts) if parts else false()

    def ordered(self, op: str, value: Any) -> ColumnElement[bool]:
        if isinstance(value, str):
            return and_(self.type == "text", _apply(op, self.value, value))
        guard = self.type.in_(_SQLITE_NUMBER)
        if isinstance(value, int) and -_INT64 <= value < _INT64:
            return and_(guard, _apply(op, self.value, literal(value, Integer())))
        side = _as_double(op, value)  # a double as it is; a larger integer as its nearest double
        if isinstance(side, bool):
            return guard if side else false()
        return and_(guard, _apply(side[0], self.value, literal(side[1], Float())))


class _Pg(_Leaf):
    # The metadata column is ``json`` (text): each operator below parses it, so the conditions use
    # as few as they can (casting to ``jsonb`` first costs more: one full conversion per reference).
    def __init__(self, column: Any, node: Condition) -> None:
        super().__init__(column, node)
        steps = [cast(literal(step, Text), Text) for step in node.path]
        # PostgreSQL cannot read a string holding \u0000 out of json text (the query would fail):
        # such metadata (rare: NUL in a value) is read as no metadata at all
        # (titans-agent refuses NUL in metadata since schema version 5; older rows may hold one)
        text_form = cast(column, Text)
        has_nul = and_(func.strpos(text_form, _NUL_ESCAPE) > 0, text_form.op("~")(_NUL_ESCAPE_RE))
        x: Any = case((has_nul, None), else_=column)
        for step in steps[:-1]:
            x = x.op("->", return_type=JSON)(step)
        self.json = x.op("->", return_type=JSON)(steps[-1])  # the value, as JSON; NULL when missing
        self.text = x.op("->>", return_type=Text)(steps[-1])  # a string's value, else the JSON text
        self.type = func.json_typeof(self.json)

    def exists(self) -> ColumnElement[bool]:
        return self.json.is_not(None)

    def equal(self, values: tuple[Any, ...]) -> ColumnElement[bool]:
        # ->> gives a string's value, a number's literal, true/false, an array's or object's JSON
        # text (NULL for null): a string that no literal or JSON text can spell needs no type check.
        # true, false and null have one spelling each: their JSON text says it.
        strings, numbers, bools, null = _partition(values)
        parts = []
        if strings:
            found = self.text.in_(strings)
            guarded = any(_JSON_SPELLING.match(v) for v in strings)
            parts.append(and_(self.type == "string", found) if guarded else found)
        small = [v for v in numbers if _small(v)]
        if small:
            parts.append(self._number().in_([_numeric(v) for v in small]))
        large = [v for v in numbers if not _small(v)]
        if large:  # by the stored literal's kind: as a double, or as an integer
            sides = [(_as_double("$eq", v), _as_integer("$eq", v)) for v in large]
            doubles = sorted({d[1] for d, _ in sides if not isinstance(d, bool)})
            ints = sorted({i[1] for _, i in sides if not isinstance(i, bool)})
            number = cast(self.text, Numeric)
            as_double = number.in_([_numeric(v) for v in doubles]) if doubles else false()
            as_integer = number.in_([_numeric(v) for v in ints]) if ints else false()
            parts.append(self._by_kind(as_double, as_integer))
        words = [("true" if b else "false") for b in bools] + (["null"] if null else [])
        if words:
            parts.append(cast(self.json, Text).in_(words))
        return or_(*parts) if parts else false()

    def _number(self) -> Any:
        return case((self.type == "number", cast(self.text, Numeric)), else_=None)

    def _by_kind(self, as_double: Any, as_integer: Any) -> Any:
        """``as_double`` for a number whose literal is a double's (as Python reads JSON: it has a
        fraction or an exponent), ``as_integer`` for an integer's, NULL for anything else (nested
        CASEs: PostgreSQL may evaluate the parts of an AND in any order, and a cast to numeric
        must see only numbers)."""
        kind = case((self.text.op("~")("[.eE]"), as_double), else_=as_integer)
        return case((self.type == "number", kind), else_=None)

    def ordered(self, op: str, value: Any) -> ColumnElement[bool]:
        if isinstance(value, str):  # code point order, as Python's
            return and_(self.type == "string", _apply(op, collate(self.text, "C"), literal(value, Text)))
        if _small(value):
            return _apply(op, self._number(), _numeric(value))
        as_double, as_integer = _as_double(op, value), _as_integer(op, value)
        if isinstance(as_double, bool) and as_double == as_integer:
            return self.type == "number" if as_double else false()
        number = cast(self.text, Numeric)
        branches = [
            (true() if side else false()) if isinstance(side, bool) else _apply(side[0], number, _numeric(side[1]))
            for side in (as_double, as_integer)
        ]
        return self._by_kind(*branches)


def _numeric(value: int | float) -> Any:
    """A number as PostgreSQL's ``numeric``: its literal, as Python writes it (a double's shortest)."""
    return cast(literal(repr(value), Text), Numeric)
