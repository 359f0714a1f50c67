"""Least-recently-used order of a cache's entries, for ``specialize(..., maxsize=N)``.

May import: dispatch.entry.

# [Note: maxsize]
# ``specialize(fn, maxsize=N)`` keeps at most N entries: when a compile makes one more, the
# least recently used entry is evicted, as ``functools.lru_cache(maxsize=N)`` does ("used":
# made, or hit). Each hit of such a function stamps the slot it hit with a tick of the
# function's clock (``slot.last``: one more attribute store on the hit path, only where
# ``maxsize`` is set); a hit on the careful path or a new entry stamps the entry
# (``entry.last``). ``Lru`` keeps the entries in a heap by the stamp they had when pushed;
# the victim is found by popping: an entry whose stamp moved since is pushed back with its
# new stamp, a dropped one is discarded. Each push back pays for at least one hit, so an
# eviction costs O(log entries), amortized. The evicted entry's slots are killed before it
# leaves the index (a racing call goes to the careful path, never to it), it is counted
# (``stats().evictions``) and logged at DEBUG on ``jitguard.recompiles``, and its
# generated code and its ``linecache`` text are let go. Evictions count towards
# ``recompile_limit`` like any compile: with ``maxsize`` set the limit defaults to None
# (no limit), so that, as with lru_cache, the cache keeps compiling and evicting.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Optional

from .entry import CacheEntry

__all__ = ["Lru"]


class Lru:
    """The use order of a function's entries (see [Note: maxsize])."""

    __slots__ = ("_heap", "tick")

    def __init__(self) -> None:
        self.tick: Callable[[], int] = itertools.count(1).__next__
        self._heap: list[tuple[int, int, CacheEntry]] = []

    def add(self, entry: CacheEntry) -> None:
        """A new entry: used now."""
        entry.last = self.tick()
        heapq.heappush(self._heap, (entry.last, entry.seq, entry))

    def touch(self, entry: CacheEntry) -> None:
        """A hit on the careful path."""
        entry.last = self.tick()

    def victim(self, live: Callable[[CacheEntry], bool]) -> Optional[CacheEntry]:
        """The least recently used entry for which ``live`` holds, taken out of the order."""
        heap = self._heap
        while heap:
            stamp, seq, entry = heap[0]
            if not live(entry):
                heapq.heappop(heap)
                continue
            now = entry.recency()
            if now != stamp:
                heapq.heapreplace(heap, (now, seq, entry))
                continue
            heapq.heappop(heap)
            return entry
        return None

    def clear(self) -> None:
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._heap)
