"""Connections to a titans-agent database: SQLite (a path) or PostgreSQL (a URL).

:class:`Store` opens the engine, creates or migrates the schema (:mod:`titans_agent.store.migrations`)
under the database's write lock, and hands out sessions: plain ones, read snapshots, and write
sessions that hold a namespace's write lock. SQLite is opened in WAL mode with a busy timeout and
foreign keys on. Other backends are refused at open (titans-agent's write lock and lexical index
exist only for these two).

Concurrency: every write that reads and replaces a namespace's memory state runs in a
:meth:`Store.write_session`, whose transaction holds that namespace's write lock from its first
statement to its commit (SQLite: ``BEGIN IMMEDIATE``, the database's single writer lock;
PostgreSQL: an advisory lock on the namespace's name, then ``SELECT ... FOR UPDATE`` of its row),
and checks there that the namespace row is still the one it looked up (its id and incarnation).
Transient lock errors (SQLite busy, PostgreSQL lock timeout, deadlock or serialization failure)
are retried with bounded, jittered exponential backoff by :meth:`Store.write_attempts`. Readers
load a namespace's state and record index from one snapshot (:meth:`Store.snapshot_session`), so
the two always match.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import create_engine, event, inspect, select, text
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, stop_after_delay, wait_exponential_jitter

from titans_agent.errors import DatabaseNotFoundError, ReadOnlyError, SchemaOutdatedError, StoreError
from titans_agent.store import migrations
from titans_agent.store.schema import SCHEMA_VERSION, Base, Meta, NamespaceRow

__all__ = ["SUPPORTED_BACKENDS", "Store"]

log = logging.getLogger(__name__)

SUPPORTED_BACKENDS = ("sqlite", "postgresql")

# SQLSTATEs of PostgreSQL errors that a retry of the whole transaction resolves: serialization
# failure, deadlock detected, lock not available (lock_timeout).
_PG_TRANSIENT = frozenset({"40001", "40P01", "55P03"})
_SCHEMA_LOCK_KEY = 0x7469_7461_6E73  # pg_advisory_xact_lock key that serialises schema creation ("titans")


class _TransientStoreError(StoreError):
    """A lock or serialization conflict; the whole transaction can be retried (internal)."""


def _is_transient(exc: BaseException) -> bool:
    """Whether a database error is a lock conflict that retrying the transaction resolves."""
    if not isinstance(exc, DBAPIError):
        return False
    sqlstate = getattr(exc.orig, "sqlstate", None)
    if sqlstate in _PG_TRANSIENT:
        return True
    msg = str(exc.orig).lower()
    return isinstance(exc, OperationalError) and ("database is locked" in msg or "database is busy" in msg)


def _expand(path: str | Path) -> Path:
    """``path`` with ``~`` expanded; a home folder that cannot be found is the caller's error."""
    try:
        return Path(path).expanduser()
    except RuntimeError as exc:  # "~nosuchuser/memory.db"
        raise StoreError(f"cannot open database {str(path)!r}: {exc}") from None


def _to_url(path_or_url: str | Path, make_folders: bool) -> str | URL:
    """A URL as given; a file path as a SQLite URL object whose database is the resolved path
    verbatim (never parsed: a ``?`` or ``%2F`` in a file name is part of the name, so one path is
    always one file)."""
    s = str(path_or_url)
    if "://" in s:
        return s
    p = _expand(s)
    if p.exists() and p.is_dir():
        raise StoreError(f"{s} is a directory; give a database file path")
    if make_folders:
        p.parent.mkdir(parents=True, exist_ok=True)
    return URL.create("sqlite", database=str(p.resolve()))


def _missing_database(exc: DBAPIError) -> bool:
    """Whether a connection failed because the server has no such database (PostgreSQL names it in
    its message; a connection error carries no SQLSTATE)."""
    return re.search(r'database ".*" does not exist', str(exc.orig)) is not None


