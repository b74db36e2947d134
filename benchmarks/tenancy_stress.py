"""Tenancy stress: processes writing, dropping, rebuilding, exporting and importing a few shared
namespaces at once must never put a row of one namespace into another, nor raise a driver error.

Per backend (one SQLite file; one fresh schema of a PostgreSQL database, dropped at the end),
``--processes`` processes (default 5) start together and loop for ``--seconds`` (default 60), each
picking at random an operation and one of three namespace names shared by all of them:
add_turn, add_turns (several sessions, several batches), remember (sometimes ``replace=True``),
ingest of a named text, update_metadata, drop_namespace, rebuild_memory, forget(unlearn=True),
export of the namespace, and import of one of its own earlier exports (half the time right after
dropping that namespace, as a restore from a backup does). Every name a process
writes carries the namespace's name (session ``acme-p3-s1``, source ``acme:note:2``, texts holding
the word ``acme`` and no other namespace's), so a row in the wrong namespace is found exactly.

What counts as a violation (the script exits 1 on any):

- an exception a caller may not expect. Expected, and counted by class: ``NamespaceNotFoundError``
  (forget or update_metadata of a namespace another process dropped; a document's batch whose
  namespace was dropped under the ingest; an export of a namespace dropped before it read), ``InvalidInputError``
  from import (the namespace exists: import never merges), ``StoreError`` saying the database stayed
  busy past the retry budget. Anything else (a driver's ``IntegrityError``, a ``StoreError`` of
  another kind, ...) is a violation;
- an export of namespace X holding a session, source or text of another namespace;
- at the end, checked with SQL: a turn whose session and occurrence are in different namespaces
  (or different sessions), an occurrence in another namespace than its record, document or
  metadata terms, a supersession link across namespaces, a session, source, document or record
  text named for another namespace, a row whose namespace does not exist, a record without an
  occurrence, a session without a turn, a turn without its occurrence, a namespace without an
  incarnation or sharing one; and a memory state that is not finite.

The embedder is a deterministic hashed bag of words in 32 dimensions (benchmarks/crash.py's), so
the run is fast, offline and loads no model.

    python benchmarks/tenancy_stress.py                      # 60 s on each backend; writes the table
    python benchmarks/tenancy_stress.py --seconds 5 --backends sqlite --out ''
    python benchmarks/tenancy_stress.py --child URL WORK P SEED SECONDS   # (internal) one process
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

NAMES = ("acme", "globex", "initech")
WORDS = "invoice pager rota backup server port deploy ticket budget audit review launch meeting".split()
OPS = {  # op -> weight
    "add_turn": 6,
    "add_turns": 3,
    "remember": 5,
    "ingest": 2,
    "update_metadata": 2,
    "drop_namespace": 2,
    "rebuild_memory": 1,
    "forget_unlearn": 2,
    "export": 2,
    "import": 2,
}
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def agent_config() -> Any:
    from titans_agent import AgentConfig

    return AgentConfig(device="cpu", chunk_tokens=32, batch_size=4, checkpoint_units=8)


# ---------------------------------------------------------------------- one process
def _sentence(rng: random.Random, ns: str) -> str:
    return f"{ns} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) + f" n{rng.randrange(10**6)}."


def expected_error(op: str, exc: BaseException) -> bool:
    """Whether ``exc`` raised by ``op`` is an error the API documents for what a concurrent drop,
    import or lock conflict does (see the module docstring)."""
    from titans_agent import InvalidInputError, NamespaceNotFoundError, StoreError

    msg = str(exc)
    if isinstance(exc, NamespaceNotFoundError):
        return op in ("forget_unlearn", "update_metadata", "ingest", "export")
    if isinstance(exc, InvalidInputError):
        return op == "import" and "already exists" in msg
    if isinstance(exc, StoreError):
        return type(exc) is StoreError and "busy" in msg
    return False


def export_strays(path: Path, ns: str) -> list[str]:
    """What an export of namespace ``ns`` holds of another namespace: session ids, sources and
    texts that do not carry ``ns``'s name."""
    others = [n for n in NAMES if n != ns]
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for key in ("session_id", "source"):
            value = row.get(key)
            if isinstance(value, str) and not (value.startswith(f"{ns}-") or value.startswith(f"{ns}:")):
                if not value.startswith(f"session:{ns}-"):
                    out.append(f"{row.get('type')} {key}={value!r}")
        text = row.get("text") or row.get("content")
        if isinstance(text, str) and (ns not in text.split() or any(o in text.split() for o in others)):
            out.append(f"{row.get('type')} text={text[:60]!r}")
        if row.get("type") == "namespace" and row.get("name") != ns:
            out.append(f"namespace {row.get('name')!r}")
    return out


