"""Tests for jitguard._src.dispatch.dispatcher: key layouts and the generated dispatcher."""

from __future__ import annotations

from typing import Any

import pytest

from jitguard import (
    AttrSource,
    CompileId,
    GetItemSource,
    GuardBuilder,
    LocalSource,
    cache_of,
    compile_guards,
    specialize,
)
from jitguard._src.dispatch.dispatcher import (
    LINEAR,
    NOKEY,
    Dispatcher,
    Layout,
    compute_layout,
)
from jitguard._src.dispatch.entry import CacheEntry
from jitguard._src.dispatch.signature import Signature
from jitguard._src.dispatch.snapshot import build_snapshot, choose_dims, linear_lookup

GB = GuardBuilder


def entries_for(frames: list[dict[str, Any]], kinds: dict[str, Any]) -> list[CacheEntry]:
    out = []
    for i, frame in enumerate(frames):
        params = tuple(frame)
        check = compile_guards(
            [LocalSource(n).make_guard(kinds[n]) for n in params], f_locals=frame,
            arg_names=params,
        )
        out.append(CacheEntry(compile_id=CompileId(frame_id=0, frame_compile_id=i),
                              artifact=lambda *a, _i=i: _i, check=check, params=params, seq=i))
    return out


def published(frames: list[dict[str, Any]], kinds: dict[str, Any], fn: Any) -> tuple[Any, Any]:
    entries = entries_for(frames, kinds)
    misses: list[tuple[Any, ...]] = []
    disp = Dispatcher(Signature(fn), fn.__name__, lambda *v: misses.append(v) or "miss")
    dims = choose_dims(sorted(entries, key=lambda e: e.rank))
    keycode = disp.keycode(compute_layout(sorted(entries, key=lambda e: e.rank), dims))
    snap = build_snapshot(entries, keycode)
    disp.install(keycode, snap.index)
    return disp, snap


def f2(a, b):  # type: ignore[no-untyped-def]
    return (a, b)


def test_uniform_value_type_is_hoisted() -> None:
    """Int values in every entry: the type is tested once, the key is the raw value."""
    entries = entries_for([{"n": i} for i in range(3)], {"n": GB.EQUALS_MATCH})
    dims = choose_dims(entries)
    layout = compute_layout(entries, dims)
    assert layout.hoisted == (("is", int),) and layout.exact
    disp = Dispatcher(Signature(lambda n: n), "g", print)
    keycode = disp.keycode(layout)
    assert keycode.entry_key(entries[2]) == 2
    assert keycode.key_of(2) == 2 and keycode.key_of(True) is NOKEY


def test_mixed_types_key_on_type_id() -> None:
    """Values of different types: the key carries id(type(v)) and the value."""
    entries = entries_for([{"n": 1}, {"n": "1"}], {"n": GB.EQUALS_MATCH})
    layout = compute_layout(entries, choose_dims(entries))
    assert layout.hoisted == (None,)
    keycode = Dispatcher(Signature(lambda n: n), "g", print).keycode(layout)
    assert keycode.entry_key(entries[0]) == (id(int), 1)
    assert keycode.key_of(1.0) == (id(float), 1.0)  # never equal to the int entry's key


def test_exact_dispatcher_calls_artifact_directly() -> None:
    """All entries exact and keyed: the dispatcher hits without a residual."""
    disp, snap = published([{"a": 1, "b": 2}, {"a": 3, "b": 4}],
                           {"a": GB.EQUALS_MATCH, "b": GB.EQUALS_MATCH}, f2)
    assert snap.keycode.layout.exact
    assert LINEAR not in snap.index
    assert disp.function(1, 2) == 0 and disp.function(3, 4) == 1
    assert disp.function(1, 4) == "miss"
    assert disp.function(True, 2) == "miss"
    assert "residual" not in disp.source
    assert snap.keycode.nested and snap.index[1][2].hits == 1  # one dict level per part


