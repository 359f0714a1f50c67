"""Adversarial soundness probes of the core cache (no torch), in both dispatch modes: values
equal across types, hostile dunders, swapped classes, calls by keyword, methods, recursion,
re-entrancy, threads with eviction, id reuse, arrays and hostile names. The compilers
memoize, so a stale entry shows as a wrong answer against the plain function."""

from __future__ import annotations

import gc
import math
import struct
import sys
import threading
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from jitguard import CompileRequest, cache_of, specialize

pytestmark = pytest.mark.usefixtures("dispatch_mode")


class Memo:
    """Artifacts return ``fn``'s result on the compile's own arguments."""

    def __init__(self) -> None:
        self.compiles = 0

    def __call__(self, request: CompileRequest) -> Callable[..., Any]:
        self.compiles += 1
        if request.dynamic_sources:
            return request.fn
        result = request.fn(*request.args, **request.kwargs)
        return lambda *a, **k: result


def memoized(fn: Callable[..., Any], **options: Any) -> Any:
    options.setdefault("automatic_dynamic", False)
    options.setdefault("recompile_limit", None)
    return specialize(fn, compiler=Memo(), **options)


def tag(x: Any) -> Any:
    tp = type(x)
    if tp is float:
        return ("float", "nan" if math.isnan(x) else x.hex())
    if isinstance(x, (tuple, list)):
        return (tp.__qualname__, tuple(tag(i) for i in x))
    try:
        r = repr(x)
    except Exception:
        r = "?"
    return (tp.__qualname__, r)


def test_equal_values_of_many_types() -> None:
    """1, 1.0, True, Decimal, Fraction, int/str subclasses, -0.0 never share an entry."""
    class MyInt(int):
        pass

    class MyStr(str):
        pass

    class MyBool(int):
        def __bool__(self) -> bool:
            return False

    f = memoized(tag)
    values = [1, 1.0, True, Decimal(1), Fraction(1), MyInt(1), MyBool(1), 1 + 0j, "a",
              MyStr("a"), b"a", -0.0, 0.0, 0, False, (1,), (1.0,), (MyInt(1),), [MyStr("a")],
              Decimal("1.0"), Decimal("-0"), Decimal(0), float("nan"), Decimal("nan")]
    for _ in range(2):
        for v in values:
            assert f(v) == tag(v), v


def test_numpy_scalars_vs_python() -> None:
    """numpy scalars equal to Python scalars never share their entries."""
    np = pytest.importorskip("numpy")
    f = memoized(tag)
    values = [1, np.int64(1), np.int32(1), np.float64(1.0), 1.0, np.bool_(True), True,
              np.float32(-0.0), np.float64("nan"), np.str_("a"), "a"]
    for _ in range(2):
        for v in values:
            assert f(v) == tag(v), v


def test_class_swapped_between_calls() -> None:
    """An object whose ``__class__`` is reassigned misses its old entry."""
    class A:
        def who(self) -> str:
            return "A"

    class B:
        def who(self) -> str:
            return "B"

    f = memoized(lambda o: o.who())
    o = A()
    assert f(o) == "A"
    o.__class__ = B
    assert f(o) == "B"
    o.__class__ = A
    assert f(o) == "A"


def test_method_receiver_class_swapped() -> None:
    """A specialized method whose receiver's class is swapped misses."""
    class A:
        @specialize
        def who(self) -> str:
            return type(self).__name__

    class B(A):
        pass

    a = A()
    assert a.who() == "A"
    a.__class__ = B
    assert a.who() == "B"


def test_hostile_eq_in_a_container_argument() -> None:
    """Items whose ``__eq__`` raises, lies or mutates: served, never stale."""
    calls = []

    class Liar:
        def __init__(self, v: int) -> None:
            self.v = v

        def __eq__(self, other: object) -> bool:
            calls.append(1)
            return True

        __hash__ = object.__hash__

    f = memoized(lambda xs: [x.v for x in xs])
    a, b = Liar(1), Liar(2)
    assert f([a]) == [1]
    assert f([b]) == [2]
    assert f([a, b]) == [1, 2]


def test_keyword_and_positional_and_defaults() -> None:
    """Positional, keyword and defaulted calls of one function agree with the plain one."""
    def fn(a: Any, b: Any = 2, *args: Any, c: Any = 3, **kw: Any) -> Any:
        return (tag(a), tag(b), tag(args), tag(c), sorted((k, tag(v)) for k, v in kw.items()))

    f = memoized(fn)
    calls = [((1,), {}), ((1, 2), {}), ((1,), {"b": 2}), ((1, 2.0), {}), ((1, 2, 3), {}),
             ((1,), {"c": 3}), ((1,), {"c": 3.0}), ((1,), {"d": 1}), ((1,), {"d": True}),
             ((), {"a": 1}), ((), {"a": 1, "b": True}), ((1, 2, 3, 4), {"c": 5, "e": 6})]
    for _ in range(2):
        for args, kwargs in calls:
            assert f(*args, **kwargs) == fn(*args, **kwargs)
    fn.__kwdefaults__["c"] = 4
    assert f(1) == fn(1)
    fn.__defaults__ = (5,)
    assert f(1) == fn(1)


