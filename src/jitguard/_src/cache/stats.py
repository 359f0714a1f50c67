"""The test events of the cache: what happened to a specialized function, as counts.

May import: nothing from jitguard (the standard library only).

Hits on the fast path are counted on the entry that served them (one slot-attribute add
under the GIL, see [Note: Dispatch by facts]); everything else is counted here, under a lock,
so no event is lost when threads race.

# [Note: Counters under threads]
# Every count but ``hits`` is exact under threads (each event is counted under the
# counters' lock). ``stats()`` reads under that lock too, and the cache moves a dropped
# entry's hits into ``dropped_hits`` under it (taking the entry out of the entries it
# sums in the same step), so a snapshot taken while other threads call never counts an
# entry's hits twice or not at all, and counts never go backwards between two snapshots.
# ``hits`` is approximate in one case only: a call that had already picked an entry when
# another thread evicted or invalidated it (the fast path takes no lock) may be counted
# as a hit and then as the miss it becomes, or its hit lost; so under threads with
# ``maxsize`` or dying identities, ``hits + misses`` may differ from the number of calls
# by the calls in flight at each eviction. Without evictions and invalidations the counts
# are exact once the calls have returned.
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
    Set by ``jitguard.torch.compile`` only (0 elsewhere): ``capture_failures`` (captures
    that were not one graph, the function then served by Dynamo's frame path),
    ``backend_failures`` (compiles whose backend raised or returned no callable),
    ``delegated`` (entries now held whose check hands some guards to torch's guard tree) and
    ``frame_path`` (entries now held whose calls Dynamo's frame path serves, torch's guards
    deciding).
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
    capture_failures: int = 0
    delegated: int = 0
    backend_failures: int = 0
    frame_path: int = 0

    def __add__(self, other: CacheStats) -> CacheStats:
        return CacheStats(
            *(getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(self))
        )


class Counters:
    """The mutable event counters of one function (all but the per-entry hits). Every event
    is counted under ``lock``: the events are misses and what follows them, never hits, so
    a lock (tens of ns) is nothing beside them, and no count is lost when threads race (an
    unlocked ``+=`` is a read, an add and a store). Reentrant: the cache holds it while it
    moves a dropped entry's hits and while ``stats()`` reads (see
    [Note: Counters under threads])."""

    __slots__ = ("_counts", "lock")

    NAMES = ("misses", "compiles", "restarts", "failures", "fallbacks", "invalidations",
             "dropped_hits", "evictions")

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.reset()

    def bump(self, name: str) -> None:
        """Count one event."""
        with self.lock:
            self._counts[name] += 1

    def add(self, name: str, n: int) -> None:
        """Count ``n`` events at once."""
        with self.lock:
            self._counts[name] += n

    def get(self, name: str) -> int:
        return self._counts[name]

    def reset(self) -> None:
        with self.lock:
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
