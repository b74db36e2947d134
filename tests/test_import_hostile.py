"""Import refuses a hostile or damaged export file with a clear InvalidInputError naming the line
and the field, and writes nothing: the database before and after a refused import exports to the
same bytes, and export and metadata filters still work.

Each file is a real export, altered: non-finite numbers (``NaN``, ``Infinity``, ``1e999``, ``"nan"``
strings), integers beyond what a column holds, lone surrogates and NULs in strings, duplicate rows,
out-of-range times, nesting too deep, bytes that are not UTF-8, and memory blobs holding non-finite
or ill-shaped tensors under a valid checksum. The databases are real (SQLite files, the PostgreSQL
server); only the embedder is fake.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner
from conftest import SmallFakeEmbedder
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from titans_agent import MemoryAgent
from titans_agent.core.memory import tensors_digest
from titans_agent.errors import InvalidInputError, NamespaceNotFoundError
from titans_agent.text import text_hash
from titans_agent.transfer import export_jsonl, import_jsonl

pytestmark = pytest.mark.backends()

FILTERS = ({"team": {"$exists": True}}, {"team": {"$ne": "nobody"}}, {"team": {"$nin": ["nobody"]}})
BIG = "__BIG_FLOAT__"  # replaced by 1e999 in the file's text (json.dumps cannot write it)


# ---------------------------------------------------------------------- the files
@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    """A real export of namespaces "alpha" and "beta": notes with metadata, a document's chunks,
    two sessions of turns and a knowledge update."""
    folder = tmp_path_factory.mktemp("good")
    with MemoryAgent.open(folder / "src.db", embedder=SmallFakeEmbedder()) as a:
        a.ingest("# Ports\n\nThe staging server listens on port 8443.\n", source="ports.md", namespace="alpha")
        a.remember("Dana prefers green tea.", namespace="alpha", metadata={"team": "ops", "n": 1})
        a.add_turn("s1", "user", "Please call me Dana.", "2024-05-01T10:00:00Z", namespace="alpha")
        a.add_turn("s1", "assistant", "Sure, Dana.", "2024-05-01T10:00:05Z", namespace="alpha")
        a.add_turn(
            "s3", "user", "My favourite colour is blue and I live in Berlin.", "2024-05-01T10:00:00Z", namespace="alpha"
        )
        a.add_turn(
            "s3",
            "user",
            "My favourite colour is now green and I live in Berlin.",
            "2024-06-01T10:00:00Z",
            namespace="alpha",
        )
        a.remember("Only in the beta namespace.", namespace="beta", metadata={"team": "dev"})
        report = export_jsonl(a, folder / "good.jsonl")
    assert report.supersessions == 1 and report.documents == 1 and report.turns == 4
    return folder / "good.jsonl"


def _body(good: Path) -> list[dict[str, Any]]:
    """The good file's lines before its end line."""
    lines = [json.loads(x) for x in good.read_text(encoding="utf-8").splitlines()]
    assert lines[-1]["type"] == "end"
    return lines[:-1]


def _text(lines: list[dict[str, Any]]) -> str:
    """Lines and a matching end line, as json.dumps writes them (NaN and Infinity unquoted)."""
    body = "".join(json.dumps(x) + "\n" for x in lines)
    return (body + json.dumps({"type": "end", "lines": len(lines)}) + "\n").replace(f'"{BIG}"', "1e999")


def _first(lines: list[dict[str, Any]], of: str, /, **where: Any) -> dict[str, Any]:
    return next(x for x in lines if x["type"] == of and all(x.get(k) == v for k, v in where.items()))


def _set(of: str, field: str, value: Any, /, **where: Any) -> Callable[[list[dict[str, Any]]], str]:
    """A file whose first line of type ``of`` (matching ``where``) has ``field`` set to ``value``."""

    def make(lines: list[dict[str, Any]]) -> str:
        _first(lines, of, **where)[field] = value
        return _text(lines)

    return make


def _metadata(value: dict[str, Any]) -> Callable[[list[dict[str, Any]]], str]:
    return _set("occurrence", "metadata", value, kind="note")


def _record_text(text: str) -> Callable[[list[dict[str, Any]]], str]:
    """A record whose text is ``text``, its hash recomputed (so only the text is wrong)."""

    def make(lines: list[dict[str, Any]]) -> str:
        record = _first(lines, "record")
        record["text"], record["text_hash"] = text, text_hash(text)
        return _text(lines)

    return make


