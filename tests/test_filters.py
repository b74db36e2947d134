"""Metadata filters in recall (``recall(filter=...)``): the operators, dotted paths, missing keys,
errors; SQL (SQLite JSON1, PostgreSQL jsonb) against the pure :func:`matches_filter` on one table of
cases; the filter in the CLI (``--where``), the LangChain retriever and ``TitansStore.search``."""

from __future__ import annotations

import json

import pytest

from titans_agent import InvalidInputError, matches_filter

DOCS = [  # (source, text, metadata)
    ("memo-ny.txt", "Memo on the merger settlement terms for the board.", {"privileged": True, "court": "NY"}),
    ("brief-ny.txt", "Public brief filed about the merger schedule.", {"privileged": False, "court": "NY"}),
    ("memo-ca.txt", "Counsel memo on licensing risks in the merger.", {"privileged": True, "court": "CA"}),
]


def _sources(agent, flt, query="merger memo", **kw):
    return sorted(h.source for h in agent.recall(query, k=10, filter=flt, **kw))


@pytest.mark.backends
def test_filters_on_documents(agent):
    for source, text, meta in DOCS:
        agent.ingest(text, source=source, metadata=meta)
    assert _sources(agent, None) == ["brief-ny.txt", "memo-ca.txt", "memo-ny.txt"]
    cases = [
        ({"privileged": True}, ["memo-ca.txt", "memo-ny.txt"]),
        ({"privileged": 1}, []),  # a bool is not a number
        ({"court": {"$nin": ["NY"]}}, ["memo-ca.txt"]),
        ({"judge": "X"}, []),  # a missing key matches nothing
        ({"judge": {"$exists": False}}, ["brief-ny.txt", "memo-ca.txt", "memo-ny.txt"]),
        ({"judge": {"$ne": "X"}}, ["brief-ny.txt", "memo-ca.txt", "memo-ny.txt"]),
        ({"court": "NY", "privileged": True}, ["memo-ny.txt"]),  # several keys: AND
        ({"court": {"$eq": "CA"}}, ["memo-ca.txt"]),
        ({"court": {"$ne": "CA"}}, ["brief-ny.txt", "memo-ny.txt"]),
        ({"court": {"$in": ["CA", "TX"]}}, ["memo-ca.txt"]),
        ({"court": {"$gt": "CA"}}, ["brief-ny.txt", "memo-ny.txt"]),
        ({"court": {"$gte": "CA", "$lt": "NY"}}, ["memo-ca.txt"]),
        ({"court": {"$lte": "NY"}}, ["brief-ny.txt", "memo-ca.txt", "memo-ny.txt"]),
        ({"privileged": {"$exists": True}}, ["brief-ny.txt", "memo-ca.txt", "memo-ny.txt"]),
        ({"$or": [{"court": "CA"}, {"privileged": False}]}, ["brief-ny.txt", "memo-ca.txt"]),
        ({}, ["brief-ny.txt", "memo-ca.txt", "memo-ny.txt"]),  # no restriction
    ]
    for flt, expected in cases:
        assert _sources(agent, flt) == expected, flt
    # a filter with the other filters: source, kinds
    assert _sources(agent, {"privileged": True}, source="memo-ny.txt") == ["memo-ny.txt"]
    assert _sources(agent, {"privileged": True}, kinds=["note"]) == []
    with pytest.raises(InvalidInputError, match=r"\$regex"):
        agent.recall("merger", filter={"court": {"$regex": "N"}})


