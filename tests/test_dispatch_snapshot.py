"""Tests for jitguard._src.dispatch.snapshot: choosing dims, snapshots, and the differential
check that the index answers exactly what a careful linear walk answers."""

from __future__ import annotations

from typing import Any, Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from jitguard import AttrSource, CompileId, GetItemSource, GuardBuilder, LocalSource, compile_guards
from jitguard._src.dispatch.dispatcher import Dispatcher, compute_layout
from jitguard._src.dispatch.entry import CacheEntry, Dim
from jitguard._src.dispatch.signature import Signature
from jitguard._src.dispatch.snapshot import build_snapshot, choose_dims, linear_lookup, union_dims

GB = GuardBuilder
PARAMS = ("a", "b", "c")


class Obj:
    def __init__(self, v: Any = 1) -> None:
        self.v = v


class Prop:
    """An object whose ``v`` is a property (user code run by every read)."""

    reads = 0

    def __init__(self, v: Any) -> None:
        self._v = v

    @property
    def v(self) -> Any:
        Prop.reads += 1
        return self._v


class Raising:
    """An object whose ``v`` and items raise, and whose hash and == lie."""

    @property
    def v(self) -> Any:
        raise RuntimeError("no v")

    def __getitem__(self, i: Any) -> Any:
        raise RuntimeError("no items")

    def __hash__(self) -> int:
        raise RuntimeError("no hash")

    def __eq__(self, other: object) -> bool:
        return True


OBJ_A, OBJ_B = Obj(1), Obj("x")
LIST_1, LIST_2 = [1], [1, 2]
POOL: list[Any] = [0, 1, 2, True, False, 0.0, 1.0, -0.0, "x", "y", None, b"x", (1,), (1, 2),
                   LIST_1, LIST_2, OBJ_A, OBJ_B, float("nan"), (2, "x"), ("x",), Obj(2),
                   Obj(-0.0), Prop(1), Prop("x"), Raising(), (0.0,), Obj(OBJ_A)]