def child_main(url: str, work: str, proc: int, seed: int, seconds: float) -> None:
    """Loop over random operations until ``seconds`` have passed; print the counts as JSON."""
    import torch

    torch.set_num_threads(1)
    from crash import TinyEmbedder

    from titans_agent import MemoryAgent, export_jsonl, import_jsonl

    rng = random.Random(seed * 1000 + proc)
    folder = Path(work)
    agent = MemoryAgent.open(url, agent_config(), embedder=TinyEmbedder())
    print("ready", flush=True)
    go = folder / "go"
    while not go.exists():
        time.sleep(0.01)
    done: collections.Counter[str] = collections.Counter()
    errors: collections.Counter[str] = collections.Counter()
    violations: list[str] = []
    exports: list[tuple[str, Path]] = []
    deadline = time.monotonic() + seconds
    k = 0
    while time.monotonic() < deadline:
        k += 1
        op = rng.choices(list(OPS), weights=list(OPS.values()))[0]
        ns = rng.choice(NAMES)
        try:
            if op == "add_turn":
                agent.add_turn(f"{ns}-p{proc}-s{rng.randrange(4)}", "user", _sentence(rng, ns), namespace=ns)
            elif op == "add_turns":
                turns = [
                    (f"{ns}-p{proc}-s{rng.randrange(4)}", rng.choice(["user", "assistant"]), _sentence(rng, ns))
                    for _ in range(rng.randint(3, 9))
                ]
                agent.add_turns(turns, namespace=ns)
            elif op == "remember":
                agent.remember(
                    _sentence(rng, ns),
                    {"ns": ns, "p": proc},
                    source=f"{ns}:note:{rng.randrange(6)}",
                    namespace=ns,
                    replace=rng.random() < 0.3,
                )
            elif op == "ingest":
                text = "\n\n".join(" ".join(_sentence(rng, ns) for _ in range(3)) for _ in range(rng.randint(2, 5)))
                agent.ingest(text, source=f"{ns}:doc:{rng.randrange(3)}", namespace=ns, metadata={"ns": ns})
            elif op == "update_metadata":
                agent.update_metadata({"ns": ns, "tag": k}, source=f"{ns}:note:{rng.randrange(6)}", namespace=ns)
            elif op == "drop_namespace":
                agent.drop_namespace(ns)
            elif op == "rebuild_memory":
                agent.rebuild_memory(ns)
            elif op == "forget_unlearn":
                source = rng.choice(
                    [f"{ns}:note:{rng.randrange(6)}", f"session:{ns}-p{rng.randrange(5)}-s{rng.randrange(4)}"]
                )
                agent.forget(source=source, namespace=ns, unlearn=True)
            elif op == "export":
                path = folder / f"p{proc}-{k}-{ns}.jsonl"
                export_jsonl(agent, path, [ns])
                strays = export_strays(path, ns)
                if strays:
                    violations.append(f"export of {ns} holds another namespace's rows: {strays[:3]}")
                exports = [*exports[-4:], (ns, path)]
            elif op == "import":
                if not exports:
                    continue
                old, path = rng.choice(exports)
                if rng.random() < 0.5:  # a restore: drop the namespace, then import its backup
                    agent.drop_namespace(old)
                import_jsonl(agent, path)
            done[op] += 1
        except Exception as exc:  # counted: expected ones by class, any other is a violation
            name = type(exc).__name__
            if expected_error(op, exc):
                errors[f"{op}: {name}"] += 1
            else:
                errors[f"{op}: {name} (violation)"] += 1
                violations.append(f"{op} in {ns}: {name}: {str(exc)[:400]}")
    agent.close()
    print(json.dumps({"done": done, "errors": errors, "violations": violations}), flush=True)


