"""MemoryAgent.ingest on real files (deterministic embedder): cases C5-C9 of docs/failure-cases.md."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FakeEmbedder

from titans_agent import AgentConfig, MemoryAgent, StoreError

TESTS = Path(__file__).parent


def rows(db: Path, sql: str, *args):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def test_c5_long_document_last_paragraph_is_found_and_nothing_is_cut(agent, tmp_path):
    words = [f"clause{i % 97} term{i % 13} provision" for i in range(2000)]  # 6,000 words
    paragraphs = [" ".join(words[i : i + 60]) + "." for i in range(0, 2000, 60)]
    paragraphs.append("The escrow release date: 2031-03-14, as agreed by both parties.")
    doc = tmp_path / "contract.txt"
    doc.write_text("\n\n".join(paragraphs), encoding="utf-8")
    report = agent.ingest(doc)
    assert report.files == 1 and report.chunks > 10
    hit = agent.recall("When is the escrow release date?", k=3)[0]
    assert "2031-03-14" in hit.text
    assert hit.end_line == len(doc.read_text().splitlines())
    tok = agent.embedder.tokenizer
    for (text,) in rows(tmp_path / "memory.db", "SELECT text FROM records"):
        assert len(tok.encode(text, add_special_tokens=False)) <= agent.embedder.max_tokens
    stored = " ".join(
        t
        for (t,) in rows(
            tmp_path / "memory.db",
            "SELECT r.text FROM records r JOIN occurrences o ON o.record_id = r.id ORDER BY o.chunk_index",
        )
    )
    assert stored.split() == doc.read_text().split()  # every word kept, in order, none cut


def test_c6_empty_files_are_skipped_with_reasons(agent, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "empty.txt").write_bytes(b"")
    (folder / "blank.md").write_text("  \n\t\n", encoding="utf-8")
    (folder / "real.md").write_text("Real content lives here.", encoding="utf-8")
    report = agent.ingest(folder)
    reasons = {Path(s.path).name: s.reason for s in report.skipped}
    assert reasons == {"empty.txt": "empty", "blank.md": "whitespace only"}
    assert report.files == 1 and report.stored == 1


def test_c7_bad_encodings_and_binaries(agent, tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "readme.md").write_text("# Title\n\nUTF-8 text: Zoë\n", encoding="utf-8")
    (folder / "legacy.txt").write_bytes("a naïve résumé from 1998".encode("cp1252"))
    (folder / "wide.txt").write_bytes("\ufeffUTF-16 text with BOM: Grüße".encode("utf-16"))
    (folder / ".hidden").write_bytes(os.urandom(4096))
    (folder / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(2048))
    (folder / "nul.py").write_bytes(b"def f():\n    return 1\x00\n")
    report = agent.ingest(folder)
    skipped = {Path(s.path).name: s.reason for s in report.skipped}
    assert set(skipped) == {".hidden", "image.png"}
    assert all(r.startswith("binary") for r in skipped.values())
    texts = " ".join(t for (t,) in rows(tmp_path / "memory.db", "SELECT text FROM records"))
    assert "naïve résumé" in texts and "Grüße" in texts and "Zoë" in texts and "return 1" in texts
    assert any("nul.py" in w for w in report.warnings)


def test_c8_symlink_loops_end_and_are_reported(agent, tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.txt").write_text("alpha file contents", encoding="utf-8")
    (proj / "up").symlink_to("..")
    (proj / "self").symlink_to(".")
    (proj / "dead").symlink_to("/nonexistent/target")
    report = agent.ingest(proj)
    assert report.stored == 1
    assert rows(tmp_path / "memory.db", "SELECT count(*) FROM records")[0][0] == 1
    reasons = " | ".join(f"{s.path}: {s.reason}" for s in report.skipped)
    assert "broken symlink" in reasons and "loop" in reasons


def test_include_exclude_globs(agent, tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("def hello():\n    return 'hi'\n", encoding="utf-8")
    (src / "pkg" / "test_mod.py").write_text("def test_hello():\n    pass\n", encoding="utf-8")
    (src / "notes.md").write_text("Some notes.", encoding="utf-8")
    report = agent.ingest(src, include=["*.py"], exclude=["test_*"])
    assert report.files == 1
    assert [Path(s).name for (s,) in rows(tmp_path / "memory.db", "SELECT source FROM occurrences")] == ["mod.py"]


def test_too_large_files_are_skipped(tmp_path, fake_embedder):
    big = tmp_path / "big.txt"
    big.write_text("word " * 1000, encoding="utf-8")
    with MemoryAgent.open(tmp_path / "m.db", AgentConfig(max_file_bytes=1000), embedder=fake_embedder) as agent:
        report = agent.ingest(big)
    assert report.files == 0 and report.skipped[0].reason.startswith("too large")


def test_a_missing_path_raises_and_one_of_many_is_reported(agent, tmp_path):
    from titans_agent import InvalidInputError

    with pytest.raises(InvalidInputError, match="source="):
        agent.ingest("some raw text that is not a path")
    (tmp_path / "real.txt").write_text("real", encoding="utf-8")
    report = agent.ingest([tmp_path / "nope", tmp_path / "real.txt"])
    assert report.skipped[0].reason == "does not exist" and report.stored == 1


def test_a_failed_open_leaves_no_database_file(tmp_path):
    from titans_agent import AgentConfig, EmbedderLoadError

    db = tmp_path / "new.db"
    with pytest.raises(EmbedderLoadError):
        MemoryAgent.open(db, AgentConfig(embedder=str(tmp_path / "no-such-model")))
    assert not db.exists() and not (tmp_path / "new.db-wal").exists()


def test_second_ingest_stores_nothing_and_changed_file_is_replaced(agent, tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "a.md").write_text("First file about apples.", encoding="utf-8")
    (folder / "b.md").write_text("Second file about bananas.", encoding="utf-8")
    first = agent.ingest(folder)
    again = agent.ingest(folder)
    assert (first.files, first.stored, first.replaced) == (2, 2, 0)
    assert (again.files, again.unchanged, again.stored, again.chunks, again.replaced) == (0, 2, 0, 0, 0)
    (folder / "b.md").write_text("Second file, now about cherries.", encoding="utf-8")
    third = agent.ingest(folder)
    assert (third.files, third.unchanged, third.stored, third.replaced) == (1, 1, 1, 1)
    texts = sorted(t for (t,) in rows(tmp_path / "memory.db", "SELECT text FROM records"))
    assert texts == ["First file about apples.", "Second file, now about cherries."]


def test_progress_callback_sees_files_and_chunks(agent, tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    for i in range(3):
        (folder / f"{i}.txt").write_text(f"file number {i}", encoding="utf-8")
    seen = []
    agent.ingest(folder, progress=lambda p: seen.append((p.files, p.chunks, p.current)))
    assert seen[-1][:2] == (3, 3)
    assert [s[0] for s in seen] == sorted(s[0] for s in seen)


class FailingEmbedder(FakeEmbedder):
    """Fails on its n-th call: an embedder error mid-ingest."""

    def __init__(self, fail_on_call: int) -> None:
        super().__init__()
        self.fail_on_call = fail_on_call

    def embed(self, texts):
        if self.calls + 1 == self.fail_on_call:
            self.calls += 1
            raise RuntimeError("embedder crashed")
        return super().embed(texts)


def three_files(folder: Path) -> dict[str, int]:
    folder.mkdir()
    sizes = {"1.txt": 3, "2.txt": 7, "3.txt": 2}
    for name, n in sizes.items():
        paras = [f"{name} paragraph {i}: " + " ".join(f"word{j}" for j in range(60)) for i in range(n)]
        (folder / name).write_text("\n\n".join(paras), encoding="utf-8")
    return sizes


def test_three_files_chunk_as_expected(tmp_path):
    from titans_agent.ingest.chunking import Chunker

    sizes = three_files(tmp_path / "docs")
    chunker = Chunker(FakeEmbedder().tokenizer, max_tokens=200)
    for name, n in sizes.items():
        assert len(chunker.split((tmp_path / "docs" / name).read_text())) == n


def check_complete(db: Path, sizes: dict[str, int]) -> None:
    got = rows(db, "SELECT source, chunk_index, count(*) FROM occurrences GROUP BY source, chunk_index")
    per_file: dict[str, list[int]] = {}
    for source, idx, n in got:
        assert n == 1, f"duplicate chunk {idx} of {source}"
        per_file.setdefault(Path(source).name, []).append(idx)
    assert {k: sorted(v) for k, v in per_file.items()} == {k: list(range(n)) for k, n in sizes.items()}
    assert rows(db, "SELECT count(*) FROM documents WHERE complete = 0")[0][0] == 0


def test_c9_embedder_error_mid_file_then_reingest_completes_without_duplicates(tmp_path):
    folder = tmp_path / "docs"
    sizes = three_files(folder)
    db = tmp_path / "m.db"
    cfg = AgentConfig(batch_size=2)  # file 2 spans several batches
    # call 1 embeds 1.txt's first batch ... fail in the middle of 2.txt
    with MemoryAgent.open(db, cfg, embedder=FailingEmbedder(fail_on_call=4)) as agent:
        with pytest.raises(RuntimeError):
            agent.ingest(folder)
    partial = rows(db, "SELECT count(*) FROM records")[0][0]
    assert 0 < partial < sum(sizes.values())
    assert rows(db, "SELECT count(*) FROM documents WHERE complete = 1")[0][0] == 1
    with MemoryAgent.open(db, cfg, embedder=FakeEmbedder()) as agent:
        report = agent.ingest(folder)
    assert report.unchanged == 1 and report.stored == sum(sizes.values()) - partial
    check_complete(db, sizes)


_KILLED_CHILD = """
import os, sys
sys.path.insert(0, {tests!r})
from conftest import FakeEmbedder
from titans_agent import AgentConfig, MemoryAgent, StoreError

