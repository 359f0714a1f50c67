"""Tests for jitguard._src.cache.policy: the default guards of arguments, user rules and the
aliasing guards."""

from __future__ import annotations

import collections
import functools
import math
from typing import Any, NamedTuple

import pytest

from jitguard import (
    ArgContext,
    ArgPolicy,
    AttrSource,
    Guard,
    GuardBuilder,
    LocalSource,
    cache_of,
    register_arg_rule,
    specialize,
)
from jitguard._src.cache.policy import default_policy, is_immutable

GB = GuardBuilder


def guards_of(value: Any, *, policy: ArgPolicy = default_policy, **kw: Any) -> list[tuple[str, str]]:
    """(source name, kind name) of the guards the policy installs for ``x = value``."""
    out: list[Guard] = []
    ctx = ArgContext(policy, out.append, **kw)
    ctx.visit(LocalSource("x"), value)
    out += ctx.aliasing_guards()
    return [(g.name, g.create_fn_name() if not isinstance(g.create_fn, functools.partial)
             else g.create_fn.func.__name__) for g in out]


class Point:
    def __init__(self, x: Any, y: Any) -> None:
        self.x, self.y = x, y

    def norm(self) -> Any:
        return math.hypot(self.x, self.y)


class Pair(NamedTuple):
    a: int
    b: int


def test_scalars_by_value() -> None:
    """Scalars, strings, bytes and None are guarded by (type-exact) value."""
    for v in (3, 2.5, 1j, "s", b"b", True, None):
        assert guards_of(v) == [("L['x']", "CONSTANT_MATCH")]


def test_dynamic_scalar_by_type() -> None:
    """A dynamic int is guarded by type only; a dynamic bool stays by value."""
    assert guards_of(3, is_dynamic=lambda s: True) == [("L['x']", "TYPE_MATCH")]
    assert guards_of(True, is_dynamic=lambda s: True) == [("L['x']", "CONSTANT_MATCH")]


def test_static_wins_over_dynamic() -> None:
    """A source both static and dynamic is treated as static."""
    assert guards_of(3, is_dynamic=lambda s: True, is_static=lambda s: True) == [
        ("L['x']", "CONSTANT_MATCH")
    ]


def test_sequences_by_type_length_and_items() -> None:
    """Tuples, lists and named tuples: exact type and length, then each item."""
    assert guards_of((1, "a")) == [
        ("L['x']", "SEQUENCE_LENGTH"), ("L['x'][0]", "CONSTANT_MATCH"),
        ("L['x'][1]", "CONSTANT_MATCH"),
    ]
    assert guards_of([1])[:2] == [("L['x']", "SEQUENCE_LENGTH"), ("L['x'][0]", "CONSTANT_MATCH")]
    assert guards_of(Pair(1, 2))[0] == ("L['x']", "SEQUENCE_LENGTH")


def test_dicts_by_keys_and_values() -> None:
    """Dicts: exact type and keys in order, then each value."""
    assert guards_of({"k": 1, 2: "v"}) == [
        ("L['x']", "DICT_KEYS_MATCH"), ("L['x']['k']", "CONSTANT_MATCH"),
        ("L['x'][2]", "CONSTANT_MATCH"),
    ]
    assert guards_of(collections.OrderedDict(a=1))[0] == ("L['x']", "DICT_KEYS_MATCH")


def test_dict_with_unnamable_key_is_an_object() -> None:
    """A dict whose key has no literal form is guarded by type and identity."""
    assert guards_of({Point(1, 2): 1}) == [("L['x']", "TYPE_MATCH"), ("L['x']", "ID_MATCH")]
    assert guards_of({complex("nan"): 1}) == [("L['x']", "TYPE_MATCH"), ("L['x']", "ID_MATCH")]


def test_dict_keyed_by_any_builtin_scalar_is_guarded_by_keys() -> None:
    """Every builtin scalar with a literal form names an item, complex numbers included."""
    assert guards_of({1j: 1, b"k": None})[:2] == [
        ("L['x']", "DICT_KEYS_MATCH"), ("L['x'][1j]", "CONSTANT_MATCH"),
    ]