def _duplicate(kind: str, **changes: Any) -> Callable[[list[dict[str, Any]]], str]:
    """A file with the first ``kind`` line written twice (the copy with ``changes``)."""

    def make(lines: list[dict[str, Any]]) -> str:
        i = next(i for i, x in enumerate(lines) if x["type"] == kind)
        lines.insert(i + 1, {**lines[i], **changes})
        return _text(lines)

    return make


def _blob(field: str, alter: Callable[[dict[str, torch.Tensor]], None]) -> Callable[[list[dict[str, Any]]], str]:
    """Namespace "alpha"'s ``field`` blob (params or state) with its tensors altered and a valid
    checksum recomputed over them: only what they hold is wrong."""
    fmt = {"params": "titans-agent-memory-params", "state": "titans-agent-memory-state"}[field]

    def make(lines: list[dict[str, Any]]) -> str:
        ns = _first(lines, "namespace", name="alpha")
        tensors = dict(st_load(base64.b64decode(ns[field])))
        alter(tensors)
        meta = {"format": fmt, "version": "1", "sha256": tensors_digest(tensors)}
        ns[field] = base64.b64encode(st_save(tensors, metadata=meta)).decode("ascii")
        return _text(lines)

    return make


def _poison(name: str, value: float) -> Callable[[dict[str, torch.Tensor]], None]:
    def alter(tensors: dict[str, torch.Tensor]) -> None:
        t = tensors[name].clone()
        t.view(-1)[0] = value
        tensors[name] = t

    return alter


def _widen(tensors: dict[str, torch.Tensor]) -> None:
    for name in list(tensors):
        if name != "step":
            tensors[name] = tensors[name].double()


def _fill_pending(tensors: dict[str, torch.Tensor]) -> None:  # a whole chunk (16 rows) left pending
    tensors["pending"] = torch.zeros(16, tensors["pending"].shape[1])


def _supersedes_itself(lines: list[dict[str, Any]]) -> str:  # a record demoted by itself, for ever
    link = _first(lines, "supersession")
    link["new"] = link["old"]
    return _text(lines)


def _seed(lines: list[dict[str, Any]]) -> str:
    _first(lines, "namespace")["memory_config"]["seed"] = 2**64
    return _text(lines)


def _deep_line(lines: list[dict[str, Any]]) -> str:
    body = "".join(json.dumps(x) + "\n" for x in lines)
    deep = '{"type":"record","x":' + "[" * 100_000 + "]" * 100_000 + "}\n"
    return body + deep + json.dumps({"type": "end", "lines": len(lines) + 1}) + "\n"


def _cut_in_a_character(lines: list[dict[str, Any]]) -> bytes:
    """The file cut inside a UTF-8 character (a copy interrupted): its last bytes are no text."""
    data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode("utf-8")
    return data + '{"type":"turn","content":"茶'.encode()[:-1]


def _not_utf8(lines: list[dict[str, Any]]) -> bytes:
    return _text(lines).encode("utf-8").replace(b'"Sure, Dana."', b'"Sure, \xff\xfe Dana."')


def _deeply_nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"a": value}
    return value


def _position(lines: list[dict[str, Any]], **where: Any) -> int:
    """The position (a turn line's ``occurrence``) of namespace "alpha"'s first occurrence matching ``where``."""
    first_ns = next(i for i, x in enumerate(lines) if x["type"] == "namespace" and x["name"] == "alpha")
    occurrences = [x for x in lines[first_ns + 1 :] if x["type"] == "occurrence"]
    return next(i for i, x in enumerate(occurrences) if all(x.get(k) == v for k, v in where.items()))


def _turn_occurrence(**where: Any) -> Callable[[list[dict[str, Any]]], str]:
    """Session s1's first turn naming the first occurrence matching ``where`` (another session's
    turn, a note, a chunk)."""

    def make(lines: list[dict[str, Any]]) -> str:
        _first(lines, "turn", session_id="s1")["occurrence"] = _position(lines, **where)
        return _text(lines)

    return make


def _turns_share_an_occurrence(lines: list[dict[str, Any]]) -> str:
    turns = [x for x in lines if x["type"] == "turn" and x["session_id"] == "s1"]
    turns[1]["occurrence"] = turns[0]["occurrence"]
    return _text(lines)


def _memory_config(**changes: Any) -> Callable[[list[dict[str, Any]]], str]:
    def make(lines: list[dict[str, Any]]) -> str:
        _first(lines, "namespace")["memory_config"].update(changes)
        return _text(lines)

    return make


