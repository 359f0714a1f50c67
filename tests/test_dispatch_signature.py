"""Tests for jitguard._src.dispatch.signature: parameter values, binders and forwarders."""

from __future__ import annotations

import functools
import inspect
from typing import Any

import pytest

from jitguard import CompileRequest, cache_of, specialize
from jitguard._src.dispatch.signature import DEFAULT, Signature, internal_prefix

# Every test here runs with the C hot path and in pure Python ([Note: The C hot path]).
pytestmark = pytest.mark.usefixtures("dispatch_mode")


def full(a, b=2, /, c=3, *args, d, e=5, **kw):  # type: ignore[no-untyped-def]
    return (a, b, c, args, d, e, kw)


def test_params_in_signature_order() -> None:
    """Parameters are listed in signature order, variadics included."""
    sig = Signature(full)
    assert sig.params == ("a", "b", "c", "args", "d", "e", "kw")
    assert sig.var_positional == "args" and sig.var_keyword == "kw"
    assert sig.positional == ("a", "b", "c") and sig.keyword_only == ("d", "e")


def test_bind_applies_defaults_like_python() -> None:
    """bind() gives the values Python's own binding would, defaults applied."""
    sig = Signature(full)
    assert sig.bind(1, d=4) == (1, 2, 3, (), 4, 5, {})
    assert sig.bind(1, 9, 8, 7, 6, d=4, z=0) == (1, 9, 8, (7, 6), 4, 5, {"z": 0})


def test_bind_rejects_what_fn_rejects() -> None:
    """bind() raises TypeError for calls the function itself would reject."""
    sig = Signature(full)
    with pytest.raises(TypeError):
        sig.bind(1)  # d is required
    with pytest.raises(TypeError):
        sig.bind(a=1, d=2)  # a is positional-only


def test_forward_calls_target_with_same_arguments() -> None:
    """forward(target, *values) calls target as the original call did."""
    sig = Signature(full)
    values = sig.bind(1, 9, 8, 7, d=4, z=0)
    assert sig.forward(full, *values) == full(1, 9, 8, 7, d=4, z=0)


def test_split_rebuilds_args_and_kwargs() -> None:
    """split() turns values back into (args, kwargs) for an ordinary call."""
    sig = Signature(full)
    args, kwargs = sig.split(sig.bind(1, 9, 8, 7, d=4, z=0))
    assert args == (1, 9, 8, 7) and kwargs == {"d": 4, "e": 5, "z": 0}
    assert full(*args, **kwargs) == full(1, 9, 8, 7, d=4, z=0)


def test_fresh_names_the_variadics() -> None:
    """fresh() names *args and **kwargs, whose objects are new on every call."""
    assert Signature(full).fresh() == {"args", "kw"}
    assert Signature(lambda x: x).fresh() == frozenset()


def test_single_and_zero_parameters() -> None:
    """One-parameter and no-parameter functions bind to 1- and 0-tuples."""
    assert Signature(lambda x: x).bind(3) == (3,)
    assert Signature(lambda: 0).bind() == ()


def test_keyword_only_without_varargs() -> None:
    """A keyword-only parameter without *args gets a bare * in the header."""
    def g(a, *, k):  # type: ignore[no-untyped-def]
        return (a, k)

    sig = Signature(g)
    assert "*" in sig.header
    assert sig.forward(g, *sig.bind(1, k=2)) == (1, 2)


def test_prefix_avoids_parameter_names() -> None:
    """Generated names never start like a parameter name."""
    assert internal_prefix(("a", "b")) == "___j"
    prefix = internal_prefix(("___jx",))
    assert not "___jx".startswith(prefix)
    def g(___jt, ___jd0=1):  # type: ignore[no-untyped-def]
        return ___jt + ___jd0

    sig = Signature(g)
    assert sig.forward(g, *sig.bind(1)) == 2


def test_callable_without_signature_is_refused() -> None:
    """A callable with no Python signature cannot be specialized."""
    class NoSig:
        __signature__ = "not a signature"

        def __call__(self) -> None: ...

    with pytest.raises(TypeError, match="no Python signature"):
        Signature(NoSig())


def test_wraps_wrapper_is_bound_by_its_own_parameters() -> None:
    """A functools.wraps wrapper taking *args/**kwargs is bound as such, not as the function
    its __wrapped__ names: the wrapper sees the arguments exactly as given."""
    def inner(x, k):  # type: ignore[no-untyped-def]
        return x + k

    @functools.wraps(inner)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.setdefault("k", 10)
        return inner(*args, **kwargs)

    sig = Signature(wrapper)
    assert sig.params == ("args", "kwargs")
    assert sig.bind(1) == ((1,), {})
    assert sig.forward(wrapper, *sig.bind(1)) == 11
    assert sig.forward(wrapper, *sig.bind(1, k=2)) == 3
    assert sig.forward(wrapper, *sig.bind(x=1)) == 11


