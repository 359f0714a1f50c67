"""More adversarial soundness cases for ``jitguard.torch.compile``: dict keys Dynamo bakes in,
mutable arguments that alias, float zeros, decorated functions, and reads torch leaves
unguarded; each compares with eager after a mutation."""

# ruff: noqa: E731  (the probes are one-line lambdas compared with eager)

from __future__ import annotations

import collections
import enum
import functools
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from eager_compare import same  # noqa: E402

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("restore_grad_mode")



def same_sign(got: Any, want: Any) -> None:
    same(got, want)
    assert torch.equal(got.signbit(), want.signbit())


def calls(fn: Callable[..., Any], *arg_sets: tuple[Any, ...], **opts: Any) -> None:
    """Compile ``fn`` and call it on each argument tuple in turn, against eager."""
    cf = jgt.compile(fn, **opts)
    for args in arg_sets:
        same(cf(*args), fn(*args))


X = torch.ones(3)


# ---- dict keys read through list(d) / [*d] ([Note: Dict keys a length stands for]) --------


def test_list_of_dict_float_keys() -> None:
    """``list(d)[0]`` of ``{1.0: v}`` then ``{2.0: v}`` (torch guards the length only)."""
    calls(lambda x, d: x * list(d)[0], (X, {1.0: 1}), (X, {1.0: 1}), (X, {2.0: 1}), (X, {3: 1}))  # noqa: RUF015


def test_list_of_dict_str_keys() -> None:
    """``list(d)[0]`` of a dict whose only key changes."""
    calls(lambda x, d: x * len(list(d)[0]), (X, {"a": 1}), (X, {"a": 1}), (X, {"bb": 1}))  # noqa: RUF015


def test_star_unpacked_dict_keys() -> None:
    """``[*d]`` (torch guards only the dict's type)."""
    calls(lambda x, d: x * [*d][0], (X, {1: 1}), (X, {1: 1}), (X, {5: 1}))  # noqa: RUF015


def test_star_unpacked_dict_grew() -> None:
    """``len([*d])`` of a dict that gained a key."""
    calls(lambda x, d: x * len([*d]), (X, {1: 1}), (X, {1: 1}), (X, {1: 1, 2: 2}))


def test_list_of_global_dict_keys() -> None:
    """``list(D)`` of a global dict whose key is replaced in place."""
    g: dict[str, Any] = {"torch": torch, "D": {1: 2}}
    exec("def fn(x):\n    return x * list(D)[0]\n", g)
    fn = g["fn"]
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    same(cf(X), fn(X))
    g["D"].clear()
    g["D"][7] = 2
    same(cf(X), fn(X))


def test_list_of_module_dict_attribute_keys() -> None:
    """``list(self.cfg)`` of a module's dict attribute whose key is replaced."""

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cfg = {1: 2}

        def forward(self, x: Any) -> Any:
            return x * list(self.cfg)[0]  # noqa: RUF015

    m = M()
    cf = jgt.compile(m)
    same(cf(X), m(X))
    same(cf(X), m(X))
    m.cfg.clear()
    m.cfg[9] = 2
    same(cf(X), m(X))


def test_list_of_kwargs_keys() -> None:
    """``list(kwargs)`` with another keyword name."""

    def fn(x: Any, **kw: Any) -> Any:
        return x * len(list(kw)[0])  # noqa: RUF015

    cf = jgt.compile(fn)
    for kw in ({"a": 1}, {"a": 1}, {"bbb": 1}):
        same(cf(X, **kw), fn(X, **kw))


def test_list_of_ordereddict_and_defaultdict_keys() -> None:
    """``list(d)`` of an OrderedDict and of a defaultdict whose key changes."""
    fn = lambda x, d: x * list(d)[0]  # noqa: RUF015
    calls(fn, *[(X, collections.OrderedDict([(k, 0)])) for k in (1, 1, 4)])
    calls(fn, *[(X, collections.defaultdict(int, {k: 0})) for k in (1, 1, 4)])