def _chunking(**changes: Any) -> Callable[[list[dict[str, Any]]], str]:
    def make(lines: list[dict[str, Any]]) -> str:
        _first(lines, "namespace", name="alpha")["chunking"].update(changes)
        return _text(lines)

    return make


@dataclass(frozen=True)
class Case:
    id: str
    make: Callable[[list[dict[str, Any]]], str | bytes]
    match: str  # what the error must say: the line, its type and the field


CASES = [
    # non-finite numbers: a NaN in metadata broke export of the whole database and $exists/$ne/$nin
    Case("metadata-nan", _metadata({"team": "x", "score": float("nan")}), r":\d+: occurrence line: metadata\.score"),
    Case("metadata-infinity", _metadata({"score": float("-inf")}), r":\d+: occurrence line: metadata\.score"),
    Case("metadata-1e999", _metadata({"score": BIG}), r":\d+: occurrence line: metadata\.score"),
    Case("surprise-nan", _set("record", "surprise", float("nan")), r":\d+: record line: surprise"),
    Case("surprise-nan-string", _set("record", "surprise", "NaN"), r":\d+: record line: surprise"),
    Case("similarity-infinity", _set("supersession", "similarity", float("inf")), r":\d+: supersession line: similar"),
    Case("chunking-infinity", _set("namespace", "chunking", {"chunk_tokens": float("inf")}), r"namespace line: chunk"),
    # integers beyond what a column holds (SQLite: 64 bits; PostgreSQL's INTEGER: 32 bits)
    Case("metadata-int-65-bits", _metadata({"n": 2**64}), r":\d+: occurrence line: metadata\.n"),
    Case("hits-64-bits", _set("record", "hits", 2**63), r":\d+: record line: hits"),
    Case("n_chunks-70-bits", _set("document", "n_chunks", 2**70), r":\d+: document line: n_chunks"),
    Case(
        "chunk_index-40-bits", _set("occurrence", "chunk_index", 2**40, kind="chunk"), r"occurrence line: chunk_index"
    ),
    Case("seq-as-a-huge-string", _set("turn", "seq", "9" * 30), r":\d+: turn line: seq"),
    Case("write_revision-32-bits", _set("occurrence", "write_revision", 2**31), r"occurrence line: write_revision"),
    # positions and counts the code adds 1 to (the next turn, the neighbour turn or chunk): bounded
    Case("seq-at-int32", _set("turn", "seq", 2**31 - 1), r":\d+: turn line: seq"),
    Case("n_turns-at-int32", _set("session", "n_turns", 2**31 - 1), r":\d+: session line: n_turns"),
    Case("n_turns-over-the-bound", _set("session", "n_turns", 10**9 + 1), r":\d+: session line: n_turns"),
    Case("chunk_index-at-int32", _set("occurrence", "chunk_index", 2**31 - 1, kind="chunk"), r"line: chunk_index"),
    Case("chunk_index-negative", _set("occurrence", "chunk_index", -1, kind="chunk"), r"line: chunk_index"),
    # strings that a database cannot hold, or that a write never stores
    Case("metadata-lone-surrogate", _metadata({"team": "\ud800"}), r":\d+: occurrence line: metadata\.team"),
    Case("metadata-key-surrogate", _metadata({"\udc00": 1}), r":\d+: occurrence line: metadata"),
    Case("metadata-nul", _metadata({"team": "a\x00b"}), r":\d+: occurrence line: metadata\.team"),
    Case("metadata-too-deep", _metadata(_deeply_nested(80)), r":\d+: occurrence line: metadata"),
    Case(
        "location-surrogate",
        _set("occurrence", "location", {"headings": ["\ud800"]}, kind="chunk"),
        r":\d+: occurrence line: location",
    ),
    Case("text-lone-surrogate", _record_text("Dana \ud800 prefers tea."), r":\d+: record line: text"),
    Case("text-nul", _record_text("Dana\x00 prefers tea."), r":\d+: record line: text"),
    Case("text-blank", _record_text("\u200b \t"), r":\d+: record line: text"),
    Case("context-surrogate", _set("record", "context", "\udfff"), r":\d+: record line: context"),
    Case("content-nul", _set("turn", "content", "Sure,\x00 Dana."), r":\d+: turn line: content"),
    Case("source-surrogate", _set("document", "source", "ports\ud800.md"), r":\d+: document line: source"),
    Case("session-nul", _set("session", "session_id", "s\x001"), r":\d+: session line: session_id"),
    Case("content-over-the-limit", _set("turn", "content", "word " * 25_000), r":\d+: turn line: content: .*limit"),
    Case("role-too-long", _set("turn", "role", "r" * 65), r":\d+: turn line: role"),
    Case("memory-config-seed", _seed, r":\d+: namespace line: memory_config"),
    # duplicates the schema refuses (a raw IntegrityError) or a write never makes
    Case("duplicate-document", _duplicate("document"), r":\d+: document line: source"),
    Case("duplicate-session", _duplicate("session"), r":\d+: session line: session_id"),
    Case("duplicate-turn", _duplicate("turn", content="Again."), r":\d+: turn line: seq"),
    Case("duplicate-namespace", _duplicate("namespace"), r":\d+: namespace line: name"),
    Case("supersedes-itself", _supersedes_itself, r":\d+: supersession line: new"),
    # a transcript line that forgetting its session would leave behind
    Case("turn-without-occurrence", _set("turn", "occurrence", None, session_id="s1"), r"turn line: occurrence"),
    Case("turn-of-another-session", _turn_occurrence(kind="turn", session_id="s3"), r":\d+: turn line: occurrence"),
    Case("turn-naming-a-note", _turn_occurrence(kind="note"), r":\d+: turn line: occurrence"),
    Case("turn-naming-a-chunk", _turn_occurrence(kind="chunk"), r":\d+: turn line: occurrence"),
    Case("turns-sharing-an-occurrence", _turns_share_an_occurrence, r":\d+: turn line: occurrence"),
    # a session's count its turns do not fit (the next add_turn would repeat a seq)
    Case("n_turns-below-its-turns", _set("session", "n_turns", 0, session_id="s1"), r":\d+: turn line: seq"),
    Case("n_turns-below-the-last-seq", _set("session", "n_turns", 1, session_id="s1"), r":\d+: turn line: seq"),
    Case("seq-0", _set("turn", "seq", 0, session_id="s1"), r":\d+: turn line: seq"),
    # configurations ingest and the memory read: their models, exactly
    Case("chunking-unknown-key", _set("namespace", "chunking", {"foo": 1}, name="alpha"), r"namespace line: chunking"),
    Case("chunking-extra-key", _chunking(foo=1), r":\d+: namespace line: chunking\.foo"),
    Case("chunking-string-tokens", _chunking(chunk_tokens="200"), r"namespace line: chunking\.chunk_tokens"),
    Case("chunking-overlap-too-big", _chunking(chunk_overlap_tokens=10**6), r"namespace line: chunking"),
    Case("chunking-other-embedder", _chunking(embedder="other-model"), r"namespace line: chunking\.embedder"),
    Case("memory-config-extra-key", _memory_config(foo=1), r":\d+: namespace line: memory_config"),
    Case("memory-config-string-depth", _memory_config(depth="2"), r":\d+: namespace line: memory_config"),
    Case("chunks_done-over-n_chunks", _set("document", "chunks_done", 99), r":\d+: document line: chunks_done"),
    Case("chunk-of-another-source", _set("occurrence", "source", "other.md", kind="chunk"), r"occurrence line: source"),
    Case("note-of-a-document", _set("occurrence", "document", "ports.md", kind="note"), r"occurrence line: document"),
    # times that do not exist in UTC
    Case(
        "created_at-before-year-1",
        _set("record", "created_at", "0001-01-01T00:00:00+05:00"),
        r":\d+: record line: created_at",
    ),
    # the file itself
    Case("header-version-0", _set("header", "version", 0), r":1: header line: version"),  # a guard, as before
    Case("nesting-beyond-the-parser", _deep_line, r":\d+: .*nest"),
    Case("cut-inside-a-character", _cut_in_a_character, r":\d+: .*UTF-8"),
    Case("not-utf8", _not_utf8, r":\d+: .*UTF-8"),
    # memory blobs under a valid checksum: what they hold must be a finite memory of the config
    Case("params-nan", _blob("params", _poison("W_K", float("nan"))), r":\d+: namespace line: params"),
    Case("params-infinity", _blob("params", _poison("W_V", float("inf"))), r":\d+: namespace line: params"),
    Case("state-nan", _blob("state", _poison("weight.0", float("nan"))), r":\d+: namespace line: state"),
    Case("momentum-infinity", _blob("state", _poison("momentum.1", float("-inf"))), r":\d+: namespace line: state"),
    Case("state-float64", _blob("state", _widen), r":\d+: namespace line: state"),
    Case("state-whole-chunk-pending", _blob("state", _fill_pending), r":\d+: namespace line: state"),
]


