"""Recall latency at 1,000, 10,000 and 100,000 stored records, next to the query embedding alone.

Target: recall over 100,000 stored records on 2 CPU cores, p50 under 50 ms
including the query embedding.

Corpus: real text that is on every machine with Python, freely licensed: the paragraphs of the
docstrings of the standard library and of the installed packages (read with ``ast``, nothing is
imported), and of the text files under /usr/share/doc (READMEs, *.txt, *.md). Each paragraph is a
sentence to a paragraph long (60-600 characters). Consecutive paragraphs of one file make one
session of at most 20 turns (roles alternating "user" / "assistant", one minute apart), written with
:meth:`MemoryAgent.add_turns`, so recall runs its whole default pipeline: BM25 (the in-memory index), dense cosine,
score fusion, neighbour expansion and supersession links. Sessions are shuffled with a fixed seed;
the 1k and 10k databases hold the first records of the 100k one.

Queries: one-line docstring summaries ("Return the number of ...") of functions whose docstrings
were left out of the corpus, so no query is a stored text.

Measured, after a warm-up, over ``--queries`` queries per size, with the real default embedder
(all-MiniLM-L6-v2):

- recall p50 / p95: one :meth:`MemoryAgent.recall` call (k = 10), query embedding included;
- embedding p50 / p95: the embedder alone on the query;
- a breakdown of medians, each stage replayed alone on the same query: lexical (the search of the
  namespace's BM25 index, :class:`titans_agent.bm25.BM25Index`, built here as recall builds it),
  dense (the matrix-vector product, over a float16 copy from ``HALF_SCAN_ROWS`` records on, as
  recall scans, and the top-k), and the rest (fusion, neighbour map, supersession links, hits) =
  recall - embedding - lexical - dense;
- the lexical index's build time (the first recall of a namespace in a process pays it once).

Build: the corpus, its embeddings (the real embedder, computed once) and the databases are cached
under benchmarks/.cache/ (ignored by git), so a rerun measures only. The build times are reported.

    python benchmarks/recall_latency.py [--sizes 1000 10000 100000] [--queries 300] [--threads 2]
                                        [--record-embeddings real|hash] [--build-only]
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import gzip
import hashlib
import json
import os
import platform
import random
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sqlalchemy import text as sql_text

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"

from titans_agent import AgentConfig, MemoryAgent  # noqa: E402
from titans_agent.bm25 import BM25Index  # noqa: E402
from titans_agent.embeddings import load_embedder  # noqa: E402
from titans_agent.recall import HALF_SCAN_ROWS, lexical_terms  # noqa: E402
from titans_agent.retrieval import rank_by_similarity  # noqa: E402
from titans_agent.store.context import lexical_rows  # noqa: E402

CORPUS_VERSION = 1
SESSION_TURNS = 20
ROLES = ("user", "assistant")
_MIN_CHARS, _MAX_CHARS = 60, 600


# ---------------------------------------------------------------------------------------------- corpus
def _paragraphs(text: str) -> list[str]:
    out = []
    for para in re.split(r"\n\s*\n", text):
        s = " ".join(para.split())
        if _MIN_CHARS <= len(s) <= _MAX_CHARS and sum(c.isalpha() for c in s) > 0.6 * len(s):
            out.append(s)
    return out


def _docstring_files() -> list[Path]:
    roots = [Path(os.__file__).parent]
    roots += [Path(p) for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    files = []
    for root in dict.fromkeys(roots):
        files += [p for p in sorted(root.rglob("*.py")) if not ({"test", "tests"} & set(p.parts))]
    return files


def _doc_files() -> list[Path]:
    root = Path("/usr/share/doc")
    if not root.is_dir():
        return []
    pat = re.compile(r"^(README.*|.*\.txt|.*\.md|.*\.rst)(\.gz)?$", re.IGNORECASE)
    return [p for p in sorted(root.rglob("*")) if p.is_file() and pat.match(p.name)]


def build_corpus(n_records: int, n_queries: int, seed: int = 0) -> tuple[list[dict], list[str]]:
    """``n_records`` turns ``{"session", "role", "text"}`` in write order, and ``n_queries`` queries."""
    sources: list[tuple[str, list[str]]] = []  # (file, paragraphs)
    summaries: list[tuple[str, str, list[str]]] = []  # (file, summary line, its docstring's paragraphs)
    for path in _docstring_files():
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
            continue
        paras: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node)
                if not doc:
                    continue
                ps = _paragraphs(doc)
                first = " ".join(doc.strip().split("\n\n")[0].split())
                if isinstance(node, ast.FunctionDef) and 25 <= len(first) <= 150 and first.endswith("."):
                    summaries.append((str(path), first, ps))
                paras += ps
        if paras:
            sources.append((str(path), paras))
    for path in _doc_files():
        try:
            raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            paras = _paragraphs(raw.decode("utf-8"))
        except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
            continue
        if paras:
            sources.append((str(path), paras))
    rng = random.Random(seed)
    rng.shuffle(summaries)
    queries, held_out = [], set()
    for _, first, ps in summaries:
        if first not in held_out and len(queries) < n_queries:
            queries.append(first)
            held_out.update(ps)  # the whole docstring leaves the corpus
            held_out.add(first)
    seen = set(held_out)
    sessions: list[list[str]] = []
    for _, paras in sources:
        fresh = [p for p in dict.fromkeys(paras) if p not in seen]
        seen.update(fresh)
        sessions += [fresh[i : i + SESSION_TURNS] for i in range(0, len(fresh), SESSION_TURNS)]
    rng.shuffle(sessions)
    turns: list[dict] = []
    for si, sess in enumerate(sessions):
        for ti, text in enumerate(sess):
            turns.append({"session": f"s{si}", "role": ROLES[ti % 2], "text": text})
        if len(turns) >= n_records:
            break
    if len(turns) < n_records:
        raise SystemExit(f"only {len(turns)} paragraphs of text found; {n_records} needed")
    return turns[:n_records], queries


def load_corpus(n_records: int, n_queries: int) -> tuple[list[dict], list[str], float]:
    """The first ``n_records`` turns and ``n_queries`` queries of the cached corpus (built once, with
    at least 100,000 turns, so every size is a prefix of the same one)."""
    n_build, q_build = max(n_records, 100_000), max(n_queries, 320)
    path = CACHE / f"corpus_v{CORPUS_VERSION}_{n_build}_{q_build}.json"
    if path.exists():
        data = json.loads(path.read_text())
    else:
        t0 = time.perf_counter()
        turns, queries = build_corpus(n_build, q_build)
        data = {"turns": turns, "queries": queries, "build_s": time.perf_counter() - t0}
        path.write_text(json.dumps(data))
    return data["turns"][:n_records], data["queries"][:n_queries], data["build_s"]


def _ensure_cache() -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    ignore = CACHE / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# corpus, embeddings and databases of benchmarks/recall_latency.py\n*\n")


# ---------------------------------------------------------------------------------------------- embeddings
def embed_input(turn: dict) -> str:
    """What MemoryAgent.add_turns embeds for a one-piece turn: "<role>: <text>"."""
    return f"{turn['role'][:40]}: {turn['text'].strip()}"


def corpus_embeddings(turns: list[dict], embedder, block: int = 4096) -> tuple[np.ndarray, float]:
    """``(n, d)`` embeddings of the turns with the real embedder, cached block by block (resumable)."""
    d = embedder.dim
    folder = CACHE / f"emb_v{CORPUS_VERSION}"
    folder.mkdir(exist_ok=True)
    timing = folder / "embed_s.json"
    spent = json.loads(timing.read_text()) if timing.exists() else {}
    out = np.zeros((len(turns), d), dtype=np.float32)
    for b, start in enumerate(range(0, len(turns), block)):
        part = folder / f"block_{b:04d}.npy"
        texts = [embed_input(t) for t in turns[start : start + block]]
        if part.exists() and np.load(part).shape == (len(texts), d):
            out[start : start + len(texts)] = np.load(part)
            continue
        t0 = time.perf_counter()
        emb = embedder.embed(texts)
        spent[str(b)] = time.perf_counter() - t0
        np.save(part, emb)
        timing.write_text(json.dumps(spent))
        out[start : start + len(texts)] = emb
        print(f"  embedded {start + len(texts)}/{len(turns)} ({spent[str(b)]:.0f} s for {len(texts)})", flush=True)
    return out, float(sum(spent.values()))


class HashingEmbedder:
    """A stand-in for the records' vectors when there is no time to embed 100,000 texts with the real
    model (``--record-embeddings hash``): signed feature hashing of the lower-cased words into d = 384
    dimensions, unit norm. It carries the real embedder's name, so the database is opened and queried
    with the real model; recall then costs the same (the same matmul, BM25, fusion and SQL), but its
    dense ranking means little. Never used to embed queries."""

    def __init__(self, real) -> None:
        self.name, self.dim, self.max_tokens, self.tokenizer = real.name, real.dim, real.max_tokens, real.tokenizer

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 20) & 1 else -1.0
            out[i] += 0.01
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


class CachedEmbedder:
    """The real embedder, with the corpus's embeddings (computed by it) looked up instead of recomputed.

    Used only to build the databases; recall is measured with the real embedder."""

    def __init__(self, real, texts: list[str], emb: np.ndarray) -> None:
        self.real, self.name, self.dim = real, real.name, real.dim
        self.max_tokens, self.tokenizer = real.max_tokens, real.tokenizer
        self.index = {t: i for i, t in enumerate(texts)}
        self.emb = emb
        self.misses = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        rows = [self.index.get(t) for t in texts]
        missing = [t for t, r in zip(texts, rows) if r is None]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if missing:
            self.misses += len(missing)
            fresh = iter(self.real.embed(missing))
        for i, r in enumerate(rows):
            out[i] = self.emb[r] if r is not None else next(fresh)
        return out


# ---------------------------------------------------------------------------------------------- databases
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def build_database(target: str, turns: list[dict], embedder, batch: int = 2048) -> float:
    """Write ``turns`` through MemoryAgent.add_turns; returns the seconds it took."""
    t0 = time.perf_counter()
    with MemoryAgent.open(target, AgentConfig(batch_size=256), embedder=embedder) as agent:
        for start in range(0, len(turns), batch):
            part = turns[start : start + batch]
            agent.add_turns(
                [(t["session"], t["role"], t["text"], T0 + dt.timedelta(minutes=start + i)) for i, t in enumerate(part)]
            )
            if (start // batch) % 10 == 9:
                print(f"  wrote {start + len(part)}/{len(turns)} ({time.perf_counter() - t0:.0f} s)", flush=True)
        n = agent.stats().records
    if n != len(set(t["text"] for t in turns)):
        print(
            f"  note: {n} records for {len(turns)} turns "
            "(a turn longer than the window is split; repeats are not stored twice)"
        )
    return time.perf_counter() - t0


def spread_turns(turns: list[dict], n_namespaces: int) -> list[tuple[str, list[dict]]]:
    """``turns`` dealt over ``n_namespaces`` namespaces session by session, in rounds (namespace 0
    gets the first session, namespace 1 the second, ...), so each namespace's records are
    interleaved with the others' in id order, as when many users write at once: ``[(namespace,
    its turns of this round)]`` in write order. The queried namespace is "ns0"."""
    sessions: list[list[dict]] = []
    for t in turns:
        if not sessions or sessions[-1][0]["session"] != t["session"]:
            sessions.append([])
        sessions[-1].append(t)
    return [(f"ns{i % n_namespaces}", sess) for i, sess in enumerate(sessions)]


def build_spread(target: str, turns: list[dict], embedder, n_namespaces: int, batch: int = 4096) -> float:
    """Write ``turns`` over ``n_namespaces`` namespaces (:func:`spread_turns`) through add_turns, a
    round of consecutive sessions per call to each namespace; returns the seconds it took."""
    t0 = time.perf_counter()
    parts = spread_turns(turns, n_namespaces)
    per_round = max(batch // SESSION_TURNS, n_namespaces)  # sessions per round: each namespace once or more
    with MemoryAgent.open(target, AgentConfig(batch_size=256), embedder=embedder) as agent:
        done = 0
        for start in range(0, len(parts), per_round):
            by_ns: dict[str, list[dict]] = {}
            for ns, sess in parts[start : start + per_round]:
                by_ns.setdefault(ns, []).extend(sess)
            for ns, part in by_ns.items():
                agent.add_turns(
                    [
                        (t["session"], t["role"], t["text"], T0 + dt.timedelta(minutes=done + i))
                        for i, t in enumerate(part)
                    ],
                    namespace=ns,
                )
                done += len(part)
            print(f"  wrote {done}/{len(turns)} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return time.perf_counter() - t0


def pg_admin_url(url: str) -> tuple[str, str]:
    """The server's maintenance database URL and the database name of ``url``."""
    base, name = url.rsplit("/", 1)
    return f"{base}/postgres", name


