"""Adversarial soundness of ``jitguard.specialize`` (class 11 of issue 9): defaults changed
after specializing, ``functools.wraps`` wrappers, hostile metaclasses, methods. The memoizing
compiler returns what ``fn`` returned on the compile's own arguments, so an entry served
where its assumptions no longer hold shows up as a stale result against an eager call."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from jitguard import AttrSource, CompileRequest, GuardBuilder, cache_of, specialize


def memo(req: CompileRequest) -> Callable[..., Any]:
    """The artifact returns what ``fn`` returned on the compile's own arguments."""
    result = req.fn(*req.args, **req.kwargs)
    return lambda *args, **kwargs: result


COMPILERS = [pytest.param(None, id="identity"), pytest.param(memo, id="memo")]


def compiles(f: Any) -> int:
    return cache_of(f).stats().compiles


# ---- defaults changed after specializing ---------------------------------------------------


@pytest.mark.parametrize("compiler", COMPILERS)
def test_defaults_replaced(compiler: Any) -> None:
    """``f.__defaults__`` replaced after specializing: calls that use the default see it."""

    def f(x: int, k: int = 2) -> int:
        return x * k

    sf = specialize(f, compiler=compiler)
    assert sf(3) == 6
    f.__defaults__ = (5,)
    assert sf(3) == f(3) == 15
    assert sf(3, 2) == 6


@pytest.mark.parametrize("compiler", COMPILERS)
def test_kwdefaults_replaced(compiler: Any) -> None:
    """``f.__kwdefaults__`` changed after specializing."""

    def f(x: int, *, k: int = 2) -> int:
        return x * k

    sf = specialize(f, compiler=compiler)
    assert sf(3) == 6
    assert f.__kwdefaults__ is not None
    f.__kwdefaults__["k"] = 7
    assert sf(3) == f(3) == 21


@pytest.mark.parametrize("compiler", COMPILERS)
def test_mutable_default_mutated(compiler: Any) -> None:
    """A list default mutated in place between calls."""
    acc: list[int] = [1]

    def f(x: int, items: list[int] = acc) -> int:
        return x + sum(items)

    sf = specialize(f, compiler=compiler)
    assert sf(1) == 2
    acc.append(10)
    assert sf(1) == f(1) == 12


@pytest.mark.parametrize("compiler", COMPILERS)
def test_defaults_removed(compiler: Any) -> None:
    """``f.__defaults__ = None``: a call relying on the default raises TypeError, as eager."""

    def f(x: int, k: int = 2) -> int:
        return x * k

    sf = specialize(f, compiler=compiler)
    assert sf(3) == 6
    f.__defaults__ = None
    with pytest.raises(TypeError):
        f(3)
    with pytest.raises(TypeError):
        sf(3)
    assert sf(3, 4) == 12


@pytest.mark.parametrize("compiler", COMPILERS)
def test_defaults_added(compiler: Any) -> None:
    """A default given to a required parameter after specializing: the call without it
    works, as eager."""

    def f(x: int, k: int) -> int:
        return x * k

    sf = specialize(f, compiler=compiler)
    assert sf(3, 2) == 6
    f.__defaults__ = (4,)
    assert sf(3) == f(3) == 12


def test_default_is_a_guarded_value() -> None:
    """A default that changes type (int to str) is not served by the int entry."""

    def f(x: int, k: Any = 2) -> Any:
        return x * k

    sf = specialize(f, compiler=memo)
    assert sf(3) == 6
    f.__defaults__ = ("ab",)
    assert sf(3) == f(3) == "ababab"


# ---- functools.wraps wrappers ---------------------------------------------------------------


def _inner(x: int, k: int = 1) -> int:
    return x * k


@pytest.mark.parametrize("compiler", COMPILERS)
def test_wraps_setdefault(compiler: Any) -> None:
    """A wraps wrapper doing ``kwargs.setdefault('k', 10)`` is called with the arguments as
    given (no 'multiple values for k')."""

    @functools.wraps(_inner)
    def wrapper(*args: Any, **kwargs: Any) -> int:
        kwargs.setdefault("k", 10)
        return _inner(*args, **kwargs)

    sf = specialize(wrapper, compiler=compiler)
    assert sf(3) == wrapper(3) == 30
    assert sf(3, k=2) == wrapper(3, k=2) == 6
    assert sf(4) == 40


@pytest.mark.parametrize("compiler", COMPILERS)
def test_wraps_wrapper_adds_positional(compiler: Any) -> None:
    """A wraps wrapper whose own signature differs from the wrapped one (it takes an extra
    leading argument)."""

    @functools.wraps(_inner)
    def wrapper(scale: int, *args: Any, **kwargs: Any) -> int:
        return scale + _inner(*args, **kwargs)

    sf = specialize(wrapper, compiler=compiler)
    assert sf(100, 3) == wrapper(100, 3) == 103
    assert sf(100, 3, 2) == wrapper(100, 3, 2) == 106
    assert sf(200, 3) == 203


@pytest.mark.parametrize("compiler", COMPILERS)
def test_wraps_kwargs_pop(compiler: Any) -> None:
    """A wraps wrapper that pops an option the wrapped function does not take."""

    @functools.wraps(_inner)
    def wrapper(*args: Any, **kwargs: Any) -> int:
        negate = kwargs.pop("negate", False)
        out = _inner(*args, **kwargs)
        return -out if negate else out

    sf = specialize(wrapper, compiler=compiler)
    assert sf(3, negate=True) == wrapper(3, negate=True) == -3
    assert sf(3) == 3
    assert sf(3, k=2, negate=True) == -6


