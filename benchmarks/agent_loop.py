"""A chatbot's memory in the agent loop: is the current fact at rank 1, whatever the phrasing?

Scripted users talk to a chatbot over several dated sessions (one namespace per user). Every user
message and every assistant reply is stored as :class:`TitansMemoryMiddleware` stores an agent's
turns: after each agent run (one user message and the reply), the run's human and AI messages go
to :meth:`MemoryAgent.add_turns` as ``(thread_id, "user"|"assistant", text, timestamp,
{"message_id": id})`` in one batch, the user's questions included. Users state two or three facts
in one message, chat, ask about their own facts (and ask again later), and change one or two facts
in everyday words ("I moved to Seattle", "these days I ...", "we ...", "my new place in ...").

Writers (``--writer``):

- ``replay`` (default): the middleware's exact ``add_turns`` calls, with the session's date as the
  turn's timestamp (what the middleware stores when it runs on that day; run live it passes no
  timestamp, so the store takes the clock);
- ``agent``: a real ``langchain.agents.create_agent`` loop with the middleware, a checkpointer, one
  thread per session and a fake chat model that answers with the scripted replies; the turns carry
  the clock's time (all sessions seconds apart). ``tests/test_agent_loop.py`` checks that both
  writers store the same turns.

Probes are questions that are NOT stored, each with its gold: the user statement(s) that hold the
current value of the fact. Metrics per probe, over ``MemoryAgent.recall(probe, k=10, namespace=user)``:

- current@1: a gold statement at rank 1 (probes of a fact that changed);
- R@5, MRR: of the first gold statement;
- stale@1: a superseded statement of the fact at rank 1;
- Q>A: a stored user question, or a stored near-copy of the probe (content-word Jaccard >= .5),
  ranks above the first gold statement (or, gold not in the 10, anywhere in them);
- stable@1: a gold statement at rank 1 for facts that never changed (the control).

Baselines over the same stored turns (each distinct text once, as the store keeps it): BM25
(rank-bm25, stopwords removed) and all-MiniLM-L6-v2 cosine alone. 95% intervals are percentile
bootstraps that resample users (probes of one user are not independent); differences are paired.

Sets: the development set (``agent_loop_users.py``; 3 folds by user, for tuning out of fold) and
the held-out set (``agent_loop_heldout.py``, written separately, never tuned on).

    python benchmarks/agent_loop.py [--sets dev,heldout] [--writer replay|agent] [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
DEPTH = 10  # hits asked of every retriever
N_FOLDS = 3
NEAR_COPY = 0.5  # content-word Jaccard with the probe above which a stored text is a near-copy
_TOKEN = re.compile(r"\w+")
_TAGGED = re.compile(r"^(U\??)\s*(?:\[([^\]]*)\])?\s*:\s*(.+)$")


# ------------------------------------------------------------------------------------ the data
@dataclass(frozen=True)
class Line:
    """One user message: its text, whether it asks something, the facts it states."""

    text: str
    question: bool = False
    facts: tuple[tuple[str, str], ...] = ()  # (fact, value) stated by this message
    changes: tuple[tuple[str, str], ...] = ()  # (fact, phrasing kind) where a new value first appears


@dataclass(frozen=True)
class Run:
    """One agent run: a user message and the assistant's reply."""

    user: Line
    reply: str


@dataclass(frozen=True)
class Session:
    date: dt.datetime
    runs: tuple[Run, ...]


@dataclass(frozen=True)
class Probe:
    """A question not stored; gold and stale are stored user statements (exact texts)."""

    user: str
    fact: str
    query: str
    gold: tuple[str, ...]  # statements of the fact's current value
    stale: tuple[str, ...]  # statements of its earlier values (empty: a stable fact)
    phrasing: str  # how the change was said ("stable" when it never changed)

    @property
    def changed(self) -> bool:
        return bool(self.stale)


@dataclass(frozen=True)
class User:
    name: str
    sessions: tuple[Session, ...]
    probes: tuple[Probe, ...]

    @property
    def questions(self) -> frozenset[str]:
        """The texts of the user's stored questions."""
        return frozenset(r.user.text for s in self.sessions for r in s.runs if r.user.question)

    @property
    def replies(self) -> frozenset[str]:
        """The texts of the assistant's stored replies."""
        return frozenset(r.reply for s in self.sessions for r in s.runs)

    @property
    def texts(self) -> list[str]:
        """Every stored text once, in the order first stored."""
        return list(dict.fromkeys(t for s in self.sessions for r in s.runs for t in (r.user.text, r.reply)))