def test_functions_classes_modules() -> None:
    """Functions by code, closure, globals and defaults; classes, modules and builtins by
    identity."""
    assert guards_of(lambda: 0) == [
        ("L['x']", "FUNCTION_MATCH"), ("L['x'].__globals__", "ID_MATCH"),
        ("L['x'].__defaults__", "CONSTANT_MATCH"), ("L['x'].__kwdefaults__", "CONSTANT_MATCH"),
    ]
    assert guards_of(Point) == [("L['x']", "ID_MATCH")]
    assert guards_of(math) == [("L['x']", "ID_MATCH")]
    assert guards_of(len) == [("L['x']", "ID_MATCH")]


def test_bound_method_by_function_and_self() -> None:
    """A bound method is guarded through __func__ and __self__, not its fresh identity."""
    names = guards_of(Point(1, 2).norm)
    assert ("L['x'].__func__", "FUNCTION_MATCH") in names
    assert ("L['x'].__self__", "ID_MATCH") in names


def test_other_objects_by_type_and_identity() -> None:
    """Objects without a rule: exact type and identity."""
    assert guards_of(Point(1, 2)) == [("L['x']", "TYPE_MATCH"), ("L['x']", "ID_MATCH")]


def test_frozensets_and_ranges() -> None:
    """Frozensets of constants, ranges and slices by value; other frozensets as objects."""
    assert guards_of(frozenset({1, 2})) == [("L['x']", "CONSTANT_MATCH")]
    assert guards_of(range(3)) == [("L['x']", "CONSTANT_MATCH")]
    assert guards_of(frozenset({Point}))[0] == ("L['x']", "TYPE_MATCH")


def test_subclass_of_builtin_is_an_object() -> None:
    """Built-in rules are exact: an int subclass is guarded as an object."""
    class MyInt(int):
        pass

    assert guards_of(MyInt(3)) == [("L['x']", "TYPE_MATCH"), ("L['x']", "ID_MATCH")]


def test_user_rule_like_a_pytree_node() -> None:
    """A registered rule guards a user type through its parts."""
    def point_rule(ctx: ArgContext, source: Any, value: Point) -> None:
        ctx.by_type(source)
        ctx.visit(AttrSource(source, "x"), value.x)
        ctx.visit(AttrSource(source, "y"), value.y)

    policy = ArgPolicy()
    policy.register(Point, point_rule)
    assert guards_of(Point(1, "a"), policy=policy) == [
        ("L['x']", "TYPE_MATCH"), ("L['x'].x", "CONSTANT_MATCH"), ("L['x'].y", "CONSTANT_MATCH"),
    ]
    # the default policy is untouched
    assert guards_of(Point(1, "a")) == [("L['x']", "TYPE_MATCH"), ("L['x']", "ID_MATCH")]


def test_rule_lookup_follows_mro_unless_exact() -> None:
    """A rule applies to subclasses unless registered with subclasses=False."""
    class Sub(Point):
        pass

    policy = ArgPolicy()
    policy.register(Point, lambda ctx, s, v: ctx.by_type(s))
    assert guards_of(Sub(1, 2), policy=policy) == [("L['x']", "TYPE_MATCH")]
    exact = ArgPolicy()
    exact.register(Point, lambda ctx, s, v: ctx.by_type(s), subclasses=False)
    assert guards_of(Sub(1, 2), policy=exact)[-1] == ("L['x']", "ID_MATCH")


def test_register_twice_needs_replace() -> None:
    """Registering a type twice is an error unless replace=True; unregister removes it."""
    policy = ArgPolicy()
    policy.register(Point, lambda ctx, s, v: None)
    with pytest.raises(ValueError, match="already registered"):
        policy.register(Point, lambda ctx, s, v: None)
    policy.register(Point, lambda ctx, s, v: ctx.by_type(s), replace=True)
    policy.unregister(Point)
    with pytest.raises(KeyError):
        policy.unregister(Point)
    with pytest.raises(TypeError):
        policy.register("Point", print)  # type: ignore[arg-type]


def test_empty_base_policy_guards_everything_as_objects() -> None:
    """ArgPolicy(base=None) has no rules: every value is an object."""
    assert guards_of(3, policy=ArgPolicy(base=None)) == [
        ("L['x']", "TYPE_MATCH"), ("L['x']", "ID_MATCH")
    ]


