"""The local tier: one SQLite database, shared by every process of the user.

May import: errors, store.* (the standard library otherwise).

# [Note: The local tier]
# ``store.sqlite3`` in the store's directory, in WAL mode (readers never wait for the
# writer), ``busy_timeout`` 10 s, ``synchronous=NORMAL``. One row per entry: (key, entry)
# is the primary key, with the function's name, the signed value, its size and the times
# it was written and last read. A write is one ``INSERT OR REPLACE`` in a ``BEGIN
# IMMEDIATE`` transaction, so concurrent writers queue instead of failing, and a reader
# sees a whole value or none. The same transaction evicts the least recently read rows
# while the total size is over ``max_bytes`` (the new row is kept even when it alone is
# larger). Reading marks the rows read as used (to the minute: rows used within the last
# minute are not written again). A connection belongs to one process: after a fork the child
# opens its own and keeps the inherited one open and unused (closing a connection the parent
# still uses is what SQLite's docs warn against). A connection is closed by ``close()`` or,
# when the tier is dropped unclosed, by a finalizer in the process that opened it: an
# implicit store is never left to the garbage collector (Python 3.13 warns of that).
# Every sqlite3 or OS error surfaces as ``TierError`` (the store turns it into a warning).
# The tier never makes its directory (the store does, [Note: Opening a store]), and never
# opens a database path that is a symbolic link. Opening a database sets it up (WAL mode,
# the schema); on a new file that reads and then writes, and SQLite answers a read that
# must become a write while another connection writes with SQLITE_BUSY at once, without
# waiting its busy timeout (waiting could deadlock). So the set-up runs again on a fresh
# connection, with backoff, for up to the same 10 s: processes that open one new database
# together (a corrupt one just moved aside, a first run) all get it.
#
# [Note: A corrupt database]
# A database SQLite reports as corrupt or not a database (SQLITE_CORRUPT, SQLITE_NOTADB:
# truncated, bit flips, overwritten) is moved aside by the first process that meets it:
# ``store.sqlite3`` (and its -wal and -shm files) become ``store.sqlite3.corrupt-<UTC
# time>-<pid>``, a new database is made, the operation that met it runs again on the new
# one, and one ``StoreWarning`` says so. Concurrency: every read and write of a connection
# holds ``store.sqlite3.lock`` shared (``flock``), and checks first that the file at the
# path is the one the connection reads (device and inode), opening the path again when
# not; moving aside holds the lock exclusive, and moves the file only when it is still the
# one found corrupt. So of several processes meeting it at once exactly one moves it
# aside, the others find it moved and warn that another process did, and no write after
# the move lands in the moved file (SQLite itself also refuses to write to, or checkpoint
# into, a database file that was renamed while open). A process that never read the
# corrupt file says nothing. Entries of the moved file are not copied (they compile
# again). Without ``fcntl`` (Windows) there is no lock file.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, Optional, TypeVar

from ..errors import StoreWarning

try:
    import fcntl
except ImportError:  # Windows: no lock file (moving a corrupt database aside is unguarded)
    fcntl = None  # type: ignore[assignment]

__all__ = ["DB_NAME", "Row", "SqliteTier", "TierError", "is_busy", "is_corrupt", "notify"]

_T = TypeVar("_T")
_log = logging.getLogger("jitguard.store")

DB_NAME = "store.sqlite3"
_TOUCH_EVERY = 60.0  # seconds: a read marks rows as used when they were not for this long
_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key TEXT NOT NULL,
    entry TEXT NOT NULL,
    name TEXT NOT NULL,
    value BLOB NOT NULL,
    size INTEGER NOT NULL,
    created REAL NOT NULL,
    used REAL NOT NULL,
    PRIMARY KEY (key, entry)
);
CREATE INDEX IF NOT EXISTS entries_used ON entries (used);
CREATE INDEX IF NOT EXISTS entries_name ON entries (name);
"""


_inherited: list[sqlite3.Connection] = []  # connections opened before a fork: never closed here


def _close_in(pid: int, conn: sqlite3.Connection) -> None:
    """Close ``conn`` if this is the process that opened it."""
    if os.getpid() == pid:
        conn.close()


def notify(message: str) -> None:
    """A ``StoreWarning``, and the same line on the ``jitguard.store`` log (INFO)."""
    _log.info("%s", message)
    warnings.warn(message, StoreWarning, stacklevel=2)


_BUSY_SECONDS = 10.0  # SQLite's busy timeout, and how long opening retries a busy set-up
_BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED (primary result codes)
_BUSY_TEXTS = ("database is locked", "database table is locked")
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB (primary result codes)
_CORRUPT_TEXTS = ("database disk image is malformed", "file is not a database")


def _sqlite_says(error: BaseException, codes: set[int], texts: tuple[str, ...]) -> bool:
    """Whether ``error``'s primary result code is one of ``codes`` (Python 3.11+), or its
    text holds one of ``texts`` (3.10, or an error with no code)."""
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in codes:
        return True
    return any(text in str(error) for text in texts)


