"""Schema migrations: Alembic revisions run on open.

A database of the released schema version 1 is built in the test from its exact DDL
(tests/fixtures/schema_v1_sqlite.sql, schema_v1_postgresql.sql) and filled with the rows of a
database the current code wrote (so its namespaces hold real state and parameter blobs); opening it
must back it up (SQLite), keep every row, and leave a memory that recalls and links updates. A
version-2 database is made by the released revisions 0001 and 0002 and filled the same way; opening
it adds version 3's columns (``occurrences.location``, ``namespaces.chunking``) and version 4's
(``occurrences.write_revision``, ``occurrences.embedding``), NULL in old rows.
Real SQLite files under tmp_path and a real PostgreSQL server (conftest); only the embedder is fake.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import sqlite3
import threading
from pathlib import Path

import pytest
from conftest import FakeEmbedder, query
from sqlalchemy import create_engine, insert, inspect, select, text
from sqlalchemy.engine import Engine

from titans_agent import AgentConfig, MemoryAgent, StoreError
from titans_agent.store import SCHEMA_VERSION, Base, Store, Supersession, migrations
from titans_agent.store.context import supersession_links
from titans_agent.store.metaterms import term_rows

FIXTURES = Path(__file__).parent / "fixtures"
V1_TABLES = ("meta", "namespaces", "documents", "records", "sessions", "occurrences", "turns")  # parents first
V2_TABLES = (*V1_TABLES, "supersessions")
# added by revisions 0003 (location, chunking), 0004 (write_revision, embedding), 0007 (changed_revision)
# and 0008 (incarnation: the only one filled in old rows, a random token each)
LATER_COLUMNS = {
    "occurrences": ("location", "write_revision", "embedding"),
    "namespaces": ("chunking",),
    "records": ("changed_revision",),
}
FILLED_LATER = {"namespaces": ("incarnation",)}
NULL_LATER = {
    "location": {None},
    "chunking": {None},
    "write_revision": {None},
    "embedding": {None},
    "changed_revision": {None},
}
T0 = dt.datetime(2024, 5, 1, 9, 0, tzinfo=dt.timezone.utc)
OLD, NEW = "My code editor is Vim.", "My code editor is Helix now."
QUESTION = "what port does the staging server listen on"


def _v1_statements(backend: str) -> list[str]:
    sql = (FIXTURES / f"schema_v1_{backend}.sql").read_text(encoding="utf-8")
    body = "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
    return [s.strip().removesuffix(";") for s in body.split(";\n") if s.strip()]


def _engine(url: str) -> Engine:
    return create_engine(url if "://" in url else f"sqlite:///{url}")


_PARAMS = text("(SELECT p.params FROM memory_parameters p WHERE p.id = namespaces.parameters_id) AS params")
_STATE = text("(SELECT c.state FROM memory_checkpoints c WHERE c.namespace_id = namespaces.id) AS state")


def _old_columns(name: str, conn=None) -> list:
    """The columns table ``name`` had before revision 0003 (the models' columns without the later
    ones). A namespace's ``params`` and ``state`` (columns until revision 0006) come from
    ``memory_parameters`` and ``memory_checkpoints`` where the database at ``conn`` has moved them."""
    table = Base.metadata.tables[name]
    later = (*LATER_COLUMNS.get(name, ()), *FILLED_LATER.get(name, ()), "parameters_id")
    columns = [c for c in table.columns if c.name not in later]
    if name == "namespaces":
        moved = conn is None or "params" not in {c["name"] for c in inspect(conn).get_columns("namespaces")}
        columns += [_PARAMS, _STATE] if moved else [text("params"), text("state")]
    return columns


def _source(tmp_path: Path, embedder: FakeEmbedder) -> tuple[Path, dict[str, int], list[int]]:
    """A database written by the current code: a document, notes in two namespaces, a session.

    Returns its path, record ids by name, and the ids ``recall(QUESTION)`` gives there."""
    path = tmp_path / "source.db"
    doc = tmp_path / "handbook.txt"
    doc.write_text(
        "\n\n".join(f"Section {i}. The on-call rota rule number {i} covers weekend pager duty." for i in range(12)),
        encoding="utf-8",
    )
    # every write checkpoints: each namespace's whole state is in its checkpoint, as an old row's was
    with MemoryAgent.open(path, AgentConfig(checkpoint_units=1), embedder=embedder) as agent:
        assert agent.ingest(doc).chunks >= 1
        port = agent.remember("The staging server listens on port 8443.", metadata={"team": "ops", "n": [1, 2]})
        agent.remember("The build cache lives on the NAS.", namespace="work")
        old = agent.add_turn("s1", "user", OLD, T0).record_id
        agent.add_turn("s1", "assistant", "Nice, a classic.", T0)
        expected = [h.id for h in agent.recall(QUESTION, k=5)]
        assert expected[0] == port.record_id
    return path, {"port": port.record_id, "old": old}, expected


def _build_v1(url: str, backend: str, source: Path, version: int = 1) -> None:
    """Make a version-1 database at ``url`` from the fixture DDL and copy ``source``'s rows into it.

    ``version=2``: a version-2 database instead, made by the released revisions 0001 and 0002 (its
    ``alembic_version`` says 0002), with the supersessions rows too."""
    target = _engine(url)
    with target.begin() as conn:
        if version == 2:
            migrations.upgrade(conn, "0002")
        elif backend == "sqlite":
            conn.connection.driver_connection.executescript(";\n".join(_v1_statements("sqlite")) + ";")
        else:
            for stmt in _v1_statements("postgresql"):
                conn.exec_driver_sql(stmt)
    src = _engine(str(source))
    with src.connect() as s, target.begin() as t:
        if version == 2:
            t.execute(text("DELETE FROM meta"))  # revision 0001 wrote the version row
        for name in V1_TABLES if version == 1 else V2_TABLES:
            table = Base.metadata.tables[name]
            rows = [dict(r) for r in s.execute(select(*_old_columns(name, s))).mappings()]
            if name == "meta":
                rows = [r | {"value": str(version)} if r["key"] == "schema_version" else r for r in rows]
            assert rows, f"the source database has no {name} rows"
            if name == "namespaces":  # the old table: the columns as named in the fixture DDL
                cols = list(rows[0])
                sql = f"INSERT INTO namespaces ({', '.join(cols)}) VALUES ({', '.join(':' + c for c in cols)})"
                values = [{k: json.dumps(v) if isinstance(v, dict) else v for k, v in r.items()} for r in rows]
                t.execute(text(sql), values)
            else:
                t.execute(insert(table), rows)
            if backend == "postgresql" and name != "meta":  # as a real database's sequences would be
                t.execute(text(f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), (SELECT max(id) FROM {name}))"))
    src.dispose()
    target.dispose()


def _dump(url: str, tables: tuple[str, ...] = V1_TABLES) -> dict[str, list[tuple]]:
    """Every row of the version-1 tables (typed; the columns they had before revision 0003), in
    primary key order; meta without the version."""
    engine = _engine(url)
    out: dict[str, list[tuple]] = {}
    with engine.connect() as conn:
        for name in tables:
            table = Base.metadata.tables[name]
            rows = conn.execute(select(*_old_columns(name, conn)).order_by(*table.primary_key.columns)).all()
            out[name] = [tuple(r) for r in rows if not (name == "meta" and r[0] == "schema_version")]
    engine.dispose()
    return out


def _table_names(url: str) -> set[str]:
    engine = _engine(url)

    with engine.connect() as conn:
        names = set(inspect(conn).get_table_names())
    engine.dispose()
    return names


def _later_columns(url: str) -> dict[str, set]:
    """The values found in the later revisions' columns, over every row (raw SQL: NULL is None)."""
    engine = _engine(url)
    with engine.connect() as conn:
        out = {
            column: set(conn.execute(text(f"SELECT {column} FROM {table}")).scalars())
            for table, columns in LATER_COLUMNS.items()
            for column in columns
        }
    engine.dispose()
    return out


