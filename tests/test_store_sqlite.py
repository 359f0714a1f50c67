"""The local tier: real SQLite, WAL, LRU eviction, a full disk."""

from __future__ import annotations

import gc
import os
import sqlite3
import time
import warnings
from contextlib import closing
from pathlib import Path

import pytest

from jitguard._src.store.sqlite import SqliteTier, TierError


def test_put_get_replace_delete(tmp_path: Path) -> None:
    """Values are stored per (key, entry); a put replaces; delete by entry, key or all."""
    tier = SqliteTier(tmp_path / "s.db", max_bytes=1 << 20)
    tier.put("k1", "a", "m:f", b"one")
    tier.put("k1", "b", "m:f", b"two")
    tier.put("k2", "a", "m:g", b"three")
    assert sorted(tier.get("k1")) == [("a", b"one"), ("b", b"two")]
    tier.put("k1", "a", "m:f", b"ONE")
    assert dict(tier.get("k1"))["a"] == b"ONE"
    assert tier.get("nope") == []
    assert tier.get_one("k2", "a") == b"three"
    assert {r.name for r in tier.rows()} == {"m:f", "m:g"}
    assert [r.entry for r in tier.rows("m:g")] == ["a"]
    assert tier.delete("k1", "a") == 1
    assert tier.delete("k1") == 1
    assert tier.delete() == 1
    assert tier.rows() == []


def test_wal_mode(tmp_path: Path) -> None:
    """The database is in WAL mode (readers never wait for a writer)."""
    tier = SqliteTier(tmp_path / "s.db", max_bytes=1 << 20)
    tier.put("k", "e", "m:f", b"v")
    with closing(sqlite3.connect(tmp_path / "s.db")) as db:
        (mode,) = db.execute("PRAGMA journal_mode").fetchone()
    assert mode == "wal"


def test_a_dropped_tier_closes_its_connection(tmp_path: Path) -> None:
    """A tier dropped without close() closes its connection when collected (no ResourceWarning
    on Python 3.13, no open file left), and close() twice is fine."""
    tier = SqliteTier(tmp_path / "s.db", max_bytes=1 << 20)
    tier.put("k", "e", "m:f", b"v")
    conn = tier.connection()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        del tier
        gc.collect()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        conn.execute("SELECT 1")
    again = SqliteTier(tmp_path / "s.db", max_bytes=1 << 20)
    assert again.get("k") == [("e", b"v")]
    again.close()
    again.close()
    assert again.get("k") == [("e", b"v")]  # reopened on use
    again.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_opens_its_own_connection(tmp_path: Path) -> None:
    """After a fork the child writes through a connection of its own and leaves the parent's
    alone, even when it closes the tier or drops it: the parent's connection still works."""
    tier = SqliteTier(tmp_path / "s.db", max_bytes=1 << 20)
    tier.put("k", "parent", "m:f", b"p")
    parent_conn = tier.connection()
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if everything held
        code = 1
        try:
            tier.put("k", "child", "m:f", b"c")
            code = 0 if tier.connection() is not parent_conn else 2
            tier.close()
            parent_conn.execute("SELECT 1")  # still open in the child: never closed here
        except BaseException:
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert tier.connection() is parent_conn
    assert sorted(tier.get("k")) == [("child", b"c"), ("parent", b"p")]
    tier.close()


def test_lru_eviction_keeps_the_recently_read(tmp_path: Path) -> None:
    """Past max_bytes the least recently used entries go; a read counts as a use."""
    tier = SqliteTier(tmp_path / "s.db", max_bytes=350)
    for i in range(3):
        tier.put(f"k{i}", "e", "m:f", bytes(100))
        time.sleep(0.01)
    # all long unused (k0 the longest), then k0 is read
    tier.connection().execute("UPDATE entries SET used = CAST(substr(key, 2) AS REAL)")
    tier.get("k0")
    time.sleep(0.01)
    evicted = tier.put("k3", "e", "m:f", bytes(100))
    assert evicted == 1
    assert sorted(r.key for r in tier.rows()) == ["k0", "k2", "k3"]


def test_an_entry_larger_than_the_limit_is_kept_alone(tmp_path: Path) -> None:
    """A value larger than max_bytes evicts everything else, not itself."""
    tier = SqliteTier(tmp_path / "s.db", max_bytes=50)
    tier.put("a", "e", "m:f", bytes(10))
    tier.put("b", "e", "m:f", bytes(100))
    assert [r.key for r in tier.rows()] == ["b"]


def test_full_disk_is_a_tier_error(tmp_path: Path) -> None:
    """A database that cannot grow (max_page_count) raises TierError naming the file, and
    keeps what it had."""
    tier = SqliteTier(tmp_path / "s.db", max_bytes=1 << 30)
    tier.put("k", "small", "m:f", b"v")
    conn = tier.connection()
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(TierError, match=r"cannot write in .*s\.db: database or disk is full"):
        tier.put("k", "big", "m:f", bytes(1 << 20))
    assert tier.get("k") == [("small", b"v")]


def test_an_unusable_path_is_a_tier_error(tmp_path: Path) -> None:
    """A database path under a regular file cannot be opened: TierError, not a crash."""
    (tmp_path / "file").write_text("x")
    tier = SqliteTier(tmp_path / "file" / "s.db", max_bytes=1 << 20)
    with pytest.raises(TierError):
        tier.get("k")


def test_opening_a_new_database_another_connection_writes_waits_for_it(tmp_path: Path) -> None:
    """A new database that another connection holds a write lock on while this one opens it
    (SQLite answers that set-up busy at once, past its busy timeout): the tier opens it once
    the lock goes, instead of failing with 'database is locked'."""
    import threading

    path = tmp_path / "store.sqlite3"
    other = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    released = threading.Event()

    def release() -> None:
        other.execute("ROLLBACK")
        released.set()

    timer = threading.Timer(0.3, release)
    timer.start()
    tier = SqliteTier(path, max_bytes=1 << 20)
    try:
        start = time.monotonic()
        tier.open()
        assert released.is_set() and time.monotonic() - start >= 0.25
        tier.put("k", "e", "f", b"v")
        assert tier.get("k") == [("e", b"v")]
    finally:
        timer.join()
        tier.close()
        other.close()


def test_a_set_up_busy_past_the_timeout_is_a_tier_error(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A new database whose write lock is never released: opening gives up after the busy
    timeout (shortened here) with a TierError that says the database is locked."""
    from jitguard._src.store import sqlite as tier_module

    monkeypatch.setattr(tier_module, "_BUSY_SECONDS", 0.2)
    path = tmp_path / "store.sqlite3"
    with closing(sqlite3.connect(str(path), isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")
        tier = SqliteTier(path, max_bytes=1 << 20)
        start = time.monotonic()
        with pytest.raises(TierError, match=r"cannot open in .*database is locked"):
            tier.open()
        assert 0.15 <= time.monotonic() - start < 5
        other.execute("ROLLBACK")
        tier.close()


def test_is_busy_knows_sqlites_locked_errors() -> None:
    """is_busy: 'database is locked' from SQLite is busy; a corrupt database or a syntax
    error is not."""
    from jitguard._src.store.sqlite import is_busy

    assert is_busy(sqlite3.OperationalError("database is locked"))
    with closing(sqlite3.connect(":memory:")) as db:
        with pytest.raises(sqlite3.OperationalError) as syntax:
            db.execute("SELEC 1")
    assert not is_busy(syntax.value)
    assert not is_busy(sqlite3.DatabaseError("file is not a database"))
