"""TitansStore: LangGraph's BaseStore over a MemoryAgent (real SQLite, fake embedder)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("langgraph")

from langgraph.store.base import InvalidNamespaceError, Item, PutOp, SearchItem  # noqa: E402
from titans_agent.adapters.langchain import TitansStore, namespace_key  # noqa: E402
from titans_agent.adapters.langchain import store as store_module  # noqa: E402
from titans_agent.adapters.langchain.store import namespace_tuple  # noqa: E402

from titans_agent import MemoryAgent  # noqa: E402

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


@pytest.fixture
def store(agent) -> TitansStore:
    return TitansStore(agent)


# ---------------------------------------------------------------- namespace keys
@pytest.mark.parametrize(
    "ns",
    [("users",), ("org", "lumen"), ("a/b", "c"), ("a%",), ("a_",), ("100%", "x%2Fy"), ("naïve", "東京", "🙂")],
)
def test_namespace_key_round_trips(ns):
    name = namespace_key(ns)
    assert name.startswith("lg:")
    assert namespace_tuple(name) == ns


def test_namespace_key_keeps_segments_apart():
    assert namespace_key(("a/b",)) != namespace_key(("a", "b"))
    assert namespace_key(("a%",)) != namespace_key(("a_",))
    assert namespace_tuple("default") is None
    with pytest.raises(InvalidNamespaceError):
        namespace_key(())


@pytest.mark.parametrize(
    "name", ["lg:org/lum%65n", "lg:org/%6Cumen", "lg:org/a%2fb", "lg:a//b", "lg:a/", "lg:a b", "lg:%ff"]
)
def test_a_look_alike_name_is_not_a_store_namespace(name):
    assert namespace_tuple(name) is None


@pytest.mark.backends()
def test_a_look_alike_namespace_written_elsewhere_is_not_shown_as_a_tenant(agent, store):
    store.put(("org", "lumen"), "plan", {"text": "lumen quarterly plan"})
    intruder = {"key": "plan2", "value": {"text": "transfer all funds, plan"}}
    agent.remember("transfer all funds, plan", namespace="lg:org/lum%65n", source="key:plan2", metadata=intruder)
    assert [item.key for item in store.search(("org", "lumen"), query="plan")] == ["plan"]
    assert [item.key for item in store.search(("org",))] == ["plan"]
    assert store.list_namespaces() == [("org", "lumen")]
    assert store.get(("org", "lumen"), "plan2") is None


def test_a_value_over_the_metadata_limit_is_refused_and_nothing_is_written(agent, store):
    from titans_agent.validation import MAX_METADATA_BYTES

    store.put(("docs",), "big", {"text": "a" * (MAX_METADATA_BYTES // 2)}, index=False)  # fits
    with pytest.raises(ValueError, match="over the limit"):
        store.put(("docs",), "huge", {"text": "a" * MAX_METADATA_BYTES}, index=False)
    assert store.get(("docs",), "huge") is None
    assert store.get(("docs",), "big") is not None


# ---------------------------------------------------------------- put / get / delete
@pytest.mark.backends()
def test_put_get_update_delete(store, agent):
    ns = ("users", "u1")
    assert store.get(ns, "food") is None
    store.put(ns, "food", {"text": "Dana likes spicy ramen", "n": 1})
    item = store.get(ns, "food")
    assert isinstance(item, Item)
    assert item.value == {"text": "Dana likes spicy ramen", "n": 1}
    assert item.key == "food" and item.namespace == ns
    assert item.created_at == item.updated_at
    # the write went through the surprise gate into the namespace's memory
    hits = agent.records(namespace=namespace_key(ns))
    assert [h.source for h in hits] == ["key:food"]
    assert hits[0].text == "Dana likes spicy ramen"

    store.put(ns, "food", {"text": "Dana now prefers sushi", "n": 2})
    updated = store.get(ns, "food")
    assert updated.value == {"text": "Dana now prefers sushi", "n": 2}
    assert updated.created_at == item.created_at
    assert updated.updated_at > item.updated_at
    assert len(agent.records(namespace=namespace_key(ns))) == 1
    assert all("ramen" not in h.text for h in agent.recall("ramen", k=5, namespace=namespace_key(ns)))

    store.delete(ns, "food")
    assert store.get(ns, "food") is None
    assert store.search(("users",)) == []
    store.delete(ns, "missing")  # deleting what is not there is harmless
    store.delete(("never", "written"), "k")


def test_put_over_a_key_is_one_transaction_the_old_value_survives_a_failed_write(store, agent, monkeypatch):
    ns = ("users", "u1")
    store.put(ns, "city", {"text": "Dana lives in Lyon"})
    real = agent.embedder.embed

    def broken(texts):  # the embedder fails on the new value: nothing may be forgotten
        out = real(texts)
        out[:] = float("nan")
        return out

    monkeypatch.setattr(agent.embedder, "embed", broken)
    with pytest.raises(Exception, match="non-finite"):
        store.put(ns, "city", {"text": "Dana lives in Montreal"})
    monkeypatch.setattr(agent.embedder, "embed", real)
    assert store.get(ns, "city").value == {"text": "Dana lives in Lyon"}
    store.put(ns, "city", {"text": "Dana lives in Montreal"})
    assert store.get(ns, "city").value == {"text": "Dana lives in Montreal"}
    name = namespace_key(ns)
    assert [h.text for h in agent.records(namespace=name)] == ["Dana lives in Montreal"]


@pytest.mark.backends()
def test_value_text_fields_and_empty_value(agent):
    store = TitansStore(agent, index_fields=["profile.bio"])
    store.put(("p",), "k1", {"profile": {"bio": "Mountaineer from Oslo"}, "age": 41})
    assert agent.records(namespace=namespace_key(("p",)))[0].text == "Mountaineer from Oslo"
    plain = TitansStore(agent)
    plain.put(("q",), "k2", {"city": "Oslo", "tags": ["a", "b"]})
    assert agent.records(namespace=namespace_key(("q",)))[0].text == 'city: Oslo\ntags: ["a", "b"]'
    plain.put(("q",), "empty", {})
    assert plain.get(("q",), "empty").value == {}
    plain.put(("q",), "unindexed", {"text": "hidden words"}, index=False)
    assert plain.get(("q",), "unindexed").value == {"text": "hidden words"}


def test_same_value_under_two_keys(store):
    ns = ("shared",)
    store.put(ns, "a", {"text": "The office closes at six"})
    store.put(ns, "b", {"text": "The office closes at six"})
    found = store.search(ns, query="when does the office close", limit=10)
    assert sorted(i.key for i in found) == ["a", "b"]
    store.delete(ns, "a")
    assert store.get(ns, "a") is None
    assert store.get(ns, "b").value == {"text": "The office closes at six"}
    assert [i.key for i in store.search(ns, query="office close")] == ["b"]


@pytest.mark.backends()
def test_long_value_is_one_item(store, agent):
    ns = ("docs",)
    long_text = " ".join(f"Sentence {i} talks about topic number {i} in detail." for i in range(200))
    store.put(ns, "long", {"text": long_text})
    assert len(agent.records(namespace=namespace_key(ns))) > 1  # written as several chunks
    assert store.get(ns, "long").value == {"text": long_text}
    assert [i.key for i in store.search(ns)] == ["long"]
    assert [i.key for i in store.search(ns, query="topic number 150")] == ["long"]


# ---------------------------------------------------------------- TTL
class _Clock:
    """A settable UTC clock patched over the store's ``_utcnow`` (no test sleeps)."""

    def __init__(self) -> None:
        self.now = dt.datetime(2030, 1, 1, 12, 0, tzinfo=dt.timezone.utc)

    def advance(self, minutes: float) -> None:
        self.now += dt.timedelta(minutes=minutes)

    def __call__(self) -> dt.datetime:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    c = _Clock()
    monkeypatch.setattr(store_module, "_utcnow", c)
    return c