def test_a_lying_signature_attribute_is_ignored() -> None:
    """A function's __signature__ does not change how Python binds its calls: neither does it
    change the Signature."""
    def f(a, b=2):  # type: ignore[no-untyped-def]
        return (a, b)

    f.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("z", inspect.Parameter.KEYWORD_ONLY)]
    )
    sig = Signature(f)
    assert sig.params == ("a", "b")
    assert sig.forward(f, *sig.bind(1)) == (1, 2)


def test_bound_method_drops_the_instance() -> None:
    """A bound method's parameters are its function's without the first; its defaults are
    read from the function at call time."""
    class C:
        def m(self, x, k=1):  # type: ignore[no-untyped-def]
            return (self, x, k)

    c = C()
    sig = Signature(c.m)
    assert sig.params == ("x", "k") and sig.receiver is None
    assert sig.forward(c.m, *sig.bind(5)) == (c, 5, 1)
    C.m.__defaults__ = (7,)
    assert sig.bind(5) == (5, 7)


def test_partial_binds_what_is_left() -> None:
    """A partial's parameters are what its function has left; a default set by the partial's
    keywords is read from them at call time, else from the function."""
    def f(a, b, k=1, *, z=3):  # type: ignore[no-untyped-def]
        return (a, b, k, z)

    p = functools.partial(f, 0, z=4)
    sig = Signature(p)
    assert sig.params == ("b", "k", "z")
    assert sig.forward(p, *sig.bind(1)) == (0, 1, 1, 4)
    p.keywords["z"] = 40
    f.__defaults__ = (10,)
    assert sig.bind(1) == (1, 10, 40)
    assert sig.forward(p, *sig.bind(1)) == p(1) == (0, 1, 10, 40)
    del p.keywords["z"]
    assert sig.bind(1) == (1, 10, 3)  # the function's own default, as p(1) uses it


def test_callable_object_defaults_are_current() -> None:
    """A callable object is bound by its __call__; a default read at call time."""
    class Scale:
        def __call__(self, x, k=2):  # type: ignore[no-untyped-def]
            return x * k

    s = Scale()
    sig = Signature(s)
    assert sig.params == ("x", "k")
    assert sig.bind(3) == (3, 2)
    Scale.__call__.__defaults__ = (5,)
    assert sig.bind(3) == (3, 5)


# ---- [Note: Defaults are read at call time] ----------------------------------------------


def test_rebound_defaults_are_read_at_call_time() -> None:
    """Rebinding __defaults__/__kwdefaults__, or changing __kwdefaults__ in place, changes
    what bind() fills in, as it changes what the function itself receives."""
    def f(a, b=2, /, c=3, *, d=4, e):  # type: ignore[no-untyped-def]
        return (a, b, c, d, e)

    sig = Signature(f)
    assert sig.bind(1, e=5) == (1, 2, 3, 4, 5)
    f.__defaults__ = (20, 30)
    f.__kwdefaults__["d"] = 40  # type: ignore[index]
    assert sig.bind(1, e=5) == (1, 20, 30, 40, 5) == f(1, e=5)
    f.__kwdefaults__ = {"d": 400}
    assert sig.bind(1, e=5) == (1, 20, 30, 400, 5) == f(1, e=5)
    assert sig.bind(1, 2, 3, d=4, e=5) == (1, 2, 3, 4, 5)


def test_removed_defaults_raise_like_python() -> None:
    """A default that was removed makes the omitted argument missing, with Python's text."""
    def f(a, b=2, *, k=3):  # type: ignore[no-untyped-def]
        return (a, b, k)

    sig = Signature(f)
    f.__defaults__ = None
    f.__kwdefaults__ = None
    with pytest.raises(TypeError, match=r"\.f\(\) missing 1 required positional argument: 'b'$"):
        sig.bind(1)
    with pytest.raises(TypeError, match=r"\.f\(\) missing 1 required keyword-only argument: 'k'$"):
        sig.bind(1, 2)
    assert sig.bind(1, 2, k=3) == (1, 2, 3)


def test_shorter_defaults_shift_like_python() -> None:
    """Defaults belong to the last parameters: a shorter tuple leaves the earlier ones
    required, as Python does."""
    def f(a, b=2, c=3):  # type: ignore[no-untyped-def]
        return (a, b, c)

    sig = Signature(f)
    f.__defaults__ = (30,)
    assert sig.bind(1, 2) == (1, 2, 30) == f(1, 2)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'b'"):
        sig.bind(1)