def test_residual_dispatcher_falls_back_to_linear_head() -> None:
    """With a linear entry, a key miss tries the first linear entry."""
    entries = entries_for([{"n": 1}], {"n": GB.EQUALS_MATCH})
    entries += entries_for([{"n": 5}], {"n": GB.TYPE_MATCH})
    entries[1].seq = 1
    entries[1].artifact = lambda n: "typed"
    disp = Dispatcher(Signature(lambda n: n), "g", lambda *v: "miss")
    ranked = sorted(entries, key=lambda e: e.rank)
    dims = choose_dims(ranked)
    keycode = disp.keycode(compute_layout(ranked, dims))
    snap = build_snapshot(entries, keycode)
    disp.install(keycode, snap.index)
    assert not keycode.layout.exact and snap.index[LINEAR].entry is entries[1]
    assert disp.function(1) == 0  # the value entry, more specific
    assert disp.function(2) == "typed"
    assert disp.function("s") == "miss"


def test_layout_change_swaps_code_and_retires_old_index() -> None:
    """A new layout swaps the function's code; the old index always misses."""
    disp = Dispatcher(Signature(f2), "f2", lambda *v: "miss")
    fn = disp.function
    first_source, first_generation = disp.source, disp.generation
    assert fn(1, 2) == "miss"
    entries = entries_for([{"a": 1, "b": 2}], {"a": GB.EQUALS_MATCH, "b": GB.EQUALS_MATCH})
    keycode = disp.keycode(compute_layout(entries, choose_dims(entries)))
    snap = build_snapshot(entries, keycode)
    disp.install(keycode, snap.index)
    assert disp.function is fn and fn(1, 2) == 0
    assert disp.generation == first_generation + 1 and disp.source != first_source
    assert fn(1, 3) == "miss"  # the old generation's index now always misses
    assert fn.__code__.co_name == "f2"


def test_same_layout_reuses_generation() -> None:
    """The same layout gives the same generated code."""
    disp = Dispatcher(Signature(lambda n: n), "g", print)
    layout = Layout((), (), False)
    assert disp.keycode(layout) is disp.keycode(layout)


def test_parameters_named_like_builtins() -> None:
    """Parameters called type, id or len do not break the generated code."""
    def g(type, id, len):  # type: ignore[no-untyped-def]
        return (type, id, len)

    frames = [{"type": 1, "id": "x", "len": b"y"}]
    disp, _ = published(frames, {n: GB.EQUALS_MATCH for n in frames[0]}, g)
    assert disp.function(1, "x", b"y") == 0
    assert disp.function(2, "x", b"y") == "miss"


def test_key_of_swallows_exceptions() -> None:
    """A key that cannot be computed (len of an int) is NOKEY, not an exception."""
    entries = entries_for([{"t": (1, 2)}, {"t": [1]}], {"t": GB.SEQUENCE_LENGTH})
    layout = compute_layout(entries, choose_dims(entries))
    keycode = Dispatcher(Signature(lambda t: t), "g", print).keycode(layout)
    assert keycode.key_of(5) is NOKEY
    assert keycode.key_of((3, 4)) == keycode.entry_key(entries[0])


def test_unhashable_value_misses() -> None:
    """An unhashable argument where values are keyed goes to the miss path."""
    disp, _ = published([{"a": 1, "b": 2}], {"a": GB.EQUALS_MATCH, "b": GB.EQUALS_MATCH}, f2)
    assert disp.function(1, [2]) == "miss"


def test_dispatcher_source_is_public_commented_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    """cache.dispatcher.source is the generated text, every line of the function commented,
    registered in linecache and logged at DEBUG when generated."""
    import linecache
    import logging

    from jitguard import cache_of, specialize

    with caplog.at_level(logging.DEBUG, logger="jitguard.codegen"):
        f = specialize(lambda n: n, automatic_dynamic=False)
        f(1), f(2)
    disp = cache_of(f).dispatcher
    text = disp.source
    body = text.split("\ndef ")[0].splitlines()
    commented = [line for line in text.splitlines() if "  # " in line]
    assert body[0].startswith("def ") and "dims [n:value]" in body[0]
    assert len(commented) == len(text.splitlines())
    assert "# call the entry's artifact" in text
    assert "".join(linecache.getlines(disp.filename)) == text
    assert any(text in r.getMessage() for r in caplog.records if r.name == "jitguard.codegen")


