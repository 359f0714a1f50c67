"""Tests for jitguard._src.cache.stats: counters and their sums."""

from __future__ import annotations

import gc
import threading

from jitguard import CacheStats, cache_counters, specialize
from jitguard._src.cache.stats import Counters


def test_counters_count_and_reset() -> None:
    """bump/add/get count events; reset starts over."""
    c = Counters()
    c.bump("misses")
    c.add("misses", 3)
    assert c.get("misses") == 4 and c.get("compiles") == 0
    c.reset()
    assert c.get("misses") == 0


def test_counters_lose_nothing_across_threads() -> None:
    """Bumps from many threads at once are all counted."""
    c = Counters()

    def work() -> None:
        for _ in range(2000):
            c.bump("fallbacks")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.get("fallbacks") == 16000


def test_stats_add_fieldwise() -> None:
    """CacheStats sum field by field."""
    a = CacheStats(hits=1, misses=2, entries=1)
    b = CacheStats(hits=3, compiles=1)
    assert a + b == CacheStats(hits=4, misses=2, compiles=1, entries=1)


def test_cache_counters_sum_live_functions() -> None:
    """cache_counters() includes every live specialized function."""
    # Functions of earlier tests held only by reference cycles would die, and leave the sum,
    # between the two readings: collect them first.
    gc.collect()
    before = cache_counters()
    f = specialize(lambda x: x)
    g = specialize(lambda x: x)
    f(1), f(1), g(2)
    after = cache_counters()
    assert after.hits - before.hits == 1
    assert after.misses - before.misses == 2
    assert after.compiles - before.compiles == 2


def test_reading_counters_warns_nothing() -> None:
    """Counters are read without any deprecated API (no DeprecationWarning on 3.12+)."""
    import warnings

    f = specialize(lambda n: n)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(1), f(1), f(2)
        s = f.cache.stats()
        total = cache_counters()
    assert (s.hits, s.misses, s.compiles) == (1, 2, 2) and total.misses >= 2