@pytest.mark.backends()
def test_a_v1_database_is_migrated_on_open_keeping_every_row(backend, db_url, tmp_path, fake_embedder, caplog):
    source, ids, expected = _source(tmp_path, fake_embedder)
    _build_v1(db_url, backend, source)
    before = _dump(db_url)
    assert {"alembic_version", "supersessions"}.isdisjoint(_table_names(db_url))
    assert len(before["namespaces"]) == 2 and all(before[t] for t in V1_TABLES if t != "meta")

    with caplog.at_level(logging.INFO, logger="titans_agent.store"):
        agent = MemoryAgent.open(db_url, embedder=fake_embedder)
    with agent:
        assert "from schema revision 0001 to 0008" in caplog.text
        backups = sorted(tmp_path.glob("memory.db.bak-v1-*"))
        if backend == "sqlite":
            assert len(backups) == 1 and str(backups[0]) in caplog.text
            assert _dump(str(backups[0])) == before  # the copy is the version-1 database, untouched
            assert {"alembic_version", "supersessions"}.isdisjoint(_table_names(str(backups[0])))
            with sqlite3.connect(backups[0]) as b:
                assert b.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        else:
            assert backups == [] and "copied at" not in caplog.text  # PostgreSQL: no file copy
        assert _dump(db_url) == before  # every row kept, blobs byte for byte
        assert _later_columns(db_url) == NULL_LATER  # the later revisions' columns: NULL
        _assert_incarnations(db_url, 2)  # but every old namespace got its own incarnation
        assert query(agent, "SELECT version_num FROM alembic_version") == [(migrations.head_revision(),)]
        assert query(agent, "SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]

        assert [h.id for h in agent.recall(QUESTION, k=5)] == expected  # memory state and indexes work
        lexical = [h.id for h in agent.recall("staging server port", k=5) if h.signals.get("lexical") == 1]
        assert lexical == [ids["port"]]  # the lexical signal, from the in-memory index
        assert not _fulltext_objects(db_url)  # revision 0007 dropped the SQL full-text index
        new = agent.add_turn("s3", "user", NEW, T0 + dt.timedelta(days=10)).record_id
        with agent.store.session() as s:
            assert supersession_links(s, [ids["old"], new], None)[0] == {ids["old"]: [new]}

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="titans_agent.store"):
        with MemoryAgent.open(db_url, embedder=fake_embedder) as again:  # opening again: nothing to migrate
            assert again.recall("which code editor do I use", k=3)[0].id == new
    assert "migrated" not in caplog.text
    assert sorted(tmp_path.glob("memory.db.bak-*")) == backups