def test_list_of_dict_enum_and_object_keys() -> None:
    """``list(d)[0]`` with enum members and plain objects as keys."""

    class E(enum.Enum):
        A = 1
        B = 2

    class K:
        def __init__(self, v: int) -> None:
            self.v = v

    calls(lambda x, d: x * list(d)[0].value, *[(X, {k: 0}) for k in (E.A, E.A, E.B)])  # noqa: RUF015
    k1, k2 = K(1), K(5)
    calls(lambda x, d: x * list(d)[0].v, *[(X, {k: 0}) for k in (k1, k1, k2)])  # noqa: RUF015


def test_list_of_dict_tensor_keys() -> None:
    """``list(d)[0]`` with tensors as keys."""
    a, b = torch.ones(1), torch.full((1,), 3.0)
    calls(lambda x, d: x * list(d)[0], *[(X, {k: 0}) for k in (a, a, b)])  # noqa: RUF015


def test_dict_read_by_key_with_other_keys() -> None:
    """A dict read by key only, then with another key added: still equal to eager."""
    calls(lambda x, d: x * d["a"], (X, {"a": 2}), (X, {"a": 2, "b": 3}), (X, {"a": 4, "c": 1}))


def test_sets_listed() -> None:
    """``sorted(list(s))`` of sets and ``list(fs)`` of frozensets with other members."""
    calls(lambda x, s: x * sorted(list(s))[0], (X, {1, 2}), (X, {1, 2}), (X, {3, 4}))
    calls(lambda x, s: x * list(s)[0], *[(X, frozenset({k})) for k in (1, 1, 3)])  # noqa: RUF015


# ---- mutable arguments that alias ([Note: Mutable objects that alias]) -------------------


def test_same_list_passed_twice() -> None:
    """Two lists, then one list as both arguments, appended to through the first."""

    def fn(a: Any, b: Any) -> Any:
        a.append(1)
        return X * len(b)

    cf = jgt.compile(fn)
    same(cf([], []), fn([], []))
    l1: list[int] = []
    l2: list[int] = []
    same(cf(l1, l1), fn(l2, l2))
    same(cf([], []), fn([], []))


def test_same_dict_passed_twice() -> None:
    """Two dicts, then one dict as both arguments, written through the first."""

    def fn(a: Any, b: Any) -> Any:
        a["z"] = 1
        return X * len(b)

    cf = jgt.compile(fn)
    same(cf({}, {}), fn({}, {}))
    d1: dict[str, int] = {}
    d2: dict[str, int] = {}
    same(cf(d1, d1), fn(d2, d2))


def test_same_object_passed_twice() -> None:
    """Two objects, then one object as both, an attribute set through the first."""

    class Obj:
        k = 1

    def fn(a: Any, b: Any) -> Any:
        a.k = 5
        return X * b.k

    cf = jgt.compile(fn)
    same(cf(Obj(), Obj()), fn(Obj(), Obj()))
    o1, o2 = Obj(), Obj()
    same(cf(o1, o1), fn(o2, o2))


def test_same_list_passed_twice_item_set() -> None:
    """An item set through one argument and read through the other."""

    def fn(a: Any, b: Any) -> Any:
        a[0] = 9
        return X * b[0]

    cf = jgt.compile(fn)
    same(cf([1], [1]), fn([1], [1]))
    l1, l2 = [1], [1]
    same(cf(l1, l1), fn(l2, l2))


def test_list_nested_in_another_argument() -> None:
    """An argument that is also an item of another argument."""

    def fn(outer: Any, inner: Any) -> Any:
        inner[0] = 9
        return X * outer[0][0]

    cf = jgt.compile(fn)
    same(cf([[1]], [1]), fn([[1]], [1]))
    i1, i2 = [1], [1]
    same(cf([i1], i1), fn([i2], i2))
    same(cf([[1]], [1]), fn([[1]], [1]))


def test_aliased_then_distinct_lists() -> None:
    """One list as both arguments first, then two lists."""

    def fn(a: Any, b: Any) -> Any:
        a.append(1)
        return X * len(b)

    cf = jgt.compile(fn)
    l1, l2 = [], []  # type: ignore[var-annotated]
    same(cf(l1, l1), fn(l2, l2))
    same(cf([], []), fn([], []))


# ---- float zeros and NaN ------------------------------------------------------------------


