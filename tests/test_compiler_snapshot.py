"""The structure snapshot on plain Python objects ([Note: Skipping structure guards by
version tags]): which reads it pins, and that a change to any of them makes the front
check run the full check (a miss when a guard fails)."""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import pytest

import jitguard as jg
from jitguard import GuardBuilder as GB
from jitguard._src.compiler import snapshot
from jitguard._src.more_sources import ClosureCellSource, DictGetItemSource, TypeDictSource
from jitguard.sources import (
    AttrSource,
    CodeSource,
    DefaultsSource,
    GetItemSource,
    LocalSource,
    TypeSource,
)

pytestmark = pytest.mark.skipif(
    not (snapshot.available() and snapshot.enabled),
    reason="no structure snapshot here (Python 3.12+, no C extension, or turned off)")

N = snapshot.MIN_COVERED + 6


class Base:
    """Where ``Box`` finds ``helper``."""

    def helper(self, x: Any) -> Any:
        return x


class Box(Base):
    """A root whose attributes are functions, and whose class holds a marker."""

    marker: Any = "plain"


class OtherBox(Box):
    pass


def _scaled(k: float) -> Callable[[Any], Any]:
    def scaled(x: Any) -> Any:
        return x * k

    return scaled


def _other(x: Any, k: int = 0) -> Any:
    return -x


def _box() -> Box:
    box = Box()
    for i in range(N):
        ns: dict[str, Any] = {}
        exec(f"def f{i}(x, k={i}):\n    return x + k\n", ns)
        setattr(box, f"f{i}", ns[f"f{i}"])
    box.scaled = _scaled(2.0)  # type: ignore[attr-defined]
    return box


def _check(box: Box) -> Any:
    """A check on every function's code and first default, a closure cell and a class
    attribute read from the class's namespace, with a front check installed."""
    b = LocalSource("b")
    guards = []
    for i in range(N):
        fn = AttrSource(b, f"f{i}")
        guards += [CodeSource(fn).make_guard(GB.ID_MATCH),
                   DefaultsSource(fn, 0).make_guard(GB.EQUALS_MATCH)]
    guards.append(ClosureCellSource(AttrSource(b, "scaled"), "k", 0).make_guard(GB.EQUALS_MATCH))
    ns = TypeDictSource(TypeSource(b))
    guards.append(DictGetItemSource(ns, "marker").make_guard(GB.EQUALS_MATCH))
    cls = AttrSource(b, "__class__")  # object's own descriptor: the exact type
    guards += [cls.make_guard(GB.ID_MATCH),
               AttrSource(cls, "__name__").make_guard(GB.EQUALS_MATCH),
               CodeSource(AttrSource(cls, "helper")).make_guard(GB.ID_MATCH)]
    check = jg.compile_guards(guards, f_locals={"b": box}, arg_names=("b",))
    assert snapshot.install(check, (box,))
    return check


def _snapshot_holds(check: Any, box: Box) -> bool:
    return bool(check.fn.__globals__["___snap"][0]((box,)))


def _full_check_decides(check: Any, box: Box, *, holds: bool) -> None:
    """After a change, the snapshot fails; the full check says ``holds``, and the snapshot
    holds again (taken anew) exactly when it did."""
    assert not _snapshot_holds(check, box)
    assert bool(check.fn(box)) is holds
    assert _snapshot_holds(check, box) is holds


def test_function_slots_cells_and_class_namespaces_are_covered() -> None:
    """Every guard of the check is skipped while the snapshot holds: the code, defaults,
    closure cell, class namespace, ``__class__``, class name and class attribute reads
    are pinned by the snapshot, not rerun."""
    box = _box()
    check = _check(box)
    assert len(check.structure_skip.covered) == len(check.leaves)
    assert _snapshot_holds(check, box) and check.fn(box)


def _set_code(box: Box) -> None:
    box.f3.__code__ = _other.__code__  # type: ignore[attr-defined]


def _set_defaults(box: Box) -> None:
    box.f4.__defaults__ = (99,)  # type: ignore[attr-defined]


def _rebind_cell(box: Box) -> None:
    box.scaled.__closure__[0].cell_contents = 3.0  # type: ignore[attr-defined]


def _class_attr(box: Box) -> None:
    Box.marker = "changed"


def _rename_class(box: Box) -> None:
    Box.__name__ = "Renamed"


