"""The definitions of TypeScript, JavaScript, Go and Rust source, read from its syntax tree.

:func:`outline` parses a file with tree-sitter (py-tree-sitter and the grammar wheels
``tree-sitter-typescript``, ``tree-sitter-go`` and ``tree-sitter-rust``, whose compiled grammars
ship inside the wheels: nothing is downloaded or built at run time) and returns an
:class:`Outline`: the file's definitions, nested as they are in the source, each with its symbol
name qualified the way the language writes it:

* TypeScript and JavaScript (``.ts``, ``.mts``, ``.cts`` with the TypeScript grammar; ``.tsx``,
  ``.js``, ``.jsx``, ``.mjs``, ``.cjs`` with the TSX one, which reads JavaScript and JSX):
  functions, generators, classes, interfaces, enums, type aliases, namespaces and modules,
  methods (``Class.method``), ``const f = () => ...``, ``const F = make("F", () => ...)``
  and ``exports.f = function ...`` (``Foo.prototype.bar = ...`` reads ``Foo.bar``), and test
  blocks (``describe("parser", () => ...)`` reads ``describe parser``; also ``context``,
  ``suite``, ``it``, ``test``, ``bench`` and their ``.only``/``.skip`` forms);
* Go: functions, methods (``(*T).Method`` for a pointer receiver, ``T.Method`` for a value one),
  types (structs, interfaces, aliases; each of a ``type ( ... )`` group);
* Rust: functions, structs, enums, unions, traits, type aliases, ``macro_rules!`` macros, modules
  with a body (``tests::name``), impls (``impl Display for Bar``, ``impl Bar``; generics left out)
  and their functions (``Bar::fmt``), trait functions (``Trait::name``).

A definition starts at its leading comments, decorators and attributes (``///``, ``/** */``,
``#[derive(..)]``, ``@Component(..)``, the ``//`` lines above a Go function) when they stand on
lines of their own right above it, with no blank line between; a module's own documentation
(``//!``) and a comment a blank line above are not its.

:meth:`Outline.split` cuts a file at its definitions as the chunker cuts Python at ``class`` and
``def``: consecutive definitions (and the code between them) are packed into one chunk while they
fit; one that does not fit is cut at the definitions inside it (an impl's or a class's methods),
and one without any at the generic separators (blank lines, lines, words). :meth:`Outline.symbols`
names the definitions a chunk lies in and those it holds.

A file whose syntax tree holds an error (broken code, or a construct the grammar does not know), a
grammar that is not installed, or a parser failure gives ``None`` with the reason logged (a
warning): the chunker then cuts the file as it cuts any other code. Nothing here raises on bad
input.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

__all__ = [
    "GRAMMARS",
    "MAX_BROKEN",
    "MAX_NESTING",
    "MAX_SYMBOLS",
    "Definition",
    "Outline",
    "grammar_for_path",
    "outline",
]

logger = logging.getLogger(__name__)

#: The tree-sitter grammar that reads each file extension (lower case, with its dot).
GRAMMARS: dict[str, str] = {
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".js": "tsx",
    ".jsx": "tsx",
    ".mjs": "tsx",
    ".cjs": "tsx",
    ".go": "go",
    ".rs": "rust",
}

#: Definitions nested deeper than this are not definitions of their own (their text stays in the
#: definition that holds them); bounds the work on generated or hostile code.
MAX_NESTING = 24

#: A file whose syntax errors cover more than this share of its bytes is cut without its
#: definitions; below it, the definitions outside the errors are used.
MAX_BROKEN = 0.25

#: At most this many symbol names are given for one chunk (:meth:`Outline.symbols`).
MAX_SYMBOLS = 16

_MAX_NAME = 120  # characters of one symbol name
_TEST_CALLS = frozenset({"describe", "context", "suite", "it", "test", "bench"})  # JavaScript test blocks

# What each grammar calls a definition: tree-sitter queries, one capture per kind.
_QUERIES: dict[str, str] = {
    "typescript": """
        (function_declaration) @function
        (generator_function_declaration) @function
        (function_signature) @function
        (class_declaration) @class
        (abstract_class_declaration) @class
        (interface_declaration) @interface
        (enum_declaration) @enum
        (type_alias_declaration) @type
        (internal_module) @module
        (module) @module
        (method_definition) @method
        (method_signature) @method
        (abstract_method_signature) @method
        (public_field_definition value: [(arrow_function) (function_expression)]) @method
        (variable_declarator name: (identifier)
            value: [(arrow_function) (function_expression) (generator_function)]) @function
        (variable_declarator name: (identifier) value: (class)) @class
        (variable_declarator name: (identifier)
            value: (call_expression arguments: (arguments [(arrow_function) (function_expression)]))) @function
        (call_expression function: [(identifier) (member_expression object: (identifier))]
            arguments: (arguments . (string) . [(arrow_function) (function_expression)])) @test
        (assignment_expression left: [(member_expression) (identifier)]
            right: [(arrow_function) (function_expression) (generator_function)]) @function
        (assignment_expression left: [(member_expression) (identifier)] right: (class)) @class
    """,
    "go": """
        (function_declaration) @function
        (method_declaration) @method
        (type_spec) @type
        (type_alias) @type
    """,
    "rust": """
        (function_item) @function
        (function_signature_item) @function
        (struct_item) @struct
        (union_item) @struct
        (enum_item) @enum
        (trait_item) @trait
        (type_item) @type
        (impl_item) @impl
        (mod_item body: (declaration_list)) @module
        (macro_definition) @macro
    """,
}
_QUERIES["tsx"] = _QUERIES["typescript"]

# Comments, decorators and attributes that belong to the definition right below them.
_PREFIX = {
    "typescript": frozenset({"comment", "decorator"}),
    "go": frozenset({"comment"}),
    "rust": frozenset({"line_comment", "block_comment", "attribute_item"}),
}
_PREFIX["tsx"] = _PREFIX["typescript"]

# Statements that hold a definition and nothing else: the definition's text starts with them
# (``export``, ``declare``, ``const``, the ``type`` of a one-type declaration).
_WRAPPERS = {
    "typescript": frozenset(
        {
            "export_statement",
            "ambient_declaration",
            "lexical_declaration",
            "variable_declaration",
            "expression_statement",
        }
    ),
    "go": frozenset({"type_declaration"}),
    "rust": frozenset(),
}
_WRAPPERS["tsx"] = _WRAPPERS["typescript"]

# Kinds whose members are qualified by the container's name, and with which separator.
_CONTAINERS = {
    "typescript": ({"class", "interface", "module"}, "."),
    "go": (set(), "."),
    "rust": ({"impl", "trait", "module"}, "::"),
}
_CONTAINERS["tsx"] = _CONTAINERS["typescript"]


@dataclass
class Definition:
    """One definition of a source file.

    Attributes:
        kind: ``"function"``, ``"method"``, ``"class"``, ``"interface"``, ``"enum"``, ``"type"``,
            ``"module"``, ``"struct"``, ``"trait"``, ``"impl"``, ``"macro"`` or ``"test"``.
        name: Its qualified symbol name: ``"Bar::fmt"``, ``"impl Display for Bar"``,
            ``"(*Server).Serve"``, ``"Parser.parse"``.
        start: Character offset where its text starts, leading comments, decorators and
            attributes included.
        at: Character offset of the definition itself (after those).
        end: Character offset just past its text.
        children: The definitions inside it, in source order.
        scope: What its members' names are qualified with (``"Bar"`` for ``impl Display for
            Bar``); empty for a definition whose members are not qualified (a function).
    """

    kind: str
    name: str
    start: int
    at: int
    end: int
    children: list[Definition] = field(default_factory=list)
    scope: str = ""


class Outline:
    """The definitions of one source file (see :func:`outline`).

    Attributes:
        grammar: The grammar that read it (``"typescript"``, ``"tsx"``, ``"go"``, ``"rust"``).
        roots: The outermost definitions, in source order.
    """

    def __init__(self, grammar: str, roots: list[Definition]) -> None:
        self.grammar = grammar
        self.roots = roots
        self._flat: list[Definition] = list(_walk(roots))  # pre-order: sorted by ``start``
        self._starts = [d.start for d in self._flat]
        self._level_starts: dict[int, list[int]] = {}  # id of a list of siblings -> their starts

    def __len__(self) -> int:
        return len(self._flat)

    def definitions(self) -> Iterator[Definition]:
        """Every definition, outer before inner, in source order."""
        return iter(self._flat)

    def split(
        self,
        text: str,
        size: int,
        length: Callable[[str], int],
        leaf: Callable[..., list[tuple[int, int]]],
    ) -> list[tuple[int, int]]:
        """Cut ``text`` (the parsed file) into ``(start, end)`` character spans at its definitions.

        Args:
            text: The file's text, as given to :func:`outline`.
            size: Most tokens of a span, as ``length`` counts them.
            length: Counts the tokens of a piece of text.
            leaf: ``leaf(start, end)`` cuts a span of ``text`` that holds no definition and does
                not fit into smaller spans (the generic separators); ``leaf(start, end, n)`` cuts
                it into spans of at most ``n`` tokens.

        Returns:
            Spans in order, without leading or trailing whitespace, covering every
            non-whitespace character of ``text``. A span packs consecutive definitions and the
            code between them while their token counts add up to at most ``size``; a definition
            larger than that is cut at the definitions inside it, one without any by ``leaf``.
            Token counts are added up, not checked: the caller enforces the limit.
        """
        return _split(text, 0, len(text), self.roots, size, length, leaf, min(8, max(size // 4, 1)))

    def symbols(self, start: int, end: int, limit: int = MAX_SYMBOLS) -> tuple[str, ...]:
        """The symbol names of the chunk ``text[start:end]``: the definitions that enclose its
        start (outermost first), then those that start inside it (with their leading comments),
        in source order; each name once, at most ``limit`` names."""
        names: dict[str, None] = {}
        level = self.roots
        while True:  # the definitions around the start (their comments too), outermost first
            starts = self._level_starts.get(id(level))
            if starts is None:  # once per level: a class of many methods is named in linear time
                starts = self._level_starts[id(level)] = [d.start for d in level]
            i = bisect.bisect_right(starts, start) - 1
            if i < 0 or not (level[i].start <= start < level[i].end):
                break
            names[level[i].name] = None
            level = level[i].children
        lo, hi = bisect.bisect_left(self._starts, start), bisect.bisect_left(self._starts, end)
        for d in self._flat[lo:hi]:
            if len(names) >= limit:
                break
            names[d.name] = None
        return tuple(list(names)[:limit])


def grammar_for_path(path: str | os.PathLike[str] | None) -> str | None:
    """The grammar that reads a file, by its extension (see :data:`GRAMMARS`); ``None`` for any
    other file and for ``None``."""
    if path is None:
        return None
    return GRAMMARS.get(os.path.splitext(os.fspath(path))[1].lower())


def outline(text: str, path: str | os.PathLike[str] | None) -> Outline | None:
    """Parse ``text``, the content of the file ``path``, and find its definitions.

    Args:
        text: The file's text (any string; lone surrogates are passed through).
        path: The file's path; only its extension is looked at (:func:`grammar_for_path`).

    Returns:
        The file's :class:`Outline`; ``None`` when no grammar reads the extension (silently), or,
        with a warning logged that names the file and the reason, when the grammar's package is
        not installed, the parser fails, or the syntax tree holds an error (its line is named).
    """
    grammar = grammar_for_path(path)
    if grammar is None:
        return None
    try:
        language, query = _grammar(grammar)
    except Exception as exc:  # an import or ABI failure of an optional native package
        logger.warning(
            "%s: no %s grammar (%s: %s); chunked without its definitions", path, grammar, type(exc).__name__, exc
        )
        return None
    from tree_sitter import Parser, QueryCursor

    data = text.encode("utf-8", "surrogatepass")
    try:
        root = Parser(language).parse(data).root_node
    except Exception as exc:  # a parser failure must not stop an ingest
        logger.warning("%s: %s parser failed (%s); chunked without its definitions", path, grammar, exc)
        return None
    errors = _errors(root) if root.has_error else []
    broken = sum(e - s for s, e, _ in errors)
    if root.is_error or broken > MAX_BROKEN * len(data):
        line = errors[0][2] if errors else 1
        logger.warning(
            "%s: %s syntax errors over %d of %d bytes (the first near line %d); chunked without its definitions",
            path, grammar, broken, len(data), line,
        )  # fmt: skip
        return None
    if errors:
        logger.info("%s: %d %s syntax errors (the first near line %d); definitions in them not used",
                    path, len(errors), grammar, errors[0][2])  # fmt: skip
    error_starts = [s for s, _, _ in errors]
    found: list[tuple[int, int, int, str, Any]] = []  # (at, -end, start) in bytes, kind, node
    for kind, nodes in QueryCursor(query).captures(root).items():
        for node in nodes:
            i = bisect.bisect_right(error_starts, node.start_byte) - 1
            if i >= 0 and node.end_byte <= errors[i][1]:
                continue  # a fragment inside an error
            span = _climb(node, grammar)
            start = _leading(span, data, grammar)
            found.append((span.start_byte, -span.end_byte, start, kind, node))
    found.sort(key=lambda f: (f[0], f[1]))
    chars = _CharOffsets(data, text, [b for f in found for b in (f[0], -f[1], f[2])])
    roots: list[Definition] = []
    stack: list[tuple[Definition, int, int]] = []  # (definition, at, end) in bytes
    seen: set[tuple[int, int]] = set()
    for at, neg_end, start, kind, node in found:
        end = -neg_end
        if (at, end) in seen:  # two captures of one statement: the outer one stands
            continue
        while stack and stack[-1][2] <= at:
            stack.pop()
        parent = stack[-1][0] if stack else None
        if (stack and end > stack[-1][2]) or len(stack) >= MAX_NESTING:
            continue  # overlaps its parent's end (not expected of a tree) or nested too deep
        named = _name(kind, node, data, grammar, parent)
        if named is None:
            continue
        name, scope = named
        definition = Definition(kind, name, chars[start], chars[at], chars[end], scope=scope)
        (parent.children if parent is not None else roots).append(definition)
        stack.append((definition, at, end))
        seen.add((at, end))
    return Outline(grammar, roots)


# -- reading the tree ----------------------------------------------------------------------------


@cache
def _grammar(grammar: str) -> tuple[Any, Any]:
    """The tree-sitter ``Language`` and definition ``Query`` of a grammar, loaded once."""
    from tree_sitter import Language, Query

    if grammar in ("typescript", "tsx"):
        import tree_sitter_typescript as ts

        capsule = ts.language_typescript() if grammar == "typescript" else ts.language_tsx()
    elif grammar == "go":
        import tree_sitter_go

        capsule = tree_sitter_go.language()
    else:
        import tree_sitter_rust

        capsule = tree_sitter_rust.language()
    language = Language(capsule)
    return language, Query(language, _QUERIES[grammar])


def _errors(root: Any) -> list[tuple[int, int, int]]:
    """``(start byte, end byte, 1-based line)`` of the outermost error and missing nodes under
    ``root``, in order (a missing node is empty)."""
    out: list[tuple[int, int, int]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            out.append((node.start_byte, node.end_byte, int(node.start_point[0]) + 1))
        elif node.has_error:
            stack.extend(c for c in reversed(node.children) if c.has_error or c.is_missing)
    return out


def _climb(node: Any, grammar: str) -> Any:
    """The statement whose text is the definition's: ``node`` or the wrappers that hold only it."""
    wrappers, prefix = _WRAPPERS[grammar], _PREFIX[grammar]
    while node.parent is not None and node.parent.type in wrappers:
        held = [c for c in node.parent.named_children if c.type not in prefix]
        if len(held) != 1:
            break
        node = node.parent
    return node