def pg_fresh_database(url: str) -> None:
    """Drop and create the (benchmark's own) database of ``url``."""
    from sqlalchemy import create_engine

    admin, name = pg_admin_url(url)
    if name in ("test", "postgres", "template0", "template1"):
        raise SystemExit(f"refusing to drop database {name!r}; give --pg-url a database of the benchmark's own")
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sql_text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(sql_text(f'CREATE DATABASE "{name}"'))
    engine.dispose()


def pg_analyze(url: str) -> None:
    """ANALYZE the freshly built database: a server whose autovacuum is off (as a test server may
    be) keeps no statistics for it, and without them the planner picks nested-loop scans (recall
    p50 657 ms instead of ~180 ms at 10,000 records, under load 3.4); a production server's
    autovacuum would have analyzed the tables."""
    from sqlalchemy import create_engine

    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sql_text("ANALYZE"))
    engine.dispose()


def database(
    backend: str, size: int, turns: list[dict], embedder, mode: str, spread: int, pg_url: str
) -> tuple[str, float | None]:
    """The target (path or URL) of a built database of ``size`` turns (built when missing; a marker
    file under the cache says it was finished) and its build seconds."""
    tag = f"v{CORPUS_VERSION}_{mode}_{size}" + (f"_spread{spread}" if spread else "")
    done = CACHE / f"recall_{backend}_{tag}.built"
    if backend == "sqlite":
        path = CACHE / f"recall_{tag}.db"
        target = str(path)
    else:
        target = f"{pg_url}_{tag}"
    if done.exists() and (backend != "sqlite" or Path(target).exists()):
        return target, json.loads(done.read_text())["build_s"]
    if backend == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(f"{target}{suffix}").unlink(missing_ok=True)
    else:
        pg_fresh_database(target)
    print(f"building {backend} {tag} ({size} turns) ...", flush=True)
    if spread:
        build_s = build_spread(target, turns[:size], embedder, spread)
    else:
        build_s = build_database(target, turns[:size], embedder)
    if backend == "postgresql":
        pg_analyze(target)
    done.write_text(json.dumps({"build_s": build_s}))
    return target, build_s