# ---------------------------------------------------------------------- the database
KEEP = {"The keep note about ports.", "Another keep note about tea."}


def _target(url: str) -> MemoryAgent:
    """A database that already holds namespace "keep", with metadata to filter on."""
    a = MemoryAgent.open(url, embedder=SmallFakeEmbedder())
    a.remember("The keep note about ports.", namespace="keep", metadata={"team": "ops"})
    a.remember("Another keep note about tea.", namespace="keep", metadata={"team": "dev", "n": 2})
    return a


def _snapshot(a: MemoryAgent, path: Path) -> bytes:
    export_jsonl(a, path)
    return path.read_bytes()


def _filters_work(a: MemoryAgent, namespace: str, tagged: set[str]) -> None:
    """``$exists`` finds exactly the ``tagged`` texts (those with a "team"); ``$ne`` and ``$nin``,
    which a missing key passes too, find them among others."""
    for f in FILTERS:
        texts = {h.text for h in a.recall("note tea Dana ports", namespace=namespace, filter=f, k=20)}
        assert texts == tagged if "$exists" in f["team"] else tagged <= texts, (f, texts)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_hostile_file_is_refused_and_writes_nothing(case, good, make_db_url, tmp_path):
    made = case.make(_body(good))
    bad = tmp_path / "bad.jsonl"
    if isinstance(made, bytes):
        bad.write_bytes(made)
    else:
        bad.write_text(made, encoding="utf-8", errors="surrogatepass")
    a = _target(make_db_url("target"))
    try:
        before = _snapshot(a, tmp_path / "before.jsonl")
        with pytest.raises(InvalidInputError, match=case.match):
            import_jsonl(a, bad)
        assert a.namespaces() == ["keep"]
        assert _snapshot(a, tmp_path / "after.jsonl") == before
        _filters_work(a, "keep", KEEP)
    finally:
        a.close()