def _leading(node: Any, data: bytes, grammar: str) -> int:
    """Byte offset where the definition ``node`` starts with its leading comments, decorators and
    attributes: siblings of those types, each on lines of its own, with no blank line between."""
    prefix = _PREFIX[grammar]
    start, row = node.start_byte, node.start_point[0]
    prev = _before(node)
    while prev is not None and prev.type in prefix:
        end_row, end_col = prev.end_point
        if end_col == 0 and end_row > prev.start_point[0]:  # a line comment holds its newline
            end_row -= 1
        if row - end_row > 1:
            break
        line_start = data.rfind(b"\n", 0, prev.start_byte) + 1
        if data[line_start : prev.start_byte].strip():
            break  # the end of another statement's line
        head = data[prev.start_byte : prev.start_byte + 3]
        if head in (b"//!", b"/*!"):
            break  # a module's own documentation
        start, row = prev.start_byte, prev.start_point[0]
        prev = _before(prev)
    return start


def _before(node: Any) -> Any:
    """The sibling before ``node``, past the line ends that Go's grammar keeps as statement
    terminators."""
    prev = node.prev_sibling
    while prev is not None and not prev.is_named and prev.type in ("\n", "\r\n"):
        prev = prev.prev_sibling
    return prev


def _text(node: Any, data: bytes) -> str:
    return " ".join(data[node.start_byte : node.end_byte].decode("utf-8", "replace").split())


