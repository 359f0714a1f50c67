"""The test events of the cache: what happened to a specialized function, as counts.

May import: nothing from jitguard (the standard library only).

Hits on the fast path are counted on the entry that served them (one slot-attribute add
under the GIL, see [Note: Dispatch by facts]); everything else is counted here, under a lock,
so no event is lost when threads race.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from typing import Any

__all__ = ["CacheStats", "Counters", "cache_counters", "track"]


@dataclasses.dataclass(frozen=True)
class CacheStats:
    """A snapshot of one specialized function's counters (or their sum, from
    ``cache_counters()``).

    ``hits``: calls served by an entry. ``misses``: calls no entry accepted (each one then
    compiled, fell back or raised). ``compiles``: entries made. ``recompiles``: compiles
    after the first. ``restarts``: compiler restarts (``RestartCompile``). ``failures``:
    compiles that raised. ``fallbacks``: calls that ran the original function uncompiled (past
    the recompile limit, or a call made from inside its own compile). ``invalidations``:
    entries dropped because an object they guarded by identity died. ``evictions``: entries
    evicted by ``maxsize`` (least recently used first). ``entries``: entries held now.
    """

    hits: int = 0
    misses: int = 0
    compiles: int = 0
    recompiles: int = 0
    restarts: int = 0
    failures: int = 0
    fallbacks: int = 0
    invalidations: int = 0
    entries: int = 0
    evictions: int = 0

    def __add__(self, other: CacheStats) -> CacheStats:
        return CacheStats(
            *(getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(self))
        )


class Counters:
    """The mutable event counters of one function (all but the per-entry hits). Every event
    is counted under a lock of its own: the events are misses and what follows them, never
    hits, so a lock (tens of ns) is nothing beside them, and no count is lost when threads
    race (an unlocked ``+=`` is a read, an add and a store)."""

    __slots__ = ("_counts", "_lock")

    NAMES = ("misses", "compiles", "restarts", "failures", "fallbacks", "invalidations",
             "dropped_hits", "evictions")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def bump(self, name: str) -> None:
        """Count one event."""
        with self._lock:
            self._counts[name] += 1

    def add(self, name: str, n: int) -> None:
        """Count ``n`` events at once."""
        with self._lock:
            self._counts[name] += n

    def get(self, name: str) -> int:
        return self._counts[name]

    def reset(self) -> None:
        self._counts = dict.fromkeys(self.NAMES, 0)


_live: weakref.WeakSet[Any] = weakref.WeakSet()


def track(cache: Any) -> None:
    """Make ``cache`` (anything with ``stats() -> CacheStats``) part of ``cache_counters()``."""
    _live.add(cache)


def cache_counters() -> CacheStats:
    """The counters of every live specialized function, summed."""
    total = CacheStats()
    for cache in list(_live):
        total = total + cache.stats()
    return total