def test_strange_kwarg_names() -> None:
    """``**kwargs`` keys with quotes, newlines and non-identifiers are named safely."""
    f = memoized(lambda **kw: sorted((k, tag(v)) for k, v in kw.items()))
    names = ["a'b", 'a"b', "a\nb", "a\\", "1x", "", "\x00", "é", "a b", "'''", "\"\"\"",
             "__class__", "L", "G", "self", "\u2028"]
    for _ in range(2):
        for n in names:
            assert f(**{n: 1}) == [(n, tag(1))]
            assert f(**{n: 2}) == [(n, tag(2))]


def test_strange_dict_keys() -> None:
    """Dict keys with quotes, newlines, str subclasses and equal-but-different types."""
    class MyStr(str):
        pass

    f = memoized(lambda d: sorted((tag(k), tag(v)) for k, v in d.items()))
    keys = ["a'b", "a\nb", "\\", MyStr("x"), "x", 1, 1.0, True, (1, "a'"), b"\n", -0.0, 0.0,
            None, frozenset({1})]
    for _ in range(2):
        for k in keys:
            for v in (1, 2):
                d = {k: v}
                assert f(d) == sorted((tag(a), tag(b)) for a, b in d.items()), (k, v)


class WithMethods:
    def __init__(self, v: int) -> None:
        self.v = v

    def meth(self, x: int) -> Any:
        return (self.v, x)

    @classmethod
    def cm(cls, x: int) -> Any:
        return (cls.__name__, x)

    @staticmethod
    def sm(x: int) -> Any:
        return ("sm", x)


class Sub(WithMethods):
    pass


def test_bound_methods_of_different_instances() -> None:
    """Bound methods, classmethods and staticmethods as arguments."""
    f = memoized(lambda m, x: m(x))
    a, b = WithMethods(1), WithMethods(2)
    for _ in range(2):
        for m in (a.meth, b.meth, WithMethods.cm, Sub.cm, WithMethods.sm, Sub.sm, Sub(3).meth):
            assert f(m, 1) == m(1)


def test_specialized_classmethod_and_staticmethod() -> None:
    """specialize under classmethod and staticmethod serves each class apart."""
    class K:
        @classmethod
        @specialize
        def cm(cls, x: int) -> Any:
            return (cls.__name__, x)

        @staticmethod
        @specialize
        def sm(x: int) -> Any:
            return ("sm", x)

    class L2(K):
        pass

    for _ in range(2):
        assert K.cm(1) == ("K", 1) and L2.cm(1) == ("L2", 1) and K().cm(2) == ("K", 2)
        assert K.sm(1) == ("sm", 1) and L2.sm(2) == ("sm", 2)


def test_recursion_recompiles_during_its_own_call() -> None:
    """A specialized function calling itself with new values (recompiling inside a call)."""
    @specialize
    def fact(n: int) -> int:
        return 1 if n <= 1 else n * fact(n - 1)

    for n in (5, 3, 7, 5, 0):
        assert fact(n) == math.factorial(max(n, 1))


def test_memoized_recursion() -> None:
    """A memoizing compiler on a recursive function (the compile calls the function)."""
    def fib(n: int) -> int:
        return n if n < 2 else g(n - 1) + g(n - 2)

    g = memoized(fib)
    for n in (6, 2, 9, 6):
        assert g(n) == [0, 1, 1, 2, 3, 5, 8, 13, 21, 34][n]


def test_reentrant_eq_calls_the_function() -> None:
    """A value whose ``__eq__`` calls the specialized function itself."""
    holder: dict[str, Any] = {}

    class Re(int):
        def __eq__(self, other: object) -> bool:
            holder["f"](int(self) + 100)
            return int.__eq__(self, other)

        __hash__ = int.__hash__

    f = memoized(tag)
    holder["f"] = f
    for _ in range(2):
        for v in (Re(1), 1, Re(2), [Re(1)], {"k": Re(1)}):
            assert f(v) == tag(v)