@pytest.mark.backends
def test_filters_on_nested_values_notes_and_turns(agent):
    agent.remember("Quarterly numbers for the Paris office.", {"client": {"region": "EU", "tier": 2}, "year": 2023})
    agent.remember("Quarterly numbers for the Boston office.", {"client": {"region": "US", "tier": 1}, "year": 2021})
    agent.add_turn("s1", "user", "What were the quarterly numbers in Paris?", metadata={"channel": "web"})
    agent.add_turns([("s2", "user", "Send me the quarterly numbers for Boston.", None, {"channel": "mail"})])
    # the same text from two sources, with different metadata: one record, shown by its matching occurrence
    agent.ingest("Quarterly numbers summary for every office.", source="a.txt", metadata={"owner": "ana"})
    agent.ingest("Quarterly numbers summary for every office.", source="b.txt", metadata={"owner": "ben"})

    def texts(flt, **kw):
        return sorted(h.text for h in agent.recall("quarterly numbers", k=10, filter=flt, **kw))

    assert texts({"client.region": "EU"}) == ["Quarterly numbers for the Paris office."]
    assert texts({"client": {"region": "US"}}) == ["Quarterly numbers for the Boston office."]
    assert texts({"client.tier": {"$gte": 1}, "year": {"$lt": 2022}}) == ["Quarterly numbers for the Boston office."]
    assert texts({"client.region.name": "EU"}) == []  # a step through a string: missing
    assert len(texts({"client": {"$exists": True}})) == 2
    turns = agent.recall("quarterly numbers", k=10, filter={"channel": "mail"})
    assert [(h.kind, h.session_id, h.metadata) for h in turns] == [("turn", "s2", {"channel": "mail"})]
    assert [h.session_id for h in agent.recall("numbers", filter={"channel": {"$in": ["web"]}}, kinds=["turn"])] == [
        "s1"
    ]
    (hit,) = agent.recall("summary for every office", k=10, filter={"owner": "ben"})
    assert (hit.source, hit.metadata, hit.occurrences) == ("b.txt", {"owner": "ben"}, 2)
    # a NUL in metadata is refused (PostgreSQL's JSON cannot hold it); filtering goes on
    with pytest.raises(InvalidInputError, match="NUL"):
        agent.remember("A note whose metadata holds a NUL.", {"raw": "a\x00b", "owner": "cy"})
    assert [h.metadata for h in agent.recall("summary for every office", filter={"owner": "ana"})] == [{"owner": "ana"}]


# metadata of the agreement table's records, and the filters checked on them
TABLE_META = [
    {"court": "NY", "privileged": True, "year": 2020, "score": 1.5, "client": {"region": "EU", "tier": 1}},
    {"court": "CA", "privileged": False, "year": 2023, "score": 1, "client": {"region": "US"}, "note": None},
    {"court": "ny", "privileged": 1, "year": "2021", "client": "EU", "tags": ["a", "b"]},
    {"court": "Ñandú", "year": 2019.0, "client": {"region": None}, "n": 0},
    {"court": "", "privileged": 0, "year": -5, "client": {"region": ["EU"]}},
    {"court": "Zürich", "x": {"y": {"z": "deep"}}},
    {},
    {"court": 5, "year": True, "a.b": 1},
    {"court": "true", "score": "1.5", "privileged": "1"},  # strings that spell JSON literals
]
TABLE_FILTERS = [
    {"court": "NY"},
    {"court": {"$ne": "NY"}},
    {"privileged": True},
    {"privileged": 1},
    {"privileged": False},
    {"privileged": {"$in": [0, False]}},
    {"year": {"$gt": 2020}},
    {"year": {"$gte": 2020}},
    {"year": {"$lt": 2020}},
    {"year": {"$lte": 2019}},
    {"year": {"$gt": "2020"}},
    {"year": 2019},
    {"year": {"$gt": 2019, "$lt": 2023}},
    {"court": {"$gt": "M"}},
    {"court": {"$lt": "b"}},
    {"court": {"$gt": "Z"}},
    {"court": {"$gte": ""}},
    {"court": "Ñandú"},
    {"court": {"$in": ["NY", "CA", 5]}},
    {"court": {"$nin": ["NY", ""]}},
    {"court": {"$in": []}},
    {"court": {"$nin": []}},
    {"note": None},
    {"note": {"$ne": None}},
    {"note": {"$exists": True}},
    {"note": {"$exists": False}},
    {"client.region": "EU"},
    {"client": {"region": "EU"}},
    {"client.region": None},
    {"client.region": {"$exists": True}},
    {"client.region": {"$ne": "EU"}},
    {"client.tier": {"$gte": 1}},
    {"client": "EU"},
    {"x.y.z": "deep"},
    {"x.y": {"$exists": True}},
    {"tags": "a"},
    {"tags": '["a","b"]'},  # JSON text of a stored array: not equal
    {"client": '{"region":"US"}'},
    {"court": "5"},
    {"year": 1},  # a stored true: not equal
    {"privileged": {"$nin": [1, "x"]}},
    {"court": "true"},
    {"privileged": "true"},
    {"privileged": "1"},
    {"score": "1.5"},
    {"score": 1.5},
    {"court": {"$in": ["true", "NY", None]}},
    {"tags": {"$exists": True}},
    {"a.b": 1},
    {"score": 1},
    {"score": 1.0},
    {"score": {"$gt": 1.2}},
    {"n": {"$ne": 0}},
    {"court": "NY", "year": 2020},
    {"$or": [{"court": "CA"}, {"n": 0}]},
    {"$and": [{"year": {"$gt": 2000}}, {"year": {"$lt": 2022}}]},
]