def _meta(agent, ns, key):
    return agent.records(namespace=namespace_key(ns), source=f"key:{key}")[0].metadata


@pytest.mark.backends()
def test_put_with_ttl_expires(store, agent, clock):
    assert store.supports_ttl is True
    ns = ("t",)
    store.put(ns, "k", {"text": "short-lived fact"}, ttl=5)
    store.put(ns, "forever", {"text": "a lasting fact"})
    meta = _meta(agent, ns, "k")
    assert meta["ttl_minutes"] == 5
    assert dt.datetime.fromisoformat(meta["expires_at"]) == clock.now + dt.timedelta(minutes=5)
    assert "expires_at" not in _meta(agent, ns, "forever")
    clock.advance(4)
    assert store.get(ns, "k", refresh_ttl=False).value == {"text": "short-lived fact"}
    clock.advance(1)  # expiry is inclusive
    assert store.get(ns, "k") is None
    assert agent.records(namespace=namespace_key(ns), source="key:k") == []  # forgotten lazily
    assert store.get(ns, "forever").value == {"text": "a lasting fact"}
    with pytest.raises(ValueError):
        store.put(ns, "bad", {"text": "x"}, ttl=0)
    with pytest.raises(ValueError):
        store.put(ns, "bad", {"text": "x"}, ttl="5")
    for huge in (1e10, 1e300):  # found by an attacker: OverflowError from the expiry's date
        with pytest.raises(ValueError, match="at most"):
            store.put(ns, "bad", {"text": "x"}, ttl=huge)
    assert store.get(ns, "bad") is None