# ---------------------------------------------------------------------------------------------- measurement
def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def dense_index(agent: MemoryAgent, namespace: str = "default") -> tuple[int, np.ndarray, torch.Tensor]:
    """The namespace's id and the dense index recall keeps cached for it, read from the database
    the same way: record ids in id order and their embeddings as one float32 matrix on the agent's
    device."""
    with agent.store.engine.connect() as conn:
        ns_id = conn.execute(sql_text("SELECT id FROM namespaces WHERE name = :n"), {"n": namespace}).scalar_one()
        rows = conn.execute(
            sql_text("SELECT id, embedding FROM records WHERE namespace_id = :ns ORDER BY id"), {"ns": ns_id}
        ).all()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    blob = b"".join(bytes(r[1]) for r in rows)
    emb = torch.from_numpy(np.frombuffer(blob, dtype=np.float32).reshape(len(rows), agent.embedder.dim).copy()).to(
        agent.device
    )
    return ns_id, ids, emb


def measure(
    agent: MemoryAgent, queries: list[str], k: int, warmup: int, namespace: str = "default"
) -> dict[str, list[float]]:
    """Per query, in ms: whole recall; and each stage replayed alone (embedding, lexical, dense)."""
    rcfg = agent.config.retrieval
    for q in queries[:warmup]:
        agent.recall(q, k=k, namespace=namespace)
        agent.embedder.embed([q])
    out: dict[str, list[float]] = {"recall": [], "embed": [], "lexical": [], "dense": [], "hits": []}
    ns_id, ids, emb = dense_index(agent, namespace)
    half = emb.half() if emb.shape[0] >= HALF_SCAN_ROWS else None
    t0 = time.perf_counter()
    lexical = BM25Index()
    with agent.store.session() as s:
        lexical.add(lexical_rows(s, ns_id))
    out["lexical_build"] = [(time.perf_counter() - t0) * 1e3]
    n_cand = max(rcfg.candidates, k)
    for q in queries:
        t0 = time.perf_counter()
        hits = agent.recall(q, k=k, namespace=namespace)
        out["recall"].append((time.perf_counter() - t0) * 1e3)
        out["hits"].append(len(hits))
        t0 = time.perf_counter()
        qv = torch.from_numpy(agent.embedder.embed([q])).to(agent.device)
        out["embed"].append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        lexical.search(lexical_terms(q), n_cand)
        out["lexical"].append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        with torch.no_grad():  # as recall scans: a float16 copy from HALF_SCAN_ROWS records on
            sims = (half @ qv[0].half()).float() if half is not None else emb @ qv[0]
            rank_by_similarity({}, "dense", ids, sims, None, n_cand)
        out["dense"].append((time.perf_counter() - t0) * 1e3)
    return out