@pytest.mark.backends
def test_sql_and_python_agree(agent):
    words = "amber basalt cobalt dune ember fjord granite harbor ivory".split()
    for i, meta in enumerate(TABLE_META):
        agent.remember(f"Entry {words[i]} of the ledger.", {"i": i, **meta})
    ids = {h.metadata["i"]: h.id for h in agent.records()}
    assert sorted(ids) == list(range(len(TABLE_META)))
    for flt in TABLE_FILTERS:
        expected = sorted(ids[i] for i, m in enumerate(TABLE_META) if matches_filter(m, flt))
        got = sorted(h.id for h in agent.recall("entry of the ledger", k=50, filter=flt))
        assert got == expected, flt
    # spot checks of the Python side itself
    assert [i for i, m in enumerate(TABLE_META) if matches_filter(m, {"privileged": True})] == [0]
    assert [i for i, m in enumerate(TABLE_META) if matches_filter(m, {"court": {"$gt": "Z"}})] == [2, 3, 5, 8]


INDEX_META = [  # what the metadata index cuts or rounds: the exact condition must still decide
    {"memo": "x" * 250 + "a", "big": 2**60 + 1, "f": 3},
    {"memo": "x" * 250 + "b", "big": 2**60, "f": 3.0},
    {"wide": {f"k{j}": j for j in range(300)}, "f": 2.5},  # too many keys to flatten: never narrowed out
]
INDEX_FILTERS = [
    {"memo": "x" * 250 + "a"},
    {"memo": {"$in": ["x" * 250 + "b", "y"]}},
    {"big": 2**60 + 1},
    {"big": {"$gt": 2**60}},
    {"big": {"$lte": 2**60}},
    {"f": 3},
    {"f": {"$gte": 3}},
    {"f": {"$lt": 3}},
    {"wide.k7": 7},
    {"wide.k299": {"$gt": 298}},
    {"wide": {"$exists": True}},
    {"$or": [{"f": 2.5}, {"memo": "x" * 250 + "b"}]},
]


@pytest.mark.backends
def test_the_metadata_index_narrows_without_losing_a_match(agent, tmp_path):
    from titans_agent import MemoryAgent, export_jsonl, import_jsonl

    for i, meta in enumerate(INDEX_META):
        agent.ingest(f"Ledger line {'abc'[i]} of the index.", source=f"line-{i}", metadata={"i": i, **meta})

    def check(a):
        ids = {h.metadata["i"]: h.id for h in a.records()}
        for flt in INDEX_FILTERS:
            expected = sorted(ids[i] for i, m in enumerate(INDEX_META) if matches_filter(m, flt))
            assert sorted(h.id for h in a.recall("ledger line", k=10, filter=flt)) == expected, flt

    check(agent)
    # the index follows changed metadata: the new value is found, the old one no longer
    source = "line-0"
    agent.update_metadata({"court": "NY"}, source=source)
    assert [h.source for h in agent.recall("ledger line", k=10, filter={"court": "NY"})] == [source]
    agent.update_metadata({"i": 0, "court": "CA"}, source=source, merge=False)
    assert agent.recall("ledger line", k=10, filter={"court": "NY"}) == []
    # and an imported namespace is indexed as it is written
    dump = tmp_path / "dump.jsonl"
    export_jsonl(agent, dump)
    with MemoryAgent.open(tmp_path / "copy.db", embedder=agent.embedder) as copy:
        import_jsonl(copy, dump)
        assert [h.source for h in copy.recall("ledger line", k=10, filter={"court": "CA"})] == [source]
        INDEX_META[0] = {"court": "CA"}
        try:
            check(copy)
        finally:
            INDEX_META[0] = {"memo": "x" * 250 + "a", "big": 2**60 + 1, "f": 3}


