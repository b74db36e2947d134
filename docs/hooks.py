"""MkDocs hooks of this site (declared in mkdocs.yml; nothing here is part of the package).

- The layout page (docs/design/layout.md) gets its table from the rules the layout test enforces:
  ``LAYERS`` of tests/test_layout.py, its module list (``source_modules``) and row lookup
  (``layer_of``), each module with the first sentence of its docstring. The marker
  ``<!-- layout-table -->`` is replaced by that table and ``<!-- layout-rules -->`` by the test's
  own docstring, so the page cannot drift from the test.
- The API pages read the source statically (griffe), which finds a package by its folder; but
  ``titans_agent.adapters`` and ``titans_agent.cli`` live in adapters/ and cli/ (pyproject's
  ``package-dir``). ``on_config`` lays the installed package out in a temporary folder of symbolic
  links (titans_agent/*, plus adapters/ and cli/ inside it) and points mkdocstrings there.
- The charts the benchmark scripts write (benchmarks/results/*.png) are published next to the
  benchmark pages (``benchmarks/<name>.png``), so a page or an included results file can show
  ``![...](locomo.png)``.
"""

from __future__ import annotations

import ast
import atexit
import importlib.util
import re
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
LAYOUT_TEST = ROOT / "tests" / "test_layout.py"
RESULTS = ROOT / "benchmarks" / "results"
PACKAGE_DIRS = {"adapters": ROOT / "adapters", "cli": ROOT / "cli"}  # pyproject's package-dir
TABLE_MARKER = "<!-- layout-table -->"
RULES_MARKER = "<!-- layout-rules -->"


def _layout_rules() -> ModuleType:
    """tests/test_layout.py, loaded from its file (it defines the table; its tests are not run)."""
    spec = importlib.util.spec_from_file_location("_titans_layout_rules", LAYOUT_TEST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


def _row_comments(source: str, rows: list[str]) -> dict[str, str]:
    """The ``# ...`` comment lines written just above each row of ``LAYERS`` in the test's source."""
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("LAYERS"))
    out: dict[str, str] = {}
    for row in rows:
        at = next(i for i in range(start, len(lines)) if re.search(rf'"{re.escape(row)}"', lines[i]))
        i, comment = at - 1, []
        while i > start and lines[i].strip() in ("(", ""):
            i -= 1
        while i > start and lines[i].strip().startswith("#"):
            comment.insert(0, lines[i].strip().lstrip("#").strip())
            i -= 1
        out[row] = " ".join(comment)
    return out


def _summary(source: str) -> str:
    """The first sentence of a module's docstring, on one line ('' when it has none)."""
    try:
        doc = ast.get_docstring(ast.parse(source)) or ""
    except SyntaxError:
        return ""
    first = " ".join(doc.strip().split("\n\n")[0].split())
    first = re.sub(r":\w+:`~?([^`<]+?)(?:\s*<[^>]*>)?`", lambda m: f"`{m.group(1).split('.')[-1]}`", first)
    first = first.replace("``", "`")
    match = re.match(r"(.+?(?<!\bsec)(?<!\be\.g)(?<!\bi\.e)(?<!\beq)(?<!\bvs)\.)(\s|$)", first)
    text = match.group(1) if match else first
    if len(text) > 180:
        text = text[:177].rstrip() + "..."
    return text.replace("|", "\\|")


def layout_table() -> str:
    """The Markdown table of the layering: one row per module, top row of ``LAYERS`` first."""
    rules = _layout_rules()
    names = [name for name, _ in rules.LAYERS]
    comments = _row_comments(LAYOUT_TEST.read_text(encoding="utf-8"), names)
    by_row: dict[int | None, list[Any]] = {}
    for module in rules.source_modules(ROOT):
        by_row.setdefault(rules.layer_of(module.name), []).append(module)
    out = ["| row | module | file | what it is |", "|---|---|---|---|"]
    for index, name in enumerate(names):
        out.append(f"| **{name}** | | | *{comments[name]}* |")
        for module in sorted(by_row.get(index, []), key=lambda m: m.name):
            out.append(f"| | `{module.name}` | `{module.path}` | {_summary(module.source)} |")
    for module in sorted(by_row.get(None, []), key=lambda m: m.name):
        out.append(f"| **in no row** (the layout test fails) | `{module.name}` | `{module.path}` | |")
    return "\n".join(out)


def layout_rules_text() -> str:
    """The layout test's docstring: the rules in its own words."""
    doc = ast.get_docstring(ast.parse(LAYOUT_TEST.read_text(encoding="utf-8"))) or ""
    return "\n".join("    " + line if line else "" for line in doc.splitlines())


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    if TABLE_MARKER in markdown:
        markdown = markdown.replace(TABLE_MARKER, layout_table())
    if RULES_MARKER in markdown:
        markdown = markdown.replace(RULES_MARKER, layout_rules_text())
    return markdown


def on_files(files: Files, config: Any) -> Files:
    for chart in sorted(RESULTS.glob("*.png")):
        files.append(File.generated(config, f"benchmarks/{chart.name}", abs_src_path=str(chart)))
    return files


def _installed_layout() -> Path:
    """A temporary folder holding ``titans_agent/`` as it is installed: links to every entry of
    titans_agent/, and adapters/ and cli/ linked inside it. Removed when the build's process ends."""
    folder = Path(tempfile.mkdtemp(prefix="titans-agent-docs-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    package = folder / "titans_agent"
    package.mkdir()
    for entry in (ROOT / "titans_agent").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    for name, source in PACKAGE_DIRS.items():
        (package / name).symlink_to(source, target_is_directory=True)
    return folder


@event_priority(100)  # before mkdocstrings reads its handler's options
def on_config(config: Any) -> Any:
    handlers = config.plugins["mkdocstrings"].config.handlers
    python = handlers.setdefault("python", {})
    python["paths"] = [str(_installed_layout())]
    return config