def test_register_arg_rule_reaches_specialize() -> None:
    """register_arg_rule changes the default guards of every specialized function."""
    class Tagged:
        def __init__(self, tag: str) -> None:
            self.tag = tag

    def tagged_rule(ctx: ArgContext, source: Any, value: Tagged) -> None:
        ctx.by_type(source)
        ctx.visit(AttrSource(source, "tag"), value.tag)

    register_arg_rule(Tagged, tagged_rule)
    try:
        f = specialize(lambda t: t.tag)
        assert f(Tagged("a")) == "a" and f(Tagged("a")) == "a"
        assert cache_of(f).stats().compiles == 1  # two objects, one entry: by tag
        f(Tagged("b"))
        assert cache_of(f).stats().compiles == 2
    finally:
        default_policy.unregister(Tagged)


def test_aliasing_of_mutable_arguments() -> None:
    """f(l, l) and f(l1, l2) with equal lists get different aliasing guards."""
    same: list[Guard] = []
    ctx = ArgContext(default_policy, same.append)
    shared = [1]
    ctx.visit(LocalSource("a"), shared)
    ctx.visit(LocalSource("b"), shared)
    names = [g.create_fn.func.__name__ for g in ctx.aliasing_guards()]  # type: ignore[attr-defined]
    assert names == ["DUPLICATE_INPUT"]
    other: list[Guard] = []
    ctx = ArgContext(default_policy, other.append)
    ctx.visit(LocalSource("a"), [1])
    ctx.visit(LocalSource("b"), [1])
    names = [g.create_fn.func.__name__ for g in ctx.aliasing_guards()]  # type: ignore[attr-defined]
    assert names == ["NO_ALIASING"]


def test_no_aliasing_guards_for_immutables_and_pinned() -> None:
    """Immutable values and identity-pinned objects need no aliasing guards."""
    out: list[Guard] = []
    ctx = ArgContext(default_policy, out.append)
    p = Point(1, 2)
    for name, v in (("a", 1), ("b", 1), ("c", p), ("d", p), ("e", "s")):
        ctx.visit(LocalSource(name), v)
    assert ctx.aliasing_guards() == []


def test_fresh_and_ignored_sources_leave_aliasing() -> None:
    """**kwargs dicts and sources marked ignore_aliasing get no aliasing guards."""
    out: list[Guard] = []
    ctx = ArgContext(default_policy, out.append, fresh=("kw",))
    ctx.visit(LocalSource("kw"), {})
    ctx.visit(LocalSource("a"), [])
    assert ctx.aliasing_guards() == []
    ctx.visit(LocalSource("b"), [])
    ctx.ignore_aliasing(LocalSource("b"))
    assert ctx.aliasing_guards() == []
    assert ctx.aliasing_guards(allowed=[LocalSource("a")]) == []


def test_cycle_is_guarded_by_type_and_aliasing() -> None:
    """A list that contains itself is guarded by type inside, and tied to itself."""
    cyc: list[Any] = []
    cyc.append(cyc)
    names = guards_of(cyc)
    assert ("L['x'][0]", "TYPE_MATCH") in names
    assert ("L['x']", "DUPLICATE_INPUT") in names


def test_max_depth_falls_back_to_objects() -> None:
    """Past max_depth, values are guarded as objects (no unbounded recursion)."""
    deep: Any = 0
    for _ in range(10):
        deep = [deep]
    out: list[Guard] = []
    ctx = ArgContext(default_policy, out.append, max_depth=3)
    ctx.visit(LocalSource("x"), deep)
    assert [g.create_fn_name() for g in out][-2:] == ["TYPE_MATCH", "ID_MATCH"]
    assert len(out) == 5


def test_dynamic_sources_are_recorded() -> None:
    """Visited sources that are dynamic are listed in dynamic_sources."""
    out: list[Guard] = []
    ctx = ArgContext(default_policy, out.append,
                     is_dynamic=lambda s: s == LocalSource("x"))
    ctx.visit(LocalSource("x"), 3)
    ctx.visit(LocalSource("y"), 4)
    assert ctx.dynamic_sources == {LocalSource("x")}