def _shadow_helper(box: Box) -> None:
    Box.helper = lambda self, x: x  # type: ignore[method-assign]


def _base_helper(box: Box) -> None:
    Base.helper = lambda self, x: -x  # type: ignore[method-assign]


def _replace_function(box: Box) -> None:
    box.f5 = types.FunctionType(_other.__code__, {})  # type: ignore[attr-defined]


CHANGES: dict[str, Callable[[Box], None]] = {
    "__code__ replaced": _set_code,
    "__defaults__ replaced": _set_defaults,
    "cell contents rebound": _rebind_cell,
    "class attribute replaced": _class_attr,
    "function replaced": _replace_function,
    "__class__ assigned": lambda box: setattr(box, "__class__", OtherBox),
    "class renamed": _rename_class,
    "method shadowed on the class": _shadow_helper,
    "method replaced on a base": _base_helper,
}


@pytest.mark.parametrize("what", sorted(CHANGES))
def test_a_change_fails_the_snapshot_and_the_check(what: str) -> None:
    """After the change the snapshot no longer holds and the check says False."""
    box = _box()
    check = _check(box)
    helper = Base.helper
    try:
        CHANGES[what](box)
        assert not _snapshot_holds(check, box)
        assert not check.fn(box)
    finally:
        Box.marker, Box.__name__, Base.helper = "plain", "Box", helper  # type: ignore[method-assign]
        if "helper" in Box.__dict__:
            del Box.helper


def test_an_unrelated_change_rearms() -> None:
    """A write no guard reads fails the snapshot once; the full check holds, the snapshot
    is taken again and holds from then on."""
    box = _box()
    check = _check(box)
    box.unrelated = 1  # type: ignore[attr-defined]
    assert not _snapshot_holds(check, box)
    assert check.fn(box)
    assert _snapshot_holds(check, box)


def test_the_old_values_of_pinned_slots_are_held() -> None:
    """The snapshot holds the code it compares by address: a code object replaced after
    the snapshot was taken stays alive (its address is never reused by another code)
    while the snapshot lives, and is freed once the root it hangs from is."""
    import gc
    import weakref

    box = _box()
    ns: dict[str, Any] = {}
    exec("def g(x, k=0):\n    return x\n", ns)
    box.f0.__code__ = ns.pop("g").__code__  # type: ignore[attr-defined]
    old = weakref.ref(box.f0.__code__)  # type: ignore[attr-defined]
    check = _check(box)
    box.f0.__code__ = _other.__code__  # type: ignore[attr-defined]
    gc.collect()
    assert old() is not None  # only the snapshot holds it now
    assert not check.fn(box)
    del box
    gc.collect()
    assert old() is None



@pytest.mark.parametrize("kind", [dict, __import__("collections").OrderedDict])
def test_plain_dicts_are_held_and_their_changes_seen(kind: type) -> None:
    """An exact dict or OrderedDict the snapshot compares by its tag alone is held by it
    (its address is never another object's, whatever its container did), and any store
    into it, or its replacement, fails the snapshot."""
    import gc
    import sys

    box = Box()
    box.d = kind((f"k{i}", 1000 + i) for i in range(N))  # type: ignore[attr-defined]
    b = LocalSource("b")
    d = AttrSource(b, "d")
    guards = [DictGetItemSource(d, f"k{i}").make_guard(GB.EQUALS_MATCH) for i in range(N)]
    before = sys.getrefcount(box.d)  # type: ignore[attr-defined]
    check = jg.compile_guards(guards, f_locals={"b": box}, arg_names=("b",))
    assert snapshot.install(check, (box,))
    assert sys.getrefcount(box.d) > before  # type: ignore[attr-defined]
    assert _snapshot_holds(check, box) and check.fn(box)
    box.d["k3"] = int("1003")  # type: ignore[attr-defined]  # an equal value: the tag moves
    assert not _snapshot_holds(check, box)
    assert check.fn(box) and _snapshot_holds(check, box)  # taken again
    box.d = kind(box.d)  # type: ignore[attr-defined]  # an equal copy, the old one let go
    gc.collect()
    assert not _snapshot_holds(check, box)
    assert check.fn(box)
    box.d["k0"] = -1  # type: ignore[attr-defined]
    assert not _snapshot_holds(check, box) and not check.fn(box)

