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
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, Optional

__all__ = ["DB_NAME", "Row", "SqliteTier", "TierError"]

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
    """The local tier ([Note: The local tier])."""

    name = "sqlite"

    def __init__(self, path: Path, *, max_bytes: int) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._conn: Optional[sqlite3.Connection] = None
        self._pid = -1
        self._finalizer: Optional[weakref.finalize] = None

    def __repr__(self) -> str:
        return f"<SqliteTier {self.path}>"

    def connection(self) -> sqlite3.Connection:
        """This process's connection (opened, and the schema made, on first use)."""
        if self._conn is None or self._pid != os.getpid():
            if self._conn is not None:  # opened by the parent of this fork
                _inherited.append(self._conn)
                self._conn = None
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            conn = sqlite3.connect(
                str(self.path), timeout=10.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA busy_timeout=10000")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            self._conn, self._pid = conn, os.getpid()
            self._finalizer = weakref.finalize(self, _close_in, self._pid, conn)
        return self._conn

    @contextmanager
    def _db(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self.connection()
            except (sqlite3.Error, OSError) as e:
                raise TierError(f"{what} in {self.path}: {e}") from e

    def get(self, key: str) -> list[tuple[str, bytes]]:
        """Every entry stored under ``key``: (entry id, value); marks them as just used."""
        with self._db("cannot read") as db:
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
        return [(str(e), bytes(v)) for e, v in rows]

    def get_one(self, key: str, entry: str) -> Optional[bytes]:
        with self._db("cannot read") as db:
            row = db.execute(
                "SELECT value FROM entries WHERE key = ? AND entry = ?", (key, entry)
            ).fetchone()
        return None if row is None else bytes(row[0])

    def put(self, key: str, entry: str, name: str, value: bytes) -> int:
        """Store one value (replacing the entry's old one); evict past ``max_bytes``.
        Returns how many entries were evicted."""
        now = time.time()
        with self._db("cannot write") as db:
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
        with self._db("cannot list") as db:
            found = db.execute(query + " ORDER BY used DESC", args).fetchall()
        return [Row(*r) for r in found]

    def delete(self, key: Optional[str] = None, entry: Optional[str] = None) -> int:
        """Delete one entry, a key's entries, or (no key) every entry; returns how many."""
        with self._db("cannot delete") as db:
            if key is None:
                cur = db.execute("DELETE FROM entries")
            elif entry is None:
                cur = db.execute("DELETE FROM entries WHERE key = ?", (key,))
            else:
                cur = db.execute("DELETE FROM entries WHERE key = ? AND entry = ?", (key, entry))
            return int(cur.rowcount)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid != os.getpid():
                _inherited.append(self._conn)
            if self._finalizer is not None:
                self._finalizer()  # closes the connection if this process opened it
                self._finalizer = None
            self._conn = None