@pytest.mark.backends()
def test_a_v2_database_is_migrated_to_the_head_with_every_row_and_the_new_columns_null(
    backend, db_url, tmp_path, fake_embedder, caplog
):
    source, ids, _ = _source(tmp_path, fake_embedder)
    with MemoryAgent.open(source, embedder=fake_embedder) as agent:  # a knowledge update: a supersession row
        new = agent.add_turn("s3", "user", NEW, T0 + dt.timedelta(days=10)).record_id
        expected = [h.id for h in agent.recall(QUESTION, k=5)]
    _build_v1(db_url, backend, source, version=2)
    before = _dump(db_url, V2_TABLES)
    assert len(before["namespaces"]) == 2 and all(before[t] for t in V2_TABLES if t != "meta")
    assert {c["name"] for c in _columns(db_url, "occurrences")}.isdisjoint(LATER_COLUMNS["occurrences"])
    assert {c["name"] for c in _columns(db_url, "namespaces")}.isdisjoint({"chunking"})

    with caplog.at_level(logging.INFO, logger="titans_agent.store"):
        Store(db_url).close()  # the store alone migrates: nothing but the migration has written
    assert "from schema revision 0002 to 0008" in caplog.text
    backups = sorted(tmp_path.glob("memory.db.bak-v2-*"))
    if backend == "sqlite":
        assert len(backups) == 1 and _dump(str(backups[0]), V2_TABLES) == before
        with sqlite3.connect(backups[0]) as b:
            assert {r[1] for r in b.execute("PRAGMA table_info(occurrences)")}.isdisjoint({"location"})
    else:
        assert backups == []
    assert _dump(db_url, V2_TABLES) == before  # every row kept, blobs byte for byte
    assert _later_columns(db_url) == NULL_LATER  # SQL NULL in every old row
    _assert_incarnations(db_url, 2)
    for table, column in [(t, c) for t, cs in LATER_COLUMNS.items() for c in cs]:
        (found,) = [c for c in _columns(db_url, table) if c["name"] == column]
        assert found["nullable"] and found["default"] is None
    engine = _engine(db_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).all() == [("0008",)]
        assert conn.execute(text("SELECT value FROM meta WHERE key = 'schema_version'")).all() == [("8",)]
    engine.dispose()

    # revision 0005 filled the metadata index from the stored occurrences
    engine = _engine(db_url)
    with engine.connect() as conn:
        metas = conn.execute(select(Base.metadata.tables["occurrences"].c.id, text("metadata"))).all()
        want = sorted((occ, *row) for occ, m in metas for row in term_rows(json.loads(m) if isinstance(m, str) else m))
        got = conn.execute(text("SELECT occurrence_id, path, term, num FROM metadata_terms ORDER BY 1, 2")).all()
        assert [tuple(r) for r in got] == want and want
    engine.dispose()

    with MemoryAgent.open(db_url, embedder=fake_embedder) as agent:  # the memory still works
        assert [h.id for h in agent.recall(QUESTION, k=5)] == expected
        with agent.store.session() as s:
            assert supersession_links(s, [ids["old"], new], None)[0] == {ids["old"]: [new]}


