"""Knowledge updates: does recall rank the newest statement of a changed fact first?

A generated suite (no external data). Each simulated user talks to an assistant over weeks; for
each of eight subjects (an editor preference, a home address, a job, a rent, a phone, a car, a
manager, a team size) the user states a fact, and later an update of it ("I moved from Vim to
Helix"), with distractor turns between: the assistant's replies, chit-chat, and near-subject
distractors (a sister's address, a friend's car) that must not be taken for updates. Then every
subject is asked about ("Which code editor do I use?").

Reported:

- newest-first@1: the fraction of questions whose top hit is the newest statement, for titans-agent
  (``recall``) and for BM25 (rank-bm25, stopwords removed), all-MiniLM-L6-v2 cosine and their
  reciprocal-rank fusion over the same turns ("[date] speaker: text");
- as-of@1: titans-agent's top hit for ``recall(..., as_of=<between the two statements>)`` is the
  old statement;
- the supersession links titans-agent made (precision: links from an update to the statement it
  updates; recall: updates linked), for each ``update_similarity`` threshold swept, which is how
  the default threshold was chosen.

    python benchmarks/updates.py [--users N] [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)

# subject: (old template, new template, question, fillers a, fillers b)
SUBJECTS: dict[str, tuple[str, str, str, list[str]]] = {
    "editor": (
        "My code editor is {a}, I use it for everything.",
        "I moved from {a} to {b} as my code editor last week.",
        "Which code editor do I use?",
        ["Vim", "Emacs", "Helix", "VS Code", "Sublime Text", "Zed", "Neovim", "Kakoune"],
    ),
    "address": (
        "I live at {a}.",
        "We just moved house, my new address is {b}.",
        "What is my home address?",
        ["12 Oak Street", "48 Pine Road", "7 Maple Avenue", "301 Birch Lane", "95 Cedar Court", "16 Elm Drive"],
    ),
    "job": (
        "I work as a data analyst at {a}.",
        "I left my old job and started as a product manager at {b}.",
        "Where do I work?",
        ["Initech", "Globex", "Umbrella Labs", "Stark Industries", "Wayne Foods", "Acme Corp", "Hooli"],
    ),
    "rent": (
        "My rent is {a} dollars a month.",
        "The landlord raised it, my rent is now {b} dollars a month.",
        "How much rent do I pay?",
        ["1200", "1350", "1480", "1625", "1790", "2050", "2300"],
    ),
    "phone": (
        "My phone number is {a}.",
        "I got a new phone number: {b}.",
        "What is my phone number?",
        ["555-0142", "555-0198", "555-0173", "555-0111", "555-0166", "555-0185"],
    ),
    "car": (
        "I drive a {a}.",
        "I sold my old car and now drive a {b}.",
        "What car do I drive?",
        ["Toyota Corolla", "Honda Civic", "Ford Focus", "Tesla Model 3", "Mazda 3", "Volvo V60"],
    ),
    "manager": (
        "My manager at work is {a}.",
        "After the reorganisation my manager is {b}.",
        "Who is my manager?",
        ["Priya", "Marcus", "Elena", "Tomasz", "Aiko", "Gabriel", "Fatima"],
    ),
    "team": (
        "My team has {a} people.",
        "We hired a lot, my team now has {b} people.",
        "How many people are on my team?",
        ["4", "6", "7", "9", "12", "15"],
    ),
}

CHITCHAT = [
    "I went hiking with my sister last weekend, the views were amazing.",
    "Can you recommend a good book about the history of mathematics?",
    "I'm trying to drink more water during the day.",
    "My cat knocked a plant off the shelf this morning.",
    "I watched a documentary about octopuses yesterday.",
    "I need to remember to buy groceries after work.",
    "The weather has been really rainy this week.",
    "I started learning to play the guitar.",
    "We're planning a trip to the coast in the summer.",
    "I baked sourdough bread for the first time.",
]
NEAR = {  # near-subject distractors: same words, another person
    "editor": "My friend Sam swears by {c} as a code editor.",
    "address": "My sister lives at {c}.",
    "job": "My brother works as a nurse at {c}.",
    "rent": "My friend pays {c} dollars a month for a studio.",
    "phone": "My mother's phone number is {c}.",
    "car": "My neighbour drives a {c}.",
    "manager": "My partner's manager is {c}.",
    "team": "My friend's team has {c} people.",
}
REPLIES = ["That sounds great!", "Thanks for letting me know.", "Got it, I'll remember that.", "Interesting!"]


@dataclass
class Case:
    """One subject of one user: the old and new statements (turn indices) and the question."""

    user: str
    subject: str
    old: int
    new: int
    question: str
    between: dt.datetime  # a time after the old statement and before the new one


def generate(n_users: int, seed: int = 0) -> tuple[dict[str, list[tuple[str, str, dt.datetime]]], list[Case]]:
    """Conversations (user -> turns ``(role, text, time)``) and the cases to ask about."""
    rng = random.Random(seed)
    convs: dict[str, list[tuple[str, str, dt.datetime]]] = {}
    cases: list[Case] = []
    for u in range(n_users):
        user = f"user-{u}"
        convs[user] = _conversation(user, dt.datetime(2024, 1, 1, 9, 0) + dt.timedelta(days=7 * u), rng, cases)
    return convs, cases


def _conversation(user: str, start: dt.datetime, rng: random.Random, cases: list[Case]) -> list:
    turns: list[tuple[str, str, dt.datetime]] = []

    def say(role: str, text: str) -> int:
        last = turns[-1][2] if turns else start
        turns.append((role, text, last + dt.timedelta(hours=rng.choice([1, 5, 26]))))
        return len(turns) - 1

    pending: dict[str, tuple[int, str, str, str]] = {}  # subject -> (old turn, a, b, c)
    subjects = list(SUBJECTS)
    rng.shuffle(subjects)
    tail = [("near", s) for s in subjects] + [("new", s) for s in subjects]
    rng.shuffle(tail)  # every old statement comes first; near-distractors and updates interleave
    for what, subject in [("old", s) for s in subjects] + tail:
        old_t, new_t, question, fillers = SUBJECTS[subject]
        if what == "old":
            a, b, c = rng.sample(fillers, 3)
            pending[subject] = (say("user", old_t.format(a=a)), a, b, c)
        elif what == "near":
            say("user", NEAR[subject].format(c=pending[subject][3]))
        else:
            old_i, a, b, _ = pending[subject]
            between = turns[-1][2] + dt.timedelta(minutes=30)
            new_i = say("user", new_t.format(a=a, b=b))
            cases.append(Case(user, subject, old_i, new_i, question, between))
        say("assistant", rng.choice(REPLIES))
        for _ in range(rng.randint(1, 3)):
            say("user", rng.choice(CHITCHAT))
            say("assistant", rng.choice(REPLIES))
    return turns


def _locomo():
    spec = importlib.util.spec_from_file_location("locomo_bench", HERE / "locomo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["locomo_bench"] = module
    spec.loader.exec_module(module)
    return module


def baselines(convs, cases, embedder) -> dict[str, float]:
    """newest-first@1 of BM25, MiniLM cosine and their RRF over each user's turns."""
    from rank_bm25 import BM25Okapi

    loc = _locomo()
    hits = {"BM25 (rank-bm25)": 0, "all-MiniLM-L6-v2 cosine": 0, "RRF of BM25 + MiniLM (k=60)": 0}
    for user, turns in convs.items():
        texts = [f"[{ts:%d %B %Y}] {role}: {text}" for role, text, ts in turns]
        bm25 = BM25Okapi([loc.tokenize(x) for x in texts])
        emb = embedder.embed(texts)
        for c in (c for c in cases if c.user == user):
            lex = list(np.argsort(-bm25.get_scores(loc.tokenize(c.question)), kind="stable"))
            den = list(np.argsort(-(emb @ embedder.embed([c.question])[0]), kind="stable"))
            for name, ranking in zip(hits, (lex, den, loc.rrf([lex, den]))):
                hits[name] += ranking[0] == c.new
    return {k: v / len(cases) for k, v in hits.items()}


