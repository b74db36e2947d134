"""The source tree's import rules, checked over the ast of every module of titans_agent/, cli/ and
adapters/ (the files are parsed, never imported).

The layering is the table ``LAYERS`` below, from top to bottom: a module may import modules of its
own row or of lower rows. Imports inside functions and under ``if TYPE_CHECKING:`` count too. Besides
the rows:

(b) only modules under titans_agent/store/ import ``sqlalchemy`` or ``alembic``; store/ never
    imports ``torch``;
(c) ``PURE`` modules do no I/O: no sqlalchemy, no ``titans_agent.store*``, none of ``IO_MODULES``,
    no call of ``open(``;
(d) the faces (cli/, adapters/) take from titans_agent only the names of ``titans_agent.__all__``
    (read from the ast of titans_agent/__init__.py), the subpackage ``titans_agent.models`` and
    their own package; cli/ may also import adapters/ (``titans-agent mcp`` serves the MCP
    adapter), never the other way round.

(e) only the modules of ``RUNTIME_OWNERS`` assign a field of a ``Runtime`` (the statements are
    read, not the imports): pipelines tell the runtime what happened through its methods.
(f) a regular expression (a string literal given to ``re.compile``) is written in one module
    only; the others import it (``titans_agent.text`` holds the shared lexicon).

Every module must sit in exactly one row: a new module is placed here first. And no module of
titans_agent/ or cli/ holds more than ``MAX_CODE_LINES`` lines of code (:func:`code_lines`: lines
with a token that is not a comment, blank or docstring), so a module stays readable in one sitting
and its documentation never counts against it.
"""

from __future__ import annotations

import ast
import fnmatch
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------------------------------ the rules
# The layering, top row first. Patterns are dotted module names (fnmatch: "x.*" is every module
# under package x, at any depth, not x itself). cli/ is installed as titans_agent.cli and adapters/
# as titans_agent.adapters (pyproject's package-dir).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # what users and other frameworks touch
    (
        "faces",
        ("titans_agent", "titans_agent.cli", "titans_agent.cli.*", "titans_agent.adapters", "titans_agent.adapters.*"),
    ),
    # MemoryAgent: the one public object, delegating to the pipelines; UserMemory: it, bound to one namespace
    ("facade", ("titans_agent.agent", "titans_agent.user")),
    # one flow each, from input to committed rows or from a query to hits
    (
        "pipelines",
        (
            "titans_agent.ingest.pipeline",
            "titans_agent.write",
            "titans_agent.recall",
            "titans_agent.erase",
            "titans_agent.erase_words",
            "titans_agent.transfer",
            "titans_agent.transfer_format",
            "titans_agent.transfer_import",
        ),
    ),
    # a namespace's live memory, state and dense index; the context the facade hands the pipelines
    ("state", ("titans_agent.runtime", "titans_agent.live", "titans_agent.indexes", "titans_agent.context")),
    # one job each: SQL of the rows, the memory, ranking, updates, text to chunks, embedders, models
    (
        "services",
        (
            "titans_agent.store.repository",
            "titans_agent.store.dump",
            "titans_agent.store.erasure",
            "titans_agent.store.context",
            "titans_agent.store.documents",
            "titans_agent.store.checkpoints",
            "titans_agent.core.*",
            "titans_agent.retrieval",
            "titans_agent.code_rank",
            "titans_agent.bm25",
            "titans_agent.updates",
            "titans_agent.ingest.files",
            "titans_agent.ingest.sources",
            "titans_agent.ingest.formats",
            "titans_agent.ingest.decoding",
            "titans_agent.ingest.structure",
            "titans_agent.ingest.chunking",
            "titans_agent.ingest.syntax",
            "titans_agent.ingest.chat",
            "titans_agent.ingest.headers",
            "titans_agent.ingest.patterns",
            "titans_agent.embeddings",
            "titans_agent.models",
            "titans_agent.models.*",  # the sequence models, built on core/
            "titans_agent.data",
            "titans_agent.data.*",
        ),
    ),
    # what everything stands on: connections and tables, the lexicon, checks, settings, types, errors
    (
        "foundation",
        (
            "titans_agent.store",
            "titans_agent.store.engine",
            "titans_agent.store.schema",
            "titans_agent.store.jsonfilter",
            "titans_agent.store.metaterms",
            "titans_agent.store.migrations",
            "titans_agent.store.migrations.*",
            "titans_agent.text",
            "titans_agent.facts",
            "titans_agent.filters",
            "titans_agent.rows",
            "titans_agent.validation",
            "titans_agent.config",
            "titans_agent.locking",
            "titans_agent.types",
            "titans_agent.errors",
            "titans_agent.core",  # package docstrings only
            "titans_agent.ingest",
        ),
    ),
]
SOURCE_ROOTS = {"titans_agent": "titans_agent", "cli": "titans_agent.cli", "adapters": "titans_agent.adapters"}
STORE = "titans_agent.store"  # (b) the only package that speaks SQL, and never torch
DB_LIBRARIES = frozenset({"sqlalchemy", "alembic"})
PURE = frozenset(
    {
        "titans_agent.retrieval",
        "titans_agent.code_rank",
        "titans_agent.bm25",
        "titans_agent.updates",
        "titans_agent.text",
        "titans_agent.filters",
    }
)  # (c)
IO_MODULES = frozenset({"os", "pathlib", "io", "sqlite3", "subprocess", "shutil"})
FACE_PACKAGES = ("titans_agent.cli", "titans_agent.adapters")  # (d)
FACES_MAY_IMPORT = ("titans_agent.models",)  # (d) besides titans_agent.__all__ and their own package
FACE_MAY_IMPORT_FACE = {"titans_agent.cli": ("titans_agent.adapters",)}  # (d) the CLI serves adapters (mcp)
MAX_CODE_LINES = 600


