"""The entries of one function and the snapshot its dispatcher serves (``EntryTable``): an
entry joins, is evicted past ``maxsize``, or is dropped once dead, and each change is
published to the generated dispatcher.

May import: dispatch.entry, dispatch.dispatcher, dispatch.lru, dispatch.snapshot.

The table knows nothing of compiling: the miss path (``cache``) makes an entry's check and
artifact and hands them to ``join``. Every removal moves the entry's hits into the
counters' ``dropped_hits`` under their lock, together with taking it out of the entries
([Note: Counters under threads]); the caller logs what ``evict_over`` and ``drop_dead``
return.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any, Optional, Protocol

from .dispatcher import Dispatcher, Layout, compute_layout
from .entry import CacheEntry
from .lru import Lru
from .snapshot import RESCAN_BELOW, Snapshot, build_snapshot, choose_dims

__all__ = ["EntryTable", "Tally"]


class Tally(Protocol):
    """The counts a table moves entries' hits into (``cache.stats.Counters``)."""

    lock: threading.RLock

    def bump(self, name: str) -> None: ...

    def add(self, name: str, n: int) -> None: ...


class EntryTable:
    """The live entries of one function, oldest first, and the snapshot published for them.

    ``redirect`` is what a dead entry's slots call instead of its artifact (the careful
    path); ``history`` the recompile records an entry keeps a reference to."""

    def __init__(self, dispatcher: Dispatcher, params: tuple[str, ...], counters: Tally, *,
                 lru: Optional[Lru], redirect: Callable[..., Any], history: Any) -> None:
        self.dispatcher = dispatcher
        self.params = params
        self.counters = counters
        self.lru = lru
        self.redirect = redirect
        self.history = history
        self.snapshot: Snapshot = build_snapshot((), dispatcher.keycode(Layout((), (), False)))
        dispatcher.install(self.snapshot.keycode, self.snapshot.index)
        self.reset()

    def reset(self) -> None:
        """Forget every entry (the published snapshot is replaced by ``publish``)."""
        self.entries: dict[int, CacheEntry] = {}  # by seq, oldest first
        self._seq = itertools.count()
        self.dirty = False  # an entry died: drop_dead on the next miss
        if self.lru is not None:
            self.lru.clear()

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[CacheEntry]:
        return iter(self.entries.values())

    def touch(self, entry: CacheEntry) -> None:
        """``entry`` served a call off the fast path: it is the most recently used."""
        if self.lru is not None:
            self.lru.touch(entry)

    def join(self, compile_id: Any, artifact: Callable[..., Any], check: Any,
             dynamic: frozenset[Any]) -> CacheEntry:
        """A new entry (compiled or loaded) joins the table and is published."""
        entry = CacheEntry(
            compile_id=compile_id, artifact=artifact, check=check, params=self.params,
            dynamic=dynamic, seq=next(self._seq), on_invalid=self._invalid,
            redirect=self.redirect, history=self.history,
        )
        with self.counters.lock:  # stats() lists the entries under it
            self.entries[entry.seq] = entry
        if self.lru is not None:
            self.lru.add(entry)
        snapshot = self.snapshot
        size = len(snapshot) + 1
        # Up to RESCAN_BELOW entries the dims are chosen again at each doubling (1, 2, 4, 8,
        # 16 entries), above it they stay while new entries have them ([Note: Dispatch by
        # facts]); in between, an entry that fits is added in place ([Note: Updating a
        # snapshot in place]).
        rescan = size <= RESCAN_BELOW and size & (size - 1) == 0
        if rescan or not snapshot.insert(entry):
            self.publish([entry])
        return entry

    def evict_over(self, maxsize: int) -> list[CacheEntry]:
        """Evict least recently used entries until at most ``maxsize`` are live; the evicted
        ([Note: maxsize])."""
        assert self.lru is not None
        evicted: list[CacheEntry] = []
        while len(self.entries) > maxsize:
            victim = self.lru.victim(lambda e: self.entries.get(e.seq) is e)
            if victim is None:
                break
            with self.counters.lock:  # see [Note: Counters under threads]
                del self.entries[victim.seq]
                self.counters.add("dropped_hits", victim.hits)
            victim.evict(f"evicted: least recently used (maxsize={maxsize})")
            evicted.append(victim)
            self.counters.bump("evictions")
        if evicted:
            self._unpublish(evicted)
        return evicted

    def drop_dead(self) -> list[CacheEntry]:
        """Take out the entries that died (a guarded object collected, an invalidation);
        the dropped."""
        self.dirty = False
        dead = [e for e in self.entries.values() if not e.valid]
        for entry in dead:
            with self.counters.lock:  # see [Note: Counters under threads]
                del self.entries[entry.seq]
                self.counters.bump("invalidations")
                self.counters.add("dropped_hits", entry.hits)
        if dead:
            self._unpublish(dead)
        return dead

    def publish(self, new: list[CacheEntry]) -> None:
        """Build a snapshot of the live entries (dims chosen again, ``new`` among them) and
        install it in the dispatcher."""
        live = sorted((e for e in self.entries.values() if e.valid), key=lambda e: e.rank)
        dims = choose_dims(live, self.snapshot.dims, new)
        snapshot = build_snapshot(live, self.dispatcher.keycode(compute_layout(live, dims)))
        self.snapshot = snapshot
        self.dispatcher.install(snapshot.keycode, snapshot.index)

    def _unpublish(self, entries: list[CacheEntry]) -> None:
        """Take entries whose slots are dead out of the published snapshot."""
        snapshot = self.snapshot
        if [e for e in entries if not snapshot.discard(e)]:
            self.publish([])

    def _invalid(self, entry: CacheEntry) -> None:
        # From a weakref callback: no lock here (see [Note: Dispatch by facts]).
        self.dirty = True
