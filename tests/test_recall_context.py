"""The candidates' context recall reads in one snapshot (titans_agent/store/context.py).

:func:`locality` reads neighbours and groups in one query; it must equal the plain per-piece
:func:`neighbours` and :func:`groups` (its oracle) on a namespace with turns of two sessions, the
chunks of two documents, a note, a text that occurs both as a turn and as a chunk, and a supersession
link. Real databases (SQLite file, PostgreSQL schema); only the embedder is fake."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from conftest import SmallFakeEmbedder

from titans_agent import AgentConfig, MemoryAgent
from titans_agent.store.context import groups, locality, neighbours, read_recall_context, supersession_links
from titans_agent.store.repository import record_texts

pytestmark = pytest.mark.backends()

T0 = dt.datetime(2024, 5, 1, 9, 0)
SHARED = "The quarterly report is due on the first Friday of June."
KINDS = (None, (), ("turn",), ("chunk",), ("turn", "chunk"))


def _paragraph(topic: str, n: int) -> str:
    return " ".join(f"Paragraph {n} of the {topic} guide explains step {n}.{i} in plain words." for i in range(4))


@pytest.fixture
def namespace(db_url):
    """The agent and ids: ``turns`` (session -> record ids in order), ``chunks`` (source -> record
    ids in chunk order), ``note``, ``old`` / ``new`` (a supersession). Few writes, a small memory."""
    agent = MemoryAgent.open(db_url, AgentConfig(chunk_tokens=32), embedder=SmallFakeEmbedder())
    lines = {
        "s1": ["My code editor is Vim.", "Nice, a classic.", SHARED, "Shall we plan the trip?", "Yes, in July."],
        "s2": ["I went hiking in the mountains.", "Which ones?", "The Alps, near Chamonix."],
    }
    batch = [
        (sid, ("user", "assistant")[i % 2], line, T0 + dt.timedelta(minutes=i))
        for sid, ls in lines.items()
        for i, line in enumerate(ls)
    ]
    written = iter(r.record_id for r in agent.add_turns(batch))
    turns = {sid: [next(written) for _ in ls] for sid, ls in lines.items()}
    chunks = {}
    for topic in ("garden", "kitchen"):
        agent.ingest("\n\n".join(_paragraph(topic, n) for n in range(3)) + "\n\n" + SHARED, source=f"{topic}.md")
        chunks[topic] = [h.id for h in agent.records(source=f"{topic}.md")]  # in write (= chunk) order
    note = agent.remember("Remember to water the ferns.").record_id
    new = agent.add_turn("s3", "user", "My code editor is Helix now.", T0 + dt.timedelta(days=10)).record_id
    yield agent, {"turns": turns, "chunks": chunks, "note": note, "old": turns["s1"][0], "new": new}
    agent.close()


def _all_ids(ids: dict) -> list[int]:
    return sorted({*itertools.chain(*ids["turns"].values(), *ids["chunks"].values()), ids["note"], ids["new"]})


def test_the_namespace_has_every_case(namespace):
    """Guards the fixture: without these cases the comparisons below would prove little."""
    agent, ids = namespace
    s1, s2, garden = ids["turns"]["s1"], ids["turns"]["s2"], ids["chunks"]["garden"]
    shared = s1[2]
    assert garden[-1] == ids["chunks"]["kitchen"][-1] == shared  # one record: a turn and two chunks
    with agent.store.session() as s:
        ns_id = _ns_id(s)
        adj = neighbours(s, ns_id, _all_ids(ids), ("turn", "chunk"))
        grp = groups(s, _all_ids(ids), ("turn", "chunk"))
        links = supersession_links(s, [ids["old"]])
    assert adj[s1[1]] == {s1[0], shared}
    assert adj[s2[0]] == {s2[1]}
    assert adj[garden[1]] == {garden[0], garden[2]}
    assert adj[shared] == {s1[1], s1[3], garden[-2], ids["chunks"]["kitchen"][-2]}
    assert ids["note"] not in adj and ids["note"] not in grp
    assert {kind for kind, _ in grp[shared]} == {"session", "document"} and len(grp[shared]) == 3
    assert links == ({ids["old"]: [ids["new"]]}, {ids["new"]: [ids["old"]]})


def _ns_id(s) -> int:
    from titans_agent.store.repository import namespace_id

    ns_id = namespace_id(s, "default")
    assert ns_id is not None
    return ns_id


@pytest.mark.parametrize("subset", ["all", "some"])
def test_locality_equals_neighbours_and_groups(namespace, subset):
    agent, ids = namespace
    every = _all_ids(ids)
    # "some": candidates without their neighbours, as a recall's are (the map must stay symmetric)
    cand = every if subset == "all" else [ids["turns"]["s1"][2], ids["chunks"]["garden"][1], ids["note"], ids["new"]]
    with agent.store.session() as s:
        ns_id = _ns_id(s)
        for n_kinds, g_kinds in itertools.product(KINDS, KINDS):
            expected = (
                neighbours(s, ns_id, cand, n_kinds) if n_kinds else {},
                groups(s, cand, g_kinds) if g_kinds else {},
            )
            assert locality(s, ns_id, cand, n_kinds, g_kinds) == expected, (n_kinds, g_kinds)
        assert locality(s, ns_id, [], ("turn", "chunk"), ("turn", "chunk")) == ({}, {})


@pytest.mark.parametrize("as_of", [None, T0 + dt.timedelta(days=1)])
def test_read_recall_context_equals_its_pieces(namespace, as_of):
    agent, ids = namespace
    cand = [ids["old"], ids["turns"]["s2"][1], ids["chunks"]["kitchen"][0], ids["note"]]
    kinds = ("turn", "chunk")
    with agent.store.session() as s:
        ns_id = _ns_id(s)
        got = read_recall_context(
            s,
            ns_id,
            cand,
            neighbour_kinds=kinds,
            group_kinds=kinds,
            as_of=as_of,
            texts_of_scored=True,
            texts_of_pool=True,
            known=[ids["turns"]["s2"][0]],
        )
        adj = neighbours(s, ns_id, cand, kinds)
        superseded_by, supersedes = supersession_links(s, set(cand) | set(adj), as_of)
        heads = set(cand) | {n for old in cand for n in superseded_by.get(old, ())}
        pool = heads | {n for r in heads for n in adj.get(r, ())}
        texts = record_texts(s, pool - {ids["turns"]["s2"][0]})
        assert got.neighbours == adj
        assert got.groups == groups(s, cand, kinds)
        assert (got.superseded_by, got.supersedes) == (superseded_by, supersedes)
        assert got.texts == texts
    assert (ids["new"] in got.texts) == (as_of is None)  # the successor's text, only when it is in effect