def row(label: str, n_records: int, m: dict[str, list[float]], load: float) -> dict:
    med = {key: statistics.median(v) for key, v in m.items()}
    return {
        "backend": label,
        "records": n_records,
        "recall_p50": med["recall"],
        "recall_p95": pct(m["recall"], 95),
        "embed_p50": med["embed"],
        "embed_p95": pct(m["embed"], 95),
        "lexical_p50": med["lexical"],
        "dense_p50": med["dense"],
        "rest_p50": max(0.0, med["recall"] - med["embed"] - med["lexical"] - med["dense"]),
        "mean_hits": statistics.mean(m["hits"]),
        "lexical_build_ms": m["lexical_build"][0],
        "load": load,
    }


def table(rows: list[dict]) -> str:
    head = (
        "| backend | records | recall p50 (ms) | recall p95 (ms) | query embedding p50 (ms) | embedding p95 (ms) "
        "| lexical p50 | dense p50 | fusion + rest p50 | target p50 < 50 ms | lexical index build (ms) | load avg |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"
    )
    lines = [head]
    for r in rows:
        ok = "met" if r["recall_p50"] < 50 else "**missed**"
        lines.append(
            f"| {r['backend']} | {r['records']:,} | {r['recall_p50']:.1f} | {r['recall_p95']:.1f} "
            f"| {r['embed_p50']:.1f} | {r['embed_p95']:.1f} | {r['lexical_p50']:.1f} "
            f"| {r['dense_p50']:.1f} | {r['rest_p50']:.1f} "
            f"| {ok if r['records'] >= 100_000 else '-'} | {r['lexical_build_ms']:,.0f} | {r['load']:.2f} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for backend in dict.fromkeys(r["backend"] for r in rows):
        rs = sorted((r for r in rows if r["backend"] == backend), key=lambda r: r["records"])
        xs = [r["records"] for r in rs]
        ax.plot(xs, [r["recall_p50"] for r in rs], "o-", label=f"{backend}: recall p50")
        ax.plot(xs, [r["recall_p95"] for r in rs], "o:", label=f"{backend}: recall p95")
    base = sorted(rows, key=lambda r: r["records"])
    ax.plot(
        [r["records"] for r in base],
        [r["embed_p50"] for r in base],
        "s--",
        color="grey",
        label="query embedding alone p50",
    )
    ax.axhline(50, color="red", lw=0.8, label="target: p50 < 50 ms at 100k")
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("stored records")
    ax.set_ylabel("latency (ms)")
    ax.set_title("MemoryAgent.recall latency (k = 10, all-MiniLM-L6-v2)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def load_avg() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads for the measurement (default: 2 when the 1-minute load average is under 2.5, else 1)",
    )
    parser.add_argument("--build-threads", type=int, default=1, help="torch threads to embed the corpus")
    parser.add_argument(
        "--record-embeddings",
        choices=["real", "hash"],
        default="real",
        help="the stored records' vectors: the real model (default; about an hour for 100k texts on one "
        "thread) or a hashing stand-in (minutes; same recall cost, see HashingEmbedder)",
    )
    parser.add_argument("--backends", nargs="+", choices=["sqlite", "postgresql"], default=["sqlite"])
    parser.add_argument(
        "--pg-url",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/titans_latency",
        help="the benchmark's own PostgreSQL database name prefix (a database per size is made under it)",
    )
    parser.add_argument(
        "--spread",
        type=int,
        default=0,
        help="spread each size's records over this many namespaces (sessions dealt in rounds) and query one",
    )
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    _ensure_cache()
    n_max = max(args.sizes)
    torch.set_num_threads(args.build_threads)
    turns, queries, corpus_s = load_corpus(n_max, args.queries + args.warmup)
    print(f"corpus: {len(turns)} turns, {len(queries)} queries (built in {corpus_s:.0f} s)", flush=True)
    real = load_embedder("all-MiniLM-L6-v2", device="cpu")
    mode = args.record_embeddings
    if mode == "real":
        emb, embed_s = corpus_embeddings(turns, real)
        print(f"corpus embeddings: {embed_s:.0f} s, {args.build_threads} thread(s), {len(turns) / embed_s:.0f} texts/s")
        writer: CachedEmbedder | HashingEmbedder = CachedEmbedder(real, [embed_input(t) for t in turns], emb)
    else:
        embed_s, writer = None, HashingEmbedder(real)
    dbs = {
        (backend, size): database(backend, size, turns, writer, mode, args.spread, args.pg_url)
        for backend in args.backends
        for size in args.sizes
    }
    if isinstance(writer, CachedEmbedder) and writer.misses:
        print(f"  {writer.misses} texts were not in the embedding cache (embedded during the build)")
    if args.build_only:
        return 0
    warm, measured = queries[: args.warmup], queries[args.warmup :]
    load = load_avg()
    threads = args.threads or (2 if load < 2.5 else 1)
    torch.set_num_threads(threads)
    print(f"measuring with {threads} torch thread(s); load average {load:.2f}", flush=True)
    rows = []
    namespace = "ns0" if args.spread else "default"
    for (backend, size), (target, _) in dbs.items():
        with MemoryAgent.open(target, embedder=real) as agent:
            m = measure(agent, warm + measured, args.k, len(warm), namespace)
            # measure() recalls the warm-up queries again; keep only the measured ones
            m = {key: v if key == "lexical_build" else v[len(warm) :] for key, v in m.items()}
            in_ns = agent.stats(namespace=namespace).records  # what is there (a build may have been cut short)
        label = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}[backend]
        n = size if args.spread else in_ns
        rows.append(row(label, n, m, load_avg()) | {"namespace_records": in_ns, "spread": args.spread})
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    build = {f"{backend} {size:,}": b for (backend, size), (_, b) in dbs.items()}
    skipped = [n for n in (1_000, 10_000, 100_000) if n not in args.sizes]
    spread = (
        f" The records are spread over {args.spread:,} namespaces (sessions dealt in rounds, so a namespace's "
        f"records interleave with the others'); recall queries one of them, namespace `ns0` "
        f"({rows[0]['namespace_records']:,} records)."
        if args.spread
        else ""
    )
    md = [
        f"## {dt.date.today().isoformat()}: "
        + ", ".join(dict.fromkeys(r["backend"] for r in rows))
        + (f", spread over {args.spread:,} namespaces" if args.spread else ""),
        "",
        f"`python benchmarks/recall_latency.py {' '.join(sys.argv[1:])}` on "
        f"{platform.machine()} ({os.cpu_count()} CPU cores), "
        f"torch {torch.__version__}, {threads} torch thread(s), {len(measured)} queries after {len(warm)} "
        f"warm-up queries, k = {args.k}, default AgentConfig.{spread}",
        "",
        "Stored records embedded with "
        + (
            "the real model (all-MiniLM-L6-v2)."
            if mode == "real"
            else "**a hashing stand-in** (`--record-embeddings hash`: the real model would have taken over an "
            "hour on the shared CPUs); every query is embedded by the real all-MiniLM-L6-v2 inside recall, "
            "and recall does the same work (the same matmul over 384-dim vectors, BM25, fusion, SQL); "
            "only which records the dense signal picks differs."
        ),
        "",
        table(rows),
        "",
        "Recall includes the query embedding. The breakdown columns are each stage replayed alone on the "
        "same query (medians); fusion + rest (neighbour map, supersession links, hits) is the remainder.",
        f"Load average during the run: {min(r['load'] for r in rows):.2f}-{max(r['load'] for r in rows):.2f} "
        "(1-minute load average; above 2, other processes competed for the 2 cores, and the run used 1 torch "
        "thread instead of 2).",
        *(
            [
                "Not measured in this run (`--sizes`): "
                + ", ".join(f"{n:,}" for n in skipped)
                + " records; the 100,000-record database takes over an hour to build on 2 shared cores."
            ]
            if skipped
            else []
        ),
        "",
        f"Build (cached under benchmarks/.cache/): corpus {corpus_s:.0f} s; "
        + (
            f"embedding {len(turns):,} texts with the real embedder {embed_s:.0f} s ({len(turns) / embed_s:.0f} "
            "texts/s); "
            if embed_s
            else ""
        )
        + "add_turns: "
        + ", ".join(f"{s} records {b:.0f} s" for s, b in build.items() if b is not None)
        + ".",
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    # the newest run first, under the title; earlier runs' sections stay below it
    path = args.out / "recall_latency.md"
    old = path.read_text().split("\n", 1)[1].lstrip("\n") if path.exists() else ""
    path.write_text("# Recall latency\n\n" + "\n".join(md) + "\n\n" + old)
    (args.out / "recall_latency.json").write_text(json.dumps({"rows": rows, "build_s": build}, indent=1))
    plot(rows, args.out / "recall_latency.png")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