def parse_user(name: str, script: str) -> User:
    """Parse one user's script.

    Format, one item per line (blank lines and ``//`` comments ignored)::

        # 2024-03-02                      a session on that date
        U [home=boston, job=nurse]: ...   a user message stating facts (value names are free)
        U [home=seattle/moved]: ...       a new value of ``home``, changed as kind ``moved``
        U?: Where do I live again?        a user question (stored)
        A: ...                            the assistant's reply to the message above
        ? home: Where do I live now?      a probe of the fact ``home`` (not stored)

    A fact's current value is the last one stated; statements of earlier values are stale. A new
    value must name its phrasing kind (``/kind``) unless it is the fact's first value.

    Raises:
        ValueError: a malformed line, a reply without a message, a message without a reply, a new
            value without a kind, a probe of an unknown fact, or dates that do not increase.
    """
    sessions: list[Session] = []
    runs: list[Run] = []
    date: dt.datetime | None = None
    pending: Line | None = None
    statements: dict[str, list[tuple[str, str]]] = {}  # fact -> [(value, text)] in order
    kinds: dict[tuple[str, str], str] = {}
    raw_probes: list[tuple[str, str]] = []

    def close() -> None:
        if pending is not None:
            raise ValueError(f"{name}: message without a reply: {pending.text!r}")
        if date is not None:
            if not runs:
                raise ValueError(f"{name}: empty session on {date:%Y-%m-%d}")
            sessions.append(Session(date, tuple(runs)))

    for raw in script.splitlines():
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        if line.startswith("#"):
            close()
            runs = []
            new = dt.datetime.fromisoformat(line[1:].strip()).replace(hour=9)
            if date is not None and new <= date:
                raise ValueError(f"{name}: session dates must increase ({new:%Y-%m-%d} after {date:%Y-%m-%d})")
            date = new
        elif line.startswith("A:"):
            if pending is None:
                raise ValueError(f"{name}: reply without a message: {line!r}")
            runs.append(Run(pending, line[2:].strip()))
            pending = None
        elif line.startswith("?"):
            fact, _, query = line[1:].partition(":")
            raw_probes.append((fact.strip(), query.strip()))
        else:
            m = _TAGGED.match(line)
            if m is None or date is None or pending is not None:
                raise ValueError(f"{name}: bad line (or no session / no reply before it): {line!r}")
            facts, changes = [], []
            for tag in filter(None, (t.strip() for t in (m.group(2) or "").split(","))):
                fact, _, rest = tag.partition("=")
                value, _, kind = rest.partition("/")
                fact, value, kind = fact.strip(), value.strip() or "_", kind.strip()
                seen = [v for v, _ in statements.get(fact, [])]
                if seen and value not in seen and not kind:
                    raise ValueError(f"{name}: new value {fact}={value} needs a phrasing kind")
                if kind:
                    if not seen or value in seen:
                        raise ValueError(f"{name}: {fact}={value}/{kind} changes nothing")
                    kinds[(fact, value)] = kind
                    changes.append((fact, kind))
                statements.setdefault(fact, []).append((value, m.group(3).strip()))
                facts.append((fact, value))
            pending = Line(m.group(3).strip(), m.group(1) == "U?", tuple(facts), tuple(changes))
    close()
    probes = []
    for fact, query in raw_probes:
        if fact not in statements:
            raise ValueError(f"{name}: probe of unknown fact {fact!r}")
        said = statements[fact]
        current = said[-1][0]
        gold = tuple(dict.fromkeys(t for v, t in said if v == current))
        stale = tuple(dict.fromkeys(t for v, t in said if v != current and t not in gold))
        probes.append(Probe(name, fact, query, gold, stale, kinds.get((fact, current), "stable")))
    return User(name, tuple(sessions), tuple(probes))


def load_users(scripts: dict[str, str]) -> list[User]:
    """Parse a data module's ``USERS`` (name -> script), in order."""
    return [parse_user(name, script) for name, script in scripts.items()]