def test_after_a_refused_import_the_good_file_imports_and_filters_work(good, make_db_url, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_metadata({"team": "x", "score": float("nan")})(_body(good)), encoding="utf-8")
    with _target(make_db_url("target")) as a:
        with pytest.raises(InvalidInputError, match="NaN"):
            import_jsonl(a, bad)
        report = import_jsonl(a, good)
        assert report.namespaces == ["alpha", "beta"]
        _filters_work(a, "alpha", {"Dana prefers green tea."})
        _filters_work(a, "beta", {"Only in the beta namespace."})
        assert export_jsonl(a, tmp_path / "all.jsonl").namespaces == ["alpha", "beta", "keep"]
        # the memory of an imported namespace still unlearns (its parameters and state are finite)
        assert a.forget(source="session:s1", namespace="alpha", unlearn=True) == 2


@pytest.mark.backends("sqlite")
def test_the_cli_reports_a_hostile_file_in_one_line(good, tmp_path, monkeypatch):
    from titans_agent.cli import app as cli_app

    monkeypatch.setattr(
        cli_app, "open_agent", lambda db, *_, read_only=False, **_k: MemoryAgent.open(db, embedder=SmallFakeEmbedder())
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_set("record", "hits", 2**63)(_body(good)), encoding="utf-8")
    result = CliRunner().invoke(cli_app.cli, ["--db", str(tmp_path / "new.db"), "import", str(bad)])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error:") and "record line: hits" in result.output, result.output
    assert not (tmp_path / "new.db").exists()


# ---------------------------------------------------------------------- export of a missing namespace
def test_export_of_a_missing_namespace_raises_namespace_not_found(make_db_url, tmp_path):
    """A misspelled namespace is the error every read raises; the default namespace, which reads
    treat as always there, exports as empty (a file without lines of it) before its first write."""
    with _target(make_db_url("target")) as a:
        with pytest.raises(NamespaceNotFoundError, match="rael"):
            export_jsonl(a, tmp_path / "x.jsonl", namespaces=["rael"])
        assert not (tmp_path / "x.jsonl").exists()
        report = export_jsonl(a, tmp_path / "default.jsonl", namespaces=["default"])
        assert report.namespaces == [] and report.records == 0
        types = [json.loads(x)["type"] for x in (tmp_path / "default.jsonl").read_text().splitlines()]
        assert types == ["header", "end"]
        with MemoryAgent.open(make_db_url("other"), embedder=SmallFakeEmbedder()) as b:
            assert import_jsonl(b, tmp_path / "default.jsonl").namespaces == []
        report = export_jsonl(a, tmp_path / "both.jsonl", namespaces=["default", "keep"])
        assert report.namespaces == ["keep"] and report.records == 2