def _list_check(box: Box) -> Any:
    """A check on the length and every item of an exact list held by ``box``, with the
    ``_check`` guards (so the front check is installed)."""
    b = LocalSource("b")
    items = AttrSource(b, "items")
    guards = [items.make_guard(GB.SEQUENCE_LENGTH)]
    guards += [GetItemSource(items, i).make_guard(GB.EQUALS_MATCH) for i in range(N)]
    check = jg.compile_guards(guards, f_locals={"b": box}, arg_names=("b",))
    assert snapshot.install(check, (box,))
    return check


def test_an_exact_lists_items_are_pinned() -> None:
    """Item reads of an exact list and its length are covered: pinned by the list's items."""
    box = _box()
    box.items = [f"v{i}" for i in range(N)]  # type: ignore[attr-defined]
    check = _list_check(box)
    assert len(check.structure_skip.covered) == len(check.leaves)
    assert _snapshot_holds(check, box) and check.fn(box)


LIST_CHANGES: dict[str, Callable[[list[str]], None]] = {
    "item stored": lambda items: items.__setitem__(3, "other"),
    "item appended": lambda items: items.append("more"),
    "item deleted": lambda items: items.pop(),
    "items reversed": lambda items: items.reverse(),
    "equal item of another identity": lambda items: items.__setitem__(2, "".join(["v", "2"])),
}


@pytest.mark.parametrize("what", sorted(LIST_CHANGES))
def test_a_list_change_fails_the_snapshot(what: str) -> None:
    """Any change to a pinned list's items fails the snapshot; the full check decides
    (an equal item of another identity still holds, and the snapshot is taken again)."""
    box = _box()
    box.items = [f"v{i}" for i in range(N)]  # type: ignore[attr-defined]
    check = _list_check(box)
    LIST_CHANGES[what](box.items)  # type: ignore[attr-defined]
    _full_check_decides(check, box, holds=what == "equal item of another identity")


def test_a_list_subclass_is_not_pinned() -> None:
    """A list subclass may compute its items: its item reads stay in the volatile check."""

    class Items(list):  # type: ignore[type-arg]
        pass

    box = _box()
    box.items = Items(f"v{i}" for i in range(N))  # type: ignore[attr-defined]
    b = LocalSource("b")
    guards = [GetItemSource(AttrSource(b, "items"), i).make_guard(GB.EQUALS_MATCH)
              for i in range(N)] + [CodeSource(AttrSource(b, f"f{i}")).make_guard(GB.ID_MATCH)
                                    for i in range(N)]
    check = jg.compile_guards(guards, f_locals={"b": box}, arg_names=("b",))
    assert snapshot.install(check, (box,))
    assert len(check.structure_skip.covered) == N


def _partials_check(box: Box) -> Any:
    """A check on each of ``box.acts`` (exact ``functools.partial`` objects, as
    transformers' ``GELUTanh`` holds one per layer): its func, its args' length and its
    keywords' keys and value, with a front check installed."""
    b = LocalSource("b")
    guards = []
    for i in range(N):
        p = AttrSource(b, f"a{i}")
        kw = AttrSource(p, "keywords")
        guards += [AttrSource(p, "func").make_guard(GB.ID_MATCH),
                   AttrSource(p, "args").make_guard(GB.SEQUENCE_LENGTH),
                   kw.make_guard(GB.DICT_KEYS_MATCH),
                   GetItemSource(kw, "approximate").make_guard(GB.EQUALS_MATCH)]
    check = jg.compile_guards(guards, f_locals={"b": box}, arg_names=("b",))
    assert snapshot.install(check, (box,))
    return check


def _with_partials(kind: Any = functools.partial) -> Box:
    box = _box()
    for i in range(N):
        setattr(box, f"a{i}", kind(_other, approximate="tanh"))
    return box


def test_slot_values_are_what_the_types_own_descriptors_read() -> None:
    """The extension's ``slot_values``: a function's code, defaults, keyword defaults,
    closure, name and qualname; a cell's contents; an exact partial's func, args and
    keywords (read at the offsets its member descriptors give); None for a subclass of
    partial or a plain object."""
    from jitguard._src import native

    m = native.module
    fn = _scaled(2.0)
    assert m.slot_values(fn) == (fn.__code__, m.EMPTY_SLOT, m.EMPTY_SLOT, fn.__closure__,
                                 fn.__name__, fn.__qualname__)
    cell = fn.__closure__[0]  # type: ignore[index]
    assert m.slot_values(cell) == (2.0,)
    p = functools.partial(_other, 1, approximate="tanh")
    got = m.slot_values(p)
    assert got is not None and len(got) == 3
    assert got[0] is p.func and got[1] is p.args and got[2] is p.keywords

    class Partial(functools.partial):  # type: ignore[type-arg]
        pass

    assert m.slot_values(Partial(_other)) is None
    assert m.slot_values(Box()) is None