def kinds_for(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [GB.SEQUENCE_LENGTH, GB.TYPE_MATCH, GB.LENGTH_CHECK, None]
    if isinstance(value, (Obj, Prop, Raising)):
        return [GB.ID_MATCH, GB.TYPE_MATCH, None]
    return [GB.CONSTANT_MATCH, GB.TYPE_MATCH, None]


def derived_for(value: Any, src: Any) -> Any:
    """A source below a parameter the entry may guard: an item of a sequence, an
    attribute of an object (None for other values)."""
    if isinstance(value, (tuple, list)):
        return GetItemSource(src, 0)
    if isinstance(value, (Obj, Prop, Raising)):
        return AttrSource(src, "v")
    return None


SUB_KINDS = [None, GB.CONSTANT_MATCH, GB.TYPE_MATCH, GB.ID_MATCH]


def build_entry(
    spec: tuple[tuple[int, ...], ...], seq: int, redirect: Any = None
) -> CacheEntry:
    frame = {p: POOL[v] for p, (v, *_) in zip(PARAMS, spec, strict=True)}
    guards = []
    for p, (v, k, *sub) in zip(PARAMS, spec, strict=True):
        options = kinds_for(POOL[v])
        kind = options[k % len(options)]
        if kind is not None:
            guards.append(LocalSource(p).make_guard(kind))
        derived = derived_for(POOL[v], LocalSource(p))
        sub_kind = SUB_KINDS[sub[0] % len(SUB_KINDS)] if sub else None
        if derived is not None and sub_kind is not None:
            try:
                part = derived.get_value(frame, {})
            except Exception:
                continue  # nothing to guard: reading it raises
            if sub_kind is GB.CONSTANT_MATCH and not isinstance(
                    part, (int, float, str, bytes, type(None))):
                sub_kind = GB.TYPE_MATCH
            guards.append(derived.make_guard(sub_kind))
    check = compile_guards(guards, f_locals=frame, arg_names=PARAMS)
    return CacheEntry(compile_id=CompileId(frame_id=0, frame_compile_id=seq),
                      artifact=lambda a, b, c, _s=seq: _s, check=check, params=PARAMS, seq=seq,
                      redirect=redirect)


index = st.integers(0, len(POOL) - 1)
entry_spec = st.tuples(*[st.tuples(index, st.integers(0, 3), st.integers(0, 3))
                         for _ in PARAMS])
call = st.tuples(index, index, index)


def seq_of(entry: Optional[CacheEntry]) -> Optional[int]:
    return None if entry is None else entry.seq


def run_dispatcher(entries: list[CacheEntry], dims: tuple[Dim, ...]) -> tuple[Any, Any]:
    holder: dict[str, Any] = {}

    def miss(*values: Any) -> Any:
        found = holder["snap"].lookup(values)
        return ("miss", seq_of(found))

    disp = Dispatcher(Signature(lambda a, b, c: None), "f", miss)
    ranked = sorted(entries, key=lambda e: e.rank)
    keycode = disp.keycode(compute_layout(ranked, dims))
    snap = holder["snap"] = build_snapshot(entries, keycode)
    disp.install(keycode, snap.index)
    return disp.function, snap


@settings(max_examples=300, deadline=None)
@given(st.lists(entry_spec, min_size=1, max_size=10), st.lists(call, min_size=1, max_size=12),
       st.data())
def test_index_equals_linear_walk(specs: Any, calls: Any, data: Any) -> None:
    """For random entries, dims and calls, snapshot lookup, the generated dispatcher and a
    careful linear walk choose the same entry, and the dispatcher finds it without the miss
    path (a later candidate of the key is reached through the followers)."""
    entries = [build_entry(spec, i) for i, spec in enumerate(specs)]
    ranked = sorted(entries, key=lambda e: e.rank)
    candidates = sorted({d for e in entries for d in e.facts}, key=Dim.sort_key)
    candidates += union_dims(entries)
    chosen = choose_dims(ranked)
    subset = tuple(d for d in candidates if data.draw(st.booleans()))
    for dims in (chosen, subset, ()):
        fn, snap = run_dispatcher(entries, dims)
        for c in calls:
            values = tuple(POOL[i] for i in c)
            expected = seq_of(linear_lookup(entries, values))
            assert seq_of(snap.lookup(values)) == expected
            got = fn(*values)
            if expected is not None:
                assert got == expected, (dims, values)
            else:
                assert got == ("miss", None), (dims, values)


@settings(max_examples=100, deadline=None)
@given(st.lists(entry_spec, min_size=2, max_size=8), st.lists(call, min_size=1, max_size=8),
       st.data())
def test_index_skips_dead_entries(specs: Any, calls: Any, data: Any) -> None:
    """Entries invalidated after publication are never chosen, by any path."""
    holder: dict[str, Any] = {}

    def redirect(*values: Any) -> Any:
        return ("miss", seq_of(holder["snap"].lookup(values)))

    entries = [build_entry(spec, i, redirect) for i, spec in enumerate(specs)]
    fn, snap = holder["fn"], holder["snap"] = run_dispatcher(entries, choose_dims(sorted(entries, key=lambda e: e.rank)))
    for e in entries:
        if data.draw(st.booleans()):
            e.invalidate("test")
    for c in calls:
        values = tuple(POOL[i] for i in c)
        expected = seq_of(linear_lookup(entries, values))
        assert seq_of(snap.lookup(values)) == expected
        got = fn(*values)
        assert (got[1] if isinstance(got, tuple) else got) == expected


def test_specific_entry_beats_newer_generic() -> None:
    """A generic entry made after a static one does not shadow it."""
    static = build_entry(((1, 0), (1, 2), (1, 2)), 0)   # a == 1
    generic = build_entry(((2, 1), (1, 2), (1, 2)), 1)  # type(a) is int
    for order in ([static, generic], [generic, static]):
        fn, _ = run_dispatcher(order, choose_dims(sorted(order, key=lambda e: e.rank)))
        assert fn(1, 0, 0) == 0 and fn(2, 0, 0) == 1


def test_choose_dims_prefers_discriminating_facts() -> None:
    """Entries that differ on one argument's value are keyed by that value."""
    entries = [build_entry(((v, 0), (8, 2), (8, 2)), v) for v in (0, 1, 2)]
    dims = choose_dims(sorted(entries, key=lambda e: e.rank))
    assert Dim(0, "a", "value") in dims


def test_choose_dims_finds_joint_exact_key() -> None:
    """One entry guarded on two values is keyed by both (its key is then exact)."""
    (entry,) = [build_entry(((1, 0), (8, 0), (8, 2)), 0)]
    dims = choose_dims([entry])
    assert set(dims) == {Dim(0, "a", "value"), Dim(1, "b", "value")}
    assert entry.exact_under(dims)


def test_choose_dims_keeps_previous_for_many_entries() -> None:
    """With many entries, dims stay while new entries have them all."""
    entries = [build_entry(((i % 3, 0), (8, 2), (8, 2)), i) for i in range(20)]
    previous = (Dim(0, "a", "value"),)
    assert choose_dims(entries, previous, entries[-1:]) == previous


def test_snapshot_buckets_merge_linear_entries_in_rank_order() -> None:
    """A bucket's candidates are its entries and the linear ones, in rank order."""
    keyed = build_entry(((1, 0), (8, 2), (8, 2)), 0)
    linear = build_entry(((1, 1), (8, 2), (8, 2)), 1)
    _, snap = run_dispatcher([linear, keyed], (Dim(0, "a", "value"),))
    assert snap.linear == (linear,)
    assert list(snap.buckets.values()) == [(keyed, linear)]
    assert snap.candidates((5, 0, 0)) == (linear,)
    assert "1 keys" in repr(snap)


@settings(max_examples=200, deadline=None)
@given(st.lists(entry_spec, min_size=2, max_size=12), st.lists(call, min_size=1, max_size=8),
       st.data())
def test_in_place_updates_equal_linear_walk(specs: Any, calls: Any, data: Any) -> None:
    """Entries added one at a time with Snapshot.insert (a rebuild where it refuses) and
    evicted with Snapshot.discard: after every step the generated dispatcher and the
    snapshot answer what a careful linear walk over the live entries answers."""
    holder: dict[str, Any] = {}

    def miss(*values: Any) -> Any:
        return ("miss", seq_of(holder["snap"].lookup(values)))

    entries = [build_entry(spec, i, miss) for i, spec in enumerate(specs)]
    disp = Dispatcher(Signature(lambda a, b, c: None), "f", miss)
    live: list[CacheEntry] = []

    def rebuild() -> None:
        ranked = sorted(live, key=lambda e: e.rank)
        keycode = disp.keycode(compute_layout(ranked, choose_dims(ranked)))
        holder["snap"] = build_snapshot(ranked, keycode)
        disp.install(keycode, holder["snap"].index)

    first = data.draw(st.integers(1, len(entries)))
    live.extend(entries[:first])
    rebuild()
    steps = [("add", e) for e in entries[first:]]
    steps += [("evict", e) for e in entries if data.draw(st.booleans())]
    order = data.draw(st.permutations(range(len(steps))))
    for i in order:
        what, entry = steps[i]
        if what == "add" and entry not in live and entry.valid:
            live.append(entry)
            if not holder["snap"].insert(entry):
                rebuild()
        elif what == "evict" and entry in live:
            live.remove(entry)
            entry.evict("test")
            if not holder["snap"].discard(entry):
                rebuild()
        for c in calls:
            values = tuple(POOL[k] for k in c)
            expected = seq_of(linear_lookup(live, values))
            assert seq_of(holder["snap"].lookup(values)) == expected
            got = disp.function(*values)
            assert (got[1] if isinstance(got, tuple) else got) == expected, (what, values)
        assert sorted(map(id, holder["snap"].entries)) == sorted(map(id, live))


def test_closest_entries_are_the_key_then_the_most_specific() -> None:
    """closest() takes the call's key candidates first, then the top-ranked others, and
    counts the rest."""
    entries = [build_entry(((v % 3, 0), (8, 0), (8, 2)), v) for v in range(12)]
    _, snap = run_dispatcher(entries, (Dim(0, "a", "value"), Dim(1, "b", "value")))
    covered, rest = snap.closest((2, "x", None), 3)
    assert len(covered) == 3 and rest == 9
    assert covered == sorted(covered, key=lambda e: e.rank)
    assert covered[0] is entries[2]  # shares the key (a == 2, b == "x")
