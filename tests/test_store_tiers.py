"""``Store``: both tiers together, read-through, faults as warnings, choosing a store, and
four processes writing at once (real SQLite, real Redis)."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from pathlib import Path

import pytest

import jitguard
from jitguard import Store, StoreWarning
from jitguard._src.store import tiers
from jitguard._src.store.codec import StoredRecord, decode_record
from jitguard._src.store.tiers import resolve_store

KEY = b"a test key for the store tiers"


def _record(key: str, entry: str, payload: bytes) -> StoredRecord:
    return StoredRecord(
        key=key, entry=entry, name="mod:f", env={"python": "x"}, identity={"code": "c"},
        guards={"schema_version": 1, "kind": "jitguard.guard_set", "guards": []},
        dynamic=[], artifact=payload, created=1.0,
    )


def test_save_and_fetch_local(store_dir: Path) -> None:
    """A saved record comes back from the local tier, signed and whole."""
    store = Store(store_dir, key=KEY)
    assert store.save(_record("k" * 32, "e1", b"payload")) == ["sqlite"]
    (got,) = store.fetch("k" * 32)
    assert got.entry == "e1" and got.tier == "sqlite"
    assert store.decode(got.value).artifact == b"payload"
    assert store.fetch("k" * 32, "redis") == []  # no shared tier
    stats = store.stats()
    assert stats["entries"] == 1 and stats["functions"] == 1 and "redis" not in stats
    assert store.find("k" * 8) == ("k" * 32, "e1")
    assert store.clear() == 1 and store.rows() == []


def test_read_through_copies_into_the_local_tier(
    tmp_path: Path, redis_prefix: tuple[str, str]
) -> None:
    """What one machine saved is read from Redis by another and copied to its local tier;
    a value Redis holds that fails its signature is not copied."""
    url, prefix = redis_prefix
    a = Store(tmp_path / "a", redis_url=url, redis_prefix=prefix, key=KEY)
    b = Store(tmp_path / "b", redis_url=url, redis_prefix=prefix, key=KEY)
    assert a.save(_record("k" * 32, "e1", b"one")) == ["sqlite", "redis"]
    assert b.fetch("k" * 32) == []
    (got,) = b.fetch("k" * 32, "redis")
    assert got.tier == "redis"
    assert [r.entry for r in b.rows()] == ["e1"]
    forger = Store(tmp_path / "c", redis_url=url, redis_prefix=prefix, key=b"x" * 32)
    forger.save(_record("f" * 32, "e2", b"evil"))
    assert len(b.fetch("f" * 32, "redis")) == 1  # fetched, but...
    assert [r.key for r in b.rows()] == ["k" * 32]  # ...never copied
    assert b.stats()["redis"]["entries"] == 2
    assert b.clear(shared=True) == 3


def test_full_disk_on_save_is_a_warning(store_dir: Path) -> None:
    """A local tier that cannot grow: save warns and returns no tier."""
    store = Store(store_dir, key=KEY)
    conn = store.local.connection()
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.warns(StoreWarning, match="database or disk is full"):
        assert store.save(_record("k" * 32, "e", bytes(1 << 20))) == []


def test_max_bytes_evicts(store_dir: Path) -> None:
    """The local tier keeps at most max_bytes (JITGUARD_CACHE_MAX_BYTES by default)."""
    store = Store(store_dir, key=KEY, max_bytes=3000)
    for i in range(10):
        store.save(_record("k" * 32, f"e{i}", bytes(1000)))
    assert sum(r.size for r in store.rows()) <= 3000
    assert "e9" in {r.entry for r in store.rows()}


def test_resolve_store(store_dir: Path, tmp_path: Path) -> None:
    """None follows JITGUARD_STORE; True/a directory give one shared Store per directory;
    False is off; a Store is itself."""
    env: dict[str, str] = {}
    assert resolve_store(None, env.get) == (None, False)
    env["JITGUARD_STORE"] = "off"
    assert resolve_store(None, env.get) == (None, False)
    env["JITGUARD_STORE"] = "1"
    store, explicit = resolve_store(None, env.get)
    assert store is not None and store.directory == store_dir and not explicit
    assert resolve_store(True)[0] is store
    assert resolve_store(False, env.get) == (None, True)
    env["JITGUARD_STORE"] = str(tmp_path / "d")
    other = resolve_store(None, env.get)[0]
    assert other is not None and other.directory == tmp_path / "d"
    assert resolve_store(str(tmp_path / "d"))[0] is other
    mine = Store(tmp_path / "mine")
    assert resolve_store(mine) == (mine, True)
    assert len(tiers._shared) == 2


def test_bad_max_bytes(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """max_bytes must be an int >= 1; a JITGUARD_CACHE_MAX_BYTES that is no size warns and
    the default is kept."""
    with pytest.raises(ValueError, match="max_bytes"):
        Store(store_dir, max_bytes=0)
    monkeypatch.setenv("JITGUARD_CACHE_MAX_BYTES", "lots")
    with pytest.warns(jitguard.EnvironmentVariableWarning,
                      match="JITGUARD_CACHE_MAX_BYTES='lots' is not a size"):
        store = Store(store_dir)
    assert store.local.max_bytes == tiers.DEFAULT_MAX_BYTES


# ---- four processes at once ---------------------------------------------------------------


def _payload(writer: int, i: int) -> bytes:
    seed = f"{writer}/{i}".encode()
    return hashlib.sha256(seed).digest() * (50 + i)  # 1.6 to 4.8 KB, distinct


def _writer(directory: str, url: str, prefix: str, writer: int,
            start: multiprocessing.synchronize.Event) -> None:
    store = Store(directory, redis_url=url, redis_prefix=prefix, key=KEY)
    start.wait(60)
    for i in range(100):
        key = f"{writer:032d}" if i % 2 else "s" * 32  # half under a key all share
        written = store.save(_record(key, f"w{writer}-{i}", _payload(writer, i)))
        assert written == ["sqlite", "redis"], written
    store.close()


def test_four_processes_lose_nothing_and_tear_nothing(
    store_dir: Path, redis_prefix: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four processes saving 100 entries each at once, half of them under one shared key:
    all 400 are in SQLite and in Redis, each verifying and holding its own bytes."""
    url, prefix = redis_prefix
    # concurrency is tested here, not a slow server: a loaded machine must not trip the
    # short default timeout (the spawned writers inherit the environment)
    monkeypatch.setenv("JITGUARD_REDIS_TIMEOUT", "10")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(store_dir), url, prefix, w, start))
             for w in range(4)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(240)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    store = Store(store_dir, redis_url=url, redis_prefix=prefix, key=KEY)
    for tier in ("sqlite", "redis"):
        seen = {}
        for key in ["s" * 32] + [f"{w:032d}" for w in range(4)]:
            for item in store.fetch(key, tier):
                record = decode_record(item.value, store.signer)
                seen[record.entry] = record.artifact
        assert len(seen) == 400, tier
        for w in range(4):
            for i in range(100):
                assert seen[f"w{w}-{i}"] == _payload(w, i)
    assert os.path.exists(store_dir / "store.sqlite3-wal")
