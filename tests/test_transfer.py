"""Blob safety (safetensors + checksum) and export/import round trips, on real SQLite files."""

from __future__ import annotations

import base64
import json
import sqlite3

import numpy as np
import pytest
import torch
from conftest import FakeEmbedder, digest
from safetensors.torch import save as st_save

from titans_agent import AgentConfig, MemoryAgent, MemoryConfig
from titans_agent.context import PipelineContext
from titans_agent.core.memory import (
    CorruptBlobError,
    NeuralMemory,
    params_from_bytes,
    params_to_bytes,
    state_from_bytes,
    state_to_bytes,
)
from titans_agent.errors import EmbedderMismatchError, InvalidInputError, NamespaceNotFoundError, StoreError
from titans_agent.locking import AgentLocks
from titans_agent.transfer import export_jsonl, import_file, import_jsonl

CFG = MemoryConfig(dim=16, depth=2, expansion=2, chunk_size=4)


@pytest.fixture
def state_blob() -> bytes:
    mem = NeuralMemory(CFG)
    mem.requires_grad_(False)
    state = mem.update(mem.init_state(), torch.randn(6, 16, generator=torch.Generator().manual_seed(0))).state
    return state_to_bytes(state)


# ---------------------------------------------------------------------- blobs
def test_state_blob_round_trips_with_checksum(state_blob):
    header_len = int.from_bytes(state_blob[:8], "little")
    meta = json.loads(state_blob[8 : 8 + header_len])["__metadata__"]
    assert len(meta["sha256"]) == 64
    state = state_from_bytes(state_blob)
    assert digest(state_from_bytes(state_to_bytes(state))) == digest(state)


@pytest.mark.parametrize("where", [-1, -100, -1000])
def test_flipped_tensor_byte_is_detected(state_blob, where):
    bad = bytearray(state_blob)
    bad[where] ^= 0x01
    with pytest.raises(CorruptBlobError, match="checksum"):
        state_from_bytes(bytes(bad))


def test_flipped_header_byte_or_truncation_is_a_clear_error(state_blob):
    bad = bytearray(state_blob)
    bad[12] ^= 0x20  # inside the JSON header
    for blob in (bytes(bad), state_blob[:-7], state_blob[:5], b"", b"\x00" * 64):
        with pytest.raises(CorruptBlobError) as info:
            state_from_bytes(blob)
        assert isinstance(info.value, StoreError) and isinstance(info.value, InvalidInputError)


def test_crafted_headers_are_refused_and_nothing_runs(tmp_path, state_blob):
    marker = tmp_path / "pwned"
    # A pickle payload where safetensors expects JSON: never unpickled, never executed.
    payload = b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR."
    huge_len = (2**62).to_bytes(8, "little") + b"{}"
    not_object = len(b"[1]").to_bytes(8, "little") + b"[1]"
    for blob in (len(payload).to_bytes(8, "little") + payload, huge_len, not_object):
        with pytest.raises(CorruptBlobError):
            state_from_bytes(blob)
    assert not marker.exists()
    # A well-formed safetensors blob with a valid checksum but shapes that are no memory state.
    from titans_agent.core.memory import tensors_digest

    t = {"weight.0": torch.zeros(3, 5), "momentum.0": torch.zeros(3, 5), "pending": torch.zeros(0, 5)}
    t["step"] = torch.tensor([0])
    meta = {"format": "titans-agent-memory-state", "version": "1", "sha256": tensors_digest(t)}
    with pytest.raises(CorruptBlobError, match="width"):
        state_from_bytes(st_save(t, metadata=meta))
    # The right shapes under the wrong kind of blob.
    with pytest.raises(CorruptBlobError, match="expected"):
        params_from_bytes(NeuralMemory(CFG), state_blob)