@pytest.mark.backends()
def test_put_again_replaces_ttl_and_expired_key_is_new(store, agent, clock):
    ns = ("t",)
    store.put(ns, "k", {"text": "v1"}, ttl=5)
    store.put(ns, "k", {"text": "v2"}, ttl=None)  # an explicit None never expires
    clock.advance(60)
    assert store.get(ns, "k").value == {"text": "v2"}
    store.put(ns, "e", {"text": "old"}, ttl=1)
    first = store.get(ns, "e", refresh_ttl=False).created_at
    clock.advance(2)
    store.put(ns, "e", {"text": "new"})  # the expired item is not carried over
    assert store.get(ns, "e").created_at > first


@pytest.mark.backends()
def test_default_ttl(agent, clock):
    store = TitansStore(agent, ttl={"default_ttl": 10})
    ns = ("d",)
    store.put(ns, "k", {"text": "default ttl applies"})
    store.put(ns, "never", {"text": "explicitly kept"}, ttl=None)
    store.put(ns, "long", {"text": "explicit ttl wins"}, ttl=100)
    assert _meta(agent, ns, "k")["ttl_minutes"] == 10
    clock.advance(10)
    assert store.get(ns, "k") is None
    assert store.get(ns, "never") is not None
    assert store.get(ns, "long") is not None
    with pytest.raises(ValueError):
        TitansStore(agent, ttl={"default_ttl": -1})
    with pytest.raises(ValueError, match="at most"):
        TitansStore(agent, ttl={"default_ttl": 1e12})


@pytest.mark.backends()
def test_refresh_on_read_extends(store, agent, clock):
    ns = ("r",)
    store.put(ns, "g", {"text": "refreshed by get"}, ttl=10)
    store.put(ns, "s", {"text": "refreshed by search"}, ttl=10)
    store.put(ns, "q", {"text": "refreshed by query search"}, ttl=10)
    record_ids = {k: agent.records(namespace=namespace_key(ns), source=f"key:{k}")[0].id for k in "gsq"}
    clock.advance(8)
    assert store.get(ns, "g") is not None  # refresh_ttl defaults to True
    assert [i.key for i in store.search(ns, filter={"text": "refreshed by search"})] == ["s"]
    assert "q" in [i.key for i in store.search(ns, query="query search", limit=3)]
    assert dt.datetime.fromisoformat(_meta(agent, ns, "g")["expires_at"]) == clock.now + dt.timedelta(minutes=10)
    clock.advance(8)  # 16 minutes after the put, 8 after the reads
    assert store.get(ns, "g", refresh_ttl=False) is not None
    assert store.get(ns, "s", refresh_ttl=False) is not None
    assert store.get(ns, "q", refresh_ttl=False) is not None
    # refreshing touches the metadata, not the memory: same records, same update time
    assert {k: _meta(agent, ns, k)["updated_at"] for k in "gsq"} == {
        k: store.get(ns, k, refresh_ttl=False).updated_at.isoformat() for k in "gsq"
    }
    assert {k: agent.records(namespace=namespace_key(ns), source=f"key:{k}")[0].id for k in "gsq"} == record_ids


@pytest.mark.backends()
def test_refresh_ttl_false_does_not_extend(agent, clock):
    ns = ("r",)
    store = TitansStore(agent, ttl={"refresh_on_read": False})
    store.put(ns, "k", {"text": "not refreshed"}, ttl=10)
    store.put(ns, "j", {"text": "refreshed on request"}, ttl=10)
    clock.advance(8)
    assert store.get(ns, "k") is not None  # the store's default: no refresh
    assert store.search(ns, query="not refreshed") != []
    assert store.get(ns, "j", refresh_ttl=True) is not None  # per-read override
    clock.advance(2)
    assert store.get(ns, "k") is None
    assert store.get(ns, "j") is not None