def test_a_partials_func_args_and_keywords_are_covered() -> None:
    """An exact partial's func, args and keywords are pinned by the snapshot (its slots),
    so every guard on them is skipped while it holds."""
    box = _with_partials()
    check = _partials_check(box)
    assert len(check.structure_skip.covered) == len(check.leaves)
    assert _snapshot_holds(check, box) and check.fn(box)


PARTIAL_CHANGES: dict[str, Callable[[Any], None]] = {
    "__setstate__ with another func": lambda p: p.__setstate__(
        (_scaled(1.0), (), {"approximate": "tanh"}, None)),
    "__setstate__ with more args": lambda p: p.__setstate__(
        (p.func, (1,), dict(p.keywords), None)),
    "__setstate__ with equal keywords": lambda p: p.__setstate__(
        (p.func, p.args, {"approximate": "tanh"}, None)),
    "a keyword stored": lambda p: p.keywords.__setitem__("approximate", "none"),
    "a keyword added": lambda p: p.keywords.__setitem__("extra", 1),
    "keywords cleared": lambda p: p.keywords.clear(),
}


@pytest.mark.parametrize("what", sorted(PARTIAL_CHANGES))
def test_a_partial_change_fails_the_snapshot(what: str) -> None:
    """Any change to a pinned partial (its fields through ``__setstate__``, or its
    keywords dict) fails the snapshot; the full check decides (equal keywords in a new
    dict still hold, and the snapshot is taken again)."""
    box = _with_partials()
    check = _partials_check(box)
    PARTIAL_CHANGES[what](box.a3)  # type: ignore[attr-defined]
    _full_check_decides(check, box, holds=what == "__setstate__ with equal keywords")


def test_a_partial_subclass_is_not_pinned() -> None:
    """A subclass of partial may read its attributes another way: its reads stay in the
    volatile check."""

    class Partial(functools.partial):  # type: ignore[type-arg]
        pass

    box = _with_partials(Partial)
    b = LocalSource("b")
    guards = [AttrSource(AttrSource(b, f"a{i}"), "func").make_guard(GB.ID_MATCH)
              for i in range(N)] + [CodeSource(AttrSource(b, f"f{i}")).make_guard(GB.ID_MATCH)
                                    for i in range(N)]
    check = jg.compile_guards(guards, f_locals={"b": box}, arg_names=("b",))
    assert snapshot.install(check, (box,))
    assert len(check.structure_skip.covered) == N


class Settings:
    """A config whose flag is a property reading a private attribute (transformers'
    ``output_attentions``), and one whose getter computes."""

    def __init__(self) -> None:
        self._flag = True

    @property
    def flag(self) -> Any:
        return self._flag

    @property
    def computed(self) -> Any:
        return self._flag and True


def _property_check(box: Box, member: str = "flag") -> Any:
    """``hasattr`` of ``member`` on each of ``box.s0...`` and its getter's code, with
    guards on the functions' code (so the front check is installed)."""
    b = LocalSource("b")
    guards = []
    for i in range(N):
        guards.append(AttrSource(AttrSource(b, f"s{i}"), member).make_guard(GB.HASATTR))
    prop = DictGetItemSource(TypeDictSource(TypeSource(AttrSource(b, "s0"))), member)
    guards.append(CodeSource(AttrSource(prop, "fget")).make_guard(GB.ID_MATCH))
    guards += [CodeSource(AttrSource(b, f"f{i}")).make_guard(GB.ID_MATCH) for i in range(N)]
    check = jg.compile_guards(guards, f_locals={"b": box}, arg_names=("b",))
    assert snapshot.install(check, (box,))
    return check


def _with_settings() -> Box:
    box = _box()
    for i in range(N):
        setattr(box, f"s{i}", Settings())
    return box


