"""Crash harness: kill an ingest with SIGKILL at random moments, then check what survived.

Each trial runs ``MemoryAgent.ingest`` of a generated folder in a child process (a tiny
deterministic hashing embedder and a whitespace tokenizer defined here, so it is fast and offline),
kills it with SIGKILL at a random moment, and checks the database it left:

- ``PRAGMA integrity_check`` is ok, ``PRAGMA foreign_key_check`` is empty;
- every batch the child reported committed (its progress callback runs after each commit) is
  there: the occurrences, in id order, are exactly a prefix of an uninterrupted reference run's, and
  that prefix is at least as long as what the child reported;
- the memory state matches the committed records. A unit is one chunk written through the gate
  (stored, merged or a repeat: each leaves one occurrence); ``step`` counts units. The invariant:
  ``namespaces.step == state.step == number of occurrences``, the state's sha256 (weights,
  momentum, pending inputs, step) equals the reference run's state after the same number of units,
  and ``namespaces.revision`` equals the number of batches committed (one per commit);
- every document row is consistent: its occurrences are exactly chunks ``0 .. chunks_done - 1``,
  and ``complete`` implies ``chunks_done == n_chunks``; no record is without an occurrence.

Then the same ingest runs again to completion and must give the reference run's occurrences, every
document complete, the reference's final state bit for bit, no duplicate record, no orphan, and a
third ingest must find every file unchanged.

    python benchmarks/crash.py --trials 50            # the benchmark; writes benchmarks/results/crash.md
    python benchmarks/crash.py --child DB FOLDER      # (internal) the process that gets killed
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

N_FILES = 36
WORDS = (
    "memory surprise gradient momentum forgetting gate chunk token record namespace session turn "
    "licence patent clause section contract party notice term payment server port backup night "
    "decoder error line column value key query recall store commit batch state weight"
).split()


# ---------------------------------------------------------------------- the child's tiny model
class _WordTokenizer:
    """Duck-typed fast tokenizer for the Chunker: one token per whitespace-separated word."""

    is_fast = True

    def __init__(self) -> None:
        from tokenizers import Tokenizer, models, pre_tokenizers

        tok = Tokenizer(models.WordLevel(vocab={"[UNK]": 0}, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        self.backend_tokenizer = tok


class TinyEmbedder:
    """A deterministic hashed bag of words in 32 dimensions (the same in every process)."""

    name = "crash-tiny-32"
    dim = 32
    max_tokens = 48

    def __init__(self) -> None:
        self.tokenizer = _WordTokenizer()

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for w in re.findall(r"\w+", text.lower()) or ["<empty>"]:
                h = int.from_bytes(hashlib.blake2b(w.encode("utf-8", "replace"), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
            out[i] /= np.linalg.norm(out[i]) or 1.0
            if not out[i].any():
                out[i, 0] = 1.0
        return out


def agent_config() -> Any:
    from titans_agent import AgentConfig

    return AgentConfig(device="cpu", chunk_tokens=32, batch_size=8)


def make_corpus(folder: Path, seed: int = 0, n_files: int = N_FILES) -> None:
    """Write ``n_files`` text files of random sentences; some paragraphs recur across files."""
    rng = random.Random(seed)
    shared = [" ".join(rng.choice(WORDS) for _ in range(20)) + "." for _ in range(4)]
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n_files):
        paras = []
        for _ in range(rng.randint(6, 16)):
            if rng.random() < 0.15:
                paras.append(rng.choice(shared))
            else:
                sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 14))) + "." for _ in range(3)]
                paras.append(" ".join(sentences))
        (folder / f"doc{i:02d}.txt").write_text("\n\n".join(paras) + "\n", encoding="utf-8")


def child_main(db: str, folder: str) -> None:
    """Open the database, say "ready", ingest; after every commit print "committed N"."""
    import torch

    torch.set_num_threads(1)
    from titans_agent import MemoryAgent

    agent = MemoryAgent.open(db, agent_config(), embedder=TinyEmbedder())
    os.write(1, b"ready\n")

    def progress(p: Any) -> None:  # called after each batch commit: p.chunks are all committed
        os.write(1, f"committed {p.chunks}\n".encode())

    agent.ingest(folder, progress=progress)
    agent.close()
    os.write(1, b"done\n")


# ---------------------------------------------------------------------- checks
def state_digest(state: Any) -> tuple[int, str]:
    """(step, sha256 over the state's weights, momentum, pending inputs and step)."""
    h = hashlib.sha256()
    for t in (*state.weights, *state.momentum, state.pending):
        h.update(str(t.dtype).encode() + str(tuple(t.shape)).encode())
        h.update(t.contiguous().numpy().tobytes())
    h.update(str(state.step).encode())
    return state.step, h.hexdigest()


def occurrences(con: sqlite3.Connection) -> list[tuple[str, int, str]]:
    return con.execute(
        "SELECT o.source, o.chunk_index, r.text_hash FROM occurrences o JOIN records r ON r.id = o.record_id "
        "ORDER BY o.id"
    ).fetchall()


@dataclass
class Reference:
    occurrences: list[tuple[str, int, str]]
    digests: dict[int, str]  # step -> state digest after each committed batch
    final: str
    seconds: float
    n_docs: int
    child_seconds: float = 0.0  # the child's ingest, from "ready" to "done", uninterrupted


def reference_run(folder: Path, db: Path) -> Reference:
    """Ingest uninterrupted, recording the committed state after every batch."""
    from titans_agent import MemoryAgent

    digests: dict[int, str] = {}
    db2 = db.with_name(db.stem + "-steps.db")

    def record_state(_p: Any) -> None:
        step, dig = persisted_state(db2)
        digests[step] = dig

    with MemoryAgent.open(db, agent_config(), embedder=TinyEmbedder()) as agent:
        t0 = time.perf_counter()
        agent.ingest(folder)
        seconds = time.perf_counter() - t0
    # Replay with the callback into a second database (the callback's reads would slow the timing).
    with MemoryAgent.open(db2, agent_config(), embedder=TinyEmbedder()) as agent:
        agent.ingest(folder, progress=record_state)
    con = sqlite3.connect(db2)
    ref = Reference(
        occurrences=occurrences(con),
        digests={0: _init_digest(), **digests},
        final=persisted_state(db2)[1],
        seconds=seconds,
        n_docs=con.execute("SELECT count(*) FROM documents").fetchone()[0],
    )
    con.close()
    return ref


def _init_digest() -> str:
    from titans_agent.core.memory import NeuralMemory

    mem = NeuralMemory(agent_config().memory.model_copy(update={"dim": TinyEmbedder.dim}))
    mem.requires_grad_(False)
    return state_digest(mem.init_state())[1]


def persisted_state(db: Path) -> tuple[int, str]:
    """(step, digest) of the memory state a new process reads from ``db`` (its checkpoint followed
    by the units logged after it, replayed), through a read-only agent."""
    from titans_agent import MemoryAgent

    with MemoryAgent.open(db, agent_config(), embedder=TinyEmbedder(), read_only=True) as reader:
        state = reader.memory_state()
    assert state is not None
    return state_digest(state)


def check_database(db: Path, ref: Reference, committed: int, finished: bool) -> list[str]:
    """Every invariant of the module docstring; returns the problems found (empty: clean)."""
    problems: list[str] = []
    con = sqlite3.connect(db)
    try:
        if (ic := con.execute("PRAGMA integrity_check").fetchone()[0]) != "ok":
            problems.append(f"integrity_check: {ic}")
        if fk := con.execute("PRAGMA foreign_key_check").fetchall():
            problems.append(f"foreign_key_check: {fk[:3]}")
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "namespaces" not in tables:  # killed before the schema was created
            return problems + ([f"{committed} batches reported but no schema"] if committed else [])
        occ = occurrences(con)
        if occ != ref.occurrences[: len(occ)]:
            problems.append("occurrences are not a prefix of the reference run's")
        if len(occ) < committed:
            problems.append(f"{committed} chunks reported committed, only {len(occ)} in the database")
        if finished and occ != ref.occurrences:
            problems.append(f"after the re-run: {len(occ)} occurrences, the reference has {len(ref.occurrences)}")
        row = con.execute("SELECT step, revision FROM namespaces").fetchone()
        if row is None:
            if occ:
                problems.append("occurrences without a namespace row")
        else:
            row = (row[0], None, row[1])
            step, dig = persisted_state(db)
            if not row[0] == step == len(occ):
                problems.append(f"step column {row[0]}, state step {step}, occurrences {len(occ)}")
            if ref.digests.get(step) != dig:
                problems.append(f"state at step {step} differs from the reference run's")
            elif row[2] != sorted(ref.digests).index(step):  # one revision per committed batch
                problems.append(f"revision {row[2]} after {sorted(ref.digests).index(step)} committed batches")
            if finished and dig != ref.final:
                problems.append("final state differs from the reference run's")
        orphans = con.execute(
            "SELECT count(*) FROM records r WHERE NOT EXISTS (SELECT 1 FROM occurrences o WHERE o.record_id = r.id)"
        ).fetchone()[0]
        if orphans:
            problems.append(f"{orphans} records without occurrences")
        dups = con.execute(
            "SELECT count(*) FROM (SELECT text_hash FROM records GROUP BY namespace_id, text_hash HAVING count(*) > 1)"
        ).fetchone()[0]
        if dups:
            problems.append(f"{dups} duplicated records")
        for doc_id, source, n_chunks, done, complete in con.execute(
            "SELECT id, source, n_chunks, chunks_done, complete FROM documents"
        ).fetchall():
            idx = [r[0] for r in con.execute(
                "SELECT chunk_index FROM occurrences WHERE document_id = ? ORDER BY chunk_index", (doc_id,)
            )]  # fmt: skip
            if idx != list(range(done)) or (complete and done != n_chunks):
                problems.append(f"{Path(source).name}: chunks {idx[:5]}.. done={done}/{n_chunks} complete={complete}")
            if finished and not complete:
                problems.append(f"{Path(source).name} not complete after the re-run")
        if finished:
            n_docs = con.execute("SELECT count(*) FROM documents").fetchone()[0]
            if n_docs != ref.n_docs:
                problems.append(f"{n_docs} documents, the reference has {ref.n_docs}")
    finally:
        con.close()
    return problems


# ---------------------------------------------------------------------- trials
@dataclass
class TrialResult:
    trial: int
    kill_after_s: float
    committed: int  # chunks the child reported committed before the kill
    in_db: int  # occurrences found after the kill
    finished_before_kill: bool
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems


def _child_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def time_child(folder: Path, work: Path) -> float:
    """Seconds a child takes from "ready" to "done" on a fresh database (the kill window)."""
    db = work / "calibration.db"
    proc = subprocess.Popen([sys.executable, __file__, "--child", str(db), str(folder)], stdout=subprocess.PIPE,
                            env=_child_env())  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.readline()
    t0 = time.perf_counter()
    proc.stdout.read()
    proc.wait()
    proc.stdout.close()
    return time.perf_counter() - t0


def run_trial(i: int, rng: random.Random, folder: Path, work: Path, ref: Reference) -> TrialResult:
    from titans_agent import MemoryAgent

    db = work / f"trial{i:03d}.db"
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", str(db), str(folder)], stdout=subprocess.PIPE, env=_child_env()
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if first.strip() != b"ready":
        proc.kill()
        proc.wait()
        return TrialResult(i, 0.0, 0, 0, False, [f"child did not start: {first!r}"])
    # Wait for a random number of commits, then a random fraction (0 .. 1.2) of one batch's time:
    # the kill lands anywhere in the next batch (embedding, memory update, or the commit itself),
    # whatever the machine's load.
    n_batches = len(ref.digests) - 1
    target = rng.randrange(n_batches)
    t0 = last = time.perf_counter()
    gap = ref.child_seconds / max(n_batches, 1)
    seen, consumed, reported = 0, [], 0
    while seen < target:
        line = proc.stdout.readline()
        consumed.append(line)
        if not line.startswith(b"committed"):
            break
        if int(line.split()[1]) > reported:  # progress also reports after each file: count commits
            now = time.perf_counter()
            gap, last, seen, reported = now - last, now, seen + 1, int(line.split()[1])
    time.sleep(rng.uniform(0.0, 1.2 * gap))
    os.kill(proc.pid, signal.SIGKILL)
    delay = time.perf_counter() - t0
    proc.wait()
    out = b"".join([*consumed, proc.stdout.read()]).decode().split()
    proc.stdout.close()
    counts = [int(x) for x in out if x.isdigit()]
    committed = max(counts, default=0)
    with sqlite3.connect(db) as con:
        try:
            in_db = con.execute("SELECT count(*) FROM occurrences").fetchone()[0]
        except sqlite3.OperationalError:
            in_db = 0
    result = TrialResult(i, delay, committed, in_db, "done" in out)
    result.problems += [f"after kill: {p}" for p in check_database(db, ref, committed, finished=False)]
    with MemoryAgent.open(db, agent_config(), embedder=TinyEmbedder()) as agent:
        agent.ingest(folder)
        again = agent.ingest(folder)
    if again.unchanged != ref.n_docs or again.chunks:
        result.problems.append(f"third ingest: {again.unchanged} unchanged, {again.chunks} chunks written")
    result.problems += [f"after re-run: {p}" for p in check_database(db, ref, committed, finished=True)]
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return result


def run(
    trials: int, seed: int = 0, work: Path | None = None, n_files: int = N_FILES
) -> tuple[Reference, list[TrialResult]]:
    """Run ``trials`` kill-and-check trials on ``n_files`` generated files in ``work`` (a temporary
    folder by default)."""
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="titans-crash-") as tmp:
        base = Path(work) if work is not None else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        folder = base / "corpus"
        make_corpus(folder, seed, n_files)
        ref = reference_run(folder, base / "reference.db")
        ref.child_seconds = time_child(folder, base)
        rng = random.Random(seed)
        return ref, [run_trial(i, rng, folder, base, ref) for i in range(trials)]