@pytest.mark.parametrize(
    "flt, named",
    [
        ("court=NY", "must be a dict"),
        ({"court": {"$regex": "N"}}, r"'\$regex' for 'court'"),
        ({"$not": {"court": "NY"}}, r"'\$not'"),
        ({"court": {"$in": "NY"}}, r"'\$in' for 'court' takes a list"),
        ({"court": {"$gt": True}}, r"'\$gt' for 'court' takes a number or a string"),
        ({"court": ["NY", "CA"]}, r"'court'.*\$in"),
        ({"court": {"$eq": {"a": 1}}}, "'court'"),
        ({"a..b": 1}, "Invalid filter key 'a..b': the path has an empty step"),
        ({"court": {}}, "'court' is an empty dict"),
        ({"court": {"$eq": "NY", "x": 1}}, "mixes operators"),
        ({"n": {"$exists": 1}}, r"'\$exists' for 'n'"),
        ({"$or": []}, r"'\$or' takes a non-empty list"),
        ({1: "x"}, "Invalid filter key 1 .*keys must be strings"),
    ],
)
def test_malformed_filters_name_the_problem(flt, named):
    with pytest.raises(InvalidInputError, match=named):
        matches_filter({}, flt)


def test_cli_where(tmp_path, monkeypatch, fake_embedder):
    from click.testing import CliRunner
    from titans_agent.cli import app as cli_app

    from titans_agent import MemoryAgent

    db = tmp_path / "memory.db"
    with MemoryAgent.open(str(db), embedder=fake_embedder) as agent:
        for source, text, meta in DOCS:
            agent.ingest(text, source=source, metadata=meta)
    monkeypatch.setattr(cli_app, "open_agent", lambda db, *_a, **_kw: MemoryAgent.open(db, embedder=fake_embedder))
    run = CliRunner()

    def recall(*args):
        return run.invoke(cli_app.cli, ["--db", str(db), "recall", "merger memo", *args], catch_exceptions=False)

    result = recall("--where", '{"privileged": true, "court": {"$ne": "NY"}}', "--json")
    assert result.exit_code == 0, result.output
    assert [h["source"] for h in json.loads(result.stdout)] == ["memo-ca.txt"]
    for bad, message in [("{court: NY}", "not JSON"), ('{"court": {"$like": "N"}}', "$like")]:
        result = recall("--where", bad)
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    # --meta types what JSON spells exactly as a number, a bool or null, so --where finds it
    doc = tmp_path / "ruling.txt"
    doc.write_text("A ruling on the merger appeal.", encoding="utf-8")
    for args in (
        ["remember", "Merger memo for the 2021 appeal.", "--meta", "year=2021", "--meta", "privileged=true"],
        ["ingest", str(doc), "--meta", "year=2022", "--meta", "zip=01234", "--meta", "v=1.10"],
    ):
        result = run.invoke(cli_app.cli, ["--db", str(db), *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
    result = recall("--where", '{"year": {"$gte": 2021}}', "--json", "-k", "10")
    hits = json.loads(result.stdout)
    assert sorted(h["metadata"]["year"] for h in hits) == [2021, 2022]
    assert {k: v for h in hits for k, v in h["metadata"].items() if k in ("zip", "v", "privileged")} == {
        "zip": "01234",
        "v": "1.10",
        "privileged": True,
    }


def test_retriever_and_store_filters(agent):
    pytest.importorskip("langgraph")
    from titans_agent.adapters.langchain import TitansRetriever, TitansStore

    for source, text, meta in DOCS:
        agent.ingest(text, source=source, metadata=meta)
    retriever = TitansRetriever(agent=agent, k=5, filter={"privileged": True})
    assert sorted(d.metadata["source"] for d in retriever.invoke("merger memo")) == ["memo-ca.txt", "memo-ny.txt"]
    docs = retriever.invoke("merger memo", filter={"court": "CA"})
    assert [d.metadata["source"] for d in docs] == ["memo-ca.txt"]

    store = TitansStore(agent)
    ns = ("users", "u1")
    store.put(ns, "a", {"text": "Prefers dark mode", "user": {"access-level": "nested", "age": 30}, "tags": ["x"]})
    store.put(ns, "b", {"text": "Prefers light mode", "user": {"access-level": "top", "age": 40}, "tags": ["y"]})
    for query in (None, "prefers mode"):
        assert [i.key for i in store.search(ns, query=query, filter={"user.access-level": "nested"})] == ["a"]
        assert [i.key for i in store.search(ns, query=query, filter={"user": {"age": {"$gt": 35}}})] == ["b"]
        assert [i.key for i in store.search(ns, query=query, filter={"tags": ["y"]})] == ["b"]  # list equality
        assert [i.key for i in store.search(ns, query=query, filter={"user.age": {"$nin": [30]}})] == ["b"]
    with pytest.raises(ValueError, match=r"\$regex"):
        store.search(ns, filter={"user.age": {"$regex": "3"}})


@pytest.mark.backends
def test_keys_outside_ascii_odd_operands_and_unstorable_metadata(agent):
    import enum

    import numpy as np

    from titans_agent import InvalidInputError as Invalid

    class Level(enum.IntEnum):
        HIGH = 3

    metas = [{"ключ": "v", "café": 1}, {"tab\tkey": 2, "path": "C:\\u0000dir"}, {"level": 3, "x": 0.5}]
    for i, meta in enumerate(metas):
        agent.ingest(f"Odd note number {'abc'[i]}.", source=f"odd-{i}", metadata=meta)
    for flt, want in [
        ({"ключ": "v"}, ["odd-0"]),
        ({"café": {"$gte": 1}}, ["odd-0"]),
        ({"tab\tkey": 2}, ["odd-1"]),
        ({"path": "C:\\u0000dir"}, ["odd-1"]),  # the six characters, not a NUL
        ({"level": Level.HIGH}, ["odd-2"]),
        ({"x": np.float64(0.5), "level": {"$in": [np.int64(3)]}}, ["odd-2"]),
    ]:
        assert _sources(agent, flt, query="odd note number") == want, flt
        assert [f"odd-{i}" for i, m in enumerate(metas) if matches_filter(m, flt)] == want
    for flt in ({"level": "\ud800"}, {"k\ud800": 1}):
        with pytest.raises(Invalid, match="surrogate"):
            agent.recall("odd", filter=flt)
    # what one of the databases cannot store or filter alike is refused at write time
    for meta in ({"a": "x\x00y"}, {"a": "\ud83d"}, {"\ud800": 1}, {"n": 10**30}):
        with pytest.raises(Invalid, match="metadata"):
            agent.remember("Never stored.", meta)


# ---------------------------------------------------------------------- keys, NUL, numbers at the edges
@pytest.mark.parametrize(
    "key",
    [
        "access') = 'public' OR '1'='1' OR json_extract(value, '$.",  # an attempt to close the path
        "a..b",
        ".a",
        "a.",
        " ",
        'say"hi',
        "back\\slash",
        "nul\x00key",
        "half\ud800",
    ],
)
def test_a_malformed_key_is_an_invalid_filter_key(key):
    for flt in ({key: "x"}, {"ok": {key: {"$gt": 1}}}, {"$or": [{"ok": 1}, {key: None}]}):
        with pytest.raises(ValueError, match="Invalid filter key") as caught:
            matches_filter({}, flt)
        assert isinstance(caught.value, InvalidInputError)


@pytest.mark.backends
def test_a_value_holding_nul_matches_nothing_and_raises_nothing(agent):
    metas = [{"access": "public"}, {"access": "public2"}, {"access": "private"}, {}]
    for i, meta in enumerate(metas):
        agent.remember(f"Access record {'abcd'[i]} of the vault.", {"i": i, **meta})

    def found(flt):
        return sorted(h.metadata["i"] for h in agent.recall("access record vault", k=10, filter=flt))

    nul = "public\x00' OR '1'='1"
    for flt, want in [
        ({"access": nul}, []),
        ({"access": {"$eq": nul}}, []),
        ({"access": {"$in": [nul, "private"]}}, [2]),
        ({"access": {"$ne": nul}}, [0, 1, 2, 3]),  # equal to nothing: "not equal" holds everywhere
        ({"access": {"$nin": [nul]}}, [0, 1, 2, 3]),
        # no stored string holds NUL: "public\0..." sorts after "public", before "public2"
        ({"access": {"$gt": nul}}, [1]),
        ({"access": {"$gte": nul}}, [1]),
        ({"access": {"$lt": nul}}, [0, 2]),
        ({"access": {"$lte": nul}}, [0, 2]),
    ]:
        assert found(flt) == want, flt
        assert [i for i, m in enumerate(metas) if matches_filter(m, flt)] == want, flt


@pytest.mark.backends
def test_infinities_nan_and_integers_beyond_64_bits_compare_as_numbers(agent):
    metas = [{"price": 10}, {"price": 20.5}, {"price": -30}, {"price": "cheap"}, {"price": True}, {}]
    for i, meta in enumerate(metas):
        agent.remember(f"Price list entry {'abcdef'[i]} of the shop.", {"i": i, **meta})

    def found(flt):
        return sorted(h.metadata["i"] for h in agent.recall("price list entry shop", k=10, filter=flt))

    inf = float("inf")
    for flt, want in [
        ({"price": {"$lt": inf}}, [0, 1, 2]),  # every number is below inf; a string or a bool is no number
        ({"price": {"$gt": -inf}}, [0, 1, 2]),
        ({"price": {"$lte": -inf}}, []),
        ({"price": {"$gte": inf}}, []),
        ({"price": inf}, []),
        ({"price": {"$ne": inf}}, [0, 1, 2, 3, 4, 5]),
        ({"price": float("nan")}, []),  # NaN equals nothing, itself included
        ({"price": {"$gt": float("nan")}}, []),
        ({"price": {"$nin": [float("nan"), 10]}}, [1, 2, 3, 4, 5]),
        ({"price": {"$lt": 10**100}}, [0, 1, 2]),
        ({"price": {"$gt": -(10**100)}}, [0, 1, 2]),
        ({"price": {"$in": [10**100, 20.5, -inf]}}, [1]),
        ({"price": {"$gt": 2**64, "$lt": inf}}, []),
    ]:
        assert found(flt) == want, flt
        assert [i for i, m in enumerate(metas) if matches_filter(m, flt)] == want, flt


BIG = 2**60  # beyond 2**53: not every integer near it is a double
EDGE_META = [
    {"n": BIG},
    {"n": BIG + 1},
    {"n": float(BIG)},  # the double 2**60, stored as 1.152921504606847e+18
    {"n": 1e23},  # the double 99999999999999991611392
    {"n": 2**63 - 1},
    {"n": 0.1},
]


@pytest.mark.backends
def test_integers_beyond_2_53_and_floats_compare_exactly(agent):
    for i, meta in enumerate(EDGE_META):
        agent.remember(f"Counter reading {'abcdef'[i]} of the meter.", {"i": i, **meta})

    def found(flt):
        return sorted(h.metadata["i"] for h in agent.recall("counter reading meter", k=10, filter=flt))

    for flt, want in [
        ({"n": {"$in": [1.5, BIG + 1]}}, [1]),  # a list that starts with a float keeps its integers
        ({"n": {"$nin": [1.5, BIG + 1]}}, [0, 2, 3, 4, 5]),
        ({"n": {"$in": [0.1, BIG + 1, "x"]}}, [1, 5]),
        ({"n": BIG}, [0, 2]),  # the integer 2**60 and the double 2**60 are the same number
        ({"n": float(BIG)}, [0, 2]),
        ({"n": {"$gt": BIG}}, [1, 3, 4]),
        ({"n": {"$gte": float(BIG)}}, [0, 1, 2, 3, 4]),
        ({"n": {"$lt": BIG + 1}}, [0, 2, 5]),
        ({"n": 99999999999999991611392}, [3]),  # 1e23 is exactly this integer
        ({"n": 10**23}, []),
        ({"n": {"$lt": 10**23}}, [0, 1, 2, 3, 4, 5]),
        ({"n": {"$gt": 99999999999999991611391}}, [3]),
        ({"n": {"$gte": 99999999999999991611393}}, []),
        ({"n": {"$gt": 2**63 - 2}}, [3, 4]),
        ({"n": {"$lt": 9.223372036854775807e18}}, [0, 1, 2, 4, 5]),  # that double is 2**63, above 2**63 - 1
    ]:
        assert found(flt) == want, flt
        assert [i for i, m in enumerate(EDGE_META) if matches_filter(m, flt)] == want, flt


# the property: on stored numbers near and beyond 2**53 (and strings, bools, null, a missing key), the
# SQL of a filter finds exactly the rows that the pure evaluation of the same filter passes
P53, P63 = 2**53, 2**63
PROPERTY_VALUES = [
    *(P53 + d for d in (-1, 0, 1, 2, 3)),
    *(float(P53 + d) for d in (-1, 0, 2, 4)),
    -P53 - 1,
    float(-P53),
    P63 - 1,
    -P63,
    float(2**62),
    2**62 + 1,
    1e23,
    1.7976931348623157e308,
    -5e-324,
    0,
    -0.0,
    0.1,
    1,
    2.5,
    "9007199254740993",
    True,
    None,
]


def _near_numbers():
    from hypothesis import strategies as st

    anchors = [P53, P63, 2**62, 2**64, 99999999999999991611392, 10**23, 10**100]
    ints = st.one_of(
        st.sampled_from(anchors).flatmap(lambda a: st.integers(a - 3, a + 3).map(lambda v: v * (-1) ** (v % 2))),
        st.integers(-(2**70), 2**70),
        st.integers(-3, 3),
    )
    floats = st.one_of(
        st.sampled_from([float(P53), float(P53 + 2), float(P63), 1e23, 0.1, 2.5, -0.0, 5e-324]),
        st.sampled_from([float("inf"), float("-inf"), float("nan")]),
        st.floats(),
    )
    return st.one_of(ints, floats)


@pytest.mark.backends
def test_sql_agrees_with_python_on_numbers_at_the_edges(agent):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    metas = [{"n": v} for v in PROPERTY_VALUES] + [{}]
    for i, meta in enumerate(metas):
        agent.remember(f"Gauge sample {i} of the series.", {"i": i, **meta})
    ids = {h.metadata["i"]: h.id for h in agent.records()}
    assert sorted(ids) == list(range(len(metas)))
    number = _near_numbers()
    scalar = st.one_of(number, st.sampled_from(["x", "9007199254740993", True, False, None]))
    condition = st.one_of(
        st.tuples(st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]), number),
        st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(scalar, max_size=5)),
    )

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(condition, min_size=1, max_size=2), st.booleans())
    def check(conditions, either):
        parts = [{"n": {op: value}} for op, value in conditions]
        flt = {"$or": parts} if either and len(parts) > 1 else {"$and": parts}
        expected = sorted(ids[i] for i, m in enumerate(metas) if matches_filter(m, flt))
        got = sorted(h.id for h in agent.recall("gauge sample series", k=len(metas) + 5, filter=flt))
        assert got == expected, flt

    check()