def _assert_incarnations(url: str, n: int) -> None:
    """Every one of the ``n`` namespaces has an incarnation of 32 hexadecimal digits, none shared."""
    engine = _engine(url)
    with engine.connect() as conn:
        tokens = conn.execute(text("SELECT incarnation FROM namespaces")).scalars().all()
    engine.dispose()
    assert len(tokens) == n and len(set(tokens)) == n
    assert all(isinstance(t, str) and re.fullmatch(r"[0-9a-f]{32}", t) for t in tokens), tokens


def _columns(url: str, table: str) -> list[dict]:
    engine = _engine(url)
    with engine.connect() as conn:
        columns = inspect(conn).get_columns(table)
    engine.dispose()
    return columns


@pytest.mark.parametrize(
    ("before", "after", "added"),
    [
        ("0002", "0003", {"occurrences": ["location JSON"], "namespaces": ["chunking JSON"]}),
        ("0003", "0004", {"occurrences": ["write_revision INTEGER", "embedding BLOB"]}),
        ("0007", "0008", {"namespaces": ["incarnation VARCHAR(32)"]}),
    ],
)
def test_a_revision_adds_its_columns_in_place_and_downgrades(tmp_path, before, after, added):
    # in place: no rebuild of occurrences, whose turns a rebuild would cascade-delete on SQLite
    from alembic import command

    tables = text("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
    engine = _engine(str(tmp_path / f"at_{before}.db"))
    with engine.connect() as conn:
        migrations.upgrade(conn, before)
        conn.commit()
        sql_before = dict(conn.execute(tables).all())
        migrations.upgrade(conn, after)
        conn.commit()
        sql_after = dict(conn.execute(tables).all())
        assert {n for n in sql_after if sql_after[n] != sql_before[n]} == set(added)
        for table, columns in added.items():
            for column in columns:
                assert column in sql_after[table] and column.split()[0] not in sql_before[table]
        assert conn.execute(text("SELECT value FROM meta")).all() == [(str(int(after)),)]
        command.downgrade(migrations._config(conn), before)
        conn.commit()
        assert dict(conn.execute(tables).all()) == sql_before
        assert conn.execute(text("SELECT value FROM meta")).all() == [(str(int(before)),)]
        assert conn.execute(text("SELECT version_num FROM alembic_version")).all() == [(before,)]
    engine.dispose()


@pytest.mark.backends()
def test_revision_0007_drops_the_sql_fulltext_index_and_its_downgrade_fills_it_again(db_url, fake_embedder):
    from alembic import command

    with MemoryAgent.open(db_url, embedder=fake_embedder) as agent:  # made at the head: no full-text index
        port = agent.remember("The staging server listens on port 8443.").record_id
        agent.remember("Deploys go out every Tuesday.")
    assert _fulltext_objects(db_url) == []
    engine = _engine(db_url)
    with engine.connect() as conn:
        command.downgrade(migrations._config(conn), "0006")
        conn.commit()
        if engine.dialect.name == "sqlite":
            sql = "SELECT rowid FROM records_fts WHERE records_fts MATCH 'stage'"
        else:
            sql = "SELECT id FROM records WHERE tsv @@ plainto_tsquery('english', 'staging')"
        assert conn.execute(text(sql)).scalars().all() == [port]  # filled from the stored records
        assert conn.execute(text("SELECT value FROM meta")).all() == [("6",)]
    engine.dispose()
    assert _fulltext_objects(db_url)
    with MemoryAgent.open(db_url, embedder=fake_embedder) as agent:  # opened again: upgraded to the head
        assert [h.id for h in agent.recall("staging port", k=1)] == [port]
    assert _fulltext_objects(db_url) == []


@pytest.mark.backends()
def test_revision_0008_gives_every_namespace_its_own_incarnation_and_downgrades(db_url, fake_embedder):
    from alembic import command

    with MemoryAgent.open(db_url, embedder=fake_embedder) as agent:
        agent.remember("The staging server listens on port 8443.")
        agent.remember("The build cache lives on the NAS.", namespace="work")
    _assert_incarnations(db_url, 2)  # made at the head: each row got one when inserted
    engine = _engine(db_url)
    with engine.connect() as conn:
        command.downgrade(migrations._config(conn), "0007")
        conn.commit()
        assert "incarnation" not in {c["name"] for c in inspect(conn).get_columns("namespaces")}
        assert conn.execute(text("SELECT value FROM meta")).all() == [("7",)]
        assert conn.execute(text("SELECT count(*) FROM namespaces")).scalar() == 2  # no row lost
        migrations.upgrade(conn, "0008")
        conn.commit()
        assert conn.execute(text("SELECT value FROM meta")).all() == [("8",)]
    engine.dispose()
    _assert_incarnations(db_url, 2)  # the upgrade gave each old row a token of its own
    with MemoryAgent.open(db_url, embedder=fake_embedder) as agent:  # the upgraded database works
        assert agent.recall("staging port", k=1)[0].text == "The staging server listens on port 8443."
        agent.remember("A third tenant.", namespace="third")
    _assert_incarnations(db_url, 3)


@pytest.mark.backends()
def test_a_new_database_is_created_at_the_head_and_matches_the_models(db_url):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    assert Supersession.__tablename__ in Base.metadata.tables
    store = Store(db_url)
    try:
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).all() == [("0008",)]
            assert conn.execute(text("SELECT value FROM meta")).all() == [(str(SCHEMA_VERSION),)]
            assert SCHEMA_VERSION == 8 and migrations.REVISION_OF_VERSION[SCHEMA_VERSION] == "0008"
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(ctx, Base.metadata) == []  # no full-text index beside the models
        assert not _fulltext_objects(db_url)
    finally:
        store.close()