def test_threads_racing_compile_and_eviction() -> None:
    """Threads racing compiles with maxsize=2: every answer is the plain function's."""
    f = memoized(lambda x, y: (tag(x), tag(y)), maxsize=2)
    errors: list[Any] = []

    def work(seed: int) -> None:
        try:
            for i in range(300):
                x = (i * seed) % 5
                y = [1.0, 1, True, "1"][i % 4]
                got = f(x, y)
                if got != (tag(x), tag(y)):
                    errors.append((x, y, got))
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        ts = [threading.Thread(target=work, args=(s,)) for s in (1, 2, 3, 7)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors[:3]
    assert len(cache_of(f).entries()) <= 2


def test_id_reuse_of_objects_and_functions() -> None:
    """Objects and functions dying and another taking their id never hit the dead one's entry."""
    class Obj:
        def __init__(self, v: int) -> None:
            self.v = v

    f = memoized(lambda o: o.v)
    g = memoized(lambda fn: fn())
    for i in range(50):
        assert f(Obj(i)) == i
        assert g(lambda i=i: i) == i
        def inner(k: int = i) -> int:
            return k
        assert g(inner) == i
        gc.collect()


@pytest.mark.filterwarnings("ignore::jitguard.RecompileLimitWarning")
def test_limit_and_clear_changed_inside_a_call() -> None:
    """The compiler lowering its own cache's limit, clearing it and forbidding recompiles."""
    from jitguard import RecompileError, no_recompiles
    state: dict[str, Any] = {"n": 0}

    def compiler(request: CompileRequest) -> Callable[..., Any]:
        cache = cache_of(state["f"])
        state["n"] += 1
        cache.recompile_limit = 2
        if state["n"] == 2:
            cache.clear()
        if request.dynamic_sources:
            return request.fn
        result = request.fn(*request.args)
        return lambda *a: result

    f = specialize(lambda x: tag(x), compiler=compiler, recompile_limit=None)
    state["f"] = f
    for v in (1, 2, 3, 1, 2.0, "a", 1):
        assert f(v) == tag(v)
    with no_recompiles():
        for v in (1, 7):
            try:
                assert f(v) == tag(v)
            except RecompileError:
                pass


@pytest.mark.parametrize("option", ["dynamic", "static"])
def test_declared_sources_of_the_wrong_type_are_a_clear_error(option: str) -> None:
    """``dynamic=[1]`` (not a name or a Source) is a TypeError naming it, at specialize."""
    with pytest.raises(TypeError, match=r"parameter name.*got int 1"):
        specialize(lambda x: x, **{option: [1]})


@pytest.mark.parametrize("option", ["dynamic", "static"])
@pytest.mark.parametrize("value", [False, True, 3])
def test_declared_sources_that_are_no_collection_are_a_clear_error(option: str, value: Any) -> None:
    """``dynamic=False`` (a scalar, not a list of names) is a TypeError with the form to write."""
    with pytest.raises(TypeError, match=rf"{option}= takes parameter names.*{option}=\['n'\]"):
        specialize(lambda x: x, **{option: value})


def test_a_restart_declaring_a_wrong_source_is_a_clear_error() -> None:
    """A compiler asking add_guard or is_dynamic about a non-source gets that TypeError."""
    from jitguard import GuardBuilder

    def compiler(request: CompileRequest) -> Callable[..., Any]:
        request.add_guard(3.5, GuardBuilder.TYPE_MATCH)  # type: ignore[arg-type]
        return request.fn

    f = specialize(lambda x: x, compiler=compiler)
    with pytest.raises(TypeError, match=r"got float 3\.5"):
        f(1)


NANS = [float("nan"), -float("nan"), struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]]


def nan_sign(x: Any) -> Any:
    """What a function can read from a NaN: its sign and bits."""
    if type(x) is float:
        return ("f", math.copysign(1.0, x), struct.pack("<d", x))
    if type(x) is complex:
        return ("c", nan_sign(x.real), nan_sign(x.imag))
    if type(x) in (tuple, list):
        return (type(x).__name__, tuple(nan_sign(i) for i in x))
    if type(x) is dict:
        return ("d", tuple((nan_sign(k), nan_sign(v)) for k, v in x.items()))
    if type(x) is frozenset:
        return ("fs", tuple(nan_sign(i) for i in x))
    return (type(x).__name__, repr(x))


def test_nans_of_other_sign_or_payload_are_other_values() -> None:
    """nan, -nan and a NaN with a payload (which copysign and struct tell apart) never
    share an entry, as scalars, items, complex parts, dict values or a second argument."""
    f = memoized(nan_sign)
    g = memoized(lambda a, b: (nan_sign(a), nan_sign(b)))
    values = [*NANS, *[(n,) for n in NANS], *[complex(0, n) for n in NANS],
              *[{"k": n} for n in NANS], *[[n, 1] for n in NANS], *[{n: 1} for n in NANS],
              *[frozenset({n}) for n in NANS], 0.0, -0.0]
    for _ in range(2):
        for v in values:
            assert f(v) == nan_sign(v)
            assert g(1, b=v) == (nan_sign(1), nan_sign(v))


def test_nan_other_than_float_nan_is_not_stored(store_dir: Any) -> None:
    """A guard on -nan has no JSON form (it would read back as float('nan')): the entry is
    not stored, saying why; float('nan') is stored."""
    f = specialize(lambda x: nan_sign(x), compiler=None, store=True, global_state=False,
                   automatic_dynamic=False)
    f(float("nan"))
    f(-float("nan"))
    events = cache_of(f).store_events()
    assert [e.outcome for e in events] == ["saved", "not stored"]
    assert "NaN of bits" in events[1].reason