# ---- derived sources ---------------------------------------------------------------------


class Box:
    def __init__(self, mode: Any) -> None:
        self.mode = mode


class Spy:
    """A foreign type: every read of ``mode`` (a property), ``__getattr__``, ``__hash__``,
    ``__eq__`` and item is recorded."""

    log: list[str] = []

    @property
    def mode(self) -> Any:
        Spy.log.append("mode")
        return "a"

    def __getattr__(self, name: str) -> Any:
        Spy.log.append(f"getattr {name}")
        return "a"

    def __getitem__(self, i: Any) -> Any:
        Spy.log.append("item")
        return "a"

    def __hash__(self) -> int:
        Spy.log.append("hash")
        return 0

    def __eq__(self, other: object) -> bool:
        Spy.log.append("eq")
        return True


def derived_entries(values: list[Any], guards: Any) -> list[CacheEntry]:
    out = []
    for i, value in enumerate(values):
        check = compile_guards(guards(LocalSource("x")), f_locals={"x": value},
                               arg_names=("x",))
        out.append(CacheEntry(compile_id=CompileId(frame_id=0, frame_compile_id=i),
                              artifact=lambda x, _i=i: _i, check=check, params=("x",), seq=i))
    return out


def publish(entries: list[CacheEntry], fn: Any = lambda x: x) -> tuple[Any, Any]:
    disp = Dispatcher(Signature(fn), "g", lambda *v: "miss")
    ranked = sorted(entries, key=lambda e: e.rank)
    keycode = disp.keycode(compute_layout(ranked, choose_dims(ranked)))
    snap = build_snapshot(entries, keycode)
    disp.install(keycode, snap.index)
    return disp, snap


def typed_mode(x: Any) -> list[Any]:
    return [x.make_guard(GB.TYPE_MATCH), AttrSource(x, "mode").make_guard(GB.EQUALS_MATCH)]


def test_attribute_fact_is_an_exact_key() -> None:
    """Entries on ``type(x) is Box and x.mode == m`` are keyed on the attribute's value:
    the dispatcher is exact (no residual) and hits each entry by one lookup."""
    entries = derived_entries([Box("a"), Box("b"), Box("c")], typed_mode)
    disp, snap = publish(entries)
    assert any(d.source == AttrSource(LocalSource("x"), "mode") for d in snap.dims)
    assert snap.keycode.layout.exact and "residual" not in disp.source
    assert [disp.function(Box(m)) for m in "abc"] == [0, 1, 2]
    assert disp.function(Box("d")) == "miss" and disp.function(Box(1)) == "miss"
    assert "L['x'].mode" in disp.source


def test_attribute_read_only_for_pinned_types() -> None:
    """A value of another type is never read: no property, __getattr__, __hash__, __eq__
    or item of a foreign type runs in the dispatcher or in key_of."""
    entries = derived_entries([Box("a"), Box("b")], typed_mode)
    disp, snap = publish(entries)
    Spy.log.clear()
    assert disp.function(Spy()) == "miss"
    assert snap.keycode.key_of(Spy()) is NOKEY
    assert Spy.log == []


def test_attribute_value_of_a_user_type_is_never_hashed() -> None:
    """The attribute of a pinned type holding a user object: its __hash__/__eq__ never
    run (the "value" part is hashed for builtin scalars only)."""
    entries = derived_entries([Box("a"), Box("b")], typed_mode)
    disp, _ = publish(entries)
    Spy.log.clear()
    assert disp.function(Box(Spy())) == "miss"
    assert Spy.log == []


class Moody:
    """``mode`` is a property that raises when the value is None."""

    def __init__(self, mode: Any) -> None:
        self._mode = mode

    @property
    def mode(self) -> Any:
        if self._mode is None:
            raise RuntimeError("no mode")
        return self._mode


