"""The agent loop's recall weights chosen out of fold: which of them earn their place.

Three weights of :class:`titans_agent.config.RetrievalConfig` act on a chatbot's memory:
``question_weight`` (stored questions demoted), ``reply_weight`` (for a question about the asker,
the assistant's echoes demoted) and ``relation_weight`` (a record in which the user states the
relation the question asks about favoured). This script stores every user of a set once (one
namespace each, as :mod:`agent_loop` does), then reopens the database with every point of a grid
over the three weights (recall-time settings: nothing is written again) and scores every probe.

Reported, on the development set: each weight switched off alone (the default otherwise), and the
grid point chosen on two folds of users and scored on the third, rotating (out of fold), next to the
default (chosen by the lead on the whole development set: in-fold, labelled so). On the held-out
set: the default and every ablation (never tuned on).

    python benchmarks/agent_loop_tune.py [--sets dev,heldout] [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import agent_loop as al  # noqa: E402

QUESTION_GRID = (0.2, 0.3, 0.5, 1.0)
REPLY_GRID = (0.2, 0.3, 0.5, 1.0)
RELATION_GRID = (0.0, 0.5, 1.0, 1.5)


def _settings() -> dict[object, dict[str, float]]:
    out: dict[object, dict[str, float]] = {"default": {}}
    out["without question demotion"] = {"question_weight": 1.0}
    out["without reply demotion"] = {"reply_weight": 1.0}
    out["without relation favour"] = {"relation_weight": 0.0}
    out["none of the three"] = {"question_weight": 1.0, "reply_weight": 1.0, "relation_weight": 0.0}
    for q, p, r in itertools.product(QUESTION_GRID, REPLY_GRID, RELATION_GRID):
        out[(q, p, r)] = {"question_weight": q, "reply_weight": p, "relation_weight": r}
    return out


class _CachedQueries:
    """The embedder, with each distinct text embedded once (probes recur across settings)."""

    def __init__(self, inner) -> None:
        self.inner, self.cache = inner, {}
        for name in ("dim", "name", "model_name", "max_seq_length", "identity"):
            if hasattr(inner, name):
                setattr(self, name, getattr(inner, name))

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed(self, texts):
        import numpy as np

        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            for t, v in zip(missing, self.inner.embed(missing)):
                self.cache[t] = v
        return np.stack([self.cache[t] for t in texts])


def run_grid(users, embedder, settings, db_dir=None) -> dict[object, list[al.Outcome]]:
    """Every setting's outcomes over the same probes, from one stored database."""
    from titans_agent import AgentConfig, MemoryAgent, RetrievalConfig

    out: dict[object, list[al.Outcome]] = {}
    with tempfile.TemporaryDirectory(dir=db_dir) as tmp:
        db = Path(tmp) / "loop.db"
        with MemoryAgent.open(db, embedder=embedder) as agent:
            for user in users:
                al.WRITERS["replay"](agent, user)
        for key, weights in settings.items():
            cfg = AgentConfig(retrieval=RetrievalConfig(**weights))
            rows = []
            with MemoryAgent.open(db, cfg, embedder=embedder) as agent:
                for user in users:
                    for p in user.probes:
                        hits = agent.recall(p.query, al.DEPTH, namespace=user.name)
                        rows.append(al.score(p, [h.text for h in hits], user.questions, user.replies))
            out[key] = rows
    return out


def _row(name: str, rows: list[al.Outcome]) -> str:
    changed = [o for o in rows if o.probe.changed]
    stable = [o for o in rows if not o.probe.changed]
    cells = [al.fmt(al.bootstrap(changed, al.METRICS[m])) for m in ("current@1", "MRR", "stale@1")]
    q = al.fmt(al.bootstrap(rows, al.METRICS["Q>A"]))
    st = al.fmt(al.bootstrap(stable, lambda o: float(o.top1)))
    return f"| {name} | {' | '.join(cells)} | {q} | {st} |"


HEADER = "| setting | current@1 | MRR | stale@1 | Q>A | stable@1 |\n|---|---|---|---|---|---|"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="dev,heldout")
    parser.add_argument("--out", type=Path, default=al.HERE / "results")
    args = parser.parse_args(argv)
    from titans_agent.config import DEFAULT_EMBEDDER
    from titans_agent.embeddings import load_embedder

    embedder = _CachedQueries(load_embedder(DEFAULT_EMBEDDER))
    settings = _settings()
    parts = ["# Agent loop: recall weights chosen out of fold", ""]
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        users = al.load_users(al._data(al.SETS[name]))
        t0 = time.perf_counter()
        chosen_settings = settings if name == "dev" else {k: v for k, v in settings.items() if isinstance(k, str)}
        grid = run_grid(users, embedder, chosen_settings)
        parts += [f"## {name}: {len(users)} users ({time.perf_counter() - t0:.0f} s)", "", HEADER]
        label = "default (in-fold: chosen on the whole dev set)" if name == "dev" else "default (never tuned here)"
        parts.append(_row(label, grid["default"]))
        for key in [k for k in grid if isinstance(k, str) and k != "default"]:
            parts.append(_row(key, grid[key]))
        if name == "dev":
            folds = {u.name: al.fold_of(i) for i, u in enumerate(users)}
            points = {k: v for k, v in grid.items() if isinstance(k, tuple)}
            picked, chosen = al.out_of_fold(points, folds)
            parts.append(_row("grid (question, reply, relation) chosen out of fold", picked))
            parts += ["", "Chosen per fold (question_weight, reply_weight, relation_weight): "
                      + ", ".join(f"fold {f}: {c}" for f, c in sorted(chosen.items()))]  # fmt: skip
        parts.append("")
    md = "\n".join(parts) + "\n"
    print(md)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "agent_loop_tune.md").write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