# ------------------------------------------------------------------------------------------ the checker
@dataclass(frozen=True)
class Module:
    name: str  # dotted: titans_agent.store.engine, titans_agent.cli.main
    path: str  # as shown in messages: titans_agent/store/engine.py
    source: str
    is_package: bool = False  # an __init__.py (relative imports resolve from the package itself)


@dataclass(frozen=True)
class Import:
    line: int
    module: str  # the imported module, absolute: sqlalchemy.orm, titans_agent.store
    name: str | None = None  # for `from module import name`


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def layer_of(name: str) -> int | None:
    """The row of a dotted module name in LAYERS (0 is the top), or None when no row holds it."""
    rows = [i for i, (_, patterns) in enumerate(LAYERS) if any(fnmatch.fnmatchcase(name, p) for p in patterns)]
    assert len(rows) <= 1, f"{name} is in several rows of LAYERS: {[LAYERS[i][0] for i in rows]}"
    return rows[0] if rows else None


def source_modules(root: Path = ROOT) -> list[Module]:
    """Every .py file under the source roots, with its module name."""
    out = []
    for folder, package in SOURCE_ROOTS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            name = ".".join([package, *parts])
            out.append(Module(name, path.relative_to(root).as_posix(), path.read_text(encoding="utf-8"), is_package))
    return out


def public_names(init_source: str) -> set[str]:
    """The names of ``__all__`` in a package's __init__ source."""
    for node in ast.parse(init_source).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            return {ast.literal_eval(e) for e in node.value.elts}  # type: ignore[attr-defined]
    raise AssertionError("titans_agent/__init__.py defines no __all__")


