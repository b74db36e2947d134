"""mypy over the package, the CLI and the adapters, with the settings of pyproject.toml.

The type annotations are part of the public surface (the package ships ``py.typed``): a user's own
type checker reads them, so they must agree with the code. Marked slow: a cold mypy run takes
about half a minute.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mypy_passes(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy"), "titans_agent", "cli", "adapters"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