def test_reading_a_source_that_raises_is_no_key() -> None:
    """A pinned type whose attribute read raises: no key, no exception from the
    dispatcher, and the linear entry still serves the call."""
    entries = derived_entries([Moody("a"), Moody("b")], typed_mode)
    generic = derived_entries([Moody(None)], lambda x: [x.make_guard(GB.TYPE_MATCH)])[0]
    generic.seq = 5
    generic.artifact = lambda x: "generic"
    disp, snap = publish([*entries, generic])
    assert any(d.source is not None for d in snap.dims) and not snap.keycode.layout.exact
    assert disp.function(Moody("b")) == 1
    assert disp.function(Moody(None)) == "generic"
    assert snap.lookup((Moody(None),)) is generic
    assert snap.keycode.key_of(Moody(None)) is NOKEY


def test_derived_fact_needs_every_type_below_it_pinned() -> None:
    """Without a type guard on the parameter, ``x.mode`` is not a dim (the dispatcher
    would have no type to gate the read on)."""
    entries = derived_entries(
        [Box("a"), Box("b")], lambda x: [AttrSource(x, "mode").make_guard(GB.EQUALS_MATCH)])
    assert not any(d.source is not None for e in entries for d in e.facts)
    deep = derived_entries(
        [Box(Box("a"))], lambda x: [x.make_guard(GB.TYPE_MATCH),
                                    AttrSource(AttrSource(x, "mode"), "mode").make_guard(
                                        GB.EQUALS_MATCH)])
    assert not any(d.source is not None for d in deep[0].facts)  # x.mode's type unpinned


def test_tuple_items_key_the_dispatcher() -> None:
    """A specialized function of a tuple of ints keys on its items: a hit among many
    entries is one lookup, and the key reads items only of an exact tuple."""
    fn = specialize(lambda t: t, automatic_dynamic=False, recompile_limit=None,
                    global_state=False)
    for i in range(20):
        fn((i, 2 * i))
    snap = cache_of(fn).snapshot()
    assert any(d.source == GetItemSource(LocalSource("t"), 0) for d in snap.dims)
    assert snap.keycode.layout.exact
    assert fn((7, 14)) == (7, 14) and cache_of(fn).stats().misses == 20
    Spy.log.clear()
    assert snap.keycode.key_of(Spy()) is NOKEY and Spy.log == []


# ---- union dims ----------------------------------------------------------------------------


def mixed_entries(values: list[Any]) -> list[CacheEntry]:
    """Scalars guarded by type, arrays by ARRAY_MATCH (numba's way)."""
    np = pytest.importorskip("numpy")
    return [derived_entries([v], lambda x, v=v: [x.make_guard(
        GB.ARRAY_MATCH if isinstance(v, np.ndarray) else GB.TYPE_MATCH)])[0] for v in values]


def test_mixed_scalars_and_arrays_key_on_one_union_dim() -> None:
    """Entries of int, float, complex (by type) and arrays of 8 dtypes (ARRAY_MATCH): one
    union dim keys them all, the dispatcher is exact, and every call hits its own entry
    with one lookup (no residual, no linear walk)."""
    np = pytest.importorskip("numpy")
    arrays = [np.zeros(4, dtype=d) for d in ("f8", "f4", "i8", "i4", "i2", "i1", "u1", "c16")]
    values: list[Any] = [1, 1.0, 1j, *arrays]
    entries = mixed_entries(values)
    for i, e in enumerate(entries):
        e.seq, e.artifact = i, lambda x, _i=i: _i
    disp, snap = publish(entries)
    (dim,) = snap.dims
    assert dim.union is not None and snap.keycode.layout.exact and not snap.linear
    assert {fact for _, fact in dim.union} == {"type", "array"}
    assert [disp.function(v) for v in values] == list(range(len(values)))
    assert disp.function(np.zeros(4, dtype="u2")) == "miss"
    assert disp.function(np.zeros((2, 2))) == "miss" and disp.function("s") == "miss"
    Spy.log.clear()
    assert disp.function(Spy()) == "miss" and snap.keycode.key_of(Spy()) is NOKEY
    assert Spy.log == []