def _name(kind: str, node: Any, data: bytes, grammar: str, parent: Definition | None) -> tuple[str, str] | None:
    """``(qualified name, scope for members)`` of a captured definition, or ``None`` if it has
    no usable name."""
    containers, sep = _CONTAINERS[grammar]
    outer = parent.scope if parent is not None else ""
    if grammar == "go" and node.type == "method_declaration":
        name_node, receiver = node.child_by_field_name("name"), _go_receiver(node, data)
        if name_node is None:
            return None
        own = _text(name_node, data)
        return (f"{receiver}.{own}" if receiver else own)[:_MAX_NAME], ""
    if grammar == "rust" and node.type == "impl_item":
        target = node.child_by_field_name("type")
        if target is None:
            return None
        trait = node.child_by_field_name("trait")
        typ = _strip_generics(_text(target, data))
        name = f"impl {_strip_generics(_text(trait, data))} for {typ}" if trait is not None else f"impl {typ}"
        return name[:_MAX_NAME], f"{outer}{sep}{typ}" if outer else typ
    if kind == "test":  # describe("parser", () => ...), it.only("reads a date", ...)
        function, arguments = node.child_by_field_name("function"), node.child_by_field_name("arguments")
        base = function.child_by_field_name("object") if function.type == "member_expression" else function
        if _text(base, data) not in _TEST_CALLS or arguments is None or not arguments.named_children:
            return None
        title = _text(arguments.named_children[0], data)[1:-1]
        return f"{_text(base, data)} {title}"[:_MAX_NAME], ""
    if node.type == "assignment_expression":
        own = _assigned_name(node.child_by_field_name("left"), data)
    else:
        name_node = node.child_by_field_name("name")
        own = _text(name_node, data).strip("'\"`") if name_node is not None else ""
    if not own:
        return None
    qualified = f"{outer}{sep}{own}" if outer else own
    return qualified[:_MAX_NAME], qualified if kind in containers else ""