def test_a_passed_argument_never_reads_the_default() -> None:
    """An argument given explicitly is used as is, whatever the defaults became."""
    def f(a, b=2):  # type: ignore[no-untyped-def]
        return (a, b)

    sig = Signature(f)
    f.__defaults__ = None
    assert sig.bind(1, 5) == (1, 5) and sig.bind(1, b=6) == (1, 6)


def test_header_defaults_are_the_sentinel() -> None:
    """The generated header gives each parameter but *args/**kwargs DEFAULT, never a
    default's value (which would be stale after a change)."""
    def f(a, b=[1], *args, k={}, **kw):  # type: ignore[no-untyped-def]  # noqa: B006
        return (a, b, k)

    sig = Signature(f)
    p = sig.prefix
    assert sig.header == f"a={p}DEFAULT, b={p}DEFAULT, *args, k={p}DEFAULT, **kw"
    assert repr(DEFAULT) == "<the default, read at call time>"
    values = sig.bind(0)
    assert values[1] is f.__defaults__[0] and values[3] is f.__kwdefaults__["k"]  # type: ignore[index]


# ---- receivers ----------------------------------------------------------------------------


def test_receiver_of_a_method_body() -> None:
    """The first parameter of a function defined in a class body, or one named self, receives
    the instance; a nested function's or a plain function's first parameter does not."""
    class C:
        def m(this, x):  # type: ignore[no-untyped-def]
            def inner(y):  # type: ignore[no-untyped-def]
                return y
            return inner

        def kw_only(*, x):  # type: ignore[no-untyped-def]
            return x

    def free(self, x):  # type: ignore[no-untyped-def]
        return x

    def plain(obj, x):  # type: ignore[no-untyped-def]
        return x

    assert Signature(C.m).receiver == "this"
    assert Signature(C.m(C(), 0)).receiver is None
    assert Signature(C.kw_only).receiver is None
    assert Signature(free).receiver == "self"
    assert Signature(plain).receiver is None
    assert Signature(C().m).receiver is None  # bound: the instance is not a parameter


def test_a_default_added_later_is_used() -> None:
    """A parameter that had no default when specialized, and got one since, may be omitted,
    as in a call of the function itself."""
    def f(a, b, *, k):  # type: ignore[no-untyped-def]
        return (a, b, k)

    sig = Signature(f)
    with pytest.raises(TypeError, match=r"\.f\(\) missing 1 required positional argument: 'a'$"):
        sig.bind()
    f.__defaults__ = (1, 2)
    f.__kwdefaults__ = {"k": 3}
    assert sig.bind() == (1, 2, 3) == f()
    assert sig.bind(5) == (5, 2, 3) == f(5)


# ---- through specialize -------------------------------------------------------------------


def _baking(req: CompileRequest) -> Any:
    """A compiler whose artifact returns the result computed at compile time: any stale
    hit returns a wrong value."""
    result = req.fn(*req.args, **req.kwargs)
    return lambda *args, **kwargs: result


def baked(fn: Any) -> Any:
    """``fn`` specialized with ``_baking`` (every int by value: no automatic dynamic, which
    tells a compiler not to bake a value)."""
    return specialize(fn, compiler=_baking, automatic_dynamic=False)


def test_specialized_sees_rebound_defaults() -> None:
    """After f.__defaults__ or f.__kwdefaults__ change (rebound or in place), the
    specialized function gives what f gives: the new default is a miss, never a stale hit."""
    def f(x, k=1, *, m=10):  # type: ignore[no-untyped-def]
        return x + k + m

    sf = baked(f)
    assert sf(1) == 12
    f.__defaults__ = (100,)
    assert sf(1) == f(1) == 111
    f.__kwdefaults__["m"] = 1000  # type: ignore[index]
    assert sf(1) == f(1) == 1101
    f.__kwdefaults__ = {"m": 0}
    assert sf(1) == f(1) == 101
    f.__defaults__ = (1,)
    f.__kwdefaults__ = {"m": 10}
    assert sf(1) == 12 and cache_of(sf).stats().hits == 1  # the first entry again
    assert any("L['k'] == 1" in r for r in cache_of(sf).reasons())


def test_mutated_default_object_is_a_miss() -> None:
    """A mutable default changed in place is the parameter's value: guarded like one."""
    def f(x, acc=[]):  # type: ignore[no-untyped-def]  # noqa: B006
        return x + len(acc)

    sf = baked(f)
    assert sf(1) == 1
    f.__defaults__[0].append(5)  # type: ignore[index]
    assert sf(1) == f(1) == 2


