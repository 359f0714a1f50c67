"""More adversarial soundness cases for ``jitguard.torch.compile``: arguments of every
kind (enums, dataclasses, namedtuples, sets, bytes, slices, sizes, dtypes, defaults,
subclasses of builtins, objects) and side effects on them; each compares with eager."""

# ruff: noqa: E731  (the probes are one-line lambdas compared with eager)

from __future__ import annotations

import dataclasses
import enum
from typing import Any, NamedTuple

import pytest

torch = pytest.importorskip("torch")


from eager_compare import full, same, wmc  # noqa: E402

import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("restore_grad_mode")



X = torch.ones(3)


# ---- argument kinds ----------------------------------------------------------------------


class Color(enum.Enum):
    RED = 1
    BLUE = 2


def test_enum_argument() -> None:
    """An Enum argument switched."""
    fn = lambda c, x: x * c.value
    cf = jgt.compile(fn)
    same(cf(Color.RED, X), fn(Color.RED, X))
    same(cf(Color.BLUE, X), fn(Color.BLUE, X))


@dataclasses.dataclass(frozen=True)
class Frozen:
    k: int


def test_frozen_dataclass_argument() -> None:
    """Two frozen dataclass instances."""
    fn = lambda d, x: x * d.k
    cf = jgt.compile(fn)
    same(cf(Frozen(2), X), fn(Frozen(2), X))
    same(cf(Frozen(5), X), fn(Frozen(5), X))


class NT(NamedTuple):
    a: int
    b: int


def test_namedtuple_ints() -> None:
    """Namedtuples of ints differing in one field."""
    fn = lambda p, x: x * p.a + p.b
    cf = jgt.compile(fn)
    same(cf(NT(1, 2), X), fn(NT(1, 2), X))
    same(cf(NT(1, 3), X), fn(NT(1, 3), X))


def test_set_argument() -> None:
    """A set argument with a new member."""
    fn = lambda s, x: x * len(s) + (1 if 3 in s else 0)
    cf = jgt.compile(fn)
    same(cf({1, 2}, X), fn({1, 2}, X))
    same(cf({1, 3}, X), fn({1, 3}, X))


def test_bytes_argument() -> None:
    """A bytes argument with other content."""
    fn = lambda b, x: x * b[0]
    cf = jgt.compile(fn)
    same(cf(b"\x02", X), fn(b"\x02", X))
    same(cf(b"\x05", X), fn(b"\x05", X))


def test_slice_argument() -> None:
    """A slice argument with other bounds."""
    fn = lambda s, x: x[s]
    cf = jgt.compile(fn)
    a = torch.arange(6.0)
    same(cf(slice(0, 2), a), fn(slice(0, 2), a))
    same(cf(slice(1, 5), a), fn(slice(1, 5), a))
    same(cf(slice(1, 5, 2), a), fn(slice(1, 5, 2), a))


def test_range_argument_step() -> None:
    """Ranges differing in step only."""
    fn = lambda r, x: x * sum(r)
    cf = jgt.compile(fn)
    same(cf(range(0, 6, 1), X), fn(range(0, 6, 1), X))
    same(cf(range(0, 6, 2), X), fn(range(0, 6, 2), X))


def test_torch_size_argument() -> None:
    """A torch.Size argument."""
    fn = lambda s, x: x.reshape(s)
    cf = jgt.compile(fn)
    a = torch.arange(6.0)
    same(cf(torch.Size([2, 3]), a), fn(torch.Size([2, 3]), a))
    same(cf(torch.Size([3, 2]), a), fn(torch.Size([3, 2]), a))


def test_dtype_argument() -> None:
    """A dtype argument switched."""
    fn = lambda d, x: x.to(d)
    cf = jgt.compile(fn)
    assert cf(torch.float64, X).dtype == torch.float64
    assert cf(torch.int32, X).dtype == torch.int32


def test_device_argument() -> None:
    """A device argument then a string."""
    fn = lambda d, x: torch.ones(2, device=d) + x.sum()
    cf = jgt.compile(fn)
    same(cf(torch.device("cpu"), X), fn(torch.device("cpu"), X))
    same(cf("cpu", X), fn("cpu", X))


def test_none_vs_value() -> None:
    """None then a tensor for an optional argument."""
    fn = lambda x, b=None: x if b is None else x + b
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    same(cf(X, full(3)), fn(X, full(3)))
    same(cf(X, None), fn(X, None))