def test_hasattr_through_a_property_that_reads_an_attribute_is_covered() -> None:
    """``hasattr(s, 'flag')`` where ``flag`` is a property whose getter is
    ``return self._flag`` is covered, and so is the getter's code (a property's fget is
    one of its slots); a getter that computes stays volatile."""
    box = _with_settings()
    check = _property_check(box)
    assert len(check.structure_skip.covered) == len(check.leaves)
    assert _snapshot_holds(check, box) and check.fn(box)
    computed = _property_check(box, "computed")
    assert len(computed.structure_skip.volatile.leaves) == N


def _reinit_property(box: Box) -> None:
    def other(self: Any) -> Any:
        raise AttributeError("flag")

    Settings.__dict__["flag"].__init__(other)


def _set_getter_code(box: Box) -> None:
    def other(self: Any) -> Any:
        return self._missing

    Settings.__dict__["flag"].fget.__code__ = other.__code__


PROPERTY_CHANGES: dict[str, Callable[[Box], None]] = {
    "the read attribute deleted": lambda box: delattr(box.s4, "_flag"),  # type: ignore[attr-defined]
    "property.__init__ called again": _reinit_property,
    "the getter's __code__ replaced": _set_getter_code,
    "the property replaced on the class": lambda box: setattr(
        Settings, "flag", property(lambda self: self._missing)),
}


@pytest.mark.parametrize("what", sorted(PROPERTY_CHANGES))
def test_a_property_change_fails_the_snapshot(what: str) -> None:
    """Each change that makes ``hasattr`` False (or the getter another) fails the snapshot,
    and the full check says False."""
    saved = Settings.__dict__["flag"]
    getter = saved.fget
    code = getter.__code__
    box = _with_settings()
    check = _property_check(box)
    try:
        PROPERTY_CHANGES[what](box)
        assert not _snapshot_holds(check, box)
        assert not check.fn(box)
    finally:
        getter.__code__ = code
        saved.__init__(getter)
        Settings.flag = saved  # type: ignore[method-assign]


def test_pins_callbacks_run_when_retaken_and_when_off() -> None:
    """``install(then=...)`` gets the Pins; ``on_rearm`` callbacks run with the call's
    arguments each time the snapshot is taken again, ``on_disarm`` once it is off."""
    box = _box()
    got: list[Any] = []
    check = jg.compile_guards(
        [CodeSource(AttrSource(LocalSource("b"), f"f{i}")).make_guard(GB.ID_MATCH)
         for i in range(N)] + [AttrSource(LocalSource("b"), "marker").make_guard(GB.EQUALS_MATCH)],
        f_locals={"b": box}, arg_names=("b",))
    assert snapshot.install(check, (box,), then=got.append)
    (pins,) = got
    assert pins is snapshot.pins(check) and len(pins.current()) == len(pins.sources)
    rearmed: list[Any] = []
    off: list[bool] = []
    pins.on_rearm(rearmed.append)
    pins.on_disarm(lambda: off.append(True))
    for i in range(snapshot.REARMS + 1):
        setattr(box, f"unrelated{i}", i)
        assert check.fn(box)
    assert rearmed == [(box,)] * (snapshot.REARMS - 1)
    assert off == [True] and pins.current() == ()


def test_a_deferred_check_gets_a_front_check_and_generates_only_when_it_runs() -> None:
    """A check whose code is deferred ([Note: Deferred check code]: a stored entry's) gets
    its front check from ``accepts``, with no full code generated; the first structure
    change generates the full check, which then rejects the call."""
    box = _box()
    built = _check(box)
    check = jg.CheckFunction(built.leaves, built.guards, name="deferred box",
                             arg_names=("b",), f_globals=None, deferred=True)
    assert snapshot.install(check, (box,))
    assert check.fn(box) and check.deferred
    _set_code(box)
    assert not check.fn(box) and not check.deferred


def test_a_deferred_check_that_rejects_the_call_gets_no_front_check() -> None:
    """A deferred check whose covered guard fails for the installing call gets no front
    check, and its full check (generated on the call) rejects the call."""
    box = _box()
    built = _check(box)
    check = jg.CheckFunction(built.leaves, built.guards, name="deferred failing box",
                             arg_names=("b",), f_globals=None, deferred=True)
    _set_code(box)
    assert not snapshot.install(check, (box,))
    assert getattr(check, "structure_skip", None) is None and check.deferred
    assert not check.fn(box) and not check.deferred
