"""Tests for jitguard._src.dispatch.table: entries join, are evicted and dropped, and each
change reaches the generated dispatcher."""

from __future__ import annotations

from typing import Any, Optional

from jitguard import CompileId, GuardBuilder, LocalSource, compile_guards
from jitguard._src.cache.stats import Counters
from jitguard._src.dispatch.dispatcher import Dispatcher
from jitguard._src.dispatch.lru import Lru
from jitguard._src.dispatch.signature import Signature
from jitguard._src.dispatch.table import EntryTable


def _table(lru: Optional[Lru] = None) -> tuple[EntryTable, Dispatcher, Counters, list[Any]]:
    misses: list[Any] = []
    disp = Dispatcher(Signature(lambda n: n), "g", lambda *v: misses.append(v) or "miss",
                      tick=lru.tick if lru is not None else None)
    counters = Counters()
    table = EntryTable(disp, ("n",), counters, lru=lru,
                       redirect=lambda *a, **k: "careful", history=None)
    return table, disp, counters, misses


def _join(table: EntryTable, n: int) -> Any:
    check = compile_guards([LocalSource("n").make_guard(GuardBuilder.EQUALS_MATCH)],
                           f_locals={"n": n}, arg_names=("n",))
    return table.join(CompileId(frame_id=0, frame_compile_id=n), lambda v, _n=n: ("e", _n),
                      check, frozenset())


def test_an_empty_table_misses_and_a_joined_entry_hits() -> None:
    """Before any entry every call misses; a joined entry is published and serves its calls."""
    table, disp, _, misses = _table()
    assert disp.public(1) == "miss" and misses == [(1,)]
    entry = _join(table, 1)
    assert disp.public(1) == ("e", 1) and disp.public(2) == "miss"
    assert list(table) == [entry] and len(table) == 1 and table.snapshot.entries == (entry,)


def test_many_entries_published_in_place_and_anew_all_serve() -> None:
    """Twenty joins (some in place, some in a new snapshot) each serve their own value."""
    table, disp, _, _ = _table()
    for n in range(20):
        _join(table, n)
    assert [disp.public(n) for n in range(20)] == [("e", n) for n in range(20)]
    assert disp.public(20) == "miss"


def test_evict_over_takes_the_least_recently_used() -> None:
    """Past maxsize the least recently used entry leaves (a fast hit and a touch are uses):
    counted, its hits moved into dropped_hits, its calls miss."""
    table, disp, counters, _ = _table(Lru())
    first, second, third = (_join(table, n) for n in (1, 2, 3))
    assert disp.public(1) == ("e", 1)  # a fast hit stamps its slot
    table.touch(second)
    assert table.evict_over(2) == [third] and not third.valid
    assert counters.get("evictions") == 1 and counters.get("dropped_hits") == 0
    assert disp.public(3) == "miss" and len(table) == 2
    disp.public(1)
    table.touch(second)
    assert table.evict_over(1) == [first]
    assert counters.get("evictions") == 2 and counters.get("dropped_hits") == 2
    assert disp.public(1) == "miss" and disp.public(2) == ("e", 2) and list(table) == [second]


def test_drop_dead_removes_what_was_invalidated() -> None:
    """An invalidated entry marks the table dirty; drop_dead takes it out and counts it."""
    table, disp, counters, _ = _table()
    keep, dead = _join(table, 1), _join(table, 2)
    assert not table.dirty
    dead.invalidate("a guarded object died")
    assert table.dirty
    assert table.drop_dead() == [dead] and not table.dirty
    assert list(table) == [keep] and counters.get("invalidations") == 1
    assert disp.public(2) == "miss" and disp.public(1) == ("e", 1)
    assert table.drop_dead() == []


def test_reset_forgets_and_publish_installs_the_empty_snapshot() -> None:
    """reset() forgets every entry; publish([]) then makes every call miss."""
    table, disp, _, _ = _table(Lru())
    _join(table, 1)
    table.reset()
    table.publish([])
    assert len(table) == 0 and disp.public(1) == "miss"
