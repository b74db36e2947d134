"""The agent-loop benchmark's harness (benchmarks/agent_loop.py): its metrics on hand-made rankings,
its script parser, its data sets, and its two writers. Only the embedder is fake."""

from __future__ import annotations

import math

import pytest
from conftest import load_benchmark

from titans_agent import MemoryAgent

loop = load_benchmark("agent_loop")

SCRIPT = """
# 2024-01-01
U [home=boston, job=nurse]: Hi, I'm Al. I live in Boston and work as a nurse.
A: Nice to meet you, Al!
U?: Where do I live?
A: In Boston.
# 2024-02-01
U [home=seattle/moved]: I moved to Seattle last week.
A: Congrats on Seattle!
U [home=seattle]: My new place in Seattle is tiny.
A: Small but cosy, I hope.
? home: Where do I live now?
? job: What is my job?
"""
OLD = "Hi, I'm Al. I live in Boston and work as a nurse."
NEW = "I moved to Seattle last week."
TINY = "My new place in Seattle is tiny."
ASKED = "Where do I live?"


@pytest.fixture
def user():
    return loop.parse_user("al", SCRIPT)


def test_parse_gold_stale_and_kinds(user):
    home, job = user.probes
    assert home.gold == (NEW, TINY) and home.stale == (OLD,) and home.phrasing == "moved" and home.changed
    assert job.gold == (OLD,) and job.stale == () and job.phrasing == "stable" and not job.changed
    assert user.questions == {ASKED}
    assert [s.date.month for s in user.sessions] == [1, 2]
    assert user.texts[:3] == [OLD, "Nice to meet you, Al!", ASKED]


@pytest.mark.parametrize(
    "bad, message",
    [
        (SCRIPT.replace("2024-02-01", "2023-12-01"), "dates must increase"),
        (SCRIPT.replace("home=seattle/moved", "home=seattle"), "needs a phrasing kind"),
        (SCRIPT.replace("? job:", "? car:"), "unknown fact"),
        (SCRIPT.replace("A: Small but cosy, I hope.\n", ""), "without a reply"),
        (SCRIPT.replace("home=seattle]", "home=boston/moved]"), "changes nothing"),
    ],
)
def test_parse_rejects_malformed_scripts(bad, message):
    with pytest.raises(ValueError, match=message):
        loop.parse_user("al", bad)


def test_score_gold_at_rank_one(user):
    home = user.probes[0]
    o = loop.score(home, [TINY, OLD, ASKED], user.questions, user.replies)
    assert (o.top1, o.r5, o.rr, o.stale1, o.q_above, o.top) == (True, True, 1.0, False, False, "gold")


def test_score_stale_and_question_above(user):
    home = user.probes[0]
    o = loop.score(home, [OLD, ASKED, "Congrats on Seattle!", NEW], user.questions, user.replies)
    assert (o.top1, o.r5, o.stale1, o.q_above, o.top) == (False, True, True, True, "stale")
    assert o.rr == pytest.approx(1 / 4)
    o = loop.score(home, [ASKED, NEW], user.questions, user.replies)
    assert (o.top, o.q_above, o.rr) == ("question", True, 0.5)
    o = loop.score(home, ["Congrats on Seattle!"], user.questions, user.replies)  # gold beyond the depth
    assert (o.top1, o.r5, o.rr, o.q_above, o.top) == (False, False, 0.0, False, "reply")
    o = loop.score(home, [], user.questions)
    assert (o.top1, o.rr, o.stale1, o.top) == (False, 0.0, False, "none")


def test_near_copy_is_a_question_with_the_probes_words():
    assert loop.near_copy("Where do you live now?", "Where do I live now?")
    assert not loop.near_copy("You live in Seattle now.", "Where do I live now?")  # an answer, not a copy
    assert not loop.near_copy("What is my job?", "Where do I live now?")
    o = loop.score(
        loop.parse_user("al", SCRIPT).probes[0], ["So where do you live now?", NEW], frozenset(), frozenset()
    )
    assert o.q_above and o.top == "question"


def _outcome(user: str, top1: bool, fact: str = "f") -> object:
    probe = loop.Probe(user, fact, "q?", ("g",), ("s",), "moved")
    return loop.Outcome(probe, top1, top1, float(top1), False, False)


def test_bootstrap_mean_interval_and_pairing():
    outs = [_outcome("a", True), _outcome("a", True), _outcome("b", False), _outcome("c", True)]
    mean, lo, hi = loop.bootstrap(outs, loop.METRICS["current@1"])
    assert mean == pytest.approx(0.75) and 0.0 <= lo <= mean <= hi <= 1.0 and lo < hi
    same = loop.bootstrap(outs, loop.METRICS["current@1"], outs)
    assert same == (0.0, 0.0, 0.0)
    assert all(math.isnan(x) for x in loop.bootstrap([], loop.METRICS["MRR"]))
    with pytest.raises(ValueError, match="same probes"):
        loop.bootstrap(outs, loop.METRICS["MRR"], outs[::-1])