def _imports(module: Module, tree: ast.AST) -> list[Import]:
    """Every import of a module, wherever it stands (functions, TYPE_CHECKING blocks, try blocks),
    relative ones made absolute; ``importlib.import_module("x")`` with a literal (or the literal
    head of an f-string) counts as an import of x."""
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [Import(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out += [Import(node.lineno, target, a.name) for a in node.names]
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if called not in ("import_module", "__import__"):
                continue
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                out.append(Import(node.lineno, arg.value))
            elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
                # f"pkg.sub.{name}": at least pkg.sub; f"pkg.su{x}": at least pkg
                head = str(arg.values[0].value)
                head = head[:-1] if head.endswith(".") else head.rpartition(".")[0]
                if head:
                    out.append(Import(node.lineno, head))
    return out


def _face_may_import(face: str, imp: Import, target: str, public: set[str]) -> bool:
    """Rule (d): a face (cli/ or adapters/) takes a public name of titans_agent, the models
    subpackage or a module of its own package (the CLI also adapters/)."""
    allowed = (*FACES_MAY_IMPORT, *FACE_MAY_IMPORT_FACE.get(face, ()))
    if imp.module == "titans_agent":  # import titans_agent / from titans_agent import name
        return imp.name is None or imp.name in public or f"titans_agent.{imp.name}" in (face, *allowed)
    return _under(target, face) or any(_under(target, p) for p in allowed)


def check(modules: list[Module], public: set[str]) -> list[str]:
    """Every breach of the rules, as ``path:line: rule ...: what`` lines, by file and line."""
    known = {m.name for m in modules}
    out: list[str] = []
    for m in modules:
        where = m.path
        row = layer_of(m.name)
        if row is None:
            out.append(
                f"{where}:1: placement: module {m.name} is in no row of LAYERS (place it in tests/test_layout.py)"
            )
        try:
            tree = ast.parse(m.source, filename=m.path)
        except SyntaxError as exc:
            out.append(f"{where}:{exc.lineno}: syntax: {exc.msg}")
            continue
        in_store = _under(m.name, STORE)
        face = next((p for p in FACE_PACKAGES if _under(m.name, p)), None)
        for imp in _imports(m, tree):
            top = imp.module.split(".")[0]
            # what the import loads of ours: `from pkg import sub` loads the module pkg.sub
            sub = f"{imp.module}.{imp.name}" if imp.name else None
            target = sub if sub in known else imp.module
            if top in DB_LIBRARIES and not in_store:
                out.append(f"{where}:{imp.line}: rule (b) only titans_agent/store/ uses {top}: imports {imp.module}")
            if top == "torch" and in_store:
                out.append(f"{where}:{imp.line}: rule (b) store/ never imports torch: imports {imp.module}")
            if m.name in PURE:
                if top in DB_LIBRARIES or top in IO_MODULES:
                    out.append(f"{where}:{imp.line}: rule (c) {m.name} does no I/O: imports {imp.module}")
                elif _under(target, STORE) or _under(imp.module, STORE):
                    out.append(f"{where}:{imp.line}: rule (c) {m.name} does no I/O: imports {target}")
            if top != "titans_agent" or target == m.name:
                continue
            if face is not None and not _face_may_import(face, imp, target, public):
                what = f"{imp.name} from titans_agent" if imp.module == "titans_agent" else target
                out.append(
                    f"{where}:{imp.line}: rule (d) faces take from titans_agent only titans_agent.__all__, "
                    f"titans_agent.models and their own package: imports {what}"
                )
            target_row = layer_of(target)
            if target_row is None:
                out.append(f"{where}:{imp.line}: placement: imports {target}, which is in no row of LAYERS")
            elif row is not None and target_row < row:
                out.append(
                    f"{where}:{imp.line}: rule (a) a {LAYERS[row][0]} module imports only its row or lower: "
                    f"imports {target} ({LAYERS[target_row][0]})"
                )
        if m.name in PURE:
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                    out.append(f"{where}:{node.lineno}: rule (c) {m.name} does no I/O: calls open(")
    out = list(dict.fromkeys(out))  # `from x import a, b` breaks a rule once, not once per name
    path_line = [v.split(":", 2) for v in out]
    return [out[i] for i in sorted(range(len(out)), key=lambda i: (path_line[i][0], int(path_line[i][1]), i))]


# ------------------------------------------------------------------------------------------ the tests
def test_imports_follow_the_layering():
    modules = source_modules()
    init = next(m for m in modules if m.name == "titans_agent")
    violations = check(modules, public_names(init.source))
    print("\n".join(violations))
    assert violations == [], f"{len(violations)} breaches of the import rules:\n" + "\n".join(violations)


def code_lines(source: str) -> int:
    """The lines of ``source`` that hold code: a line with at least one token that is not a
    comment, a line break, an indent or part of a docstring (the first string statement of a
    module, class or function)."""
    doc: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    doc.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            lines.update(n for n in range(tok.start[0], tok.end[0] + 1) if n not in doc)
    return len(lines)


def test_code_lines_count_code_only():
    source = (
        '"""Doc.\n\nMore."""\n\n# a comment\nimport os\n\n\ndef f(x):\n    """Doc."""\n    return (\n        x\n    )\n'
    )
    assert code_lines(source) == 5  # import, def, return, x, )


def test_modules_hold_at_most_600_lines_of_code():
    long = [
        f"{m.path}: {n} lines of code"
        for m in source_modules()
        if m.name.startswith("titans_agent") and not _under(m.name, "titans_agent.adapters")
        if (n := code_lines(m.source)) > MAX_CODE_LINES
    ]
    print("\n".join(long))
    assert long == [], f"modules over {MAX_CODE_LINES} lines of code:\n" + "\n".join(long)


def repeated_patterns(modules: list[Module]) -> list[str]:
    """Regular expressions written in more than one module: the string literal of every
    ``re.compile(...)`` call, with the modules that compile it. A pattern has one home (the lexicon,
    :mod:`titans_agent.text`, or the module that owns its rule), imported wherever it is used, so a
    change of it reaches every use."""
    where: dict[str, list[str]] = {}
    for m in modules:
        for node in ast.walk(ast.parse(m.source, filename=m.path)):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr == "compile" and isinstance(f.value, ast.Name):
                if f.value.id == "re" and isinstance(node.args[0].value, str):
                    where.setdefault(node.args[0].value, [])
                    if m.path not in where[node.args[0].value]:
                        where[node.args[0].value].append(m.path)
    return [f"{pattern!r} in {', '.join(paths)}" for pattern, paths in where.items() if len(paths) > 1]


def test_each_regular_expression_is_written_once():
    repeated = repeated_patterns(source_modules())
    assert repeated == [], "patterns compiled in several modules (give each one home):\n" + "\n".join(repeated)


def test_the_checker_finds_a_repeated_pattern():
    one = _bad("titans_agent.text", 'import re\nWORD = re.compile(r"\\w+")\nX = re.compile("a")\n')
    two = _bad("titans_agent.filters", 'import re\n_W = re.compile(r"\\w+", re.I)\nY = re.compile("b")\n')
    assert repeated_patterns([one, two]) == ["'\\\\w+' in titans_agent/text.py, titans_agent/filters.py"]
    assert repeated_patterns([one]) == []


RUNTIME_MODULE = "titans_agent.live"  # (e) where class Runtime is
RUNTIME_OWNERS = frozenset({RUNTIME_MODULE, "titans_agent.runtime"})  # (e) the Runtime and the Runtimes that keep it
RUNTIME_NAMES = frozenset({"rt", "runtime", "runtimes", "rts"})  # (e) what code calls a Runtime or the Runtimes


def runtime_fields(runtime_source: str) -> set[str]:
    """The names of class ``Runtime``'s fields in the source of its module, as written: its annotated
    class attributes and what its methods assign to ``self``."""
    cls = next(n for n in ast.parse(runtime_source).body if isinstance(n, ast.ClassDef) and n.name == "Runtime")
    names = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    for node in ast.walk(cls):
        for target in _assigned(node):
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                names.add(target.attr)
    return names


def _assigned(node: ast.AST) -> list[ast.expr]:
    """The targets a statement assigns, tuples and starred targets unpacked."""
    if isinstance(node, ast.Assign):
        todo = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        todo = [node.target]
    else:
        return []
    out: list[ast.expr] = []
    while todo:
        t = todo.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            todo.extend(t.elts)
        elif isinstance(t, ast.Starred):
            todo.append(t.value)
        else:
            out.append(t)
    return out


def _receiver(target: ast.Attribute) -> str | None:
    """The name an assigned attribute hangs on: ``rt`` of ``rt.x``, ``_runtimes`` of ``self._runtimes.x``."""
    v = target.value
    return v.id if isinstance(v, ast.Name) else v.attr if isinstance(v, ast.Attribute) else None


def runtime_writes(modules: list[Module], fields: set[str]) -> list[str]:
    """Rule (e): outside ``RUNTIME_OWNERS``, no statement assigns a field of a Runtime: neither a
    private one (``x._revision = ...``, an object's own ``self._x`` aside) nor, on something named
    like a runtime or the runtimes (``RUNTIME_NAMES``), one of the fields' names with or without
    their leading underscore (``rt.revision = -1``, ``self._runtimes.chunking = ...``). The runtime
    keeps itself at the database's revision; pipelines ask it by its methods."""
    bare = {f.lstrip("_") for f in fields}
    out = []
    for m in modules:
        if m.name in RUNTIME_OWNERS:
            continue
        for node in ast.walk(ast.parse(m.source, filename=m.path)):
            for t in _assigned(node):
                if not isinstance(t, ast.Attribute):
                    continue
                on = _receiver(t)
                private = t.attr.startswith("_") and t.attr in fields and on not in ("self", "cls")
                named = (on or "").lstrip("_") in RUNTIME_NAMES and t.attr.lstrip("_") in bare
                if private or named:
                    out.append(f"{m.path}:{t.lineno}: rule (e) only the runtime assigns its fields: {on}.{t.attr} =")
    return out


def test_only_the_runtime_assigns_its_fields():
    modules = source_modules()
    fields = runtime_fields(next(m for m in modules if m.name == RUNTIME_MODULE).source)
    assert {"ids", "chunking"} <= {f.lstrip("_") for f in fields}  # the checker reads the class
    violations = runtime_writes(modules, fields)
    print("\n".join(violations))
    assert violations == [], f"{len(violations)} assignments to a runtime's fields:\n" + "\n".join(violations)


# ------------------------------------------------------------------------------------------ the checker's own tests
def _bad(name: str, source: str, is_package: bool = False) -> Module:
    return Module(name, name.replace(".", "/") + ("/__init__.py" if is_package else ".py"), source, is_package)


_GOOD_TREE = [
    _bad("titans_agent", "from titans_agent.errors import StoreError\n__all__ = ['StoreError', 'MemoryAgent']\n", True),
    _bad("titans_agent.errors", "class StoreError(Exception): ...\n"),
    _bad("titans_agent.agent", "from titans_agent.store import engine\nfrom titans_agent import runtime\n"),
    _bad("titans_agent.runtime", "import torch\nfrom titans_agent.core.memory import NeuralMemory\n"),
    _bad("titans_agent.store", "from titans_agent.store.engine import Store\n", True),
    _bad("titans_agent.store.engine", "import sqlalchemy\nfrom sqlalchemy.orm import Session\n"),
    _bad("titans_agent.core.memory", "import torch\nfrom ..errors import StoreError\n"),
    _bad("titans_agent.cli.main", "from titans_agent import MemoryAgent\nfrom titans_agent.models import x\n"),
    _bad("titans_agent.cli.serve", "from titans_agent.adapters.mcp import create_server\n"),
]


def test_the_checker_passes_a_tree_that_keeps_the_rules():
    assert check(_GOOD_TREE, {"StoreError", "MemoryAgent"}) == []


# (what is wrong, module, its source, a part of the message the checker must give)
_BAD_MODULES = [
    ("retrieval does SQL", "titans_agent.retrieval", "import numpy\nfrom sqlalchemy import select\n", "py:2: rule (c)"),
    ("sqlalchemy outside store", "titans_agent.retrieval", "from sqlalchemy import select\n", "py:1: rule (b)"),
    (
        "updates reads the store",
        "titans_agent.updates",
        "def f():\n    from titans_agent.store import engine\n",
        ":2: rule (c)",
    ),
    (
        "text opens a file",
        "titans_agent.text",
        "def f(p):\n    return open(p).read()\n",
        ":2: rule (c) titans_agent.text does no I/O: calls open(",
    ),
    ("text imports os", "titans_agent.text", "import os.path\n", "py:1: rule (c)"),
    (
        "service imports the facade",
        "titans_agent.core.scan",
        "from titans_agent.agent import MemoryAgent\n",
        ":1: rule (a)",
    ),
    ("relative import upwards", "titans_agent.core.scan", "from .. import agent\n", "py:1: rule (a)"),
    (
        "torch in store, type-checking only",
        "titans_agent.store.engine",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch\n",
        "py:3: rule (b) store/ never imports torch",
    ),
    ("foundation imports state", "titans_agent.store.engine", "from titans_agent import runtime\n", "py:1: rule (a)"),
    ("foundation imports the face", "titans_agent.errors", "from titans_agent import StoreError\n", "py:1: rule (a)"),
    (
        "cli imports the facade in a function",
        "titans_agent.cli.main",
        "def main():\n    from titans_agent.agent import MemoryAgent\n",
        "py:2: rule (d)",
    ),
    ("cli takes a private name", "titans_agent.cli.main", "from titans_agent import NotPublic\n", "py:1: rule (d)"),
    ("adapter does SQL", "titans_agent.adapters.langchain.store", "from sqlalchemy import text\n", "py:1: rule (b)"),
    (
        "adapter imports a pipeline by name",
        "titans_agent.adapters.x",
        "import importlib\nimportlib.import_module('titans_agent.recall')\n",
        "py:2: rule (d)",
    ),
    ("adapter imports the cli", "titans_agent.adapters.x", "from titans_agent.cli import app\n", "py:1: rule (d)"),
    ("module in no row", "titans_agent.newcomer", "x = 1\n", "py:1: placement"),
]


@pytest.mark.parametrize(
    "module, expected", [pytest.param(_bad(name, src), exp, id=what) for what, name, src, exp in _BAD_MODULES]
)
def test_the_checker_reports_a_bad_module(module, expected):
    tree = [m for m in _GOOD_TREE if m.name != module.name] + [module]
    found = check(tree, {"StoreError", "MemoryAgent"})
    assert any(expected in v for v in found), found
    assert all(v.startswith(module.path + ":") for v in found), found  # only the bad module is named


_RUNTIME = "class Runtime:\n    half: int\n\n    def __init__(self):\n        self._revision = 0\n"


@pytest.mark.parametrize(
    "source, flagged",
    [
        ("def f(rt):\n    rt.revision = -1\n", True),
        ("def f(rt):\n    rt._revision = -1\n", True),
        ("def f(x):\n    x._revision += 1\n", True),  # a private field, on whatever it is called
        ("def f(agent):\n    agent._runtimes.half, y = None, 1\n", True),
        ("def f(self):\n    self._revision = 1\n", False),  # an object's own field
        ("def f(report):\n    report.revision = 1\n", False),  # another object's public field of that name
        ("def f(rt):\n    rt.other = 1\n", False),  # not a field
        ("def f(rt):\n    return rt.revision\n", False),  # reading is what properties are for
    ],
)
def test_the_checker_reports_an_assignment_to_a_runtime_field(source, flagged):
    fields = runtime_fields(_RUNTIME)
    assert fields == {"half", "_revision"}
    found = runtime_writes([_bad("titans_agent.write", source)], fields)
    assert bool(found) == flagged and all(v.startswith("titans_agent/write.py:2: rule (e)") for v in found), found
    assert runtime_writes([_bad(RUNTIME_MODULE, source)], fields) == []  # the owner may


def test_the_table_places_every_module_named_in_the_rules():
    for name in (*PURE, STORE, *FACE_PACKAGES, *FACES_MAY_IMPORT):
        assert layer_of(name) is not None, name
