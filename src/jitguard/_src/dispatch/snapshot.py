"""Choosing an entry for a call: which facts to index by, and immutable snapshots of the
entries with their fact index.

May import: dispatch.entry, dispatch.dispatcher.

# [Note: Dispatch by facts]
# The answer is defined by the careful linear walk (``linear_lookup``): entries in rank
# order ([Note: Specificity]), the first whose full check holds. The index computes the same
# answer without walking:
#   * dims: a few (parameter, fact) pairs ([Note: Facts of an entry]), chosen greedily so
#     that as many entries as possible are the first candidate of some key, and as many of
#     those as possible need no residual check (``choose_dims``; with more than
#     ``RESCAN_BELOW`` entries the dims stay while every new entry has them all);
#   * an entry that has every dim is *keyed* under its facts ([Note: Key layout]); the
#     others are *linear*. A call's key is computed by generated code from its parameter
#     values; keyed entries under other keys pin a different fact, so their checks fail;
#     the candidates are the entries under the call's key merged with the linear ones, in
#     rank order. When the call has no key (computing it raises, ``len`` of an int, or a
#     hoisted type test fails) no keyed entry can hold (each pins a fact the value does not
#     have) and the candidates are the linear entries;
#   * the first candidate of every key is published as a ``Slot`` together with its
#     *residual*: its check minus the leaves the key match proves (None when nothing is
#     left: a hit is then one dict lookup). The key ``LINEAR`` maps to the first linear
#     entry.
# The generated dispatcher, with ``fn``'s own signature, computes the key, looks up the
# slot, runs the residual, counts the hit and calls the artifact; when that residual fails
# it runs the residuals of the key's other candidates (its *followers*, in rank order) the
# same way. Anything else (every candidate failed, no slot) goes to the miss path, which
# walks all the candidates of the key with full checks (``Snapshot.lookup``) before it
# compiles. So the fast path is the same walk as the careful one, cut short by what the
# key proves, and the miss path is the careful walk. The tests
# compare all three on random entries and calls (tests/test_dispatch_snapshot.py).
#
# Threads: a snapshot is never changed once published. Publishing swaps one global in the
# dispatcher's namespace (and, when the layout changes, the dispatcher's ``__code__``; the
# index of the old layout is replaced by one that always misses), so a lookup needs no
# lock; a call racing with a publication sees the old snapshot or the new one, and every
# slot's residual matches its own key. An entry that dies kills its slots from the weakref
# callback (residual ``never``, artifact a redirect to the miss path), before the dead
# object's memory, and so its id, can be reused.

# [Note: Updating a snapshot in place]
# Rebuilding the whole index for every new entry would make a miss cost O(entries). So a
# new entry that fits the current layout (same dims, the hoisted types, the type gates; a
# new first candidate of a key in an exact layout is exact too) is added in place:
# ``Snapshot.insert`` merges it into its key's candidates by rank, then stores the key's
# followers, then (when it is the new first candidate) the key's slot: one dict store
# each. A reader racing with these sees the old first candidate with the new followers or
# the new one with the old followers: every slot it can reach sits under its own key, so
# each residual still holds only where its entry's check holds, and a candidate seen twice
# or missed only costs a trip to the careful path. ``Snapshot.discard`` takes an evicted
# or dropped entry out the same way, after its slots are dead. Anything else (a new dim, a
# linear entry, a type outside a gate, an exact layout that would stop being exact) builds
# a new snapshot, as before; with more than ``RESCAN_BELOW`` entries the dims stay while new
# entries have them all, so for a steady stream of entries of one shape that is rare, and a
# miss costs O(log entries) in the index.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Hashable, Sequence
from typing import Any, Optional

from .dispatcher import FOLLOWERS, LINEAR, NOKEY, KeyCode
from .entry import MISS_SLOT, UNION, CacheEntry, Dim, Slot, typed_pin

__all__ = ["Snapshot", "build_snapshot", "choose_dims", "linear_lookup", "union_dims"]

# Above this many entries, dims are kept while every new entry has them all.
RESCAN_BELOW = 16


def linear_lookup(entries: Sequence[CacheEntry], values: tuple[Any, ...]) -> Optional[CacheEntry]:
    """The reference answer: the first valid entry, in rank order, whose check holds."""
    for entry in sorted(entries, key=lambda e: e.rank):
        if entry.valid and entry.check.fn(*values):
            return entry
    return None


def _score(entries: Sequence[CacheEntry], dims: tuple[Dim, ...]) -> tuple[int, int, int]:
    """(entries reachable as a first candidate, of those how many need no residual check,
    minus the number of dims). ``entries`` are in rank order."""
    linear_head: Optional[CacheEntry] = None
    heads = 0
    exact = 0
    seen: set[Hashable] = set()
    for entry in entries:
        key = entry.key(dims) if dims else None
        if key is None:
            if linear_head is None:
                linear_head = entry
                heads += 1
            continue
        if key in seen:
            continue
        seen.add(key)
        if linear_head is not None:  # it outranks this bucket's top, and is counted
            continue
        heads += 1
        if entry.exact_under(dims):
            exact += 1
    return (heads, exact, -len(dims))


def union_dims(entries: Sequence[CacheEntry]) -> list[Dim]:
    """The union dims worth trying ([Note: Union dims]): one per parameter or source whose
    entries' types pin different typed facts; for each type, the fact most of its entries
    have (ties: by name)."""
    groups: dict[tuple[int, str, Any], dict[int, dict[str, int]]] = {}
    for entry in entries:
        for dim, comps in entry.facts.items():
            tid = typed_pin(dim, comps)
            if tid is None:
                continue
            per_type = groups.setdefault((dim.position, dim.param, dim.source), {})
            counts = per_type.setdefault(tid, {})
            counts[dim.fact] = counts.get(dim.fact, 0) + 1
    out = []
    for (position, param, source), per_type in groups.items():
        if len(per_type) < 2:
            continue
        mapping = tuple(sorted(
            (tid, min(counts, key=lambda f, c=counts: (-c[f], f)))  # type: ignore[misc]
            for tid, counts in per_type.items()))
        if len({fact for _, fact in mapping}) > 1:
            out.append(Dim(position, param, UNION, None, source, mapping))
    return out


def choose_dims(
    entries: Sequence[CacheEntry],
    previous: Optional[tuple[Dim, ...]] = None,
    new: Sequence[CacheEntry] = (),
) -> tuple[Dim, ...]:
    """The dims to index ``entries`` (rank order) by. Greedy: add the dim that most improves
    ``_score`` until none does. With many entries the previous dims are kept while every
    new entry has them all (the index then grows without a rescan)."""
    if (
        previous
        and len(entries) > RESCAN_BELOW
        and all(e.key(previous) is not None for e in new)
    ):
        return previous
    candidates = sorted({d for e in entries for d in e.facts}, key=Dim.sort_key)
    candidates += union_dims(entries)
    chosen: tuple[Dim, ...] = ()
    best = _score(entries, chosen)
    while True:
        pick: Optional[tuple[Dim, ...]] = None
        for dim in candidates:
            if dim in chosen:
                continue
            trial = tuple(sorted((*chosen, dim), key=Dim.sort_key))
            score = _score(entries, trial)
            if score > best:
                best, pick = score, trial
        if pick is None:
            break
        chosen = pick
    # One dim at a time cannot see that two together make a key exact (f(a, b) with one
    # entry): also try the dims every entry has, alone and with the greedy choice.
    if entries:
        common = set(entries[0].facts).intersection(*(e.facts for e in entries[1:]))
        for extra in (tuple(common), (*chosen, *common)):
            trial = tuple(sorted(set(extra), key=Dim.sort_key))
            score = _score(entries, trial)
            if score > best:
                best, chosen = score, trial
    return chosen


def _rank(entry: CacheEntry) -> tuple[int, int]:
    return entry.rank


class Snapshot:
    """The entries of a function, indexed under one key layout. Built whole by
    ``build_snapshot``; then, under the function's compile lock, ``insert`` and ``discard``
    change it in place, one entry at a time, by single stores that a lock-free reader sees
    in either order ([Note: Updating a snapshot in place])."""

    def __init__(
        self,
        entries: tuple[CacheEntry, ...],
        keycode: KeyCode,
        buckets: dict[Hashable, tuple[CacheEntry, ...]],
        linear: tuple[CacheEntry, ...],
        index: dict[Any, Any],
    ) -> None:
        self._ranked = list(entries)
        self.keycode = keycode
        self.dims = keycode.dims
        self.buckets = buckets
        self.linear = linear
        self._linear_ids = frozenset(map(id, linear))
        self.index = index

    @property
    def entries(self) -> tuple[CacheEntry, ...]:
        """The entries, in rank order."""
        return tuple(self._ranked)

    def __len__(self) -> int:
        return len(self._ranked)

    def candidates(self, values: tuple[Any, ...]) -> tuple[CacheEntry, ...]:
        """The entries that may accept these values, in rank order."""
        if not self.dims:
            return self.linear
        key = self.keycode.key_of(*values)
        if key is NOKEY:
            return self.linear
        return self.buckets.get(key, self.linear)

    def lookup(self, values: tuple[Any, ...]) -> Optional[CacheEntry]:
        """The entry for these values, with full checks (equals ``linear_lookup``)."""
        for entry in self.candidates(values):
            if entry.valid and entry.check.fn(*values):
                return entry
        return None

    def closest(self, values: tuple[Any, ...], limit: int) -> tuple[list[CacheEntry], int]:
        """Up to ``limit`` entries closest to a call, in rank order: the candidates of its key,
        then the most specific others; and how many entries are left out. Costs
        O(``limit``), whatever the number of entries ([Note: Recompile reasons])."""
        chosen: dict[int, CacheEntry] = {}
        for entry in self.candidates(values):
            if len(chosen) >= limit:
                break
            chosen[id(entry)] = entry
        if len(chosen) < limit:
            for entry in self._ranked[: limit + len(chosen)]:
                if len(chosen) >= limit:
                    break
                chosen.setdefault(id(entry), entry)
        out = sorted(chosen.values(), key=_rank)
        return out, max(0, len(self._ranked) - len(out))

    # ---- in place ----------------------------------------------------------------------
    def _slots_of(self, bucket: Sequence[CacheEntry]) -> list[Slot]:
        implied = frozenset(self.dims)
        linear = self._linear_ids
        return [e.slot(frozenset() if id(e) in linear else implied) for e in bucket]

    def insert(self, entry: CacheEntry) -> bool:
        """Add a new entry in place, when it fits the layout (it has every dim, the hoisted
        types, the type gates, and an exact layout stays exact); else False, and nothing
        changed: build a new snapshot. O(entries under its key + linear entries)."""
        keycode = self.keycode
        layout = keycode.layout
        if not self.dims or not keycode.fits(entry):
            return False
        key = keycode.entry_key(entry)
        if key is NOKEY:
            return False
        old = self.buckets.get(key)
        base = old if old is not None else self.linear
        pos = bisect.bisect(base, entry.rank, key=_rank)
        if layout.exact and pos == 0 and not entry.exact_under(self.dims):
            return False
        merged = (*base[:pos], entry, *base[pos:])
        slots = self._slots_of(merged)
        if not layout.exact:
            self.index[FOLLOWERS][key] = tuple(slots[1:])
        if pos == 0:
            keycode.store(self.index, key, slots[0])
        self.buckets[key] = merged
        bisect.insort(self._ranked, entry, key=_rank)
        return True

    def discard(self, entry: CacheEntry) -> bool:
        """Take a keyed entry out in place (its slots must be dead already); False for a
        linear entry or when its key's new first candidate would break an exact layout:
        build a new snapshot. O(entries under its key + log entries)."""
        keycode = self.keycode
        if id(entry) in self._linear_ids or not self.dims:
            return False
        key = keycode.entry_key(entry)
        bucket = self.buckets.get(key) if key is not NOKEY else None
        if bucket is None:
            return False
        pos = next((i for i, e in enumerate(bucket) if e is entry), None)
        if pos is None:
            return False
        rest = bucket[:pos] + bucket[pos + 1:]
        keyed = [e for e in rest if id(e) not in self._linear_ids]
        if not keyed:
            keycode.remove(self.index, key)
            if not keycode.layout.exact:
                self.index[FOLLOWERS].pop(key, None)
            del self.buckets[key]
        else:
            if keycode.layout.exact and pos == 0 and not rest[0].exact_under(self.dims):
                return False
            slots = self._slots_of(rest)
            if pos == 0:
                keycode.store(self.index, key, slots[0])
            if not keycode.layout.exact:
                self.index[FOLLOWERS][key] = tuple(slots[1:])
            self.buckets[key] = rest
        i = bisect.bisect_left(self._ranked, entry.rank, key=_rank)
        if i < len(self._ranked) and self._ranked[i] is entry:
            del self._ranked[i]
        else:  # not where its rank says: it cannot be, but never leave it behind
            self._ranked = [e for e in self._ranked if e is not entry]
        return True

    def __repr__(self) -> str:
        dims = ", ".join(f"{d.shown}:{d.fact}" for d in self.dims) or "none"
        return (
            f"<Snapshot {len(self._ranked)} entries, dims [{dims}], {len(self.buckets)} keys, "
            f"{len(self.linear)} linear>"
        )


def build_snapshot(entries: Sequence[CacheEntry], keycode: KeyCode) -> Snapshot:
    """Index ``entries`` under ``keycode``'s layout (they are sorted into rank order here)."""
    ranked = tuple(sorted((e for e in entries if e.valid), key=_rank))
    dims = keycode.dims
    grouped: dict[Hashable, list[CacheEntry]] = {}
    linear: list[CacheEntry] = []
    for entry in ranked:
        key = keycode.entry_key(entry) if dims else NOKEY
        if key is NOKEY:
            linear.append(entry)
        else:
            grouped.setdefault(key, []).append(entry)
    implied = frozenset(dims)
    buckets: dict[Hashable, tuple[CacheEntry, ...]] = {}
    index: dict[Any, Slot] = {}
    followers: dict[Any, tuple[Slot, ...]] = {}
    for key, group in grouped.items():
        merged = tuple(heapq.merge(group, linear, key=_rank)) if linear else tuple(group)
        buckets[key] = merged
        members = set(map(id, group))
        slots = [e.slot(implied if id(e) in members else frozenset()) for e in merged]
        index[key] = slots[0]
        followers[key] = tuple(slots[1:])
    if not keycode.layout.exact:
        index[LINEAR] = linear[0].slot(frozenset()) if linear else MISS_SLOT
        followers[LINEAR] = tuple(e.slot(frozenset()) for e in linear[1:])
    shaped: dict[Any, Any] = keycode.shape(index)
    if not keycode.layout.exact:
        shaped[FOLLOWERS] = followers
    return Snapshot(ranked, keycode, buckets, tuple(linear), shaped)