def test_kwargs_only_and_star() -> None:
    """Keyword-only, *args and **kwargs."""
    def fn(x: Any, *args: Any, k: int = 1, **kw: Any) -> Any:
        out = x * k
        for a in args:
            out = out + a
        for v in kw.values():
            out = out * v
        return out

    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    same(cf(X, 1), fn(X, 1))
    same(cf(X, 1, 2), fn(X, 1, 2))
    same(cf(X, k=3), fn(X, k=3))
    same(cf(X, z=2), fn(X, z=2))
    same(cf(X, z=2, y=3), fn(X, z=2, y=3))
    same(cf(X, y=3, z=2), fn(X, y=3, z=2))


def test_defaults_mutated() -> None:
    """A function's __defaults__ replaced after compiling."""
    def fn(x: Any, k: int = 2) -> Any:
        return x * k

    wmc(fn, lambda: (X,), lambda: setattr(fn, "__defaults__", (7,)))


def test_kwdefaults_mutated() -> None:
    """A function's __kwdefaults__ replaced after compiling."""
    def fn(x: Any, *, k: int = 2) -> Any:
        return x * k

    wmc(fn, lambda: (X,), lambda: setattr(fn, "__kwdefaults__", {"k": 7}))


def test_mutable_default_list_mutated() -> None:
    """A mutable default list changed in place."""
    def fn(x: Any, lst: list[int] = [2]) -> Any:  # noqa: B006
        return x * lst[0]

    wmc(fn, lambda: (X,), lambda: fn.__defaults__[0].__setitem__(0, 9))


def test_list_of_tensors_length() -> None:
    """A list of tensors that grew."""
    fn = lambda xs: sum(xs)
    cf = jgt.compile(fn)
    same(cf([X, X]), fn([X, X]))
    same(cf([X, X, X]), fn([X, X, X]))


def test_tuple_vs_list() -> None:
    """A tuple then a list holding the same tensor."""
    fn = lambda xs: xs[0] * 2 if isinstance(xs, tuple) else xs[0] * 3
    cf = jgt.compile(fn)
    same(cf((X,)), fn((X,)))
    same(cf([X]), fn([X]))


def test_str_argument() -> None:
    """A str argument switched and back."""
    fn = lambda x, s: x * 2 if s == "a" else x * 3
    cf = jgt.compile(fn)
    for s in ("a", "b", "a"):
        same(cf(X, s), fn(X, s))


def test_complex_scalar_arg() -> None:
    """Complex scalar arguments."""
    fn = lambda x, c: (x * c).real
    cf = jgt.compile(fn)
    for c in (1 + 1j, 2 + 0j, 2 - 0j, complex(0.0, -0.0)):
        got, want = cf(X, c), fn(X, c)
        same(got, want)


def test_big_int_arg() -> None:
    """Ints past 64 bits."""
    fn = lambda x, n: x * (n % 7)
    cf = jgt.compile(fn)
    for n in (2, 3, 2**70, 2**70 + 1, 2**64 + 3):
        same(cf(X, n), fn(X, n))


def test_int_subclass_arg() -> None:
    """An int subclass with its own __mul__ after an int."""
    class MyInt(int):
        def __mul__(self, o):
            return o * 100
    fn = lambda x, n: x * n
    cf = jgt.compile(fn)
    same(cf(X, 2), fn(X, 2))
    same(cf(X, MyInt(2)), fn(X, MyInt(2)))


def test_float_subclass_arg() -> None:
    """A float subclass after a float."""
    class MyF(float):
        pass
    fn = lambda x, n: x * 2 if type(n) is float else x * 3
    cf = jgt.compile(fn)
    same(cf(X, 2.0), fn(X, 2.0))
    same(cf(X, MyF(2.0)), fn(X, MyF(2.0)))


def test_str_subclass_arg() -> None:
    """A str subclass after a str."""
    class S(str):
        pass
    fn = lambda x, s: x * 2 if type(s) is str else x * 3
    cf = jgt.compile(fn)
    same(cf(X, "a"), fn(X, "a"))
    same(cf(X, S("a")), fn(X, S("a")))


def test_tuple_subclass_arg() -> None:
    """A tuple subclass after a tuple."""
    class T(tuple):
        pass
    fn = lambda x, s: x * 2 if type(s) is tuple else x * 3
    cf = jgt.compile(fn)
    same(cf(X, (1,)), fn(X, (1,)))
    same(cf(X, T((1,))), fn(X, T((1,))))


def test_global_store_side_effect() -> None:
    """A global counter incremented once per call."""
    global N
    cf = jgt.compile(bump)
    N = 0
    outs = [cf(X) for _ in range(3)]
    assert N == 3
    N = 0
    want = [bump(X) for _ in range(3)]
    for a, b in zip(outs, want, strict=True):
        same(a, b)


def bump(x):
    global N
    N += 1
    return x * N


def test_list_append_argument() -> None:
    """A list argument appended to once per call."""
    fn = lambda lst, x: lst.append(x * 2) or len(lst)
    cf = jgt.compile(fn)
    a, b = [], []
    for _ in range(3):
        assert cf(a, X) == fn(b, X)
    assert len(a) == len(b)


