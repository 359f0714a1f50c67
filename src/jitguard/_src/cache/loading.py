"""Joining stored entries to a ``FunctionCache`` on a miss: each entry ``cache.persist``
re-binds gets the front check a compiled entry gets, then joins the cache.

May import: compiler.snapshot, compiler.check, dispatch.entry, cache.job (``pins_taker``),
cache.persist.

# [Note: Loading without collections]
# Reading a stored entry makes many short-lived objects (the parsed header, the records,
# the generator's texts and tables) next to the few that stay (the check, the artifact).
# With the collector on, the young collections that so many allocations set off find the
# short-lived ones still alive and promote them, and the promotions count toward the next
# full collection, which walks the whole heap: in a process that imported torch and
# transformers, one ~0.24 s collection inside a warm Qwen3 load (of ~0.8 s), none once the
# load runs with the collector paused. So ``load_stored`` pauses it while it re-binds a
# tier's entries, gives them their front checks and joins them to the cache (not while
# the call runs), and restores it after (nested and concurrent loads share one pause:
# the last to end restores it, and only if it was on): what was short-lived is freed by
# then and never promoted. Cycles made meanwhile are collected later, as usual.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator
from typing import Any, Optional

from ..compiler import snapshot
from ..dispatch.entry import CacheEntry
from .job import pins_taker
from .persist import Persistence, unbindable

__all__ = ["load_stored"]


def load_stored(persist: Persistence, misses: Any, values: tuple[Any, ...]) -> Optional[CacheEntry]:
    """Under the cache's lock, on a miss: read ``persist``'s tiers in turn until an entry
    accepts ``values`` ([Note: Persistent entries] 3, 4); each loaded entry joins the cache
    with a compile id of this process (``misses``, a ``cache.miss.MissPath``:
    ``new_compile_id``, ``join``, ``evict_over``, ``lookup``)."""
    joined: list[CacheEntry] = []
    while persist.pending:
        with _collector_paused():  # [Note: Loading without collections]
            loaded = persist.load_next()
            for item in loaded:
                # the front check a compiled entry gets, taken on this call where the entry
                # accepts it ([Note: Skipping structure guards by version tags]); with it,
                # the full check's code is generated only if it ever runs, else now ([Note:
                # Deferred check code])
                if not snapshot.install(
                        item.check, values,
                        then=pins_taker(persist.compiler, item.artifact, values)):
                    try:
                        item.check.build()
                    except Exception as e:  # a malformed guard: never raised
                        persist.reject(item, unbindable(e))
                        continue
                entry = misses.join(misses.new_compile_id(), item.artifact, item.check,
                                    item.dynamic)
                persist.loaded(item, entry)
                joined.append(entry)
            if loaded:
                misses.evict_over()
        if loaded:
            entry = misses.lookup(values)
            if entry is not None:
                return entry
    persist.missed(joined, values)
    return None


_gc_lock = threading.Lock()
_gc_pauses = [0, False]  # loads under way, whether the collector was on at the first


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The garbage collector off while this (and any concurrent) load runs, then as it
    was ([Note: Loading without collections])."""
    with _gc_lock:
        if _gc_pauses[0] == 0:
            _gc_pauses[1] = gc.isenabled()
            gc.disable()
        _gc_pauses[0] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses[0] -= 1
            if _gc_pauses[0] == 0 and _gc_pauses[1]:
                gc.enable()