def fold_of(index: int) -> int:
    """The development fold of the user at ``index`` in ``USERS`` (folds by user)."""
    return index % N_FOLDS


# ------------------------------------------------------------------------------------ writing
def run_turns(user: User, session_index: int, run_index: int) -> list[tuple[str, str, str, dt.datetime, dict]]:
    """The ``add_turns`` batch the middleware writes after one agent run, timestamped on the session's date."""
    session = user.sessions[session_index]
    run = session.runs[run_index]
    thread = f"{user.name}-{session.date:%Y%m%d}"
    ts = session.date + dt.timedelta(minutes=2 * run_index)
    ids = (f"{thread}-{run_index}-u", f"{thread}-{run_index}-a")
    return [
        (thread, "user", run.user.text, ts, {"message_id": ids[0]}),
        (thread, "assistant", run.reply, ts + dt.timedelta(seconds=30), {"message_id": ids[1]}),
    ]


def write_replay(agent, user: User) -> None:
    """Store a user's sessions with the middleware's exact ``add_turns`` calls (one per agent run)."""
    for si, session in enumerate(user.sessions):
        for ri in range(len(session.runs)):
            agent.add_turns(run_turns(user, si, ri), namespace=user.name)


def write_agent(agent, user: User) -> None:
    """Store a user's sessions by running a real ``create_agent`` loop with the middleware (the
    model answers with the scripted replies; one checkpointed thread per session)."""
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from titans_agent.adapters.langchain import TitansMemoryMiddleware

    for session in user.sessions:
        replies = iter([AIMessage(r.reply, id=str(uuid.uuid4())) for r in session.runs])
        graph = create_agent(
            GenericFakeChatModel(messages=replies),
            tools=[],
            middleware=[TitansMemoryMiddleware(agent)],
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": f"{user.name}-{session.date:%Y%m%d}", "user_id": user.name}}
        for run in session.runs:
            graph.invoke({"messages": [HumanMessage(run.user.text)]}, config)


WRITERS: dict[str, Callable[[Any, User], None]] = {"replay": write_replay, "agent": write_agent}


# ------------------------------------------------------------------------------------ scoring
def content_words(text: str) -> set[str]:
    from titans_agent.text import STOPWORDS

    return {w for w in _TOKEN.findall(text.lower()) if w not in STOPWORDS}


def tokenize(text: str) -> list[str]:
    """Lowercased ``\\w+`` tokens without English stopwords (the BM25 baseline's tokenizer)."""
    from titans_agent.text import STOPWORDS

    return [w for w in _TOKEN.findall(text.lower()) if w not in STOPWORDS]


def near_copy(text: str, query: str, threshold: float = NEAR_COPY) -> bool:
    """Whether ``text`` is a near-copy of the question ``query``: a question itself (it ends with
    "?") whose content words have Jaccard >= ``threshold`` with the query's. An answer that repeats
    the question's words ("You live in Seattle now.") is not a copy of "Where do I live now?"."""
    if not text.rstrip().endswith("?"):
        return False
    a, b = content_words(text), content_words(query)
    return bool(a and b) and len(a & b) / len(a | b) >= threshold


@dataclass(frozen=True)
class Outcome:
    """What one ranking did for one probe."""

    probe: Probe
    top1: bool  # a gold statement at rank 1
    r5: bool  # a gold statement in the top 5
    rr: float  # 1 / rank of the first gold statement (0 beyond the depth)
    stale1: bool  # a superseded statement at rank 1
    q_above: bool  # a stored question or near-copy of the probe above the first gold statement
    top: str = ""  # what rank 1 is: gold, stale, question, reply, other (a user statement), none


def score(probe: Probe, ranking: Sequence[str], questions: Iterable[str], replies: Iterable[str] = ()) -> Outcome:
    """Score one ranking (stored texts, best first) against a probe.

    Args:
        probe: the probe and its gold and stale statements.
        ranking: the retrieved texts, best first (compared stripped).
        questions: the user's stored questions.
        replies: the assistant's stored replies (only to say what rank 1 is).
    """
    texts = [t.strip() for t in ranking]
    gold = {g.strip() for g in probe.gold}
    stale = {s.strip() for s in probe.stale}
    first = next((i for i, t in enumerate(texts) if t in gold), None)
    asked = {q.strip() for q in questions} - gold
    above = texts if first is None else texts[:first]
    if not texts:
        top = "none"
    else:
        t0 = texts[0]
        top = (
            "gold"
            if t0 in gold
            else "stale"
            if t0 in stale
            else "question"
            if t0 in asked or near_copy(t0, probe.query)
            else "reply"
            if t0 in {r.strip() for r in replies}
            else "other"
        )
    return Outcome(
        probe=probe,
        top1=first == 0,
        r5=first is not None and first < 5,
        rr=0.0 if first is None else 1.0 / (first + 1),
        stale1=bool(texts) and texts[0] in {s.strip() for s in probe.stale},
        q_above=any(t in asked or (t not in gold and near_copy(t, probe.query)) for t in above),
        top=top,
    )


def run_titans(
    users: Sequence[User], embedder, db_dir: Path | None = None, config=None, writer: str = "replay"
) -> list[Outcome]:
    """Store every user (one namespace each) in a fresh SQLite file, then recall every probe."""
    from titans_agent import MemoryAgent

    out = []
    with (
        tempfile.TemporaryDirectory(dir=db_dir) as tmp,
        MemoryAgent.open(Path(tmp) / "loop.db", config, embedder=embedder) as agent,
    ):
        for user in users:
            WRITERS[writer](agent, user)
        for user in users:
            questions, replies = user.questions, user.replies
            for p in user.probes:
                hits = agent.recall(p.query, DEPTH, namespace=user.name)
                out.append(score(p, [h.text for h in hits], questions, replies))
    return out


def run_baselines(users: Sequence[User], embedder) -> dict[str, list[Outcome]]:
    """BM25 and MiniLM cosine over each user's stored texts (each distinct text once)."""
    from rank_bm25 import BM25Okapi

    out: dict[str, list[Outcome]] = {BM25: [], DENSE: []}
    for user in users:
        texts = user.texts
        bm25 = BM25Okapi([tokenize(t) for t in texts])
        doc = embedder.embed(texts)
        qv = embedder.embed([p.query for p in user.probes])
        for p, q in zip(user.probes, qv):
            for name, s in ((BM25, bm25.get_scores(tokenize(p.query))), (DENSE, doc @ q)):
                order = np.argsort(-np.asarray(s), kind="stable")[:DEPTH]
                out[name].append(score(p, [texts[i] for i in order], user.questions, user.replies))
    return out


# ------------------------------------------------------------------------------------ statistics
METRICS: dict[str, Callable[[Outcome], float]] = {
    "current@1": lambda o: float(o.top1),
    "R@5": lambda o: float(o.r5),
    "MRR": lambda o: o.rr,
    "stale@1": lambda o: float(o.stale1),
    "Q>A": lambda o: float(o.q_above),
}


def bootstrap(
    outcomes: Sequence[Outcome],
    metric: Callable[[Outcome], float],
    other: Sequence[Outcome] | None = None,
    n: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean of ``metric`` over ``outcomes`` (minus ``other``'s, paired, when given) and its 95%
    percentile interval, resampling users with replacement.

    Returns:
        (mean, low, high); (nan, nan, nan) for no outcomes.
    """
    if not outcomes:
        return float("nan"), float("nan"), float("nan")
    vals = np.array([metric(o) for o in outcomes], dtype=float)
    if other is not None:
        if [o.probe for o in other] != [o.probe for o in outcomes]:
            raise ValueError("paired outcomes must be of the same probes in the same order")
        vals = vals - np.array([metric(o) for o in other], dtype=float)
    users = sorted({o.probe.user for o in outcomes})
    idx = {u: i for i, u in enumerate(users)}
    who = np.array([idx[o.probe.user] for o in outcomes])
    sums, counts = np.bincount(who, vals, len(users)), np.bincount(who, minlength=len(users))
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(users), size=(n, len(users)))
    means = sums[draws].sum(axis=1) / np.maximum(counts[draws].sum(axis=1), 1)
    return float(vals.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def fmt(ci: tuple[float, float, float], signed: bool = False) -> str:
    mean, lo, hi = ci
    if np.isnan(mean):
        return "-"
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(mean)} [{f.format(lo)}, {f.format(hi)}]"


def out_of_fold(by_setting: dict[Any, list[Outcome]], folds: dict[str, int], key: str = "current@1"):
    """Choose a setting on the other folds' users, score it on each fold's own users.

    Args:
        by_setting: outcomes of every setting, over the same probes in the same order.
        folds: user -> fold.
        key: the metric maximised (ties: MRR, then the first setting).

    Returns:
        (outcomes out of fold, in the probes' order; {fold: chosen setting}).
    """
    settings = list(by_setting)
    base = by_setting[settings[0]]
    chosen, picked = {}, list(base)
    for f in sorted(set(folds.values())):

        def train_score(s: Any, f: int = f) -> tuple[float, float]:
            rows = [o for o in by_setting[s] if folds[o.probe.user] != f]
            return (float(np.mean([METRICS[key](o) for o in rows])), float(np.mean([o.rr for o in rows])))

        best = max(settings, key=train_score)  # max keeps the first of equals
        chosen[f] = best
        for i, o in enumerate(by_setting[best]):
            if folds[o.probe.user] == f:
                picked[i] = o
    return picked, chosen


# ------------------------------------------------------------------------------------ reporting
TITANS, BM25, DENSE = "titans-agent recall", "BM25 (rank-bm25)", "all-MiniLM-L6-v2 cosine"


def main_table(results: dict[str, list[Outcome]]) -> str:
    head = "| retriever | probes | current@1 | R@5 | MRR | stale@1 | Q>A | stable@1 |"
    rows = [head, "|---|---:|---|---|---|---|---|---|"]
    for name, outs in results.items():
        changed = [o for o in outs if o.probe.changed]
        stable = [o for o in outs if not o.probe.changed]
        cells = [fmt(bootstrap(changed, METRICS[m])) for m in ("current@1", "R@5", "MRR", "stale@1")]
        cells.append(fmt(bootstrap(outs, METRICS["Q>A"])))
        cells.append(fmt(bootstrap(stable, METRICS["current@1"])))
        rows.append(f"| {name} | {len(changed)}+{len(stable)} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def diff_table(results: dict[str, list[Outcome]]) -> str:
    ours = [o for o in results[TITANS] if o.probe.changed]
    rows = ["| titans-agent minus | current@1 | MRR | Q>A (all probes) |", "|---|---|---|---|"]
    for name in (BM25, DENSE):
        theirs = [o for o in results[name] if o.probe.changed]
        cells = [fmt(bootstrap(ours, METRICS[m], theirs), signed=True) for m in ("current@1", "MRR")]
        cells.append(fmt(bootstrap(results[TITANS], METRICS["Q>A"], results[name]), signed=True))
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def phrasing_table(results: dict[str, list[Outcome]]) -> str:
    kinds = sorted({o.probe.phrasing for o in results[TITANS] if o.probe.changed})
    names = list(results)
    rows = ["| phrasing | probes | " + " | ".join(f"{n} current@1" for n in names) + " | titans stale@1 |"]
    rows.append("|---|---:|" + "---:|" * (len(names) + 1))
    for k in kinds:
        sel = {n: [o for o in outs if o.probe.phrasing == k] for n, outs in results.items()}
        cells = [f"{np.mean([o.top1 for o in sel[n]]):.2f}" for n in names]
        stale = np.mean([o.stale1 for o in sel[TITANS]])
        rows.append(f"| {k} | {len(sel[TITANS])} | " + " | ".join(cells) + f" | {stale:.2f} |")
    return "\n".join(rows)


def fold_table(results: dict[str, list[Outcome]], folds: dict[str, int]) -> str:
    names = list(results)
    rows = ["| fold | users | probes | " + " | ".join(f"{n} current@1" for n in names) + " | titans Q>A |"]
    rows.append("|---:|---:|---:|" + "---:|" * (len(names) + 1))
    for f in range(N_FOLDS):
        sel = {n: [o for o in outs if folds[o.probe.user] == f] for n, outs in results.items()}
        if not sel[TITANS]:
            continue
        changed = {n: [o for o in outs if o.probe.changed] for n, outs in sel.items()}
        users = len({o.probe.user for o in sel[TITANS]})
        cells = [f"{np.mean([o.top1 for o in changed[n]]):.3f}" for n in names]
        qa = np.mean([o.q_above for o in sel[TITANS]])
        rows.append(f"| {f} | {users} | {len(changed[TITANS])} | " + " | ".join(cells) + f" | {qa:.3f} |")
    return "\n".join(rows)


TOPS = ("gold", "stale", "question", "reply", "other")


def top_table(results: dict[str, list[Outcome]]) -> str:
    rows = ["| rank 1 is (changed facts) | " + " | ".join(TOPS) + " |", "|---|" + "---:|" * len(TOPS)]
    for name, outs in results.items():
        changed = [o for o in outs if o.probe.changed]
        rows.append(f"| {name} | " + " | ".join(f"{np.mean([o.top == t for o in changed]):.2f}" for t in TOPS) + " |")
    return "\n".join(rows)


def failures(outcomes: Sequence[Outcome], limit: int = 12) -> str:
    bad = [o for o in outcomes if o.probe.changed and not o.top1][:limit]
    return "\n".join(f"- {o.probe.user}/{o.probe.fact} ({o.probe.phrasing}): {o.probe.query!r}" for o in bad)


def _data(name: str) -> dict[str, str]:
    path = HERE / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_data", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.USERS)


SETS = {"dev": "agent_loop_users", "heldout": "agent_loop_heldout"}


@dataclass
class SetReport:
    name: str
    users: list[User]
    results: dict[str, list[Outcome]] = field(default_factory=dict)
    seconds: float = 0.0


def evaluate(name: str, embedder, writer: str, db_dir: Path | None) -> SetReport:
    users = load_users(_data(SETS[name]))
    t0 = time.perf_counter()
    rep = SetReport(name, users)
    rep.results[TITANS] = run_titans(users, embedder, db_dir, writer=writer)
    rep.results.update(run_baselines(users, embedder))
    rep.seconds = time.perf_counter() - t0
    return rep


def render(reports: list[SetReport], writer: str) -> str:
    parts = [
        "# Agent loop: the current fact at rank 1",
        "",
        f"Writer: `{writer}` (see the module docstring). Metrics over recall(k={DEPTH}); "
        "current@1, R@5, MRR, stale@1 over probes of facts that changed; stable@1 over facts that never "
        "changed; Q>A over all probes. 95% intervals: bootstrap over users; differences paired.",
    ]
    for rep in reports:
        n_turns = sum(2 * len(s.runs) for u in rep.users for s in u.sessions)
        n_probes = sum(len(u.probes) for u in rep.users)
        parts += [
            "",
            f"## {rep.name}: {len(rep.users)} users, {n_turns} stored turns, {n_probes} probes ({rep.seconds:.0f} s)",
            "",
            "probes: changed+stable",
            "",
            main_table(rep.results),
            "",
            diff_table(rep.results),
            "",
            "What ranks first on probes of changed facts (question: a stored user question or a near-copy of "
            "the probe; reply: an assistant reply; other: another user statement):",
            "",
            top_table(rep.results),
            "",
            "By phrasing of the change (current@1):",
            "",
            phrasing_table(rep.results),
        ]
        if rep.name == "dev":
            folds = {u.name: fold_of(i) for i, u in enumerate(rep.users)}
            parts += ["", "By fold (users i % 3; no setting is tuned here, so every number is out of fold):", ""]
            parts.append(fold_table(rep.results, folds))
        parts += ["", "Probes of changed facts missed at rank 1 by titans-agent (first 12):", ""]
        parts.append(failures(rep.results[TITANS]) or "- none")
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="dev,heldout", help="comma-separated: dev, heldout")
    parser.add_argument("--writer", choices=sorted(WRITERS), default="replay")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--db-dir", type=Path, default=None, help="where the temporary databases go")
    args = parser.parse_args(argv)
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = [s for s in names if s not in SETS]
    if unknown or not names:
        parser.error(f"unknown set(s) {unknown}; choose from {sorted(SETS)}")

    from titans_agent.config import DEFAULT_EMBEDDER
    from titans_agent.embeddings import load_embedder

    embedder = load_embedder(DEFAULT_EMBEDDER)
    reports = [evaluate(n, embedder, args.writer, args.db_dir) for n in names]
    md = render(reports, args.writer)
    print(md)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "agent_loop.md").write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