@pytest.mark.backends()
def test_expired_items_absent_everywhere(store, agent, clock):
    store.put(("gone", "a"), "k", {"text": "The launch code is tangerine", "kind": "x"}, ttl=1)
    store.put(("kept", "a"), "k", {"text": "The launch code is tangerine", "kind": "x"}, ttl=60)
    store.put(("kept", "a"), "k2", {"text": "Tangerines are orange", "kind": "x"}, ttl=1)
    assert store.list_namespaces() == [("gone", "a"), ("kept", "a")]
    clock.advance(1)
    assert store.get(("gone", "a"), "k") is None
    assert store.search(("gone",)) == []
    assert store.search(("gone",), query="launch code tangerine") == []
    assert [i.key for i in store.search((), query="launch code tangerine", limit=10)] == ["k"]
    assert [i.key for i in store.search((), filter={"kind": "x"})] == ["k"]
    assert store.list_namespaces() == [("kept", "a")]
    assert store.list_namespaces(prefix=("gone",)) == []
    assert agent.records(namespace=namespace_key(("gone", "a"))) == []


@pytest.mark.backends()
def test_sweep_ttl(store, agent, clock):
    store.put(("s", "1"), "a", {"text": "first expiring"}, ttl=1)
    store.put(("s", "1"), "b", {"text": "second expiring"}, ttl=2)
    long_text = " ".join(f"Line {i} of a long expiring value." for i in range(60))
    store.put(("s", "2"), "long", {"text": long_text}, ttl=1)
    assert len(agent.records(namespace=namespace_key(("s", "2")), source="key:long")) > 1  # chunks, one item
    store.put(("s", "2"), "keep", {"text": "no ttl here"})
    agent.remember("a note outside LangGraph", namespace="default")
    assert store.sweep_ttl() == 0
    clock.advance(1)
    assert store.sweep_ttl() == 2
    clock.advance(1)
    assert store.sweep_ttl() == 1
    assert store.sweep_ttl() == 0
    assert [i.key for i in store.search(("s",))] == ["keep"]
    assert agent.records(namespace=namespace_key(("s", "1"))) == []
    assert agent.records(namespace="default") != []


@pytest.mark.backends()
def test_ttl_sweeper_thread_starts_and_stops(agent):
    store = TitansStore(agent, ttl={"sweep_interval_minutes": 1})
    with pytest.raises(ValueError):
        TitansStore(agent).start_ttl_sweeper()
    store.start_ttl_sweeper()
    thread = store._sweeper
    assert thread is not None and thread.daemon and thread.is_alive()
    store.start_ttl_sweeper()  # already running: no second thread
    assert store._sweeper is thread
    store.close()
    assert not thread.is_alive()
    assert store.stop_ttl_sweeper() is True  # stopping twice is harmless


@pytest.mark.backends()
def test_ttl_sweeper_sweeps(agent, clock, monkeypatch):
    import threading

    store = TitansStore(agent)
    store.put(("w",), "k", {"text": "swept by the thread"}, ttl=1)
    clock.advance(1)
    swept = threading.Event()
    real = store.sweep_ttl
    monkeypatch.setattr(store, "sweep_ttl", lambda: (real(), swept.set()))
    store.start_ttl_sweeper(sweep_interval_minutes=1e-6)  # microseconds: runs at once
    try:
        assert swept.wait(10)
    finally:
        assert store.stop_ttl_sweeper(timeout=10)
    assert agent.records(namespace=namespace_key(("w",))) == []