def _go_receiver(node: Any, data: bytes) -> str:
    """``(*T)`` or ``T`` for a Go method's receiver (type arguments left out)."""
    params = node.child_by_field_name("receiver")
    decl = next((c for c in params.named_children if c.type == "parameter_declaration"), None) if params else None
    typ = decl.child_by_field_name("type") if decl is not None else None
    if typ is None:
        return ""
    pointer = typ.type == "pointer_type"
    if pointer:
        typ = next(iter(typ.named_children), None)
    if typ is not None and typ.type == "generic_type":
        typ = typ.child_by_field_name("type")
    if typ is None:
        return ""
    name = _text(typ, data)
    return f"(*{name})" if pointer else name


def _assigned_name(left: Any, data: bytes) -> str:
    """The name a JavaScript assignment gives: ``exports.f`` -> ``f``, ``Foo.prototype.bar`` ->
    ``Foo.bar``, ``module.exports`` as it is; empty for a computed target."""
    if left is None:
        return ""
    name = _text(left, data)
    if not all(part.replace("$", "").replace("_", "").isalnum() for part in name.split(".")):
        return ""
    for head in ("module.exports.", "exports."):
        if name.startswith(head):
            name = name[len(head) :]
    return name.replace(".prototype.", ".")


def _strip_generics(name: str) -> str:
    """A type without its type arguments: ``Bar<'a, T>`` -> ``Bar``, ``fmt::Display`` as it is."""
    out: list[str] = []
    depth = 0
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return " ".join("".join(out).split())