def test_removed_default_raises_through_specialize() -> None:
    """Once a default is gone, omitting the argument raises as f would."""
    def f(x, k=1):  # type: ignore[no-untyped-def]
        return x + k

    sf = specialize(f)
    assert sf(1) == 2
    f.__defaults__ = None
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'k'"):
        sf(1)
    assert sf(1, 2) == 3


def test_default_added_through_specialize() -> None:
    """A default given after specializing to a parameter that had none: the call that omits
    it works, as it does eagerly, and gets its own entry."""
    def f(x, k, *, m):  # type: ignore[no-untyped-def]
        return x * k + m

    sf = baked(f)
    assert sf(3, 2, m=1) == 7
    f.__defaults__ = (4,)
    f.__kwdefaults__ = {"m": 0}
    assert sf(3) == f(3) == 12
    assert sf(3, 2, m=1) == 7
    assert cache_of(sf).stats().compiles == 2


def test_wraps_wrapper_with_setdefault() -> None:
    """A functools.wraps wrapper that fills in a keyword is called with the arguments as
    given: no 'multiple values', and the default it sets applies."""
    def inner(x, k):  # type: ignore[no-untyped-def]
        return x * k

    @functools.wraps(inner)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.setdefault("k", 10)
        return inner(*args, **kwargs)

    sw = baked(wrapper)
    assert sw(2) == 20 and sw(2, k=3) == 6 and sw(x=2) == 20
    assert sw(2) == 20 and sw(2, k=3) == 6
    assert inspect.signature(sw) == inspect.signature(inner)  # what users see is unchanged


def test_specialized_partial_reads_its_keywords_live() -> None:
    """A specialized partial: a keyword changed in the partial, or a default of its function,
    is what the next call uses."""
    def f(a, b, k=1, *, z=3):  # type: ignore[no-untyped-def]
        return (a, b, k, z)

    p = functools.partial(f, 0, z=4)
    sp = baked(p)
    assert sp(1) == (0, 1, 1, 4)
    p.keywords["z"] = 5
    assert sp(1) == p(1) == (0, 1, 1, 5)
    f.__defaults__ = (2,)
    assert sp(1) == p(1) == (0, 1, 2, 5)
    assert sp(1, 7, z=8) == (0, 1, 7, 8)


def test_specialized_bound_method() -> None:
    """specialize(obj.m): the instance is bound, not a parameter; the defaults of m's
    function are read at call time."""
    class C:
        def m(self, x, k=1):  # type: ignore[no-untyped-def]
            return x + k

    sm = baked(C().m)
    assert sm(1) == 2
    C.m.__defaults__ = (5,)
    assert sm(1) == 6


def test_staticmethod_and_classmethod() -> None:
    """@specialize above @staticmethod/@classmethod gives the same kind of method; each is
    called with the arguments it takes, and cache_of finds its cache."""
    class C:
        base = 1

        @specialize
        @staticmethod
        def s(x, k=2):  # type: ignore[no-untyped-def]
            return x * k

        @specialize
        @classmethod
        def c(cls, x):  # type: ignore[no-untyped-def]
            return cls.base + x

    class D(C):
        base = 100

    assert C.s(3) == 6 and C().s(3) == 6 and C.s(3, k=3) == 9
    assert C.c(1) == 2 and C().c(1) == 2 and D.c(1) == 101 and D().c(1) == 101
    assert isinstance(C.__dict__["s"], staticmethod)
    assert isinstance(C.__dict__["c"], classmethod)
    assert cache_of(C.__dict__["s"]) is cache_of(C.s)
    assert cache_of(C.s).stats().compiles == 2  # k=2 and k=3
    assert cache_of(C.c).stats().compiles == 2  # cls is C, then D (by identity)
    C.s.__wrapped__.__defaults__ = (10,)  # type: ignore[attr-defined]
    assert C.s(3) == 30


def test_specialized_callable_object() -> None:
    """A callable object is specialized through its __call__, defaults read at call time."""
    class Scale:
        def __call__(self, x, k=2):  # type: ignore[no-untyped-def]
            return x * k

    ss = baked(Scale())
    assert ss(3) == 6
    Scale.__call__.__defaults__ = (5,)
    assert ss(3) == 15


def test_lookup_uses_current_defaults() -> None:
    """cache.lookup() binds with the defaults as they are now."""
    def f(x, k=1):  # type: ignore[no-untyped-def]
        return x + k

    sf = specialize(f)
    sf(1)
    assert cache_of(sf).lookup(1) is not None
    f.__defaults__ = (2,)
    assert cache_of(sf).lookup(1) is None
