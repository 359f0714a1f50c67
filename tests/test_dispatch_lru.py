"""Tests for jitguard._src.dispatch.lru: specialize(maxsize=N) keeps at most N entries and
evicts the least recently used one, like functools.lru_cache."""

from __future__ import annotations

import gc
import linecache
import logging
import tracemalloc
import weakref
from typing import Any

import pytest

from jitguard import cache_of, specialize
from jitguard._src.dispatch.lru import Lru

# Every test here runs with the C hot path and in pure Python ([Note: The C hot path]).
pytestmark = pytest.mark.usefixtures("dispatch_mode")


def served(f: Any) -> set[int]:
    """The int values the function's entries are specialized on."""
    out = set()
    for entry in cache_of(f).entries():
        (line,) = [c for c in entry.code if "==" in c]
        out.add(int(line.rsplit("==", 1)[1]))
    return out


def test_maxsize_evicts_the_least_recently_used() -> None:
    """a, b, b, a, c with maxsize=2: b was used longest ago, so b goes (as lru_cache)."""
    f = specialize(lambda n: n, maxsize=2, automatic_dynamic=False)
    for v in (1, 2, 2, 1, 3):
        assert f(v) == v
    assert served(f) == {1, 3}
    s = cache_of(f).stats()
    assert (s.entries, s.evictions, s.compiles, s.hits) == (2, 1, 3, 2)


def test_a_fresh_entry_counts_as_used() -> None:
    """An entry just made is the most recently used: the older one is evicted."""
    f = specialize(lambda n: n, maxsize=1, automatic_dynamic=False)
    f(1), f(2)
    assert served(f) == {2}
    assert f(1) == 1 and served(f) == {1}
    assert cache_of(f).stats().evictions == 2


def test_evicted_entries_are_never_hit() -> None:
    """A call of an evicted value misses (and compiles again): it is not served by the entry."""
    f = specialize(lambda n: n, maxsize=3, automatic_dynamic=False)
    for v in range(6):
        f(v)
    before = cache_of(f).stats()
    assert served(f) == {3, 4, 5}
    assert f(0) == 0
    after = cache_of(f).stats()
    assert after.misses == before.misses + 1 and after.hits == before.hits
    assert after.compiles == before.compiles + 1


def test_eviction_is_counted_and_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    """Each eviction is counted and logged at DEBUG on jitguard.recompiles."""
    f = specialize(lambda n: n, maxsize=1, automatic_dynamic=False)
    with caplog.at_level(logging.DEBUG, logger="jitguard.recompiles"):
        f(1), f(2)
    (record,) = [r for r in caplog.records if "evicted entry" in r.getMessage()]
    assert record.levelno == logging.DEBUG
    assert "least recently used, maxsize=1" in record.getMessage()


def test_evicted_entry_code_and_linecache_text_are_released() -> None:
    """After eviction the entry's check function is freed and its source leaves linecache."""
    f = specialize(lambda n: n, maxsize=1, automatic_dynamic=False)
    f(1)
    (entry,) = cache_of(f).entries()
    filenames = entry.check.filenames
    assert all(name in linecache.cache for name in filenames)
    check_ref = weakref.ref(entry.check)
    entry_ref = weakref.ref(entry)
    del entry
    f(2)
    gc.collect()
    assert entry_ref() is None and check_ref() is None
    assert not any(name in linecache.cache for name in filenames)


def test_maxsize_defaults_the_limit_to_none_and_validates() -> None:
    """With maxsize the cache keeps compiling (no recompile limit unless one is given)."""
    f = specialize(lambda n: n, maxsize=4, automatic_dynamic=False)
    for v in range(50):
        f(v)
    assert cache_of(f).recompile_limit is None
    assert cache_of(f).stats().compiles == 50 and cache_of(f).stats().fallbacks == 0
    assert specialize(lambda n: n).cache.recompile_limit == 8
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="maxsize must be None or an int >= 1"):
            specialize(lambda n: n, maxsize=bad)
    with pytest.raises(ValueError, match="recompile_limit must be None or an int >= 1"):
        specialize(lambda n: n, recompile_limit=0)


def test_unbounded_cache_with_no_limit() -> None:
    """maxsize=None with recompile_limit=None keeps every entry."""
    f = specialize(lambda n: n, recompile_limit=None, automatic_dynamic=False)
    for v in range(100):
        f(v)
    s = cache_of(f).stats()
    assert (s.entries, s.evictions, s.fallbacks) == (100, 0, 0)


def test_5000_entries_with_maxsize_100_stay_bounded() -> None:
    """5,000 entries through maxsize=100: at most 100 stay, memory stays flat after the
    first 100, and no evicted value is served by an entry."""
    f = specialize(lambda n: n, maxsize=100, automatic_dynamic=False)
    gc.collect()
    tracemalloc.start()
    try:
        marks = {}
        for v in range(5000):
            assert f(v) == v
            assert len(cache_of(f).entries()) <= 100
            if v + 1 in (200, 5000):
                gc.collect()
                marks[v + 1] = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert served(f) == set(range(4900, 5000))
    # Flat: 4,800 more compiles after 200 cost less than a tenth of 100 entries' worth.
    assert marks[5000] - marks[200] < 100 * 8 * 1024 / 10, marks
    before = cache_of(f).stats()
    assert f(0) == 0 and f(4999) == 4999
    after = cache_of(f).stats()
    assert after.misses == before.misses + 1 and after.hits == before.hits + 1
    assert before.evictions == 4900 and before.entries == 100


def test_hits_of_a_bounded_cache_update_recency() -> None:
    """The fast path stamps the slot it hits: the hit entry survives the next eviction."""
    f = specialize(lambda n, m: n + m, maxsize=2, automatic_dynamic=False)
    f(1, 1), f(2, 2)
    for _ in range(3):
        f(1, 1)  # hits
    f(3, 3)
    entries = cache_of(f).entries()
    assert len(entries) == 2 and cache_of(f).lookup(1, 1) is not None
    assert cache_of(f).lookup(2, 2) is None
    assert "last = " in cache_of(f).dispatcher.source


def test_lru_order_pushes_back_used_entries() -> None:
    """Lru.victim skips entries used since they were pushed, and dead ones."""

    class E:
        def __init__(self, seq: int) -> None:
            self.seq, self.last = seq, 0

        def recency(self) -> int:
            return self.last

    lru = Lru()
    a, b, c = E(0), E(1), E(2)
    for e in (a, b, c):
        lru.add(e)  # type: ignore[arg-type]
    a.last = lru.tick()
    assert lru.victim(lambda e: e is not b) is c
    assert lru.victim(lambda e: True) is a
    assert lru.victim(lambda e: True) is None and len(lru) == 0
