"""The documentation: the site builds with ``mkdocs build --strict`` (mkdocs.yml, docs/), the README
stays a short front page whose quickstart runs and whose links reach real pages, and the API
reference has a page entry for every public name.

The layout page's table is generated from tests/test_layout.py when the site is built
(docs/hooks.py), so the strict build also checks that page."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_LINES = 250


def _public_names() -> list[str]:
    tree = ast.parse((ROOT / "titans_agent" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    raise AssertionError("titans_agent/__init__.py defines no __all__")


@pytest.mark.slow
def test_the_site_builds_strict_without_the_network(tmp_path: Path) -> None:
    """``mkdocs build --strict``: any warning (a broken link, a missing snippet, an unresolved API
    name, a docstring griffe cannot read) fails. Proxies point nowhere, so a build that tried to
    download anything (an object inventory, a font) would fail or warn instead of passing."""
    mkdocs = Path(sys.executable).with_name("mkdocs")
    command = [str(mkdocs)] if mkdocs.exists() else [sys.executable, "-m", "mkdocs"]
    env = {
        **os.environ,
        "NO_MKDOCS_2_WARNING": "1",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
        "NO_PROXY": "",
        "no_proxy": "",
    }
    site = tmp_path / "site"
    done = subprocess.run(
        [*command, "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    layout = (site / "design" / "layout" / "index.html").read_text(encoding="utf-8")
    for module in ("titans_agent.agent", "titans_agent.store.repository", "titans_agent.cli.app"):
        assert f"<code>{module}</code>" in layout, f"the generated layout table has no row for {module}"
    assert "<!-- layout-table -->" not in layout
    quickstart = (site / "index.html").read_text(encoding="utf-8")
    assert "handbook.txt" in quickstart, "the README's quickstart is not included in the getting-started page"
    assert (site / "benchmarks" / "locomo.png").is_file()


def test_readme_is_a_short_front_page_that_keeps_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES, "README.md grew past its limit: move the detail to docs/"
    assert "make demo" in text and "make test" in text
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


def test_readme_links_reach_files_of_the_repository() -> None:
    """GitHub shows the README with its relative links; the strict build does not check them."""
    text = README.read_text(encoding="utf-8")
    links = [target for target in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in target]
    assert links, "README.md links to no documentation page"
    broken = [t for t in links if not (ROOT / t.split("#")[0]).exists()]
    assert not broken, f"README.md links to missing files: {broken}"


def test_every_page_is_in_the_navigation() -> None:
    """mkdocs only reports a page missing from ``nav`` at INFO level, which --strict lets pass."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    missing = [p for p in pages if not re.search(rf"(^|[\s:]){re.escape(p)}\s*$", config, re.M)]
    assert not missing, f"pages not in mkdocs.yml's nav: {missing}"


def test_the_api_reference_has_an_entry_for_every_public_name() -> None:
    pages = "\n".join(p.read_text(encoding="utf-8") for p in (DOCS / "api").glob("*.md"))
    documented = set(re.findall(r"^::: titans_agent\.(\w+)\s*$", pages, re.M))
    missing = [n for n in _public_names() if n not in documented and n != "__version__"]
    assert not missing, f"titans_agent.__all__ names with no `::: titans_agent.<name>` in docs/api/: {missing}"


@pytest.mark.integration
@pytest.mark.slow
def test_readme_quickstart_runs_as_written(tmp_path: Path) -> None:
    """The README's quickstart, run as a script in an empty folder with the real embedder: each
    question's top hit is the text that answers it."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("[start:quickstart]") : text.index("[end:quickstart]")]
    code = section[section.index("```python") + len("```python") : section.rindex("```")]
    script = tmp_path / "quickstart.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines == [
        "How long is parental leave? -> [chunk] Parental leave is 16 weeks at full pay. "
        "Travel is booked through the portal.",
        "What should I call the user? -> [turn] Please call me Dana.",
        "Which port? -> [note] The staging server listens on port 8443.",
    ], done.stdout
    assert (tmp_path / "memory.db").is_file()