def _read_only_sqlite(path: Path, timeout_s: float) -> sqlite3.Connection:
    """A read-only connection to a SQLite file (``mode=ro``). In a folder this process cannot write
    to, SQLite cannot make the WAL index (``-shm``) a WAL reader needs, so the file is opened
    ``immutable=1`` (no locks, no ``-shm``) unless its ``-wal`` and ``-shm`` are both there to read."""
    uri = f"file:{quote(str(path))}?mode=ro"
    wal_files = all(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-shm"))
    if not os.access(path.parent, os.W_OK) and not wal_files:
        uri += "&immutable=1"
    return sqlite3.connect(uri, uri=True, timeout=timeout_s, check_same_thread=False)


class Store:
    """The database behind a MemoryAgent: SQLite (a file path) or PostgreSQL (a URL).

    Args:
        path_or_url: a file path (SQLite; parent folders are created) or a SQLAlchemy URL such as
            ``postgresql+psycopg://user@host:5432/db`` (needs the ``postgres`` extra: psycopg 3).
        busy_timeout_s: how long one attempt waits for a lock (SQLite's busy timeout, PostgreSQL's
            ``lock_timeout`` inside a write); :meth:`write_attempts` retries for up to three times
            that long in all.
        read_only: open without ever writing: nothing is created or migrated (the database must
            exist at this version's schema), SQLite opens the file ``mode=ro`` (on a read-only
            file system too), PostgreSQL sessions are ``default_transaction_read_only``, and
            :meth:`write_session` raises :class:`~titans_agent.errors.ReadOnlyError`.
        create: make the database when it does not exist (a SQLite file with its folders; the
            tables in a PostgreSQL database). False (and ``read_only``) refuses a missing one.

    Raises:
        DatabaseNotFoundError: ``create=False`` or ``read_only``, and no SQLite file at the path, or
            a PostgreSQL database that the server lacks or that holds no titans-agent table.
        StoreError: the database cannot be opened, is not a titans-agent database, has a newer
            schema than this version understands (or, read-only, an older one), or its URL names a
            backend other than SQLite or PostgreSQL.
    """

    def __init__(
        self, path_or_url: str | Path, busy_timeout_s: float = 30.0, *, read_only: bool = False, create: bool = True
    ) -> None:
        self.read_only = read_only
        create = create and not read_only
        new = "://" not in str(path_or_url) and not _expand(path_or_url).exists()
        self._new_file: Path | None = _expand(path_or_url) if new and create else None
        url = _to_url(path_or_url, make_folders=create)
        try:
            parsed = make_url(url)
        except ArgumentError as exc:
            raise StoreError(f"cannot open database {path_or_url!r}: {exc}") from exc
        if parsed.get_backend_name() not in SUPPORTED_BACKENDS:
            raise StoreError(
                f"titans-agent stores memories in SQLite or PostgreSQL, not {parsed.get_backend_name()!r} "
                f"({parsed.render_as_string(hide_password=True)}): give a file path or a postgresql:// URL"
            )
        database = parsed.database or ":memory:"  # a SQLite file: checked before anything connects
        if (
            not create
            and parsed.get_backend_name() == "sqlite"
            and (database == ":memory:" or not Path(database).is_file() or Path(database).stat().st_size == 0)
        ):  # an empty file (``touch memory.db``) is no database either, as an empty PostgreSQL one is none
            why = "a read-only open" if read_only else "open(create=False)"
            raise DatabaseNotFoundError(f"no database at {display_url(path_or_url)}; {why} never creates one")
        extra: dict[str, Any] = {}
        if read_only and parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            path = Path(str(parsed.database))
            extra["creator"] = lambda: _read_only_sqlite(path, busy_timeout_s)
        try:
            self.engine: Engine = create_engine(
                url,
                connect_args=self._connect_args(parsed, busy_timeout_s),
                pool_pre_ping=parsed.get_backend_name() != "sqlite",  # a server may drop idle connections
                **extra,
            )
        except (ArgumentError, SQLAlchemyError, ImportError) as exc:
            raise StoreError(f"cannot open database {path_or_url!r}: {exc}") from exc
        self.url = parsed.render_as_string(hide_password=True)  # for messages: never the password
        self.busy_timeout_s = busy_timeout_s
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self._files = self._sqlite_files()  # now: a relative name means the working folder at open
        self.is_postgres = self.engine.dialect.name == "postgresql"
        if self.is_sqlite:
            timeout_ms = int(busy_timeout_s * 1000)

            @event.listens_for(self.engine, "connect")
            def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                cur = dbapi_conn.cursor()
                cur.execute(f"PRAGMA busy_timeout={timeout_ms}")
                if read_only:
                    cur.execute("PRAGMA query_only=ON")  # the file's journal mode is left as it is
                else:
                    cur.execute("PRAGMA journal_mode=WAL")
                    cur.execute("PRAGMA synchronous=NORMAL")
                cur.execute("PRAGMA foreign_keys=ON")
                cur.close()

        elif self.is_postgres and read_only:

            @event.listens_for(self.engine, "connect")
            def _read_only_session(dbapi_conn: Any, _record: Any) -> None:
                cur = dbapi_conn.cursor()
                cur.execute("SET default_transaction_read_only = on")
                cur.close()
                dbapi_conn.commit()

        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        if not create:
            try:
                self._check_exists()
                if read_only:
                    self._check_schema()
            except (OperationalError, DBAPIError) as exc:
                self.engine.dispose()
                if _missing_database(exc):
                    raise DatabaseNotFoundError(f"no database at {self.url}: {exc.orig}") from exc
                raise StoreError(f"cannot open database {self.url}{' read-only' * read_only}: {exc.orig}") from exc
            except StoreError:
                self.engine.dispose()
                raise
        if read_only:
            return
        try:
            for attempt in self.write_attempts():
                with attempt:
                    try:
                        self._create_schema()
                    except DBAPIError as exc:
                        # Also while connecting: SQLite can answer "database is locked" to
                        # ``PRAGMA journal_mode=WAL`` at once, without its busy handler, while another
                        # process is creating the same new file (seen with two processes starting).
                        if _is_transient(exc):
                            raise _TransientStoreError(f"database {self.url} is busy: {exc.orig}") from exc
                        raise
        except (OperationalError, DBAPIError) as exc:
            self.engine.dispose()
            if _missing_database(exc):  # the server does not have it; titans-agent makes only its tables
                raise DatabaseNotFoundError(f"no database at {self.url}: {exc.orig}") from exc
            raise StoreError(f"cannot open database {self.url}: {exc.orig}{self._read_only_hint()}") from exc
        except StoreError:
            self.engine.dispose()
            raise

    def database_files(self) -> list[Path]:
        """The files of a SQLite database, as real paths (links resolved) taken when it was opened:
        the database and its ``-wal``, ``-shm`` and ``-journal`` companions, whether or not they
        exist now; ``[]`` on PostgreSQL or in memory."""
        return list(self._files)

    def _sqlite_files(self) -> list[Path]:
        database = self.engine.url.database if self.is_sqlite else None
        if database and database.startswith("file:"):  # a URI filename: file:/path/x.db?mode=...
            database = database[5:].split("?", 1)[0] or None
        if not database or database == ":memory:" or "mode=memory" in str(self.engine.url):
            return []
        real = Path(os.path.realpath(database))
        return [real, *(real.with_name(real.name + suffix) for suffix in ("-wal", "-shm", "-journal"))]

    def _read_only_hint(self) -> str:
        """For a SQLite file this process cannot write (or whose folder it cannot): how to read it."""
        database = self.engine.url.database if self.is_sqlite else None
        if not database or database == ":memory:" or not Path(database).exists():
            return ""
        path = Path(database)
        if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK):
            return ""
        return (
            " (the file or its folder is read-only: it can only be opened read_only=True,"
            " as the commands that only read do)"
        )

    def check_writable(self) -> None:
        """Raise :class:`~titans_agent.errors.ReadOnlyError` when the store was opened read-only."""
        if self.read_only:
            raise ReadOnlyError(
                f"the database {self.url} was opened read-only: nothing was written "
                "(open it without read_only=True to write to it)"
            )

    def _check_exists(self) -> None:
        """A database that must exist (``create=False``, ``read_only``): a PostgreSQL one must hold a
        titans-agent table (a SQLite file was checked before connecting).

        Raises:
            DatabaseNotFoundError: it holds none (it has no tables, or only other applications').
        """
        if self.is_sqlite:
            return
        with self.engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
        if not tables & (set(Base.metadata.tables) | {"alembic_version"}):
            raise DatabaseNotFoundError(f"no titans-agent database at {self.url} (it has no titans-agent tables)")

    def _check_schema(self) -> None:
        """A read-only open's check: a titans-agent database at this version's head revision
        (nothing is created or migrated; an older schema must be opened writable once).

        Raises:
            StoreError: not a titans-agent database, or a schema older or newer than this code's.
        """
        with self.engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            if "meta" not in tables:
                ours = set(Base.metadata.tables) | {"alembic_version"}
                foreign = sorted(tables if self.is_sqlite else tables & ours)
                has = f"it has tables: {', '.join(foreign)[:200]}" if foreign else "it has no tables"
                raise StoreError(f"{self.url} is not a titans-agent database ({has})")
            version, current = self._revision(conn, has_alembic="alembic_version" in tables)
            head = migrations.head_revision()
            if current != head:  # newer ones were refused by _revision
                raise SchemaOutdatedError(
                    f"{self.url} has the older schema revision {current or migrations.REVISION_OF_VERSION[version]!r} "
                    f"(this titans-agent's is {head!r}) and a read-only open never migrates: open it writable "
                    "once (any command that writes, or MemoryAgent.open without read_only=True) to migrate it"
                )

    @staticmethod
    def _connect_args(parsed: Any, busy_timeout_s: float) -> dict[str, Any]:
        if parsed.get_backend_name() == "sqlite":
            return {"timeout": busy_timeout_s, "check_same_thread": False}
        if parsed.get_backend_name() == "postgresql":
            return {"connect_timeout": max(1, int(busy_timeout_s))}
        return {}

    def _create_schema(self) -> None:
        """Create a new database at the newest schema, or migrate an older one; check the version.

        Runs under the database's write lock (SQLite ``BEGIN IMMEDIATE``; PostgreSQL an advisory
        transaction lock) in one transaction, so processes opening a new or old database at the same
        time create or migrate it once. The schema is Alembic's (:mod:`titans_agent.store.migrations`):
        a new database gets every revision; a version-1 database made before migrations existed (no
        ``alembic_version`` table) is stamped ``0001``; an older one is upgraded to the head after a
        backup copy (SQLite only: :func:`~titans_agent.store.migrations.backup_sqlite`).

        Raises:
            StoreError: not a titans-agent database; a schema newer than this code (a higher
                ``meta.schema_version`` or an unknown Alembic revision); the backup failed.
        """
        with self.engine.connect() as conn:
            try:
                if self.is_sqlite:
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                elif self.is_postgres:
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK_KEY})
            except DBAPIError as exc:
                if _is_transient(exc):
                    raise _TransientStoreError(f"database {self.url} is busy: {exc.orig}") from exc
                raise
            tables = set(inspect(conn).get_table_names())
            ours = set(Base.metadata.tables) | {"alembic_version"}
            # A SQLite file is ours alone; a PostgreSQL database may hold other applications' tables.
            foreign = tables if self.is_sqlite else tables & ours
            if foreign and "meta" not in tables:
                names = ", ".join(sorted(foreign))[:200]
                raise StoreError(f"{self.url} is not a titans-agent database (it has tables: {names})")
            if "meta" not in tables:
                migrations.upgrade(conn, "head")
                log.info("created the titans-agent schema (revision %s) in %s", migrations.head_revision(), self.url)
            else:
                self._migrate(conn, has_alembic="alembic_version" in tables)
            conn.commit()

    def _revision(self, conn: Connection, *, has_alembic: bool) -> tuple[int, str | None]:
        """An existing database's ``(meta schema version, Alembic revision or None)``, checked.

        Raises:
            StoreError: a malformed or unknown schema version, or one newer than this code's.
        """
        row = conn.execute(select(Meta.value).where(Meta.key == "schema_version")).scalar()
        try:
            version = int(row) if row is not None else 1
        except ValueError:
            raise StoreError(
                f"{self.url} has a malformed schema version {row!r}; it is not a database to open"
            ) from None
        if version < 1:
            raise StoreError(f"{self.url} has an unknown schema version {row!r}")
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"database schema version {row} is newer than this titans-agent supports "
                f"({SCHEMA_VERSION}); upgrade titans-agent"
            )
        current = migrations.current_revision(conn) if has_alembic else None
        if current is not None and current not in migrations.known_revisions():
            raise StoreError(
                f"database schema revision {current!r} is newer than this titans-agent supports "
                f"(head {migrations.head_revision()!r}); upgrade titans-agent"
            )
        return version, current

    def _migrate(self, conn: Connection, *, has_alembic: bool) -> None:
        """Bring an existing database to the head revision (see :meth:`_create_schema`)."""
        version, current = self._revision(conn, has_alembic=has_alembic)
        head = migrations.head_revision()
        if current == head:
            return
        backup = self._backup(version)
        if current is None:  # made before migrations existed: its meta version says which revision it is
            current = migrations.REVISION_OF_VERSION[version]
            migrations.stamp(conn, current)
        migrations.upgrade(conn, "head")
        log.warning(
            "migrated %s from schema revision %s to %s%s",
            self.url,
            current,
            head,
            f"; the database before it is copied at {backup}" if backup else "",
        )

    def _backup(self, version: int) -> Path | None:
        """Copy a SQLite database file next to itself before a migration (None on PostgreSQL or in memory)."""
        database = self.engine.url.database
        if not self.is_sqlite or not database or database == ":memory:":
            return None
        try:
            return migrations.backup_sqlite(Path(database), version, self.busy_timeout_s)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot back up {self.url} before migrating it (nothing was changed): {exc}") from exc

    def session(self) -> Session:
        """A new ORM session (use as a context manager; commit explicitly). Its reads are not
        guaranteed to share one snapshot; use :meth:`snapshot_session` or :meth:`write_session`
        when they must."""
        return self._sessions()

    @contextmanager
    def snapshot_session(self) -> Iterator[Session]:
        """A read session whose statements all see one committed snapshot of the database.

        SQLite: an explicit ``BEGIN`` (the snapshot is taken at the first read, WAL readers never
        wait for writers). PostgreSQL: a ``REPEATABLE READ`` transaction. Never commit in it."""
        with self._sessions() as s:
            if self.is_sqlite:
                s.connection().exec_driver_sql("BEGIN")
            elif self.is_postgres:
                s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            yield s

    @contextmanager
    def write_session(self, namespace_id: int | None = None, *, name: str | None = None) -> Iterator[Session]:
        """A session whose transaction holds a namespace's write lock until it commits or ends.

        SQLite: ``BEGIN IMMEDIATE`` takes the database's writer lock (waiting up to the busy
        timeout). PostgreSQL: a transaction-level advisory lock on the namespace's ``name`` (which
        may not exist yet: what creating, importing, writing to and dropping a name all take), then
        ``SELECT ... FOR UPDATE`` of the namespace row ``namespace_id``; waits at most
        ``busy_timeout_s`` (``lock_timeout``). The lock is on what the caller names: the caller
        checks, inside the transaction, that the row is still the namespace it looked up
        (:meth:`titans_agent.runtime.Runtimes.claim`): a row dropped before the lock was taken is
        not locked. The caller commits; leaving the block without a commit rolls everything back
        and releases the lock.

        Raises:
            StoreError: the lock could not be taken (a subclass :meth:`write_attempts` retries).
            ReadOnlyError: the store was opened read-only.
        """
        self.check_writable()
        with self._sessions() as s:
            try:
                if self.is_sqlite:
                    s.connection().exec_driver_sql("BEGIN IMMEDIATE")
                elif self.is_postgres:
                    ms = int(self.busy_timeout_s * 1000)
                    s.execute(text(f"SET LOCAL lock_timeout = {ms}"))
                    if name is not None:  # always the name first, then the row: one order, no deadlock
                        s.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:n, 0))"), {"n": name})
                    if namespace_id is not None:
                        s.execute(select(NamespaceRow.id).where(NamespaceRow.id == namespace_id).with_for_update())
                yield s
            except DBAPIError as exc:
                s.rollback()
                if _is_transient(exc):
                    raise _TransientStoreError(f"the database is busy ({exc.orig}); nothing was written") from exc
                raise

    def write_attempts(self) -> Retrying:
        """Attempts of a write transaction: ``for attempt in store.write_attempts(): with attempt: ...``.

        A lock conflict (SQLite busy, PostgreSQL lock timeout, deadlock or serialization failure,
        raised inside :meth:`write_session`) rolls the attempt back and retries it after a jittered
        exponential backoff (20 ms doubling, at most 1 s), for at most 3 x ``busy_timeout_s`` and 25
        attempts; then the last :class:`StoreError` is raised. Other errors are raised at once.
        """
        return Retrying(
            retry=retry_if_exception_type(_TransientStoreError),
            stop=stop_after_delay(3 * self.busy_timeout_s) | stop_after_attempt(25),
            wait=wait_exponential_jitter(multiplier=0.02, max=1.0),
            before_sleep=lambda rs: log.debug("retrying a write after a lock conflict (attempt %d)", rs.attempt_number),
            reraise=True,
        )

    def close(self, *, discard_new_file: bool = False) -> None:
        """Dispose of the connection pool; with ``discard_new_file``, also delete the SQLite file
        (and its WAL files) when this store created it (a failed open leaves no empty database)."""
        self.engine.dispose()
        if discard_new_file and self._new_file is not None:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self._new_file}{suffix}").unlink(missing_ok=True)


__all__ += ["display_url"]


def display_url(path_or_url: str | Path) -> str:
    """``path_or_url`` as it may be shown to a user: a URL's password is masked (``***``).

    A file path, and a URL that cannot be parsed (it is reported when it is opened), are returned
    as given.
    """
    s = str(path_or_url)
    if "://" not in s:
        return s
    try:
        return make_url(s).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a malformed URL is reported when it is opened
        return s