def test_old_blob_without_checksum_still_loads(state_blob):
    tensors = {k: v for k, v in __import__("safetensors.torch").torch.load(state_blob).items()}
    old = st_save(tensors, metadata={"format": "titans-agent-memory-state", "version": "1"})
    assert digest(state_from_bytes(old)) == digest(state_from_bytes(state_blob))
    mem = NeuralMemory(CFG)
    params = __import__("safetensors.torch").torch.load(params_to_bytes(mem))
    mem2 = NeuralMemory(CFG.model_copy(update={"seed": 7}))
    params_from_bytes(mem2, st_save(params, metadata={"format": "titans-agent-memory-params", "version": "1"}))
    assert torch.equal(mem2.W_K, mem.W_K)


def test_corrupted_state_in_a_database_gives_a_clear_error(tmp_path, fake_embedder):
    db = tmp_path / "m.db"
    with MemoryAgent.open(db, AgentConfig(checkpoint_units=1), embedder=fake_embedder) as a:
        a.remember("The staging server listens on port 8443.")
    con = sqlite3.connect(db)
    blob = bytearray(con.execute("SELECT state FROM memory_checkpoints").fetchone()[0])
    blob[-3] ^= 0xFF
    con.execute("UPDATE memory_checkpoints SET state = ?", (bytes(blob),))
    con.commit()
    con.close()
    with MemoryAgent.open(db, embedder=fake_embedder) as a:
        assert a.recall("staging port")[0].text.startswith("The staging server")  # recall needs no state
        with pytest.raises(StoreError, match="checksum"):
            a.remember("The build cache lives on the NAS.")  # a write continues from the state
        assert a.stats().records == 1


def test_corrupted_parameters_in_a_database_give_a_clear_error(tmp_path, fake_embedder):
    db = tmp_path / "m.db"
    with MemoryAgent.open(db, embedder=fake_embedder) as a:
        a.remember("The staging server listens on port 8443.")
    con = sqlite3.connect(db)
    blob = bytearray(con.execute("SELECT params FROM memory_parameters").fetchone()[0])
    blob[-3] ^= 0xFF
    con.execute("UPDATE memory_parameters SET params = ?", (bytes(blob),))
    con.commit()
    con.close()
    with MemoryAgent.open(db, embedder=fake_embedder) as a, pytest.raises(StoreError, match="checksum"):
        a.recall("staging port")


