"""Adversarial probes of identity guards in both dispatch modes: objects guarded by identity
dying and a new object taking their id (arguments, globals, attributes), objects that
cannot be weakly referenced, bound methods of slotted instances, and guarded properties
that call the specialized function back. The compilers memoize: a stale entry shows as a
wrong answer."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest

from jitguard import CompileRequest, GlobalSource, GuardBuilder, LocalSource, specialize
from jitguard._src.sources import AttrSource

pytestmark = pytest.mark.usefixtures("dispatch_mode")


def memo(request: CompileRequest) -> Callable[..., Any]:
    result = request.fn(*request.args, **request.kwargs)
    return lambda *args, **kwargs: result


def guarding(*sources: Any) -> Callable[[CompileRequest], Callable[..., Any]]:
    """A memoizing compiler that guards ``sources`` by identity (or, for an
    ``("eq", source)`` pair, by value) first."""
    def compiler(request: CompileRequest) -> Callable[..., Any]:
        for source in sources:
            if isinstance(source, tuple):
                request.add_guard(source[1], GuardBuilder.EQUALS_MATCH)
            else:
                request.add_guard(source, GuardBuilder.ID_MATCH)
        return memo(request)
    return compiler


def special(fn: Callable[..., Any], compiler: Any = memo, **options: Any) -> Any:
    return specialize(fn, compiler=compiler, recompile_limit=None, automatic_dynamic=False,
                      global_state=False, **options)


class Obj:
    def __init__(self, v: Any) -> None:
        self.v = v


class Slotted:
    __slots__ = ("v",)

    def __init__(self, v: int) -> None:
        self.v = v

    def get(self) -> int:
        return self.v


class MyInt(int):
    pass


class MyTuple(tuple):  # type: ignore[type-arg]
    pass


def shown(o: Any) -> Any:
    return len(o) if isinstance(o, memoryview) else repr(o)


@pytest.mark.parametrize("make", [
    Slotted, MyInt, lambda i: MyTuple((i,)), lambda i: {i: i}.keys(), lambda i: iter([i]),
    lambda i: memoryview(bytearray(i + 1)),
], ids=["slotted", "int-subclass", "tuple-subclass", "dict-keys", "iterator", "memoryview"])
def test_identities_that_cannot_be_weakly_held(make: Callable[[int], Any]) -> None:
    """Objects without weak references, guarded by identity, dying one after another (ids
    reused): every call is answered for its own object."""
    f = special(shown)
    for i in range(20):
        o = make(i)
        assert f(o) == shown(o)
        del o
        gc.collect()


def test_bound_methods_of_slotted_instances_dying() -> None:
    """Bound methods whose ``__self__`` cannot be weakly held, dying one after another."""
    f = special(lambda m: m())
    for i in range(20):
        s = Slotted(i)
        assert f(s.get) == i
        del s


def test_a_global_guarded_by_identity_replaced_at_the_same_id() -> None:
    """A global guarded by identity replaced by a new object at the dead one's id."""
    ns: dict[str, Any] = {}
    exec("def fn(x):\n    return (x, OBJ.v)\n", ns)
    f = special(ns["fn"], guarding(GlobalSource("OBJ")))
    reused = 0
    for i in range(60):
        old = id(ns.pop("OBJ", None))
        ns["OBJ"] = Obj(i)
        reused += id(ns["OBJ"]) == old
        assert f(1) == (1, i)
        assert f(1) == (1, i)
    assert reused


def test_an_attribute_guarded_by_identity_replaced_at_the_same_id() -> None:
    """An attribute guarded by identity replaced by a new object at the dead one's id."""
    holder = Obj(None)
    f = special(lambda h: h.v.v, guarding(AttrSource(LocalSource("h"), "v")))
    for i in range(60):
        holder.v = None
        holder.v = Obj(i)
        assert f(holder) == i
        assert f(holder) == i


@pytest.mark.parametrize("maxsize", [None, 1, 2])
def test_a_guarded_property_that_calls_the_function_back(maxsize: Any) -> None:
    """A property read by a guard calls the specialized function (which compiles and, with
    a small maxsize, evicts) before answering: every call still gets its own result."""
    state: dict[str, Any] = {}

    class Deep:
        def __init__(self, v: int, depth: int) -> None:
            self._v = v
            self.depth = depth

        @property
        def v(self) -> int:
            if self.depth > 0:
                state["f"](Deep(self._v + 1, self.depth - 1))
            return self._v

    o = LocalSource("o")
    f = special(lambda o: (o._v, o.depth), guarding(("eq", AttrSource(o, "v")),
                                                   ("eq", AttrSource(o, "depth"))),
                maxsize=maxsize)
    state["f"] = f
    for i in range(4):
        for depth in (0, 1, 2):
            assert f(Deep(i % 2, depth)) == (i % 2, depth)