def test_union_dim_entries_of_one_type_with_another_fact_are_linear() -> None:
    """Two entries of one type pinning different facts (``x == 1`` and ``type(x) is int``):
    a union dim keys the type by the fact most of its entries have; the other entry is
    reached as a linear entry, and every answer is the careful walk's."""
    entries = entries_for([{"n": 1}, {"n": 2}, {"n": "s"}], {"n": GB.EQUALS_MATCH})
    entries += entries_for([{"n": 5}], {"n": GB.TYPE_MATCH})
    entries += entries_for([{"n": (1, 2)}], {"n": GB.SEQUENCE_LENGTH})
    for i, e in enumerate(entries):
        e.seq, e.artifact = i, lambda n, _i=i: _i
    disp, snap = publish(entries, lambda n: n)
    assert any(d.union is not None for d in snap.dims)
    for value in (1, 2, "s", 7, (3, 4), (1,), 1.0, True):
        expected = linear_lookup(entries, (value,))
        assert snap.lookup((value,)) is expected
        got = disp.function(value)
        assert got == ("miss" if expected is None else entries.index(expected)), value


def test_array_shape_item_keys_with_the_array_fact() -> None:
    """ARRAY_MATCH on ``x``, SEQUENCE_LENGTH on ``x.shape`` and ``x.shape[0] == n`` (what a
    policy visiting ``x.shape`` as a tuple guards): entries of several dtypes and lengths are
    exact keys on the array fact and ``x.shape[0]`` together."""
    np = pytest.importorskip("numpy")

    def guards(x: Any) -> list[Any]:
        shape = AttrSource(x, "shape")
        return [x.make_guard(GB.ARRAY_MATCH), shape.make_guard(GB.SEQUENCE_LENGTH),
                GetItemSource(shape, 0).make_guard(GB.EQUALS_MATCH)]

    values = [np.zeros(n, dtype=d) for d in ("f8", "f4") for n in (2, 3, 4)]
    entries = derived_entries(values, guards)
    for i, e in enumerate(entries):
        e.seq, e.artifact = i, lambda x, _i=i: _i
    disp, snap = publish(entries)
    assert snap.keycode.layout.exact and len(snap.buckets) == len(values)
    assert any(d.source == GetItemSource(AttrSource(LocalSource("x"), "shape"), 0)
               for d in snap.dims)
    assert [disp.function(np.ones_like(v)) for v in values] == list(range(len(values)))
    assert disp.function(np.zeros(5)) == "miss" and disp.function(np.zeros((2, 2))) == "miss"


class Mutable:
    """``mode`` is a property over a field that changes between calls."""

    reads = 0

    def __init__(self, mode: Any) -> None:
        self._mode = mode

    @property
    def mode(self) -> Any:
        Mutable.reads += 1
        return self._mode


def test_attribute_keys_follow_a_mutated_object() -> None:
    """A specialized function keyed on ``cfg.mode`` (a property): mutating the same object
    between calls always reaches the entry for its current mode, never a stale one, and a
    hit reads the property once."""

    def compiler(request: Any) -> Any:
        cfg = request.sources["cfg"]
        request.add_guard(AttrSource(cfg, "mode"), GB.EQUALS_MATCH)
        mode = request.values[0].mode
        return lambda cfg: mode

    fn = specialize(lambda cfg: cfg.mode, compiler=compiler, policy="types",
                    global_state=False)
    cfg = Mutable("a")
    for mode in ("a", "b", 3, "a", 3.5, "b"):
        cfg._mode = mode
        assert fn(cfg) == mode
    cache = cache_of(fn)
    assert len(cache.entries()) == 4
    assert any(d.source is not None for d in cache.snapshot().dims)
    cfg._mode = "b"
    Mutable.reads = 0
    assert fn(cfg) == "b" and Mutable.reads == 1