def test_wraps_wrapper_defaults_differ() -> None:
    """A wrapper with its own default (the wrapped one's differs): the wrapper's is used."""

    @functools.wraps(_inner)
    def wrapper(x: int, k: int = 7) -> int:
        return _inner(x, k)

    sf = specialize(wrapper, compiler=memo)
    assert sf(2) == wrapper(2) == 14


# ---- hostile metaclasses -------------------------------------------------------------------


class RaisingEqMeta(type):
    def __eq__(cls, other: object) -> bool:
        raise RuntimeError("metaclass __eq__ must not be called")

    __hash__ = type.__hash__


class HostileA(metaclass=RaisingEqMeta):
    k = 2


class HostileB(metaclass=RaisingEqMeta):
    k = 5


class UnhashableMeta(type):
    def __eq__(cls, other: object) -> bool:
        raise RuntimeError("metaclass __eq__ must not be called")

    __hash__ = None  # type: ignore[assignment]


@pytest.mark.parametrize("compiler", COMPILERS)
def test_metaclass_eq_raises(compiler: Any) -> None:
    """A class whose metaclass ``__eq__`` raises, passed as an argument, then another one."""

    def f(cls: type, x: int) -> int:
        return cls.k * x  # type: ignore[attr-defined]

    sf = specialize(f, compiler=compiler)
    assert sf(HostileA, 3) == 6
    assert sf(HostileA, 3) == 6
    assert sf(HostileB, 3) == 15
    assert sf(HostileA, 3) == 6


@pytest.mark.parametrize("compiler", COMPILERS)
def test_metaclass_eq_raises_in_container(compiler: Any) -> None:
    """Such classes inside a tuple and a dict argument."""

    def f(pair: tuple[type, type], table: dict[str, type]) -> int:
        return pair[0].k * 10 + table["c"].k  # type: ignore[attr-defined]

    sf = specialize(f, compiler=compiler)
    assert sf((HostileA, HostileB), {"c": HostileA}) == 22
    assert sf((HostileB, HostileA), {"c": HostileB}) == 55


@pytest.mark.parametrize("compiler", COMPILERS)
def test_unhashable_metaclass(compiler: Any) -> None:
    """A class whose metaclass makes it unhashable and ``__eq__`` raise."""
    first = UnhashableMeta("First", (), {"k": 3})
    second = UnhashableMeta("Second", (), {"k": 4})

    def f(cls: Any, x: int) -> int:
        return cls.k * x

    sf = specialize(f, compiler=compiler)
    assert sf(first, 2) == 6
    assert sf(second, 2) == 8
    assert sf(first, 2) == 6


@pytest.mark.parametrize("compiler", COMPILERS)
def test_instance_of_hostile_class(compiler: Any) -> None:
    """Instances of such classes (their type is guarded without ``==``)."""

    def f(o: Any, x: int) -> int:
        return type(o).k * x

    sf = specialize(f, compiler=compiler)
    assert sf(HostileA(), 2) == 4
    assert sf(HostileB(), 2) == 10


# ---- @specialize on a method ---------------------------------------------------------------


def _guard_k(req: CompileRequest) -> Callable[..., Any]:
    """A compiler that needs ``self.k`` (and says so) and bakes it in."""
    req.add_guard(AttrSource(req.source("self"), "k"), GuardBuilder.EQUALS_MATCH)
    k = req.arguments["self"].k
    return lambda self, x: k * x


class Scaler:
    def __init__(self, k: int) -> None:
        self.k = k

    @specialize
    def plain(self, x: int) -> int:
        return self.k * x

    @specialize(compiler=_guard_k)
    def baked(self, x: int) -> int:
        return self.k * x


def test_method_new_instances_do_not_recompile() -> None:
    """``@specialize`` on a method: new instances hit the entry (no identity guard on self)."""
    for _ in range(5):
        assert Scaler(2).plain(3) == 6
    assert compiles(Scaler.plain) == 1


def test_method_results_follow_instance_state() -> None:
    """Instances with other state get their own results."""
    assert [Scaler(k).plain(3) for k in (1, 2, 3, 2)] == [3, 6, 9, 6]


def test_method_compiler_guards_what_it_needs() -> None:
    """A compiler that bakes ``self.k`` in and guards it: same k hits across instances, a
    new k recompiles, a mutated instance is never served stale."""
    before = compiles(Scaler.baked)
    assert Scaler(2).baked(3) == 6
    assert Scaler(2).baked(3) == 6
    assert compiles(Scaler.baked) == before + 1
    s = Scaler(2)
    assert s.baked(3) == 6
    s.k = 4
    assert s.baked(3) == 12
    assert Scaler(5).baked(3) == 15


def test_method_on_subclass_instance() -> None:
    """A subclass instance with an overriding attribute."""

    class Sub(Scaler):
        pass

    sub = Sub(7)
    assert sub.plain(2) == 14
    assert sub.baked(2) == 14


def test_method_called_through_class() -> None:
    """``Scaler.plain(instance, x)`` and the bound call agree."""
    s = Scaler(3)
    assert Scaler.plain(s, 2) == s.plain(2) == 6