def test_object_attr_increment_inside() -> None:
    """An object attribute incremented once per call."""
    class Obj:
        c = 0
    o1, o2 = Obj(), Obj()
    def fn(o, x):
        o.c += 1
        return x * o.c
    cf = jgt.compile(fn)
    for _ in range(4):
        same(cf(o1, X), fn(o2, X))
    assert o1.c == o2.c


def test_dataclass_field_default_changed() -> None:
    """A dataclass field changed in place."""
    @dataclasses.dataclass
    class Cfg:
        k: int = 2
    fn = lambda x, c: x * c.k
    cf = jgt.compile(fn)
    c = Cfg()
    same(cf(X, c), fn(X, c))
    same(cf(X, c), fn(X, c))
    c.k = 4
    same(cf(X, c), fn(X, c))


def test_class_var_on_dataclass_changed() -> None:
    """A class variable of a dataclass changed."""
    @dataclasses.dataclass
    class Cfg:
        k: int = 2
        SCALE = 3
    fn = lambda x, c: x * c.SCALE
    c = Cfg()
    wmc(fn, lambda: (X, c), lambda: setattr(Cfg, "SCALE", 11))


def test_class_arg_attr() -> None:
    """A class passed as an argument, its attribute changed."""
    class C:
        k = 2
    fn = lambda x, c: x * c.k
    wmc(fn, lambda: (X, C), lambda: setattr(C, "k", 6))


def test_type_argument_switched() -> None:
    """Two classes passed in turn."""
    class A:
        k = 2
    class B:
        k = 5
    fn = lambda x, c: x * c.k
    cf = jgt.compile(fn)
    same(cf(X, A), fn(X, A))
    same(cf(X, B), fn(X, B))


def test_slots_object_attr_deleted() -> None:
    """A slot deleted, read through hasattr."""
    class S:
        __slots__ = ("k",)
    s = S()
    s.k = 2
    fn = lambda x, o: x * (o.k if hasattr(o, "k") else 9)
    wmc(fn, lambda: (X, s), lambda: delattr(s, "k"))


def test_object_attr_deleted_reveals_class() -> None:
    """An instance attribute deleted, revealing the class's."""
    class Obj:
        k = 5
    o = Obj()
    o.k = 2
    fn = lambda x, o: x * o.k
    wmc(fn, lambda: (X, o), lambda: delattr(o, "k"))


def test_object_getattr_dunder() -> None:
    """An attribute from __getattr__ whose source changes."""
    class Obj:
        def __getattr__(self, n):
            return Obj.v
    Obj.v = 2
    o = Obj()
    fn = lambda x, o: x * o.anything
    wmc(fn, lambda: (X, o), lambda: setattr(Obj, "v", 6))


def test_property_on_class_replaced_by_value() -> None:
    """A class property replaced by a plain value."""
    class Obj:
        @property
        def k(self):
            return 2
    o = Obj()
    fn = lambda x, o: x * o.k
    wmc(fn, lambda: (X, o), lambda: setattr(Obj, "k", 8))


def test_list_arg_mutated_in_place() -> None:
    """A list argument's item changed in place."""
    lst = [1, 2]
    fn = lambda x, lst: x * sum(lst)
    wmc(fn, lambda: (X, lst), lambda: lst.__setitem__(0, 10))


def test_tuple_of_lists_mutated() -> None:
    """A list inside a tuple argument changed in place."""
    t = ([1], [2])
    fn = lambda x, t: x * t[1][0]
    wmc(fn, lambda: (X, t), lambda: t[1].__setitem__(0, 8))


def test_bytearray_mutated() -> None:
    """A bytearray argument changed in place."""
    b = bytearray(b"\x02")
    fn = lambda x, b: x * b[0]
    wmc(fn, lambda: (X, b), lambda: b.__setitem__(0, 7))


def test_numpy_scalar_arg() -> None:
    """numpy scalars of other values and types."""
    np = pytest.importorskip("numpy")
    fn = lambda x, s: x * s
    cf = jgt.compile(fn)
    same(cf(X, np.float32(2.0)), fn(X, np.float32(2.0)))
    same(cf(X, np.float32(5.0)), fn(X, np.float32(5.0)))
    same(cf(X, np.int64(3)), fn(X, np.int64(3)))


def test_numpy_array_arg_mutated() -> None:
    """A numpy array argument changed in place."""
    np = pytest.importorskip("numpy")
    a = np.ones(3)
    fn = lambda x, a: x * torch.from_numpy(a)
    wmc(fn, lambda: (X.double(), a), lambda: a.__setitem__(0, 7))