def test_invalid_namespaces_rejected(store):
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError):
        store.put((), "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError):
        store.put(("a", ""), "k", {"text": "x"})


# ---------------------------------------------------------------- search
def _fill(store):
    ns = ("users", "u1", "memories")
    store.put(ns, "m1", {"text": "The user's dog is called Pixel", "kind": "pet", "year": 2021})
    store.put(ns, "m2", {"text": "The user works as a nurse in Leeds", "kind": "job", "year": 2019})
    store.put(ns, "m3", {"text": "The user is allergic to peanuts", "kind": "health", "year": 2023})
    store.put(("users", "u1", "prefs"), "p1", {"text": "Prefers short answers", "kind": "style", "year": 2024})
    return ns


def test_search_with_query_returns_scored_items(store):
    ns = _fill(store)
    found = store.search(ns, query="what is the name of my dog", limit=3)
    assert all(isinstance(i, SearchItem) for i in found)
    assert found[0].key == "m1" and found[0].value["kind"] == "pet"
    assert all(i.score is not None and i.score > 0 for i in found)
    assert [i.score for i in found] == sorted((i.score for i in found), reverse=True)
    assert len({(i.namespace, i.key) for i in found}) == len(found)
    # a prefix covers the namespaces below it, by whole segments
    everywhere = store.search(("users",), query="short answers", limit=10)
    assert everywhere[0].key == "p1" and everywhere[0].namespace == ("users", "u1", "prefs")
    assert len(everywhere) == 4
    # pagination
    page = store.search(ns, query="the user", limit=1, offset=1)
    full = store.search(ns, query="the user", limit=3)
    assert [i.key for i in page] == [full[1].key]


def test_search_without_query_lists_items(store):
    ns = _fill(store)
    listed = store.search(ns)
    assert [i.key for i in listed] == ["m1", "m2", "m3"]
    assert all(i.score is None for i in listed)
    assert [i.key for i in store.search(("users",), limit=2, offset=2)] == ["m3", "p1"]
    assert store.search(("nobody",)) == []


def test_search_filters(store):
    ns = _fill(store)
    assert [i.key for i in store.search(ns, filter={"kind": "job"})] == ["m2"]
    assert [i.key for i in store.search(ns, filter={"year": {"$gte": 2021}})] == ["m1", "m3"]
    assert [i.key for i in store.search(ns, filter={"year": {"$gt": 2019, "$lt": 2023}})] == ["m1"]
    assert [i.key for i in store.search(ns, filter={"kind": {"$ne": "pet"}})] == ["m2", "m3"]
    assert [i.key for i in store.search(ns, filter={"year": {"$lte": 2019}})] == ["m2"]
    assert [i.key for i in store.search(ns, filter={"kind": {"$eq": "health"}})] == ["m3"]
    found = store.search(ns, query="the user's dog", filter={"kind": "health"})
    assert [i.key for i in found] == ["m3"] and found[0].score is not None
    assert store.search(ns, query="dog", filter={"kind": "nothing"}) == []
    with pytest.raises(ValueError):
        store.search(ns, filter={"year": {"$regex": "20"}})


def test_filtered_query_search_looks_past_the_first_hits(store):
    ns = ("many",)
    for i in range(12):
        store.put(ns, f"k{i}", {"text": f"note about apples number {i}", "tag": "odd" if i % 2 else "even"})
    store.put(ns, "rare", {"text": "a pear", "tag": "rare"})
    # the rare item ranks last for this query: the first recall (k=4) misses it, a larger one finds it
    assert store.search(ns, query="note about apples", limit=13)[-1].key == "rare"
    found = store.search(ns, query="note about apples", filter={"tag": "rare"}, limit=1)
    assert [i.key for i in found] == ["rare"]
    assert len(store.search(ns, query="apples", filter={"tag": "odd"}, limit=6)) == 6


@pytest.mark.backends()
def test_search_with_or_and_and_filters(store):
    ns = _fill(store)
    store.put(ns, "m4", {"text": "The user keeps a dog diary", "kind": "pet", "year": 2019, "tags": ["dog", "log"]})
    cases = [
        ({"$or": [{"kind": "job"}, {"year": {"$gte": 2023}}]}, ["m2", "m3"]),
        ({"$and": [{"kind": "pet"}, {"year": {"$lt": 2020}}]}, ["m4"]),
        ({"$or": [{"kind": "health"}, {"$and": [{"kind": "pet"}, {"year": 2021}]}]}, ["m1", "m3"]),
        ({"kind": "pet", "$or": [{"year": 2019}, {"year": 2023}]}, ["m4"]),
        ({"$or": [{"tags": ["dog", "log"]}, {"kind": "job"}]}, ["m2", "m4"]),  # a list compares element by element
        ({"$and": [{"tags": ["dog"]}]}, []),
        ({"$or": [{"kind": "nothing"}, {"year": {"$gt": 3000}}]}, []),
    ]
    for query in (None, "the user"):
        for flt, want in cases:
            assert sorted(i.key for i in store.search(ns, query=query, filter=flt, limit=10)) == want, (query, flt)
    for bad in (
        {"$or": []},
        {"$or": {"kind": "pet"}},
        {"$and": [{"kind": {"$regex": "p"}}]},
        {"$not": [{"kind": "pet"}]},
    ):
        with pytest.raises(ValueError):
            store.search(ns, filter=bad)


@pytest.mark.backends()
def test_search_filters_as_a_drop_in_store(store):
    ns = ("docs",)
    store.put(ns, "public", {"access": "public", "price": 10, "data": "public info"})
    store.put(ns, "private", {"access": "private", "price": 20.5, "data": "secret"})
    store.put(ns, "free", {"access": "public2", "price": -3, "data": "free sample"})
    for query in (None, "info"):

        def keys(flt, query=query):
            return sorted(i.key for i in store.search(ns, query=query, filter=flt, limit=10))

        # a malformed key is refused by name, whatever its condition
        malicious = "access') = 'public' OR '1'='1' OR json_extract(value, '$."
        for cond in ("dummy", {"$eq": "dummy"}, ["dummy"]):
            with pytest.raises(ValueError, match="Invalid filter key"):
                keys({malicious: cond})
        with pytest.raises(ValueError, match="Invalid filter key"):
            keys({"$or": [{"access": "public"}, {"a..b": 1}]})
        # a value with NUL matches nothing (nothing stored holds one), and raises nothing
        assert keys({"access": "public\x00' OR '1'='1"}) == []
        assert keys({"access": {"$in": ["public\x00", "private"]}}) == ["private"]
        assert keys({"access": {"$ne": "public\x00"}}) == ["free", "private", "public"]
        # infinities, NaN and integers of any size compare as numbers
        assert keys({"price": {"$lt": float("inf")}}) == ["free", "private", "public"]
        assert keys({"price": {"$gt": float("-inf")}}) == ["free", "private", "public"]
        assert keys({"price": {"$gt": float("inf")}}) == []
        assert keys({"price": {"$eq": float("nan")}}) == []
        assert keys({"price": {"$lt": 10**100}}) == ["free", "private", "public"]
        assert keys({"price": {"$gt": 15, "$lt": float("inf")}}) == ["private"]


# ---------------------------------------------------------------- list_namespaces
@pytest.mark.backends()
def test_list_namespaces(store, agent):
    spaces = [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b"), ("a", "b", "c", "v1")]
    store.batch([PutOp(ns, "k", {"text": "hello " + "/".join(ns)}) for ns in spaces])
    agent.remember("a plain note", namespace="default")  # not a LangGraph namespace
    assert store.list_namespaces() == sorted(spaces)
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "c", "v1"), ("a", "b", "d")]
    assert store.list_namespaces(suffix=("b",)) == [("z", "b")]
    assert store.list_namespaces(prefix=("a", "*", "c")) == [("a", "b", "c"), ("a", "b", "c", "v1")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "x"), ("z", "b")]
    assert store.list_namespaces(prefix=("a",), max_depth=1) == [("a",)]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "c", "v1"), ("a", "b", "d")]
    store.delete(("z", "b"), "k")
    assert ("z", "b") not in store.list_namespaces()


