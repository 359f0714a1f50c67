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
