"""Adversarial tests of ``jitguard.torch.compile`` against eager: descriptors replaced on a
class or a base after compiling ([Note: Class namespaces Dynamo read]), and the float
facts a symbolic guard cannot see under ``dynamic=True`` ([Note: Float facts a symbolic
guard cannot see]); torch.compile is stale on each. Both dispatcher modes."""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from eager_compare import same  # noqa: E402

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402

X = torch.ones(3)


def scaled(k: float) -> property:
    """A property returning ``k`` (one code object for every ``k``: a closure cell tells
    them apart)."""
    return property(lambda self: k)


class Desc:
    """A custom non-data descriptor returning its ``v``."""

    def __init__(self, v: float) -> None:
        self.v = v

    def __get__(self, obj: Any, tp: Any = None) -> float:
        return self.v


def _classes() -> tuple[type, type]:
    class Base:
        factor = scaled(2.0)

        @classmethod
        def k(cls) -> float:
            return 2.0

        @staticmethod
        def s() -> float:
            return 2.0

        d = Desc(2.0)

    class Sub(Base):
        pass

    return Base, Sub


# (what the function reads, how the class is changed after compiling)
CHANGES: dict[str, tuple[Callable[[Any, Any], Any], Callable[[type, type], None]]] = {
    "property shadowed in the subclass": (
        lambda o, x: x * o.factor, lambda b, s: setattr(s, "factor", scaled(10.0))),
    "property replaced on the base": (
        lambda o, x: x * o.factor, lambda b, s: setattr(b, "factor", scaled(10.0))),
    "classmethod shadowed in the subclass": (
        lambda o, x: x * o.k(), lambda b, s: setattr(s, "k", classmethod(lambda c: 10.0))),
    "classmethod replaced on the base": (
        lambda o, x: x * o.k(), lambda b, s: setattr(b, "k", classmethod(lambda c: 10.0))),
    "staticmethod shadowed in the subclass": (
        lambda o, x: x * o.s(), lambda b, s: setattr(s, "s", staticmethod(lambda: 10.0))),
    "custom descriptor shadowed in the subclass": (
        lambda o, x: x * o.d, lambda b, s: setattr(s, "d", Desc(10.0))),
    "custom descriptor replaced on the base": (
        lambda o, x: x * o.d, lambda b, s: setattr(b, "d", Desc(10.0))),
    "method shadowing a property": (
        lambda o, x: x * o.factor, lambda b, s: setattr(s, "factor", 10.0)),
    "__getattr__ given to the subclass": (
        lambda o, x: x * getattr(o, "missing", 2.0),
        lambda b, s: setattr(s, "__getattr__", lambda self, n: 10.0)),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_descriptor_changed_on_a_class_or_base(dispatch_mode: str, change: str) -> None:
    """A descriptor replaced on the class or a base, or shadowed in a subclass, after
    compiling gives eager's result (each is stale in torch.compile or was in jitguard)."""
    read, mutate = CHANGES[change]
    base, sub = _classes()
    o = sub()

    def fn(o: Any, x: Any) -> Any:
        return read(o, x)

    cf = jgt.compile(fn, backend="eager")
    same(cf(o, X), fn(o, X))
    same(cf(o, X), X * 2.0)
    mutate(base, sub)
    same(cf(o, X), fn(o, X))
    same(cf(o, X), X * 10.0)


def test_a_super_call_sees_a_class_between_gain_the_method(dispatch_mode: str) -> None:
    """``super().f()`` resolved past the calling class: a class between it and the one
    that held ``f`` gaining its own ``f`` after compiling is seen."""
    class A:
        def f(self) -> float:
            return 2.0

    class B(A):
        pass

    class C(B):
        def f(self) -> float:
            return super().f()

    def fn(o: Any, x: Any) -> Any:
        return x * o.f()

    o = C()
    cf = jgt.compile(fn, backend="eager")
    same(cf(o, X), X * 2.0)
    B.f = lambda self: 10.0  # type: ignore[attr-defined]
    same(cf(o, X), fn(o, X))
    same(cf(o, X), X * 10.0)


def fresh(fn: Any) -> Any:
    """A new function object of ``fn``'s code: its own jitguard cache, made in this test's
    dispatcher mode ([Note: Shared entries] keys caches by the function object)."""
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__)


def _copysign(x: Any, k: float) -> Any:
    return x * math.copysign(1.0, k)


def _finite(x: Any, k: float) -> Any:
    return x + (1.0 if k - k == 0 else 2.0)  # symbolically always true: not for inf


def _sign_branch(x: Any, k: float) -> Any:
    return x * (3.0 if k >= 0 else 4.0) * math.copysign(1.0, k)


def _arith(x: Any, k: float) -> Any:
    return x * k + 1.0


INF, NAN = float("inf"), float("nan")
SEQUENCES = {
    "zero then negative zero": (_copysign, (0.0, -0.0, 0.0, -0.0)),
    "negative zero first": (_copysign, (-0.0, 0.0, -0.0)),
    "positive then negative zero": (_copysign, (2.0, -0.0, 3.0, 0.0)),
    "negative then zeros": (_copysign, (-2.0, 0.0, -0.0, -3.0)),
    "a branch on the sign, zeros": (_sign_branch, (1.0, 0.0, -0.0, -1.0, -0.0)),
    "finite then infinities": (_finite, (1.0, INF, -INF, 2.0)),
    "finite then nan": (_finite, (1.0, NAN, 3.0)),
    "arithmetic over zeros and infinities": (_arith, (2.0, -0.0, 0.0, INF, -INF, 5.0)),
}


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_float_facts_under_dynamic(dispatch_mode: str, name: str) -> None:
    """Under ``dynamic=True`` each call of a sequence of floats (zeros of both signs,
    infinities, NaN) gives eager's result, bit for bit in the sign."""
    fn, values = fresh(SEQUENCES[name][0]), SEQUENCES[name][1]
    cf = jgt.compile(fn, backend="eager", dynamic=True)
    for k in values:
        got, want = cf(X, k), fn(X, k)
        same(got, want)
        assert torch.equal(torch.signbit(got), torch.signbit(want)), (name, k)


def test_float_facts_are_listed_as_stricter(dispatch_mode: str) -> None:
    """The float guard is among the entry's stricter-than-torch guards, and a zero of the
    other sign costs one recompile, not a stale hit."""
    cf = jgt.compile(fresh(_arith), backend="eager", dynamic=True)
    same(cf(X, 0.5), X * 0.5 + 1.0)
    info = next(iter(jgt.capture_info(cf).values()))
    assert any("FLOAT_FACTS_MATCH on L['k']" in s for s in info.stricter)
    same(cf(X, 0.25), X * 0.25 + 1.0)  # the same entry: the value is symbolic
    assert jitguard.cache_of(cf).stats().compiles == 1
    same(cf(X, -0.0), X * -0.0 + 1.0)
    assert jitguard.cache_of(cf).stats().compiles == 2