def run_agent(convs, cases, embedder, threshold: float, db_dir: Path) -> dict[str, float]:
    """Ingest with ``update_similarity=threshold``; newest-first@1, as-of@1 and link quality."""
    from sqlalchemy import select

    from titans_agent import AgentConfig, MemoryAgent, RetrievalConfig
    from titans_agent.store import Supersession

    cfg = AgentConfig(retrieval=RetrievalConfig(update_similarity=threshold))
    with (
        tempfile.TemporaryDirectory(dir=db_dir) as tmp,
        MemoryAgent.open(Path(tmp) / "u.db", cfg, embedder=embedder) as agent,
    ):
        rid_of: dict[str, list[int]] = {}
        for user, turns in convs.items():
            res = agent.add_turns([("chat", role, text, ts) for role, text, ts in turns], namespace=user)
            rid_of[user] = [r.record_id for r in res]
        newest = as_of = 0
        for c in cases:
            top = agent.recall(c.question, k=1, namespace=c.user)
            newest += bool(top) and top[0].id == rid_of[c.user][c.new]
            past = agent.recall(c.question, k=1, namespace=c.user, as_of=c.between)
            as_of += bool(past) and past[0].id == rid_of[c.user][c.old]
        with agent.store.session() as s:
            links = set(s.execute(select(Supersession.old_record_id, Supersession.new_record_id)).all())
    true = {(rid_of[c.user][c.old], rid_of[c.user][c.new]) for c in cases}
    return {
        "newest-first@1": newest / len(cases),
        "as-of@1": as_of / len(cases),
        "links": len(links),
        "link precision": len(links & true) / len(links) if links else float("nan"),
        "link recall": len(links & true) / len(true),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=8, help="simulated users (8 subjects each)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--db-dir", type=Path, default=None)
    args = parser.parse_args(argv)

    from titans_agent import RetrievalConfig
    from titans_agent.config import DEFAULT_EMBEDDER
    from titans_agent.embeddings import load_embedder

    t0 = time.perf_counter()
    embedder = _locomo().CachedEmbedder(load_embedder(DEFAULT_EMBEDDER), tag="updates")
    convs, cases = generate(args.users)
    n_turns = sum(len(t) for t in convs.values())
    print(f"{len(convs)} users, {n_turns} turns, {len(cases)} updated facts")
    base = baselines(convs, cases, embedder)
    default = RetrievalConfig().update_similarity
    sweep = {thr: run_agent(convs, cases, embedder, thr, args.db_dir) for thr in THRESHOLDS}
    embedder.save()
    for thr, r in sweep.items():
        print(f"  update_similarity {thr}: " + ", ".join(f"{k} {v:.3f}" for k, v in r.items()))
    ours = sweep.get(default) or run_agent(convs, cases, embedder, default, args.db_dir)
    rows = [f"| titans-agent (update_similarity {default}) | {ours['newest-first@1']:.3f} |"]
    rows += [f"| {name} | {v:.3f} |" for name, v in base.items()]
    main_md = "\n".join(["| retriever | newest-first@1 |", "|---|---:|", *rows])
    sweep_md = "\n".join(
        [
            "| update_similarity | newest-first@1 | as-of@1 | links | link precision | link recall |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        + [
            f"| {thr} | {r['newest-first@1']:.3f} | {r['as-of@1']:.3f} | {r['links']} | "
            f"{r['link precision']:.3f} | {r['link recall']:.3f} |"
            for thr, r in sweep.items()
        ]
    )
    wall = time.perf_counter() - t0
    print(f"\n{main_md}\n\n{sweep_md}\n\nwall time {wall:.0f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    text = [
        "# Knowledge updates: newest-first@1",
        "",
        "Generated by `python benchmarks/updates.py`; do not edit by hand.",
        "",
        f"- {len(convs)} simulated users, {n_turns} turns, {len(cases)} facts stated then updated (8 subjects: "
        "editor, address, job, rent, phone, car, manager, team size), with assistant replies, chit-chat and "
        "near-subject distractors (another person's address, car, ...) between them",
        "- newest-first@1: the top hit for the subject's question is the newest statement; as-of@1: with "
        "`as_of` between the two statements, the top hit is the old one",
        '- baselines rank each user\'s turns written "[date] speaker: text" (BM25: rank-bm25, stopwords removed)',
        f"- wall time {wall:.0f} s",
        "",
        main_md,
        "",
        "Threshold sweep (`RetrievalConfig.update_similarity`, all-MiniLM-L6-v2):",
        "",
        sweep_md,
        "",
    ]
    (args.out / "updates.md").write_text("\n".join(text), encoding="utf-8")
    print(f"wrote {args.out / 'updates.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
