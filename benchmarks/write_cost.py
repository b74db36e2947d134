"""Write cost against namespace size: does a turn cost the same at 100k turns as at 100?

One namespace is filled with generated short chat turns (a user and an assistant, sessions of 20
turns, one minute apart; first-person facts, changes of them, questions, replies: what update
detection looks at; about 88% distinct, the rest are repeats) to each size of ``--sizes`` in turn,
and at each size:

- ``add_turn``: ``--turns`` fresh turns, one call each, with the default
  :class:`~titans_agent.AgentConfig` (update detection on). Reported: the write path (the call's
  time less its embedding) and ``add_turn`` with the real embedding = write path + the real default
  embedder (all-MiniLM-L6-v2) timed alone on the same turn's text ("<role>: <content>", what the
  write embeds), one call each; the ratio is that ``add_turn`` p50 over the real embedding's p50
  (the target: at most 2 at 100k turns);
- a block: ``--block`` fresh turns through ``add_turns`` (batches of ``batch_size``, one
  transaction each), its embedding subtracted; stopped, and reported unfinished, past
  ``--block-limit-s``.

How 100k turns are feasible. The namespace's embedder is a fast deterministic hashing embedder
(words and bigrams into 384 signed buckets: texts sharing words are similar, so update detection
meets as many similar records as with a real model on such templated turns); embedding 110k turns
with the real model takes 20 minutes on 2 busy cores, and its vectors cannot be mixed with another
embedder's in one namespace. The time the hashing embedder spends is measured and subtracted; the
real embedder is timed on every timed turn instead. The fill writes with ``batch_size`` 1024 and
update detection off (it is not measured, and with the old code's detection growing with the
namespace 100k could not be filled); every timed write uses the default configuration. The timed
turns and blocks continue the fill's conversation (the same generator, later turns).

Prints a markdown table and writes ``<out>/write_cost.md``, ``.png`` and ``.json``; ``--baseline``
names an earlier run's JSON (the code before a change) to show beside it. Run it with ``nice`` and,
on a shared machine, ``OMP_NUM_THREADS=1`` (torch threads spin against other processes).

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/write_cost.py [--sizes 100,1000,10000,100000] [--baseline B.json]
    python benchmarks/write_cost.py --render A.json --baseline B.json   # the tables of saved runs
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import platform
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent

NAMES = "Alice Sam Priya Marcus Elena Tomasz Aiko Gabriel Fatima Dana Leo Mia Noah Ivy Omar Zoe Ravi Lena".split()
CITIES = "Boston Seattle Denver Austin Lisbon Berlin Osaka Toronto Dublin Madrid Oslo Prague Lyon Porto".split()
FOODS = "pasta sushi tacos ramen curry salad pizza dumplings falafel risotto pho paella burritos soup".split()
JOBS = "nurse teacher engineer designer chef lawyer analyst pilot baker editor dentist architect".split()
THINGS = "Vim Emacs Helix VSCode Linux Windows Android iPhone Kindle Spotify Notion Slack Firefox Chrome".split()
SPORTS = "tennis chess football running yoga swimming climbing cycling golf boxing rowing badminton".split()
TOPICS = "history physics cooking Spanish piano pottery gardening photography poetry astronomy Rust finance".split()
RELS = "sister brother friend mother father cousin neighbour partner boss colleague".split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
PLACES = "cafe museum park library market beach gym cinema bakery bookshop".split()

TAILS = [
    "That was {n} minutes ago.",
    "It took about {n} minutes.",
    "Around {n} people were there.",
    "I think it was day {n} of the month.",
    "Only {n} left now.",
    "({n})",
]
USER = [
    "I live in {city} with my {rel} {name}.",
    "I moved to {city} last {day} and I love it.",
    "I work as a {job} in {city} now.",
    "I switched from {thing} to {thing2} this week.",
    "I no longer play {sport}, I play {sport2} now.",
    "My {rel} {name} started a new job as a {job}.",
    "I had {food} with {name} at the {place} on {day}.",
    "I'm learning {topic} these days, {num} minutes a day.",
    "My rent in {city} is {num} dollars a month.",
    "Can you remind me about {name}'s party on {day}?",
    "What should I cook tonight, {food} or {food2}?",
    "Do you know a good {place} in {city}?",
    "We went to the {place} in {city} with {name} on {day}.",
    "I started {sport} again with my {rel} on {day}.",
    "My favourite food is {food}, I eat it every {day}.",
    "I use {thing} for work and {thing2} at home.",
]
ASSISTANT = [
    "That sounds lovely, say hi to {name} from me.",
    "Got it, I'll remember that you like {food}.",
    "How was the {place} in {city}?",
    "Try {food} with a little {food2}, it is quick to make.",
    "Good luck with {topic}, {num} minutes a day is a great habit.",
    "Noted: {name}'s party is on {day}.",
    "{city} has a nice {place} near the centre.",
    "{sport} is a great way to stay fit.",
    "Congratulations to {name} on the new job as a {job}!",
    "{thing2} is a solid choice after {thing}.",
]


def conversation(start: int, n: int) -> list[tuple[str, str, str, dt.datetime]]:
    """Turns ``start .. start + n - 1`` of the generated conversation: ``(session id, role,
    content, timestamp)``; turn ``i`` depends on ``i`` alone (any slice is the same turns)."""
    base = dt.datetime(2023, 1, 1, tzinfo=dt.timezone.utc)
    out = []
    for i in range(start, start + n):
        rng = random.Random(i)
        role = "user" if i % 2 == 0 else "assistant"
        template = rng.choice(USER if role == "user" else ASSISTANT)
        slots = {
            "name": rng.choice(NAMES),
            "city": rng.choice(CITIES),
            "food": rng.choice(FOODS),
            "food2": rng.choice(FOODS),
            "job": rng.choice(JOBS),
            "thing": rng.choice(THINGS),
            "thing2": rng.choice(THINGS),
            "sport": rng.choice(SPORTS),
            "sport2": rng.choice(SPORTS),
            "topic": rng.choice(TOPICS),
            "rel": rng.choice(RELS),
            "day": rng.choice(DAYS),
            "place": rng.choice(PLACES),
            "num": str(rng.randrange(10, 3000)),
        }
        text = template.format(**slots)
        text = text[0].upper() + text[1:]
        if rng.random() < 0.9:  # mostly distinct turns (a chat repeats some: those are repeats, not records)
            text = f"{text} {rng.choice(TAILS).format(n=rng.randrange(1, 60))}"
        out.append((f"s{i // 20}", role, text, base + dt.timedelta(minutes=i)))
    return out


def embed_key(role: str, content: str) -> str:
    """What the write embeds for a one-piece turn (:func:`titans_agent.write.turn_units`)."""
    return f"{role[:40]}: {content.strip()}"


class HashEmbedder:
    """A fast deterministic stand-in for the namespace: words and word bigrams hashed into 384
    signed buckets, L2-normalised (texts sharing words are similar, as with the tests' fake
    embedder); ``seconds`` adds up the time spent embedding, which the timings subtract."""

    name, dim, max_tokens = "fake-hash-384", 384, 254

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.seconds = 0.0
        self._buckets: dict[str, tuple[int, float]] = {}

    def _bucket(self, token: str) -> tuple[int, float]:
        b = self._buckets.get(token)
        if b is None:
            n = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
            b = self._buckets[token] = (n % self.dim, 1.0 if (n >> 32) & 1 else -1.0)
        return b

    def embed(self, texts: list[str]) -> np.ndarray:
        t0 = time.perf_counter()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            words = re.findall(r"\w+", text.lower()) or ["<empty>"]
            for tok, w in [(t, 1.0) for t in words] + [(a + " " + b, 0.5) for a, b in zip(words, words[1:])]:
                j, sign = self._bucket(tok)
                out[i, j] += sign * w
            out[i] /= np.linalg.norm(out[i])
        self.seconds += time.perf_counter() - t0
        return out


def percentile(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from titans_agent import AgentConfig, MemoryAgent, RetrievalConfig
    from titans_agent.embeddings import load_embedder

    sizes = sorted(int(s) for s in args.sizes.split(","))
    default = AgentConfig()
    fill_cfg = AgentConfig(batch_size=1024, retrieval=RetrievalConfig(detect_updates=False))
    real = load_embedder(default.embedder).load()
    fake = HashEmbedder(real.tokenizer)
    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        MemoryAgent.open(Path(tmp) / "w.db", default, embedder=fake) as agent,
    ):
        done = 0
        for size in sizes:
            agent.config = fill_cfg
            t0 = time.perf_counter()
            for i in range(done, max(done, size), 4096):
                agent.add_turns(conversation(i, min(4096, size - i)))
            fill_s = time.perf_counter() - t0
            at = max(done, size)
            records = agent.stats().records
            agent.config = default
            timed = conversation(at, args.turns)
            write_s, embed_s = [], []
            for sid, role, content, ts in timed:
                before = fake.seconds
                t0 = time.perf_counter()
                agent.add_turn(sid, role, content, ts)
                write_s.append(time.perf_counter() - t0 - (fake.seconds - before))
                t0 = time.perf_counter()
                real.embed([embed_key(role, content)])
                embed_s.append(time.perf_counter() - t0)
            total = [w + e for w, e in zip(write_s, embed_s, strict=True)]
            block = conversation(at + args.turns, args.block)
            before = fake.seconds
            t0 = time.perf_counter()
            written = 0
            for i in range(0, len(block), default.batch_size):
                agent.add_turns(block[i : i + default.batch_size])
                written = min(len(block), i + default.batch_size)
                if time.perf_counter() - t0 > args.block_limit_s:
                    break
            block_s = time.perf_counter() - t0 - (fake.seconds - before)
            done = at + args.turns + written
            row = {
                "size": at,
                "records": records,
                "fill_s": fill_s,
                "add_p50_ms": percentile(total, 50) * 1e3,
                "add_p90_ms": percentile(total, 90) * 1e3,
                "write_p50_ms": percentile(write_s, 50) * 1e3,
                "embed_p50_ms": percentile(embed_s, 50) * 1e3,
                "block_turns": written,
                "block_s": block_s,
            }
            row["ratio"] = row["add_p50_ms"] / row["embed_p50_ms"]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
            if written < len(block):  # the namespace stopped mid-block: later sizes would not be the sizes asked
                print(f"block unfinished at {at} turns; stopping", file=sys.stderr)
                break
    return {
        "machine": f"{platform.processor() or platform.machine()}, {_cores()} cores, "
        f"torch threads {torch.get_num_threads()}, Python {platform.python_version()}",
        "turns": args.turns,
        "block": args.block,
        "block_limit_s": args.block_limit_s,
        "rows": rows,
    }


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def table(run: dict[str, Any]) -> list[str]:
    lines = [
        "| turns in namespace | records | write path p50 (ms) | embedding p50 (ms) | add_turn p50 (ms) | p90 (ms) "
        f"| add_turn p50 / embedding | block of {run['block']} turns (s, embedding excluded) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in run["rows"]:
        block = f"{r['block_s']:.2f}"
        if r["block_turns"] < run["block"]:
            block = f"unfinished: {r['block_turns']} turns in {r['block_s']:.0f}"
        lines.append(
            f"| {r['size']:,} | {r['records']:,} | {r['write_p50_ms']:.1f} | {r['embed_p50_ms']:.1f} "
            f"| {r['add_p50_ms']:.1f} | {r['add_p90_ms']:.1f} | {r['ratio']:.2f} | {block} |"
        )
    return lines


def plot(runs: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for label, run in runs.items():
        xs = [r["size"] for r in run["rows"]]
        a.plot(xs, [r["add_p50_ms"] for r in run["rows"]], "o-", label=f"add_turn p50 ({label})")
        done = [r for r in run["rows"] if r["block_turns"] == run["block"]]
        b.plot([r["size"] for r in done], [r["block_s"] for r in done], "o-", label=label)
    last = list(runs.values())[-1]
    xs = [r["size"] for r in last["rows"]]
    a.plot(xs, [2 * r["embed_p50_ms"] for r in last["rows"]], "k--", label="2 x embedding p50 (target)")
    for ax, title in ((a, "add_turn (ms)"), (b, f"block of {last['block']} turns (s, embedding excluded)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("turns in the namespace")
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument("--turns", type=int, default=30, help="timed add_turn calls per size")
    parser.add_argument("--block", type=int, default=1000, help="turns of the timed add_turns block")
    parser.add_argument("--block-limit-s", type=float, default=300.0)
    parser.add_argument("--baseline", type=Path, help="an earlier run's JSON, shown as 'before'")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--note", default="", help="a line on how the runs were made, printed under the tables")
    parser.add_argument("--render", type=Path, help="write the tables of this run's JSON instead of measuring")
    args = parser.parse_args()
    run = json.loads(args.render.read_text(encoding="utf-8")) if args.render else measure(args)
    runs = {}
    text = [
        "# Write cost against namespace size",
        "",
        "Generated by `python benchmarks/write_cost.py`; do not edit by hand. Method: the module docstring.",
        "",
        f"- {run['machine']}; {run['turns']} timed `add_turn` calls per size: the write path (the call "
        "less its embedding) plus the real all-MiniLM-L6-v2 embedding of the same turn, timed alone",
        "- target: `add_turn` p50 at most 2x the embedding of the turn at 100k turns",
        "",
    ]
    if args.baseline:
        before = json.loads(args.baseline.read_text(encoding="utf-8"))
        runs["before"] = before
        text += ["## Before", "", f"- {before['machine']}", "", *table(before), "", "## After", ""]
    runs["after" if args.baseline else "this run"] = run
    text += table(run)
    if args.note:
        text += ["", args.note]
    print("\n".join(table(run)))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "write_cost.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    (args.out / "write_cost.json").write_text(json.dumps(run, indent=1) + "\n", encoding="utf-8")
    plot(runs, args.out / "write_cost.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