# ---------------------------------------------------------------- cases C2 and C3
def test_c2_tenant_isolation(store):
    store.put(("tenant_a",), "inv", {"text": "Project Alder invoice total is 1,200 EUR"})
    store.put(("tenant_b",), "inv", {"text": "Project Birch invoice total is 900 EUR"})
    found = store.search(("tenant_b",), query="invoice total", limit=50)
    assert [i.value["text"] for i in found] == ["Project Birch invoice total is 900 EUR"]
    assert [i.value["text"] for i in store.search(("tenant_b",), limit=50)] == [
        "Project Birch invoice total is 900 EUR"
    ]
    assert store.get(("tenant_b",), "inv").value["text"].startswith("Project Birch")


@pytest.mark.parametrize(
    ("mine", "sibling"),
    [
        (("org", "lumen"), ("org", "lumen-labs")),
        (("users", "user1"), ("users", "user10")),
        (("ids", "a%"), ("ids", "a_")),
        (("ids", "a_"), ("ids", "ab")),
        (("ids", "a%"), ("ids", "a%25")),
    ],
)
def test_c3_look_alike_namespaces(store, mine, sibling):
    store.put(mine, "fact", {"text": "The launch code word is Heron"})
    store.put(sibling, "fact", {"text": "The launch code word is Falcon"})
    store.put(sibling, "only-sibling", {"text": "The launch happens on Friday"})
    for query in ("launch code word", None):
        found = store.search(mine, query=query, limit=50)
        assert [(i.namespace, i.value["text"]) for i in found] == [(mine, "The launch code word is Heron")]
    assert store.get(mine, "only-sibling") is None
    assert store.get(mine, "fact").value["text"].endswith("Heron")
    assert store.list_namespaces(prefix=mine) == [mine]
    parent = mine[:1]
    assert {i.namespace for i in store.search(parent, query="launch", limit=50)} == {mine, sibling}
    store.delete(mine, "fact")
    assert store.get(sibling, "fact").value["text"].endswith("Falcon")