def test_bootstrap_resamples_users_not_probes():
    # one user with 9 hits, one with 1 miss: resampling users gives draws of 0, .9 and 1.0 only
    outs = [_outcome("a", True, f"f{i}") for i in range(9)] + [_outcome("b", False)]
    mean, lo, hi = loop.bootstrap(outs, loop.METRICS["current@1"], n=500)
    assert mean == pytest.approx(0.9) and lo == 0.0 and hi == 1.0


def test_out_of_fold_chooses_on_the_other_folds():
    users = ["a", "b", "c"]
    folds = {u: i for i, u in enumerate(users)}
    # setting "x" wins on users a and b, "y" on c: fold 2 (user c) gets x, folds 0 and 1 get x too
    x = [_outcome("a", True), _outcome("b", True), _outcome("c", False)]
    y = [_outcome("a", False), _outcome("b", False), _outcome("c", True)]
    picked, chosen = loop.out_of_fold({"x": x, "y": y}, folds)
    assert chosen == {0: "x", 1: "x", 2: "x"}
    assert [o.top1 for o in picked] == [True, True, False]
    # y2 wins on a and c: fold 1 (user b) is scored with y2, though x was better on b
    y2 = [_outcome("a", True), _outcome("b", False), _outcome("c", True)]
    picked, chosen = loop.out_of_fold({"x": x, "y": y2}, folds)
    assert chosen == {0: "x", 1: "y", 2: "x"}  # fold 0: a tie on b and c keeps the first setting
    assert [o.top1 for o in picked] == [True, False, False]


@pytest.mark.parametrize("name, minimum", [("dev", 24), ("heldout", 16)])
def test_data_sets_are_well_formed(name, minimum):
    users = loop.load_users(loop._data(loop.SETS[name]))
    assert len(users) >= minimum
    for u in users:
        stored_user_texts = {r.user.text for s in u.sessions for r in s.runs}
        assert all(a.date < b.date for a, b in zip(u.sessions, u.sessions[1:])), u.name
        assert any(p.changed for p in u.probes), f"{u.name} has no changed fact"
        assert any(not p.changed for p in u.probes), f"{u.name} has no stable control"
        for p in u.probes:
            assert p.gold and set(p.gold) <= stored_user_texts, (u.name, p.query)
            assert set(p.stale) <= stored_user_texts and not set(p.stale) & set(p.gold)
        assert u.questions, f"{u.name} asks nothing"
    # the loop's hard case: some probes repeat, word for word, a question the user asked before
    assert sum(p.query in u.questions for u in users for p in u.probes) >= 5
    folds = [loop.fold_of(i) for i in range(len(users))]
    assert sorted(set(folds)) == list(range(loop.N_FOLDS))


def test_sets_share_no_user_no_statement_and_no_probe():
    dev, held = (loop.load_users(loop._data(loop.SETS[n])) for n in ("dev", "heldout"))
    assert not {u.name for u in dev} & {u.name for u in held}
    for attr in ("gold", "stale"):
        assert not {t for u in dev for p in u.probes for t in getattr(p, attr)} & {
            t for u in held for p in u.probes for t in getattr(p, attr)
        }
    assert not {p.query.lower() for u in dev for p in u.probes} & {p.query.lower() for u in held for p in u.probes}


def _stored(agent: MemoryAgent, user) -> list[tuple]:
    out = []
    for s in user.sessions:
        sid = f"{user.name}-{s.date:%Y%m%d}"
        out += [(sid, t["role"], t["content"]) for t in agent.turns(sid, namespace=user.name)]
    metas = sorted(tuple(sorted(h.metadata)) for h in agent.records(namespace=user.name))
    return [*out, *metas]


def test_replay_stores_what_the_middleware_stores(tmp_path, fake_embedder, user):
    with (
        MemoryAgent.open(tmp_path / "replay.db", embedder=fake_embedder) as a,
        MemoryAgent.open(tmp_path / "agent.db", embedder=fake_embedder) as b,
    ):
        loop.write_replay(a, user)
        loop.write_agent(b, user)
        assert _stored(a, user) == _stored(b, user)
        assert len(a.turns(f"al-{user.sessions[0].date:%Y%m%d}", namespace="al")) == 4
        assert {h.timestamp.date() for h in a.records(namespace="al")} == {s.date.date() for s in user.sessions}


def test_run_scores_every_probe(tmp_path, fake_embedder, user):
    other = loop.parse_user("bo", SCRIPT.replace("Al", "Bo").replace("Boston", "Denver"))
    outs = loop.run_titans([user, other], fake_embedder, db_dir=tmp_path)
    assert [o.probe for o in outs] == [*user.probes, *other.probes]
    base = loop.run_baselines([user, other], fake_embedder)
    assert set(base) == {loop.BM25, loop.DENSE}
    for results in (outs, *base.values()):
        assert all(0.0 <= o.rr <= 1.0 and o.top in (*loop.TOPS, "none") for o in results)
    md = loop.render([loop.SetReport("dev", [user, other], {loop.TITANS: outs, **base})], "replay")
    assert "| titans-agent recall | 2+2 |" in md and "By fold" in md