# ---------------------------------------------------------------------- export / import
def _fill(agent: MemoryAgent, tmp_path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Ports\n\nThe staging server listens on port 8443.\n\nProduction uses 443.\n")
    (docs / "b.py").write_text("def rotate(key):\n    '''Rotate API keys every 90 days.'''\n    return key\n")
    agent.ingest(docs)
    agent.remember("Dana prefers tea — 茶, שלום, e\u0301, 🙂", metadata={"deep": {"a": [1, {"b": None}]}})
    agent.remember("Dana prefers tea — 茶, שלום, e\u0301, 🙂")  # a repeat: a second occurrence
    agent.add_turn("s1", "user", "Please call me Dana.", "2024-05-01T10:00:00Z")
    agent.add_turn("s1", "assistant", "Sure, Dana.", "2024-05-01T10:00:05Z")
    agent.add_turn("s2", "user", "ok", "2024-05-02T09:00:00")
    agent.add_turn("s3", "user", "My favourite colour is blue and I live in Berlin.", "2024-05-01T10:00:00Z")
    agent.add_turn("s3", "user", "My favourite colour is now green and I live in Berlin.", "2024-06-01T10:00:00Z")
    agent.remember("Only in the ops namespace.", namespace="ops")


def test_export_import_export_is_byte_identical(tmp_path, fake_embedder):
    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    out1, out2 = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    with MemoryAgent.open(src, embedder=fake_embedder) as a:
        _fill(a, tmp_path)
        before = {
            ns: (a.stats(ns), [h.text for h in a.recall("what is Dana's name?", k=3, namespace=ns)])
            for ns in a.namespaces()
        }
        turns = a.turns("s1")
        state = digest(a.memory_state("default"))
        rep = export_jsonl(a, out1)
    assert rep.namespaces == ["default", "ops"] and rep.turns == 5 and rep.documents == 2
    assert rep.supersessions == 1  # the knowledge update travels with its records
    with MemoryAgent.open(dst, embedder=FakeEmbedder()) as b:
        got = import_jsonl(b, out1)
        assert got.model_dump() == rep.model_dump()
        for ns, (stats, hits) in before.items():
            assert b.stats(ns).model_dump() == stats.model_dump()
            assert [h.text for h in b.recall("what is Dana's name?", k=3, namespace=ns)] == hits
        assert [(t["seq"], t["role"], t["content"], t["timestamp"]) for t in b.turns("s1")] == [
            (t["seq"], t["role"], t["content"], t["timestamp"]) for t in turns
        ]
        assert digest(b.memory_state("default")) == state
        # Re-ingesting the same folder after import finds every document complete.
        report = b.ingest(tmp_path / "docs")
        assert report.unchanged == 2 and report.stored == 0
        export_jsonl(b, out2)
    assert out1.read_bytes() == out2.read_bytes()
    lines = out1.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {
        "dim": 384,
        "embedder": "fake-hash-384",
        "format": "titans-agent-export",
        "type": "header",
        "version": 3,
    }


@pytest.mark.backends()
def test_export_import_round_trip_on_every_backend(make_db_url, tmp_path, fake_embedder):
    out1, out2 = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    with MemoryAgent.open(make_db_url("src"), embedder=fake_embedder) as a:
        _fill(a, tmp_path)
        rep = export_jsonl(a, out1)
    with MemoryAgent.open(make_db_url("dst"), embedder=FakeEmbedder()) as b:
        assert import_jsonl(b, out1).model_dump() == rep.model_dump()
        with pytest.raises(InvalidInputError, match="already exists"):
            import_jsonl(b, out1)
        assert [t["content"] for t in b.turns("s1")] == ["Please call me Dana.", "Sure, Dana."]
        export_jsonl(b, out2)
    assert out1.read_bytes() == out2.read_bytes()


def test_export_selected_namespace_and_unknown_one(tmp_path, agent):
    agent.remember("alpha note", namespace="a")
    agent.remember("beta note", namespace="b")
    rep = export_jsonl(agent, tmp_path / "a.jsonl", namespaces=["a"])
    assert rep.namespaces == ["a"] and rep.records == 1
    with pytest.raises(NamespaceNotFoundError, match="no namespace"):
        export_jsonl(agent, tmp_path / "x.jsonl", namespaces=["missing"])
    assert not (tmp_path / "x.jsonl").exists()


def test_export_onto_the_database_file_is_refused(tmp_path, fake_embedder, monkeypatch):
    # found by an attacker: the temporary file was renamed over the database, wiping every memory
    db = tmp_path / "mem.db"
    (tmp_path / "link.db").symlink_to(db)
    with MemoryAgent.open(f"sqlite:///{db}", embedder=fake_embedder) as agent:
        agent.remember("important")
        for target in (db, tmp_path / "link.db", tmp_path / "mem.db-wal", tmp_path / "sub" / ".." / "mem.db"):
            (tmp_path / "sub").mkdir(exist_ok=True)
            with pytest.raises(InvalidInputError, match="the database's own file"):
                export_jsonl(agent, target)
        assert [h.text for h in agent.recall("important")] == ["important"]
    with MemoryAgent.open(f"sqlite:///{db}", embedder=fake_embedder) as again:
        assert again.stats().records == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.db", "mem.db", "sub"]
    # found by an attacker: a URI filename, and a relative name after a change of folder
    with MemoryAgent.open(f"sqlite:///file:{db}?uri=true", embedder=fake_embedder) as agent:
        with pytest.raises(InvalidInputError, match="the database's own file"):
            export_jsonl(agent, db)
    monkeypatch.chdir(tmp_path)
    with MemoryAgent.open("sqlite:///mem.db", embedder=fake_embedder) as agent:
        monkeypatch.chdir(tmp_path / "sub")
        with pytest.raises(InvalidInputError, match="the database's own file"):
            export_jsonl(agent, db)


class OtherEmbedder(FakeEmbedder):
    name = "other-model"


def test_import_refuses_another_embedder_and_existing_namespace(tmp_path, agent):
    agent.remember("The staging server listens on port 8443.")
    f = tmp_path / "e.jsonl"
    export_jsonl(agent, f)
    with MemoryAgent.open(tmp_path / "other.db", embedder=OtherEmbedder()) as other:
        with pytest.raises(EmbedderMismatchError, match="fake-hash-384"):
            import_jsonl(other, f)
        assert other.namespaces() == []
    with pytest.raises(InvalidInputError, match="already exists"):
        import_jsonl(agent, f)
    assert agent.stats().records == 1
    # every record forgotten: the namespace (and what its weights learned) is still there, and the
    # message does not send the user to forget
    (hit,) = agent.recall("staging server port", k=1)
    agent.forget(record_id=hit.id)
    assert agent.stats().records == 0
    with pytest.raises(InvalidInputError, match="forgetting its records does not remove a namespace"):
        import_jsonl(agent, f)


def _rewrite(src, dst, fn, count_lines: bool = True) -> None:
    """Apply ``fn`` to the lines before the end line; ``count_lines``: write a matching end line."""
    lines = [json.loads(x) for x in src.read_text().splitlines()]
    assert lines[-1]["type"] == "end" and lines[-1]["lines"] == len(lines) - 1
    body = fn(lines[:-1])
    tail = [{"type": "end", "lines": len(body)}] if count_lines else []
    dst.write_text("".join(json.dumps(x) + "\n" for x in [*body, *tail]))


def test_a_file_cut_short_is_refused(tmp_path, fake_embedder):
    # found by a reviewer: `head -n 4 export.jsonl` imported 2 records and 0 occurrences, silently
    with MemoryAgent.open(tmp_path / "src.db", embedder=fake_embedder) as a:
        _fill(a, tmp_path)
        good = tmp_path / "good.jsonl"
        export_jsonl(a, good)
    with MemoryAgent.open(tmp_path / "dst.db", embedder=FakeEmbedder()) as b:
        cut = tmp_path / "cut.jsonl"
        cut.write_text("".join(good.read_text().splitlines(keepends=True)[:4]))
        with pytest.raises(InvalidInputError, match="cut short"):
            import_jsonl(b, cut)
        wrong = tmp_path / "wrong.jsonl"
        _rewrite(good, wrong, lambda ls: ls[:-1], count_lines=False)
        wrong.write_text(wrong.read_text() + json.dumps({"type": "end", "lines": 10_000}) + "\n")
        with pytest.raises(InvalidInputError, match="damaged"):
            import_jsonl(b, wrong)
        after = tmp_path / "after.jsonl"
        after.write_text(good.read_text() + good.read_text().splitlines(keepends=True)[1])
        with pytest.raises(InvalidInputError, match="after the end line"):
            import_jsonl(b, after)
        assert b.namespaces() == []
        import_jsonl(b, good)
        assert sorted(b.namespaces()) == ["default", "ops"]


@pytest.mark.slow
def test_failed_import_writes_nothing(tmp_path, fake_embedder):
    with MemoryAgent.open(tmp_path / "src.db", embedder=fake_embedder) as a:
        _fill(a, tmp_path)
        good = tmp_path / "good.jsonl"
        export_jsonl(a, good)

    def dangling_turn(lines):  # the last line (a turn of namespace "ops"? no: of default) breaks
        return [*lines, {**next(x for x in lines if x["type"] == "turn"), "session_id": "nope"}]

    def bad_state(lines):
        for x in lines:
            if x["type"] == "namespace" and x["name"] == "ops":
                blob = bytearray(base64.b64decode(x["state"]))
                blob[-2] ^= 0x10
                x["state"] = base64.b64encode(bytes(blob)).decode()
        return lines

    cases = [
        (dangling_turn, InvalidInputError, "unknown session"),
        (bad_state, CorruptBlobError, "checksum"),
        (lambda ls: [*ls, {"type": "record", "oops": 1}], InvalidInputError, "record line"),
        (lambda ls: ls[1:], InvalidInputError, "header"),
    ]
    db = tmp_path / "dst.db"
    with MemoryAgent.open(db, embedder=FakeEmbedder()) as b:
        for i, (fn, exc, msg) in enumerate(cases):
            f = tmp_path / f"bad{i}.jsonl"
            _rewrite(good, f, fn)
            with pytest.raises(exc, match=msg):
                import_jsonl(b, f)
            assert b.namespaces() == []
        (tmp_path / "garbage.jsonl").write_text("not json\n")
        with pytest.raises(InvalidInputError, match="not JSON"):
            import_jsonl(b, tmp_path / "garbage.jsonl")
        import_jsonl(b, good)  # the good file still imports after all those failures
        assert b.namespaces() == ["default", "ops"]
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert con.execute("SELECT count(*) FROM namespaces").fetchone()[0] == 2


def _column(db, sql: str) -> list:
    con = sqlite3.connect(db)
    try:
        return [None if v is None else json.loads(v) for (v,) in con.execute(sql)]
    finally:
        con.close()


LOCATIONS = "SELECT location FROM occurrences ORDER BY id"
CHUNKINGS = "SELECT chunking FROM namespaces ORDER BY name"
WRITES = "SELECT write_revision, embedding FROM occurrences ORDER BY id"  # version 3's


def _writes(db) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(WRITES).fetchall()
    finally:
        con.close()


def test_locations_and_chunking_travel_and_version_1_files_still_import(tmp_path, fake_embedder):
    src = tmp_path / "src.db"
    with MemoryAgent.open(src, embedder=fake_embedder) as a:
        _fill(a, tmp_path)
    con = sqlite3.connect(src)
    with con:  # what the agent stores, made sure of here: a location per chunk, a namespace's chunking
        con.execute(
            "UPDATE occurrences SET location = ? WHERE kind = 'chunk' AND chunk_index = 0",
            (json.dumps({"page": 2, "headings": ["Ports"], "section": "4.2", "citation": "section 4.2, page 2"}),),
        )
        con.execute(
            "UPDATE namespaces SET chunking = ? WHERE name = 'ops' AND chunking IS NULL",
            (json.dumps({"chunk_tokens": 254, "chunk_overlap_tokens": 32}),),
        )
        # a unit written with an embedding of its own (a repeat embedded otherwise)
        con.execute("UPDATE occurrences SET embedding = ? WHERE id = 2", (np.ones(384, np.float32).tobytes(),))
    con.close()
    writes = _writes(src)
    assert all(rev is not None for rev, _ in writes) and [e is None for _, e in writes].count(False) == 1
    locations, chunkings = _column(src, LOCATIONS), _column(src, CHUNKINGS)
    assert {"page": 2, "headings": ["Ports"], "section": "4.2", "citation": "section 4.2, page 2"} in locations
    assert None in locations  # notes and turns have none
    assert any(c is not None for c in chunkings)

    out1, out2 = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    with MemoryAgent.open(src, embedder=fake_embedder) as a:
        export_jsonl(a, out1)
    lines = [json.loads(x) for x in out1.read_text().splitlines()]
    assert [x["location"] for x in lines if x["type"] == "occurrence"] == locations
    assert [x["chunking"] for x in lines if x["type"] == "namespace"] == chunkings
    dst = tmp_path / "dst.db"
    with MemoryAgent.open(dst, embedder=FakeEmbedder()) as b:
        import_jsonl(b, out1)
        export_jsonl(b, out2)
    assert (_column(dst, LOCATIONS), _column(dst, CHUNKINGS)) == (locations, chunkings)
    assert _writes(dst) == writes
    assert out1.read_bytes() == out2.read_bytes()

    def version_1(lines):  # a file exported before version 2: no location, no chunking (nor version 3's)
        for x in lines:
            for key in ("location", "chunking", "write_revision"):
                x.pop(key, None)
            if x["type"] == "occurrence":
                x.pop("embedding")
            if x["type"] == "header":
                x["version"] = 1
        return lines

    old = tmp_path / "old.jsonl"
    _rewrite(out1, old, version_1)
    assert '"location"' not in old.read_text() and '"chunking"' not in old.read_text()
    with MemoryAgent.open(tmp_path / "from_v1.db", embedder=FakeEmbedder()) as c:
        got = import_jsonl(c, old)
        assert got.occurrences == len(locations)
    assert _column(tmp_path / "from_v1.db", LOCATIONS) == [None] * len(locations)
    assert _column(tmp_path / "from_v1.db", CHUNKINGS) == [None] * len(chunkings)
    assert _writes(tmp_path / "from_v1.db") == [(None, None)] * len(locations)
    raw = sqlite3.connect(tmp_path / "from_v1.db")
    assert raw.execute("SELECT count(*) FROM occurrences WHERE location IS NULL").fetchone() == (len(locations),)
    raw.close()

    def crafted(**location):
        def fn(lines):
            occ = next(x for x in lines if x["type"] == "occurrence")
            occ["location"] = location
            return lines

        return fn

    def newer(lines):
        lines[0]["version"] = 4
        return lines

    cases = [
        (crafted(page=0), "occurrence line: location.page"),
        (crafted(page=1, line=3), "occurrence line: location.line"),
        (crafted(headings="Ports"), "occurrence line: location.headings"),
        (newer, "export format version 4 is newer than this titans-agent reads \\(3\\)"),
    ]
    with MemoryAgent.open(tmp_path / "refused.db", embedder=FakeEmbedder()) as d:
        for i, (fn, msg) in enumerate(cases):
            bad = tmp_path / f"bad{i}.jsonl"
            _rewrite(out1, bad, fn)
            with pytest.raises(InvalidInputError, match=msg):
                import_jsonl(d, bad)
        assert d.namespaces() == []


# ---------------------------------------------------------------------- CLI
def test_cli_export_import_round_trip(tmp_path, monkeypatch):
    from click.testing import CliRunner
    from titans_agent.cli import app as cli_main

    monkeypatch.setattr(
        cli_main,
        "open_agent",
        lambda db, *_, read_only=False, **_k: MemoryAgent.open(db, embedder=FakeEmbedder(), read_only=read_only),
    )
    runner = CliRunner()
    src, dst, f1, f2 = (str(tmp_path / n) for n in ("src.db", "dst.db", "one.jsonl", "two.jsonl"))
    assert runner.invoke(cli_main.cli, ["--db", src, "remember", "Backups run at 02:00 UTC."]).exit_code == 0
    assert runner.invoke(cli_main.cli, ["--db", src, "add-turn", "s1", "user", "call me Dana"]).exit_code == 0
    res = runner.invoke(cli_main.cli, ["--db", src, "export", f1, "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["records"] == 2
    res = runner.invoke(cli_main.cli, ["--db", dst, "import", f1], catch_exceptions=False)
    assert res.exit_code == 0 and "imported" in res.stdout
    again = runner.invoke(cli_main.cli, ["--db", dst, "import", f1])
    assert again.exit_code == 1 and "already exists" in again.output
    assert runner.invoke(cli_main.cli, ["--db", dst, "export", f2]).exit_code == 0
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()
    missing = runner.invoke(cli_main.cli, ["--db", str(tmp_path / "none.db"), "export", f2])
    assert missing.exit_code == 1 and not (tmp_path / "none.db").exists()
    (tmp_path / "bad.jsonl").write_text('{"type": "header"}\n')
    bad = runner.invoke(cli_main.cli, ["--db", str(tmp_path / "new.db"), "import", str(tmp_path / "bad.jsonl")])
    assert bad.exit_code == 1 and bad.output.startswith("Error:") and "header" in bad.output
    assert not (tmp_path / "new.db").exists()  # a failed import leaves no empty database behind


def test_a_record_whose_hash_does_not_match_its_text_is_refused(tmp_path, fake_embedder):
    # found by a reviewer: a crafted text_hash made a later remember() of another text a "repeat"
    from titans_agent.text import text_hash

    with MemoryAgent.open(tmp_path / "src.db", embedder=fake_embedder) as a:
        _fill(a, tmp_path)
        good = tmp_path / "good.jsonl"
        export_jsonl(a, good)

    def crafted(lines):
        rec = next(x for x in lines if x["type"] == "record")
        rec["text_hash"] = text_hash("The password is hunter2")
        return lines

    bad = tmp_path / "bad.jsonl"
    _rewrite(good, bad, crafted)
    with MemoryAgent.open(tmp_path / "dst.db", embedder=FakeEmbedder()) as b:
        with pytest.raises(InvalidInputError, match="text_hash does not match"):
            import_jsonl(b, bad)
        assert b.namespaces() == []


def _short_timeout_context(db) -> PipelineContext:
    """What import_file takes (no agent): a store whose lock waits are short (0.5 s a try), its locks."""
    from titans_agent.store import Store

    def no_runtimes():
        raise AssertionError("an import needs no runtimes")

    store = Store(db, busy_timeout_s=0.5)
    return PipelineContext(store, FakeEmbedder(), AgentConfig(), AgentLocks(), no_runtimes, lambda: None)


def test_an_import_retries_a_lock_held_by_another_connection(tmp_path, fake_embedder):
    # Import is a write like any other: it takes the write lock first, and a lock held past one
    # attempt's wait (0.5 s here; the writes retry for 3 x that) is retried instead of failing with
    # "database is locked" (what an import did when the lock outlasted the wait of its first insert).
    import threading
    import time

    with MemoryAgent.open(tmp_path / "src.db", embedder=fake_embedder) as a:
        a.remember("Backups run at 02:00 UTC.")
        a.add_turn("s1", "user", "call me Dana", "2024-05-01T10:00:00Z")
        f = tmp_path / "e.jsonl"
        rep = export_jsonl(a, f)
    db = tmp_path / "dst.db"
    MemoryAgent.open(db, embedder=FakeEmbedder()).close()
    b = _short_timeout_context(db)
    locked, errors = threading.Event(), []

    def hold() -> None:
        con = sqlite3.connect(db, isolation_level=None)
        try:
            con.execute("BEGIN IMMEDIATE")
            locked.set()
            time.sleep(1.2)
            con.execute("UPDATE meta SET value = value")  # another writer's commit
            con.execute("COMMIT")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            locked.set()
        finally:
            con.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(5)
        t0 = time.monotonic()
        got = import_file(b, path=f)
        waited = time.monotonic() - t0
    finally:
        holder.join()
        b.store.close()
    assert not errors
    assert waited >= 1.0  # it met the lock, and waited past one attempt
    assert got.model_dump() == rep.model_dump()
    with MemoryAgent.open(db, embedder=FakeEmbedder()) as c:
        assert c.namespaces() == ["default"] and c.stats().records == 2
        assert [t["content"] for t in c.turns("s1")] == ["call me Dana"]


@pytest.mark.backends()
def test_a_small_imported_namespace_keeps_no_checkpoint_and_a_large_one_does(make_db_url, tmp_path, fake_embedder):
    """Restoring thousands of small chat namespaces must not store a 4.7 MB checkpoint for each: a
    namespace under 64 units is restored as its log, which replays to the exported state exactly."""
    from conftest import query

    from titans_agent.transfer import REPLAY_UNITS

    src, dst, path = make_db_url("src"), make_db_url("dst"), tmp_path / "out.jsonl"
    with MemoryAgent.open(src, embedder=fake_embedder) as a:
        for i in range(3):
            a.add_turn("s1", "user", f"Small talk number {i} about the weather.", namespace="small")
        a.add_turns(
            [("s1", "user", f"Fact {i}: locker {i} holds box {i * 7}.") for i in range(REPLAY_UNITS + 1)],
            namespace="large",
        )
        states = {ns: digest(a.memory_state(ns)) for ns in ("small", "large")}
        export_jsonl(a, path)
    with MemoryAgent.open(dst, embedder=fake_embedder) as b:
        import_jsonl(b, path)
        rows = query(b, "SELECT n.name FROM memory_checkpoints c JOIN namespaces n ON n.id = c.namespace_id")
        assert rows == [("large",)]
    with MemoryAgent.open(dst, embedder=fake_embedder) as b:  # reopened: the small one replays its log
        assert {ns: digest(b.memory_state(ns)) for ns in ("small", "large")} == states


def test_a_state_serialises_to_the_same_bytes_every_time():
    state = NeuralMemory(MemoryConfig(dim=16, expansion=2), device="cpu").init_state()
    assert len({state_to_bytes(state) for _ in range(20)}) == 1  # the header's metadata in one order