def _fulltext_objects(db_url: str) -> list[str]:
    """The SQL full-text index's tables, triggers, columns and indexes still in the database."""
    engine = _engine(db_url)
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                sql = "SELECT name FROM sqlite_master WHERE name LIKE 'records_fts%' OR name LIKE 'records_a_'"
            else:
                sql = (
                    "SELECT column_name FROM information_schema.columns WHERE table_name = 'records' "
                    "AND column_name = 'tsv' AND table_schema = current_schema() "
                    "UNION ALL SELECT indexname FROM pg_indexes WHERE indexname = 'ix_records_tsv' "
                    "AND schemaname = current_schema()"
                )
            return [r[0] for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


def _normalized(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).replace("( ", "(").replace(" )", ")").strip()


def test_revision_0001_makes_exactly_the_released_v1_sqlite_schema(tmp_path):
    engine = _engine(str(tmp_path / "at_0001.db"))
    with engine.connect() as conn:
        migrations.upgrade(conn, "0001")
        conn.commit()
        made = conn.execute(
            text(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL "
                "AND name NOT LIKE 'records_fts_%' AND name NOT LIKE 'alembic_version%'"
            )
        ).scalars()
        assert sorted(map(_normalized, made)) == sorted(map(_normalized, _v1_statements("sqlite")))
        assert conn.execute(text("SELECT key, value FROM meta")).all() == [("schema_version", "1")]
    engine.dispose()


@pytest.mark.backends()
def test_a_database_at_an_unknown_newer_revision_refuses_to_open(db_url):
    MemoryAgent.open(db_url, embedder=FakeEmbedder()).close()
    engine = _engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0999'"))
    engine.dispose()
    with pytest.raises(StoreError, match="schema revision '0999' is newer than this titans-agent supports"):
        MemoryAgent.open(db_url, embedder=FakeEmbedder())


def _empty_v1(path: Path, *, with_supersessions: bool = False) -> None:
    with sqlite3.connect(path) as conn:
        conn.executescript(";\n".join(_v1_statements("sqlite")) + ";")
        conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    if with_supersessions:  # a development build between 1 and 2 made the table with create_all
        engine = _engine(str(path))
        Supersession.__table__.create(engine)
        engine.dispose()


def test_two_stores_opening_an_old_database_at_once_migrate_it_once(tmp_path):
    path = tmp_path / "old.db"
    _empty_v1(path)
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def open_it() -> None:
        try:
            start.wait()
            Store(path).close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert len(list(tmp_path.glob("old.db.bak-v1-*"))) == 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("0008",)]


def test_a_development_database_that_already_has_supersessions_is_stamped_and_upgraded(tmp_path):
    path = tmp_path / "dev.db"
    _empty_v1(path, with_supersessions=True)
    Store(path).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("0008",)]
        assert conn.execute("SELECT value FROM meta").fetchall() == [("8",)]
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'supersessions'").fetchone() == (1,)


@pytest.mark.parametrize("value", ["two", "0"])
def test_a_malformed_schema_version_is_a_store_error(tmp_path, fake_embedder, value):
    db = tmp_path / "m.db"
    with MemoryAgent.open(db, embedder=fake_embedder) as agent:
        agent.remember("a note")
    con = sqlite3.connect(db)
    with con:
        con.execute("DROP TABLE alembic_version")
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (value,))
    con.close()
    with pytest.raises(StoreError, match="schema version"):
        MemoryAgent.open(db, embedder=fake_embedder)