def report(ref: Reference, results: list[TrialResult]) -> str:
    clean = sum(r.clean for r in results)
    mid = [r for r in results if not r.finished_before_kill]
    lines = [
        "# Crash harness (benchmarks/crash.py)",
        "",
        f"{clean}/{len(results)} clean trials. Corpus: {ref.n_docs} files, {len(ref.occurrences)} chunks "
        f"(batches of 8); an uninterrupted ingest takes {ref.seconds:.2f} s in-process, "
        f"{ref.child_seconds:.2f} s in the child. Each kill waits for a random number of commits, then "
        "a random 0-1.2 x the last batch's time.",
        f"{len(mid)} kills landed mid-ingest (the others after the child finished); "
        f"chunks in the database at the kill: min {min((r.in_db for r in mid), default=0)}, "
        f"median {sorted(r.in_db for r in mid)[len(mid) // 2] if mid else 0}, "
        f"max {max((r.in_db for r in mid), default=0)} of {len(ref.occurrences)}.",
        "",
        "| trial | kill after (s) | reported committed | in database | clean |",
        "|---:|---:|---:|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.trial} | {r.kill_after_s:.3f} | {r.committed} | {r.in_db} | "
            f"{'yes' if r.clean else 'NO: ' + '; '.join(r.problems)} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--files", type=int, default=N_FILES, help="generated files to ingest")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "crash.md")
    parser.add_argument("--child", nargs=2, metavar=("DB", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(*args.child)
        return
    t0 = time.perf_counter()
    ref, results = run(args.trials, args.seed, n_files=args.files)
    text = report(ref, results) + f"\nTotal time {time.perf_counter() - t0:.0f} s.\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    sys.exit(0 if all(r.clean for r in results) else 1)


if __name__ == "__main__":
    main()