def test_is_immutable() -> None:
    """Immutable kinds of value are recognized."""
    assert all(is_immutable(v) for v in (1, "s", (1,), frozenset(), Point, len, math, None))
    assert not any(is_immutable(v) for v in ([], {}, Point(1, 2), set()))


class _HostileMeta(type):
    """A metaclass whose comparison, hash, truth and repr all raise."""

    def __eq__(cls, other: object) -> bool:
        raise RuntimeError("metaclass __eq__ called")

    def __ne__(cls, other: object) -> bool:
        raise RuntimeError("metaclass __ne__ called")

    def __hash__(cls) -> int:
        raise RuntimeError("metaclass __hash__ called")

    def __bool__(cls) -> bool:
        raise RuntimeError("metaclass __bool__ called")


class Hostile(metaclass=_HostileMeta):
    """Instances whose own comparison and hash raise too."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("__eq__ called")

    def __hash__(self) -> int:
        raise RuntimeError("__hash__ called")


class _EqRaisesMeta(type):
    def __eq__(cls, other: object) -> bool:
        raise RuntimeError("metaclass __eq__ called")

    __hash__ = type.__hash__


class _EqRaises(metaclass=_EqRaisesMeta):
    """A class that can be a dict key, but not be compared with ==."""


@pytest.mark.parametrize(
    "make",
    [
        lambda: Hostile(),
        lambda: [Hostile(), 1],
        lambda: {"a": Hostile()},
        lambda: (Hostile(), Hostile),
        lambda: Hostile,
        lambda: {_EqRaises: 1},
    ],
    ids=["object", "in-list", "dict-value", "in-tuple", "the-class", "class-as-key"],
)
def test_types_are_never_compared_with_eq(make: Any) -> None:
    """Values whose type's metaclass raises on ==, != and hash are guarded and dispatched
    without a crash: types are compared by identity only (also in the guards' texts)."""
    f = specialize(lambda x: 1)
    a, b = make(), make()
    assert f(a) == 1 and f(a) == 1 and f(b) == 1 and f(2) == 1 and f(a) == 1
    stats = cache_of(f).stats()
    assert stats.hits >= 2 and stats.failures == 0
    assert all(isinstance(r, str) for r in cache_of(f).reasons())


def test_hostile_type_gets_the_object_rule() -> None:
    """A metaclass __eq__ that would claim equality to int cannot pass an object off as one:
    rules are found by identity along the real MRO."""
    class Liar(type):
        def __eq__(cls, other: object) -> bool:
            return True

        __hash__ = type.__hash__

    class FakeInt(metaclass=Liar):
        pass

    assert guards_of(FakeInt()) == [("L['x']", "TYPE_MATCH"), ("L['x']", "ID_MATCH")]


def test_receiver_is_guarded_by_type_only() -> None:
    """The receiver of a method (ArgContext(receiver=...)) is guarded by its exact type, not
    its identity; other objects and other parameters keep type and identity."""
    p = Point(1, 2)
    assert guards_of(p, receiver="x") == [("L['x']", "TYPE_MATCH")]
    assert guards_of(p, receiver="y") == [("L['x']", "TYPE_MATCH"), ("L['x']", "ID_MATCH")]
    out: list[Guard] = []
    ctx = ArgContext(default_policy, out.append, receiver="x")
    ctx.visit(AttrSource(LocalSource("x"), "p"), p)  # not the parameter itself
    assert [g.create_fn_name() for g in out] == ["TYPE_MATCH", "ID_MATCH"]


def test_receiver_keeps_its_own_rule() -> None:
    """A receiver whose type has a rule (a list subclass registered by the user, a named
    tuple, a class for a classmethod) is guarded by that rule."""
    assert guards_of([1], receiver="x") == [("L['x']", "SEQUENCE_LENGTH"), ("L['x'][0]", "CONSTANT_MATCH")]
    assert guards_of(Point, receiver="x") == [("L['x']", "ID_MATCH")]


def test_receiver_still_takes_part_in_aliasing() -> None:
    """self is not pinned by identity, so m(self, self) and m(self, other) differ."""
    class C:
        @specialize
        def same(self, other):  # type: ignore[no-untyped-def]
            return self is other

    a, b = C(), C()
    assert a.same(a) is True and a.same(b) is False and b.same(b) is True
    assert cache_of(C.same).stats().compiles == 2