@pytest.mark.backends
def test_a_filter_within_the_limits_never_runs_past_the_databases_parameter_cap(agent):
    # found by an attacker: 199 $in lists of 1,000 values (each list within its limit) raised
    # "too many SQL variables" on SQLite and a parameter-count error on PostgreSQL
    from titans_agent.filters import MAX_FILTER_VALUES, MAX_IN_VALUES

    agent.remember("green tea", metadata={"tag": 5})
    agent.remember("black tea", metadata={"tag": 7})
    lists = [{"tag": {"$in": list(range(i * MAX_IN_VALUES, (i + 1) * MAX_IN_VALUES))}} for i in range(1, 199)]
    with pytest.raises(InvalidInputError, match=f"more than {MAX_FILTER_VALUES} values"):
        agent.recall("tea", filter={"$or": [*lists, {"tag": 5}]})
    # the most the limits allow runs on the database
    n = MAX_FILTER_VALUES // MAX_IN_VALUES
    widest = [{"tag": {"$nin": list(range(i * MAX_IN_VALUES + 100, (i + 1) * MAX_IN_VALUES + 100))}} for i in range(n)]
    hits = agent.recall("tea", filter={"$and": [*widest, {"tag": {"$lte": 6}}]}, k=5)
    assert [h.text for h in hits] == ["green tea"]