def is_corrupt(error: BaseException) -> bool:
    """Whether SQLite says the database file is corrupt or is not a database."""
    return _sqlite_says(error, _CORRUPT_CODES, _CORRUPT_TEXTS)


def is_busy(error: BaseException) -> bool:
    """Whether SQLite says the database (or a table of it) is locked by another connection."""
    return _sqlite_says(error, _BUSY_CODES, _BUSY_TEXTS)


def _connect(path: Path) -> sqlite3.Connection:
    """A connection to ``path``, set up ([Note: The local tier]): a set-up SQLite answers
    busy at once is tried again on a new connection, with backoff, for up to 10 s."""
    deadline = time.monotonic() + _BUSY_SECONDS
    pause = 0.002
    while True:
        conn = sqlite3.connect(
            str(path), timeout=_BUSY_SECONDS, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout={int(_BUSY_SECONDS * 1000)}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            return conn
        except sqlite3.OperationalError as e:
            conn.close()
            left = deadline - time.monotonic()
            if not is_busy(e) or left <= 0:
                raise
        except BaseException:
            conn.close()
            raise
        time.sleep(min(pause, left))
        pause = min(2 * pause, 0.1)


def _ident(path: Path) -> Optional[tuple[int, int]]:
    """(device, inode) of the file at ``path`` (not following a link), or None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


_ASIDE = ".corrupt-"


def _move_aside(path: Path) -> Path:
    """Rename the database and its -wal and -shm files to ``<name>.corrupt-<time>[...]``."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{os.getpid()}"
    aside = path.with_name(f"{path.name}{_ASIDE}{stamp}")
    os.replace(path, aside)
    for suffix in ("-wal", "-shm"):
        try:
            os.replace(f"{path}{suffix}", f"{aside}{suffix}")
        except FileNotFoundError:
            pass
    return aside


def _said_elsewhere(path: Path, met: Optional[tuple[int, int]]) -> bool:
    """When the database this process read (``met``) was moved aside as corrupt by another
    process: warn once, and True."""
    if met is None:
        return False
    for aside in path.parent.glob(f"{path.name}{_ASIDE}*"):
        if _ident(aside) == met:
            notify(f"jitguard store: {path} was corrupt; another process moved it aside to "
                   f"{aside.name} and started a new database (its entries compile again)")
            return True
    return False


class _LockFile:
    """``<database>.lock``, held shared by every read and write of this process's
    connection and exclusive while a corrupt database is moved aside ([Note: A corrupt
    database]). Opened per process (a fork's child opens its own)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self._pid = -1

    @contextmanager
    def held(self, *, fcntl_shared: bool) -> Iterator[None]:
        if fcntl is None:
            yield
            return
        if self._fd < 0 or self._pid != os.getpid():
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                               | getattr(os, "O_CLOEXEC", 0), 0o600)
            self._pid = os.getpid()
        fcntl.flock(self._fd, fcntl.LOCK_SH if fcntl_shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd >= 0 and self._pid == os.getpid():
            os.close(self._fd)
        self._fd = -1


class TierError(Exception):
    """A tier could not read or write (the message says which and why)."""


class Row(NamedTuple):
    """One stored entry as a tier lists it."""

    key: str
    entry: str
    name: str
    size: int
    created: float
    used: float


class SqliteTier:
    """The local tier ([Note: The local tier], [Note: A corrupt database])."""

    name = "sqlite"

    def __init__(self, path: Path, *, max_bytes: int) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._conn: Optional[sqlite3.Connection] = None
        self._ident: Optional[tuple[int, int]] = None  # (st_dev, st_ino) of what _conn reads
        self._pid = -1
        self._finalizer: Optional[weakref.finalize] = None
        self._lockfile = _LockFile(self.path.with_name(self.path.name + ".lock"))

    def __repr__(self) -> str:
        return f"<SqliteTier {self.path}>"

    def open(self) -> None:
        """Open the database now (it is opened on first use otherwise); ``TierError`` when it
        cannot be (the reason, and a corrupt database repaired first)."""
        self._run("cannot open", lambda db: None)

    def connection(self) -> sqlite3.Connection:
        """This process's connection (opened, and the schema made, on first use)."""
        with self._lock:
            with self._lockfile.held(fcntl_shared=True):
                return self._current()

    def _current(self) -> sqlite3.Connection:
        """The connection, opened again when the file at ``path`` is not the one it reads
        (moved aside by another process) or when this is a fork's child. Called holding the
        lock file shared, so nothing moves the file meanwhile."""
        pid = os.getpid()
        if self._conn is not None and self._pid == pid:
            if _ident(self.path) == self._ident:
                return self._conn
            self._drop()
            _said_elsewhere(self.path, self._met)
        elif self._conn is not None:  # opened by the parent of this fork
            _inherited.append(self._conn)
            self._conn, self._finalizer = None, None
        if os.path.islink(self.path):
            raise TierError(f"refusing {self.path}: it is a symbolic link (a link can point "
                            f"the store's writes at any file; remove it)")
        self._met = _ident(self.path)  # what this connection reads, before connecting
        conn = _connect(self.path)
        self._conn, self._pid, self._ident = conn, pid, _ident(self.path)
        self._met = self._ident
        self._finalizer = weakref.finalize(self, _close_in, pid, conn)
        return conn

    _met: Optional[tuple[int, int]] = None

    def _drop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # closes the connection if this process opened it
        self._conn, self._finalizer, self._ident = None, None, None

    def _run(self, what: str, op: Callable[[sqlite3.Connection], _T]) -> _T:
        """``op(connection)``; a database SQLite calls corrupt is moved aside and ``op`` run
        once more on a new one ([Note: A corrupt database]); any other error is a
        ``TierError``."""
        with self._lock:
            try:
                try:
                    with self._lockfile.held(fcntl_shared=True):
                        return op(self._current())
                except sqlite3.DatabaseError as e:
                    if not is_corrupt(e):
                        raise
                    self._repair(e)
                    with self._lockfile.held(fcntl_shared=True):
                        return op(self._current())
            except TierError:
                raise
            except (sqlite3.Error, OSError) as e:
                raise TierError(f"{what} in {self.path}: {e}") from e

    def _repair(self, error: sqlite3.DatabaseError) -> None:
        """The database this process read is corrupt: move it aside, unless another process
        did already; either way one warning says so."""
        met = self._met
        with self._lockfile.held(fcntl_shared=False):
            self._drop()
            if met is not None and _ident(self.path) == met:
                aside = _move_aside(self.path)
                notify(f"jitguard store: {self.path} is corrupt (SQLite: {error}); it was "
                       f"moved aside to {aside.name} and a new database started (its entries "
                       f"compile again)")
            elif not _said_elsewhere(self.path, met):
                notify(f"jitguard store: {self.path} was corrupt (SQLite: {error}); another "
                       f"process moved it aside and started a new one")
            self._met = None

    def get(self, key: str) -> list[tuple[str, bytes]]:
        """Every entry stored under ``key``: (entry id, value); marks them as just used."""

        def op(db: sqlite3.Connection) -> list[Any]:
            rows = db.execute(
                "SELECT entry, value FROM entries WHERE key = ?", (key,)
            ).fetchall()
            if rows:
                # Recency is best effort (a busy or full database still serves reads), and
                # kept to the minute: a read that finds the rows just used writes nothing.
                now = time.time()
                try:
                    db.execute("UPDATE entries SET used = ? WHERE key = ? AND used < ?",
                               (now, key, now - _TOUCH_EVERY))
                except sqlite3.Error:
                    pass
            return rows

        return [(str(e), bytes(v)) for e, v in self._run("cannot read", op)]

    def get_one(self, key: str, entry: str) -> Optional[bytes]:
        row = self._run("cannot read", lambda db: db.execute(
            "SELECT value FROM entries WHERE key = ? AND entry = ?", (key, entry)
        ).fetchone())
        return None if row is None else bytes(row[0])

    def put(self, key: str, entry: str, name: str, value: bytes) -> int:
        """Store one value (replacing the entry's old one); evict past ``max_bytes``.
        Returns how many entries were evicted."""
        now = time.time()

        def op(db: sqlite3.Connection) -> int:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (key, entry, name, value, len(value), now, now),
                )
                evicted = self._evict(db, key, entry)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # SQLITE_FULL, say, has rolled back already
                    db.execute("ROLLBACK")
                raise
            return evicted

        return self._run("cannot write", op)

    def _evict(self, db: sqlite3.Connection, key: str, entry: str) -> int:
        (total,) = db.execute("SELECT COALESCE(SUM(size), 0) FROM entries").fetchone()
        evicted = 0
        while total > self.max_bytes:
            victims = db.execute(
                "SELECT key, entry, size FROM entries WHERE NOT (key = ? AND entry = ?) "
                "ORDER BY used LIMIT 64", (key, entry),
            ).fetchall()
            if not victims:
                break
            for k, e, size in victims:
                db.execute("DELETE FROM entries WHERE key = ? AND entry = ?", (k, e))
                total -= size
                evicted += 1
                if total <= self.max_bytes:
                    break
        return evicted

    def rows(self, name: Optional[str] = None) -> list[Row]:
        """Every stored entry (of the function ``name``, when given), most recent first."""
        query = "SELECT key, entry, name, size, created, used FROM entries"
        args: tuple[Any, ...] = ()
        if name is not None:
            query += " WHERE name = ?"
            args = (name,)
        found = self._run("cannot list", lambda db: db.execute(
            query + " ORDER BY used DESC", args).fetchall())
        return [Row(*r) for r in found]

    def delete(self, key: Optional[str] = None, entry: Optional[str] = None) -> int:
        """Delete one entry, a key's entries, or (no key) every entry; returns how many."""

        def op(db: sqlite3.Connection) -> int:
            if key is None:
                cur = db.execute("DELETE FROM entries")
            elif entry is None:
                cur = db.execute("DELETE FROM entries WHERE key = ?", (key,))
            else:
                cur = db.execute("DELETE FROM entries WHERE key = ? AND entry = ?", (key, entry))
            return int(cur.rowcount)

        return self._run("cannot delete", op)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid != os.getpid():
                _inherited.append(self._conn)
            self._drop()
            self._lockfile.close()