def test_negative_zero_float_argument() -> None:
    """``0.0`` then ``-0.0`` (torch's guard takes one for the other; the sign is baked in)."""
    fn = lambda x, f: x * f
    cf = jgt.compile(fn, dynamic=False)
    for f in (0.0, 0.0, -0.0, 0.0):
        same_sign(cf(X, f), fn(X, f))


def test_negative_zero_in_list_global_and_attribute() -> None:
    """``-0.0`` inside a list argument, as a global and as a module attribute."""
    fn = lambda x, fs: x * fs[0]
    cf = jgt.compile(fn, dynamic=False)
    for f in (0.0, 0.0, -0.0):
        same_sign(cf(X, [f]), fn(X, [f]))
    g: dict[str, Any] = {"torch": torch, "F": 0.0}
    exec("def gfn(x):\n    return x * F\n", g)
    gfn = g["gfn"]
    cg = jgt.compile(gfn)
    cg(X)
    g["F"] = -0.0
    same_sign(cg(X), gfn(X))

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.f = 0.0

        def forward(self, x: Any) -> Any:
            return x * self.f

    m = M()
    cm = jgt.compile(m)
    cm(X)
    m.f = -0.0
    same_sign(cm(X), m(X))


def test_negative_zero_dict_key() -> None:
    """``{0.0: v}`` then ``{-0.0: v}``, the key read through ``list(d)``."""
    fn = lambda x, d: x * list(d)[0]  # noqa: RUF015
    cf = jgt.compile(fn)
    for f in (0.0, 0.0, -0.0):
        same_sign(cf(X, {f: 1}), fn(X, {f: 1}))


def test_nan_float_argument() -> None:
    """NaN, then a number, then NaN again."""
    calls(lambda x, f: x * f, *[(X, f) for f in (float("nan"), float("nan"), 1.0, float("nan"))],
          dynamic=False)


def test_complex_zero_parts() -> None:
    """Complex arguments whose zero parts differ in sign."""
    fn = lambda x, c: torch.view_as_real(x * c)
    cf = jgt.compile(fn, dynamic=False)
    xc = torch.ones(3, dtype=torch.complex64)
    for c in (complex(1.0, 0.0), complex(1.0, 0.0), complex(1.0, -0.0)):
        same_sign(cf(xc, c), fn(xc, c))


# ---- decorated functions ------------------------------------------------------------------


def test_no_grad_decorated_function() -> None:
    """A ``@torch.no_grad()`` function (torch's wrapper, its globals torch's)."""

    @torch.no_grad()
    def fn(x: Any) -> Any:
        return x * 2

    w = torch.ones(3, requires_grad=True)
    cf = jgt.compile(fn)
    for _ in range(2):
        got = cf(w)
        assert got.requires_grad == fn(w).requires_grad
        same(got, fn(w))
    assert torch.is_grad_enabled()


def test_inference_mode_and_enable_grad_decorated() -> None:
    """``@torch.inference_mode()`` and ``@torch.enable_grad()`` functions."""

    @torch.inference_mode()
    def fi(x: Any) -> Any:
        return x * 2

    @torch.enable_grad()
    def fe(x: Any) -> Any:
        return x * 3

    w = torch.ones(3, requires_grad=True)
    ci, ce = jgt.compile(fi), jgt.compile(fe)
    for _ in range(2):
        assert ci(w).is_inference() == fi(w).is_inference()
        with torch.no_grad():
            assert ce(w).requires_grad == fe(w).requires_grad


def test_decorator_from_another_module_with_closure() -> None:
    """A ``functools.wraps`` wrapper defined elsewhere (its own globals), its cell changed."""
    g: dict[str, Any] = {"functools": functools}
    exec(
        "def deco(f):\n"
        "    box = [2]\n"
        "    @functools.wraps(f)\n"
        "    def w(*a, **k):\n"
        "        return f(*a, **k) * box[0]\n"
        "    w.box = box\n"
        "    return w\n",
        g,
    )

    def base(x: Any) -> Any:
        return x + 1

    fn = g["deco"](base)
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    same(cf(X), fn(X))
    fn.box[0] = 5
    same(cf(X), fn(X))


# ---- reads torch leaves unguarded ---------------------------------------------------------