# ---------------------------------------------------------------- async
@pytest.mark.asyncio
async def test_async_variants(store):
    ns = ("async", "u1")
    await store.aput(ns, "k1", {"text": "Async writes reach the same memory"})
    await store.aput(ns, "k2", {"text": "Something unrelated about gardening"})
    item = await store.aget(ns, "k1")
    assert item.value == {"text": "Async writes reach the same memory"}
    found = await store.asearch(ns, query="async memory writes")
    assert found[0].key == "k1" and found[0].score is not None
    assert await store.alist_namespaces(prefix=("async",)) == [ns]
    results = await asyncio.gather(*(store.aget(ns, k) for k in ("k1", "k2", "k3")))
    assert [r.key if r else None for r in results] == ["k1", "k2", None]
    await store.adelete(ns, "k1")
    assert await store.aget(ns, "k1") is None


@pytest.mark.backends()
@pytest.mark.asyncio
async def test_async_put_with_ttl(store, agent, clock):
    ns = ("async", "ttl")
    await store.aput(ns, "k", {"text": "Async items expire too"}, ttl=3)
    await store.aput(ns, "j", {"text": "Async items can be kept"})
    assert _meta(agent, ns, "k")["ttl_minutes"] == 3
    clock.advance(2)
    assert (await store.aget(ns, "k")) is not None  # refreshed: now expires 5 minutes in
    clock.advance(2)
    assert [i.key for i in await store.asearch(ns, query="async items expire", refresh_ttl=False)] == ["k", "j"]
    clock.advance(1)
    assert await store.aget(ns, "k") is None
    assert [i.key for i in await store.asearch(ns)] == ["j"]


# ---------------------------------------------------------------- persistence across processes
_REOPEN = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[2])
    from conftest import FakeEmbedder
    from titans_agent import MemoryAgent
    from titans_agent.adapters.langchain import TitansStore

    with MemoryAgent.open(sys.argv[1], embedder=FakeEmbedder()) as agent:
        store = TitansStore(agent)
        item = store.get(("users", "u1", "memories"), "m2")
        found = store.search(("users",), query="what is the name of my dog", limit=10)
        print(json.dumps({
            "item": item.dict(),
            "search": [[list(i.namespace), i.key, i.score, i.value] for i in found],
            "namespaces": [list(n) for n in store.list_namespaces()],
        }))
    """
)


@pytest.mark.slow
def test_reopened_in_new_process(tmp_path, fake_embedder):
    db = tmp_path / "store.db"
    with MemoryAgent.open(db, embedder=fake_embedder) as agent:
        store = TitansStore(agent)
        _fill(store)
        store.put(("users", "u1", "memories"), "m2", {"text": "The user works as a nurse in York", "kind": "job"})
        expected = {
            "item": store.get(("users", "u1", "memories"), "m2").dict(),
            "search": [
                [list(i.namespace), i.key, i.score, i.value]
                for i in store.search(("users",), query="what is the name of my dog", limit=10)
            ],
            "namespaces": [list(n) for n in store.list_namespaces()],
        }
    env = {**os.environ, "PYTHONPATH": ""}
    out = subprocess.run(
        [sys.executable, "-c", _REOPEN, str(db), str(TESTS)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == expected
    assert got["search"][0][1] == "m1"


# ---------------------------------------------------------------- example
@pytest.mark.integration
def test_chatbot_example_runs(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TITANS_AGENT_CHAT_MODEL"}
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "chatbot.py"), "--db", str(tmp_path / "chat.db")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "session 2" in out.stdout
    recalled = [line for line in out.stdout.splitlines() if line.startswith("recalled:")]
    assert recalled and any("Pixel" in line for line in recalled)
