"""The local tier: real SQLite, WAL, LRU eviction, a full disk."""

from __future__ import annotations

import sqlite3
import time
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
    mode = sqlite3.connect(tmp_path / "s.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


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