# ---------------------------------------------------------------------- the checks at the end
CHECKS = {
    "turn whose session and occurrence are in different namespaces": "SELECT count(*) FROM turns t "
    "JOIN sessions s ON s.id = t.session_pk JOIN occurrences o ON o.id = t.occurrence_id "
    "WHERE s.namespace_id <> o.namespace_id OR s.session_id <> o.session_id",
    "occurrence in another namespace than its record": "SELECT count(*) FROM occurrences o "
    "JOIN records r ON r.id = o.record_id WHERE o.namespace_id <> r.namespace_id",
    "occurrence in another namespace than its document": "SELECT count(*) FROM occurrences o "
    "JOIN documents d ON d.id = o.document_id WHERE o.namespace_id <> d.namespace_id",
    "metadata term in another namespace than its occurrence": "SELECT count(*) FROM metadata_terms m "
    "JOIN occurrences o ON o.id = m.occurrence_id WHERE m.namespace_id <> o.namespace_id",
    "supersession link across namespaces": "SELECT count(*) FROM supersessions x "
    "JOIN records a ON a.id = x.old_record_id JOIN records b ON b.id = x.new_record_id "
    "WHERE a.namespace_id <> x.namespace_id OR b.namespace_id <> x.namespace_id",
    "session named for another namespace": "SELECT count(*) FROM sessions s JOIN namespaces n "
    "ON n.id = s.namespace_id WHERE s.session_id NOT LIKE n.name || '-%'",
    "occurrence source named for another namespace": "SELECT count(*) FROM occurrences o JOIN namespaces n "
    "ON n.id = o.namespace_id WHERE o.source NOT LIKE n.name || ':%' "
    "AND o.source NOT LIKE 'session:' || n.name || '-%'",
    "document named for another namespace": "SELECT count(*) FROM documents d JOIN namespaces n "
    "ON n.id = d.namespace_id WHERE d.source NOT LIKE n.name || ':%'",
    **{
        f"{table} row of a namespace that does not exist": f"SELECT count(*) FROM {table} "
        "WHERE namespace_id NOT IN (SELECT id FROM namespaces)"
        for table in (
            "records",
            "occurrences",
            "documents",
            "sessions",
            "supersessions",
            "metadata_terms",
            "memory_checkpoints",
        )
    },
    "turn of a session that does not exist": "SELECT count(*) FROM turns "
    "WHERE session_pk NOT IN (SELECT id FROM sessions)",
    "record without an occurrence": "SELECT count(*) FROM records r WHERE NOT EXISTS "
    "(SELECT 1 FROM occurrences o WHERE o.record_id = r.id)",
    "session without a turn": "SELECT count(*) FROM sessions s WHERE NOT EXISTS "
    "(SELECT 1 FROM turns t WHERE t.session_pk = s.id)",
    "turn without its occurrence": "SELECT count(*) FROM turns t WHERE t.occurrence_id IS NULL "
    "OR NOT EXISTS (SELECT 1 FROM occurrences o WHERE o.id = t.occurrence_id)",
    "namespace without an incarnation, or sharing one": "SELECT (SELECT count(*) FROM namespaces WHERE incarnation "
    "IS NULL) + (SELECT count(*) - count(DISTINCT incarnation) FROM namespaces)",
}


def check_database(url: str) -> tuple[dict[str, int], list[str]]:
    """Every check of the module docstring: check -> rows (or namespaces) that break it; and the
    namespaces left at the end."""
    import torch  # noqa: F401 - the agent below loads memories
    from crash import TinyEmbedder
    from sqlalchemy import text

    from titans_agent import MemoryAgent

    out: dict[str, int] = {}
    with MemoryAgent.open(url, agent_config(), embedder=TinyEmbedder()) as agent:
        with agent.store.engine.connect() as conn:
            for check, sql in CHECKS.items():
                out[check] = int(conn.execute(text(sql)).scalar() or 0)
            texts = conn.execute(
                text("SELECT n.name, r.text FROM records r JOIN namespaces n ON n.id = r.namespace_id")
            ).all()
            metas = conn.execute(
                text("SELECT n.name, o.metadata FROM occurrences o JOIN namespaces n ON n.id = o.namespace_id")
            ).all()
        out["record text of another namespace"] = sum(
            name not in t.split() or any(o in t.split() for o in NAMES if o != name) for name, t in texts
        )
        out["occurrence metadata of another namespace"] = sum(
            (json.loads(m) if isinstance(m, str) else (m or {})).get("ns", name) != name for name, m in metas
        )
        names = agent.namespaces()
        states = [agent.memory_state(name) for name in names]
        out["namespace whose memory state is not finite"] = sum(st is None or not st.is_finite() for st in states)
    return out, names