class DiesMidway(FakeEmbedder):
    def embed(self, texts):
        if self.calls == 4:
            os._exit(17)  # the process dies with no clean-up, after 4 committed batches
        return super().embed(texts)

with MemoryAgent.open({db!r}, AgentConfig(batch_size=2), embedder=DiesMidway()) as agent:
    agent.ingest({folder!r})
"""


@pytest.mark.slow
def test_c9_process_killed_mid_ingest_then_reingest_completes(tmp_path):
    folder = tmp_path / "docs"
    sizes = three_files(folder)
    db = tmp_path / "m.db"
    code = _KILLED_CHILD.format(tests=str(TESTS), db=str(db), folder=str(folder))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 17, proc.stderr
    assert rows(db, "PRAGMA integrity_check")[0][0] == "ok"
    committed = rows(db, "SELECT count(*) FROM records")[0][0]
    assert committed == 8  # four batches of two chunks
    with MemoryAgent.open(db, AgentConfig(batch_size=2), embedder=FakeEmbedder()) as agent:
        agent.ingest(folder)
        step = agent.stats().memory_step
    check_complete(db, sizes)
    assert step == sum(sizes.values())  # the memory saw each chunk exactly once


def test_close_from_a_progress_callback_stops_the_ingest_and_a_rerun_completes_it(tmp_path):
    """A callback that closes the agent after the first progress report: nothing is committed after
    the close (the ingest stops at the next batch with a StoreError), the document stays unfinished,
    and a later ingest completes it, every chunk exactly once."""
    paras = [f"handbook paragraph {i}: " + " ".join(f"word{j}" for j in range(60)) for i in range(8)]
    text = "\n\n".join(paras)
    db = tmp_path / "m.db"
    cfg = AgentConfig(batch_size=2)
    agent = MemoryAgent.open(db, cfg, embedder=FakeEmbedder())
    reported: list[int] = []

    def progress(p) -> None:
        reported.append(p.chunks)
        agent.close()

    with pytest.raises(StoreError, match="closed"):
        agent.ingest(text, source="handbook", progress=progress)
    assert reported == [2]  # one report: the first batch, committed before the close
    with MemoryAgent.open(db, cfg, embedder=FakeEmbedder()) as fresh:
        assert fresh.stats().chunks == 2
    assert rows(db, "SELECT chunks_done, complete FROM documents") == [(2, 0)]
    with MemoryAgent.open(db, cfg, embedder=FakeEmbedder()) as fresh:
        report = fresh.ingest(text, source="handbook")
    assert (report.files, report.chunks) == (1, 6)  # resumed after the committed chunks
    assert rows(db, "SELECT chunk_index, count(*) FROM occurrences GROUP BY chunk_index") == [(i, 1) for i in range(8)]
    assert rows(db, "SELECT chunks_done, complete FROM documents") == [(8, 1)]


def test_a_machine_out_of_threads_is_not_reported_as_a_missing_model(monkeypatch):
    import sentence_transformers

    from titans_agent import EmbedderLoadError
    from titans_agent.embeddings import SentenceTransformerEmbedder

    def refuse(*args, **kwargs):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", refuse)
    with pytest.raises(EmbedderLoadError) as err:
        SentenceTransformerEmbedder().load()
    assert "refused a resource" in str(err.value) and "never downloads" not in str(err.value)

    def missing(*args, **kwargs):
        raise OSError("no such model")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", missing)
    with pytest.raises(EmbedderLoadError, match="never downloads"):
        SentenceTransformerEmbedder().load()