class _CharOffsets:
    """Character offsets of the byte offsets of UTF-8 ``data`` (the encoding of ``text``) that a
    caller will ask for, worked out in one pass."""

    def __init__(self, data: bytes, text: str, offsets: list[int]) -> None:
        self._ascii = len(data) == len(text)
        self._map: dict[int, int] = {}
        if self._ascii:
            return
        prev_b = prev_c = 0
        for b in sorted(set(offsets)):
            prev_c += len(data[prev_b:b].decode("utf-8", "surrogatepass"))
            prev_b = b
            self._map[b] = prev_c

    def __getitem__(self, b: int) -> int:
        return b if self._ascii else self._map[b]


def _walk(definitions: list[Definition]) -> Iterator[Definition]:
    stack = list(reversed(definitions))
    while stack:
        d = stack.pop()
        yield d
        stack.extend(reversed(d.children))


def _split(
    text: str,
    a: int,
    b: int,
    children: list[Definition],
    size: int,
    length: Callable[[str], int],
    leaf: Callable[..., list[tuple[int, int]]],
    small: int,
) -> list[tuple[int, int]]:
    """:meth:`Outline.split` of ``text[a:b]``, whose definitions are ``children``."""
    pieces: list[tuple[int, int, Definition | None]] = []
    cursor = a
    for child in children:
        if child.start > cursor:
            pieces.append((cursor, child.start, None))
        pieces.append((max(child.start, cursor), child.end, child))
        cursor = max(cursor, child.end)
    if cursor < b:
        pieces.append((cursor, b, None))
    # A few tokens of code between definitions go with a neighbour, so they never make a chunk of
    # their own: one that opens a bracket (``type (``) with the piece after it, others (a closing
    # brace, a semicolon) with the piece before.
    glued: list[tuple[int, int, Definition | None]] = []
    opened: int | None = None  # start of a small opening piece waiting for the next one
    for s, e, d in pieces:
        piece = text[s:e].strip()
        if not piece:
            continue
        if d is None and length(piece) < small:
            if piece[-1] in "([{" or not glued:
                opened = s if opened is None else opened
                continue
            if opened is None:
                ps, _, pd = glued[-1]
                glued[-1] = (ps, e, pd)
                continue
        glued.append((s if opened is None else opened, e, d))
        opened = None
    if opened is not None:
        glued.append((opened, b, None))
    out: list[tuple[int, int]] = []
    run: tuple[int, int] | None = None
    run_tokens = 0
    for s, e, d in glued:
        n = length(text[s:e])
        if n > size:
            if run is not None:
                out.append(run)
                run = None
            if d is not None and d.children:
                out.extend(_split(text, s, e, d.children, size, length, leaf, small))
                continue
            out.extend(_leaf(text, s, e, d, size, length, leaf))
            continue
        if run is not None and run_tokens + n <= size:
            run, run_tokens = (run[0], e), run_tokens + n
        else:
            if run is not None:
                out.append(run)
            run, run_tokens = (s, e), n
    if run is not None:
        out.append(run)
    return [_strip(text, s, e) for s, e in out if text[s:e].strip()]


def _leaf(
    text: str,
    s: int,
    e: int,
    d: Definition | None,
    size: int,
    length: Callable[[str], int],
    leaf: Callable[..., list[tuple[int, int]]],
) -> list[tuple[int, int]]:
    """Cut ``text[s:e]``, too large for one chunk and with no definition inside, by ``leaf``.
    When it is a definition whose leading comments (what lies before ``d.at``) take less than
    half a chunk, they stay with its first lines: the first piece is cut smaller to make room."""
    if d is None or not s < d.at < e:
        return list(leaf(s, e))
    head = length(text[s : d.at])
    if head >= size // 2:
        return list(leaf(s, e))
    body = list(leaf(d.at, e))
    if body and head + length(text[body[0][0] : body[0][1]]) > size:
        body[:1] = leaf(body[0][0], body[0][1], size - head)
    if not body:
        return list(leaf(s, e))
    return [(s, body[0][1]), *body[1:]]


def _strip(text: str, s: int, e: int) -> tuple[int, int]:
    piece = text[s:e]
    head = len(piece) - len(piece.lstrip())
    tail = len(piece) - len(piece.rstrip())
    return s + head, e - tail