# ---------------------------------------------------------------------- the run
def run_backend(url: str, *, processes: int, seconds: float, seed: int, work: Path) -> dict[str, Any]:
    """Start the processes on ``url``, wait for them, check the database; the results."""
    from crash import TinyEmbedder

    from titans_agent import MemoryAgent

    MemoryAgent.open(url, agent_config(), embedder=TinyEmbedder()).close()  # the schema exists first
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", url, str(work), str(p), str(seed), str(seconds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for p in range(processes)
    ]
    for proc in procs:
        line = proc.stdout.readline().strip() if proc.stdout else ""
        if line != "ready":
            raise RuntimeError(f"a process did not start: {line!r} {proc.communicate()[1][-3000:]}")
    t0 = time.monotonic()
    (work / "go").touch()
    done: collections.Counter[str] = collections.Counter()
    errors: collections.Counter[str] = collections.Counter()
    violations: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=seconds + 600)
        if proc.returncode != 0 or not out.strip():
            violations.append(f"a process exited {proc.returncode}: {err[-2000:]}")
            continue
        result = json.loads(out.strip().splitlines()[-1])
        done.update(result["done"])
        errors.update(result["errors"])
        violations.extend(result["violations"])
    wall = time.monotonic() - t0
    checks, names = check_database(url)
    violations.extend(f"{check}: {n}" for check, n in checks.items() if n > 0)
    return {"done": done, "errors": errors, "violations": violations, "checks": checks, "names": names, "wall": wall}


def _pg_schema(pg_url: str) -> tuple[str, Any]:
    """A fresh schema in the PostgreSQL database at ``pg_url``: its URL and a function dropping it."""
    from sqlalchemy import create_engine, text

    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    schema = f"tenancy_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = admin.url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()

    return url, drop


def report(results: dict[str, dict[str, Any]], *, processes: int, seconds: float) -> str:
    """The results as Markdown tables."""
    backends = list(results)
    lines = [
        f"# Tenancy stress: {processes} processes for {seconds:g} s per backend",
        "",
        f"Generated by `python benchmarks/tenancy_stress.py --seconds {seconds:g} --processes {processes}`.",
        "Three namespaces shared by every process; each process loops over random operations (module",
        "docstring of benchmarks/tenancy_stress.py). Expected errors are the ones the API documents for",
        "a concurrent drop, import or lock conflict; every other exception, and every row found in the",
        "wrong namespace at the end, is a violation.",
        "",
        "## Operations done",
        "",
        "| operation | " + " | ".join(backends) + " |",
        "|---|" + "---:|" * len(backends),
    ]
    for op in OPS:
        lines.append(f"| {op} | " + " | ".join(str(results[b]["done"].get(op, 0)) for b in backends) + " |")
    lines.append("| **all** | " + " | ".join(str(sum(results[b]["done"].values())) for b in backends) + " |")
    lines += ["", "## Errors by operation and class", "", "| error | " + " | ".join(backends) + " |"]
    lines.append("|---|" + "---:|" * len(backends))
    kinds = sorted({e for b in backends for e in results[b]["errors"]})
    for e in kinds or ["(none)"]:
        lines.append(f"| {e} | " + " | ".join(str(results[b]["errors"].get(e, 0)) for b in backends) + " |")
    lines += ["", "## Checks at the end (rows that break each; 0 is required)", ""]
    lines += ["| check | " + " | ".join(backends) + " |", "|---|" + "---:|" * len(backends)]
    for check in results[backends[0]]["checks"]:
        lines.append(f"| {check} | " + " | ".join(str(results[b]["checks"][check]) for b in backends) + " |")
    left = [", ".join(results[b]["names"]) or "-" for b in backends]
    lines.append("| (namespaces left at the end) | " + " | ".join(left) + " |")
    walls = [f"{results[b]['wall']:.0f}" for b in backends]
    lines.append("| (seconds, start to last exit) | " + " | ".join(walls) + " |")
    lines += ["", "## Verdict", ""]
    for b in backends:
        v = results[b]["violations"]
        lines.append(f"- {b}: " + ("no violation" if not v else f"{len(v)} violation(s): " + "; ".join(v[:10])))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--pg-url", default=PG_URL)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(HERE / "results" / "tenancy_stress.md"), help="'' writes no file")
    parser.add_argument("--child", nargs=5, metavar=("URL", "WORK", "P", "SEED", "SECONDS"))
    args = parser.parse_args(argv)
    if args.child:
        url, work, p, seed, seconds = args.child
        child_main(url, work, int(p), int(seed), float(seconds))
        return 0
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="tenancy-") as tmp:
        for backend in [b for b in args.backends.split(",") if b]:
            work = Path(tmp) / backend
            if backend == "sqlite":
                results[backend] = run_backend(
                    str(Path(tmp) / "stress.db"), processes=args.processes, seconds=args.seconds, seed=args.seed,
                    work=work,
                )  # fmt: skip
            elif backend == "postgresql":
                url, drop = _pg_schema(args.pg_url)
                try:
                    results[backend] = run_backend(
                        url, processes=args.processes, seconds=args.seconds, seed=args.seed, work=work
                    )
                finally:
                    drop()
            else:
                parser.error(f"unknown backend {backend!r}")
    text = report(results, processes=args.processes, seconds=args.seconds)
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 1 if any(r["violations"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