def test_is_leaf_read() -> None:
    """A branch on ``x.is_leaf``: a leaf, then a non-leaf of the same metadata, then a leaf."""
    f2 = lambda x: x * 2 if x.is_leaf else x * 3
    cf = jgt.compile(f2)
    a = torch.ones(3, requires_grad=True)
    same(cf(a), f2(a))
    b = a * 1
    same(cf(b), f2(b))
    same(cf(a), f2(a))


def test_grad_fn_read() -> None:
    """A branch on ``x.grad_fn is None``: a non-leaf first, then a leaf."""
    f2 = lambda x: x * 2 if x.grad_fn is None else x * 3
    cf = jgt.compile(f2)
    a = torch.ones(3, requires_grad=True)
    same(cf(a * 1), f2(a * 1))
    same(cf(a), f2(a))


def test_leafness_read_under_a_counting_mode() -> None:
    """The leafness guard is read past a torch function mode: counts equal eager's."""
    from torch.overrides import TorchFunctionMode

    class Count(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            self.n += 1
            return func(*args, **(kwargs or {}))

    f2 = lambda x: x * 2
    cf = jgt.compile(f2)
    a = torch.ones(3, requires_grad=True)
    cf(a)
    with Count() as c1:
        got = cf(a)
    with Count() as c2:
        want = f2(a)
    same(got, want)
    assert c1.n == c2.n


def test_metaclass_attribute_changed() -> None:
    """``C.k`` resolved on C's metaclass, changed after compiling."""

    class Meta(type):
        k = 2

    class C(metaclass=Meta):
        pass

    fn = lambda x: x * C.k
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    same(cf(X), fn(X))
    Meta.k = 6
    same(cf(X), fn(X))


# ---- attributes a class __getattr__ gives ([Note: Attributes a class __getattr__ gives]) --


class Dyn:
    def __getattr__(self, name: str) -> Any:
        return 2


def test_class_getattr_replaced() -> None:
    """``o.zz`` from the class's ``__getattr__``, which is replaced after compiling."""

    class D(Dyn):
        pass

    o = D()
    fn = lambda x, o: x * o.zz
    cf = jgt.compile(fn)
    same(cf(X, o), fn(X, o))
    same(cf(X, o), fn(X, o))
    D.__getattr__ = lambda self, name: 7  # type: ignore[method-assign]
    same(cf(X, o), fn(X, o))


def test_instance_attribute_shadows_class_getattr() -> None:
    """``o.zz`` from ``__getattr__``, then set on the instance (found first)."""
    o = Dyn()
    fn = lambda x, o: x * o.zz
    cf = jgt.compile(fn)
    same(cf(X, o), fn(X, o))
    same(cf(X, o), fn(X, o))
    o.zz = 5
    same(cf(X, o), fn(X, o))
    del o.zz
    same(cf(X, o), fn(X, o))


def test_slotted_object_with_getattr() -> None:
    """A slotted object with ``__getattr__``: a slot read, then the fallback."""

    class S:
        __slots__ = ("k",)

        def __getattr__(self, name: str) -> Any:
            return 3

    s = S()
    s.k = 2
    fn = lambda x, o: x * o.k * o.other
    cf = jgt.compile(fn)
    same(cf(X, s), fn(X, s))
    same(cf(X, s), fn(X, s))
    s.k = 4
    same(cf(X, s), fn(X, s))


def test_class_attribute_shadows_metaclass_attribute() -> None:
    """``C.k`` resolved on C's metaclass, then set on C itself (found first)."""

    class Meta(type):
        k = 2

    class C(metaclass=Meta):
        pass

    fn = lambda x: x * C.k
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    same(cf(X), fn(X))
    C.k = 9
    same(cf(X), fn(X))


def test_abc_and_enum_classes_keep_hitting() -> None:
    """Classes with the standard metaclasses (ABCMeta, EnumType) get no metaclass guards."""
    import abc

    class A(abc.ABC):  # noqa: B024
        k = 2

    class E(enum.Enum):
        V = 3

    fn = lambda x: x * A.k * E.V.value
    cf = jgt.compile(fn)
    for _ in range(3):
        same(cf(X), fn(X))
    assert jitguard.cache_of(cf).stats().compiles == 1

