"""Adversarial soundness of ``jitguard.torch.compile`` on Dynamo, per class of issue 9: each
case compiles, warms, mutates what the function reads, calls again, and compares with eager
(or counts the recompile); side effects happen once, unusual keys don't crash, nothing
leaks. (Class 11, ``jitguard.specialize``, is in tests/test_specialize_soundness.py.)"""

from __future__ import annotations

import array
import builtins
import collections
import dataclasses
import enum
import gc
import math
import types
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

torch = pytest.importorskip("torch")

from torch.overrides import TorchFunctionMode  # noqa: E402

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("restore_grad_mode")


def same(got: Any, want: Any) -> None:
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def full(v: float, n: int = 3) -> Any:
    return torch.full((n,), float(v))


def stats(cf: Any) -> Any:
    return jitguard.cache_of(cf).stats()


def warm_mutate_compare(
    fn: Callable[..., Any], args: Callable[[], tuple[Any, ...]], mutate: Callable[[], None]
) -> Any:
    """Compile ``fn``; call it twice (warm) on ``args()``, each time comparing with eager; run
    ``mutate``; call again and compare with eager. Returns the compiled function."""
    cf = jgt.compile(fn)
    same(cf(*args()), fn(*args()))
    same(cf(*args()), fn(*args()))
    mutate()
    same(cf(*args()), fn(*args()))
    return cf


X = torch.ones(3)


# ==== class 1: containers beyond exact dict/list/tuple ====================================

P = collections.namedtuple("P", "a")
PK = collections.namedtuple("PK", "a k")


class TypedPair(NamedTuple):
    a: Any
    scale: int = 2


class DictSub(dict):  # type: ignore[type-arg]
    pass


class ListSub(list):  # type: ignore[type-arg]
    pass


@dataclasses.dataclass
class Box:
    t: Any
    k: int


class TestContainers:
    """Class 1: a new value inside a container the guard must look into."""

    def test_namedtuple_tensor_replaced(self) -> None:
        """A namedtuple's tensor field replaced: the new tensor is used."""
        cf = jgt.compile(lambda p, x: p.a + x)
        same(cf(P(full(2)), X), full(3))
        same(cf(P(full(5)), X), full(6))

    def test_namedtuple_int_field_changed(self) -> None:
        """A namedtuple's int field changed."""
        cf = jgt.compile(lambda p, x: p.a * p.k + x)
        same(cf(PK(full(2), 2), X), full(5))
        same(cf(PK(full(2), 7), X), full(15))

    def test_typing_namedtuple_default_field(self) -> None:
        """A typing.NamedTuple's defaulted field given explicitly."""
        cf = jgt.compile(lambda p: p.a * p.scale)
        same(cf(TypedPair(full(1))), full(2))
        same(cf(TypedPair(full(1), 5)), full(5))

    def test_ordereddict_value_replaced(self) -> None:
        """An OrderedDict's tensor value replaced."""
        cf = jgt.compile(lambda d, x: d["w"] * x)
        same(cf(collections.OrderedDict(w=full(2)), X), full(2))
        same(cf(collections.OrderedDict(w=full(4)), X), full(4))

    def test_ordereddict_order_changed(self) -> None:
        """The same OrderedDict keys in another order change a concatenation."""

        def fn(d: Any) -> Any:
            return torch.cat(list(d.values()))

        cf = jgt.compile(fn)
        d = collections.OrderedDict(a=full(1, 1), b=full(2, 1))
        same(cf(d), fn(d))
        d.move_to_end("a")
        same(cf(d), fn(d))

    def test_plain_dict_insertion_order(self) -> None:
        """A plain dict with the same keys inserted in another order."""

        def fn(d: Any) -> Any:
            return torch.cat([v * i for i, v in enumerate(d.values())])

        cf = jgt.compile(fn)
        same(cf({"a": full(1, 1), "b": full(2, 1)}), torch.tensor([0.0, 2.0]))
        same(cf({"b": full(2, 1), "a": full(1, 1)}), torch.tensor([0.0, 1.0]))

    def test_defaultdict_key_added(self) -> None:
        """A defaultdict gains a key that the function iterates over."""

        def fn(d: Any, x: Any) -> Any:
            out = x
            for v in d.values():
                out = out + v
            return out

        d: Any = collections.defaultdict(int, {"a": 1})
        warm_mutate_compare(fn, lambda: (d, X), lambda: d.__setitem__("b", 5))

    def test_dict_subclass_value_changed(self) -> None:
        """A dict subclass's int value changed in place."""
        d = DictSub(k=2)
        warm_mutate_compare(lambda d, x: x * d["k"], lambda: (d, X), lambda: d.__setitem__("k", 9))

    def test_list_subclass_item_changed(self) -> None:
        """A list subclass's item changed in place."""
        lst = ListSub([1, 2])
        warm_mutate_compare(lambda v, x: x * v[1], lambda: (lst, X), lambda: lst.__setitem__(1, 7))

    def test_dataclass_tensor_and_int(self) -> None:
        """A dataclass's tensor replaced and int changed in place."""
        box = Box(full(2), 3)

        def mutate() -> None:
            box.t = full(7)
            box.k = 4

        warm_mutate_compare(lambda b: b.t * b.k, lambda: (box,), mutate)

    def test_nested_containers(self) -> None:
        """A tensor deep in a dict of lists of namedtuples replaced."""
        data = {"layers": [P(full(1)), P(full(2))]}

        def fn(d: Any, x: Any) -> Any:
            return sum(p.a for p in d["layers"]) + x

        warm_mutate_compare(fn, lambda: (data, X), lambda: data["layers"].__setitem__(1, P(full(9))))

    def test_simplenamespace_attr(self) -> None:
        """A SimpleNamespace attribute changed."""
        ns = types.SimpleNamespace(k=2)
        warm_mutate_compare(lambda n, x: x * n.k, lambda: (ns, X), lambda: setattr(ns, "k", 6))

    def test_deque_item_replaced(self) -> None:
        """A deque's tensor item replaced."""
        dq = collections.deque([full(1), full(2)])
        warm_mutate_compare(lambda q: q[0] + q[1], lambda: (dq,), lambda: dq.__setitem__(0, full(5)))


# ==== class 2: attributes never watched ====================================================


class Slotted:
    __slots__ = ("scale",)

    def __init__(self, scale: int) -> None:
        self.scale = scale


@dataclasses.dataclass(slots=True)
class SlotData:
    scale: int


class Inner:
    def __init__(self, scale: int) -> None:
        self.scale = scale


class Outer:
    def __init__(self, scale: int) -> None:
        self.inner = Inner(scale)


class WithProperty:
    def __init__(self) -> None:
        self._k = 2

    @property
    def k(self) -> int:
        return self._k * 10


class ClassDefault:
    k = 3


@dataclasses.dataclass(frozen=True)
class Frozen:
    k: int


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = 2.0
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: Any) -> Any:
        return self.lin(x) * self.scale


class TestAttributes:
    """Class 2: an attribute changed on an object the function reads."""

    def test_slotted_object(self) -> None:
        """A __slots__ attribute changed."""
        o = Slotted(2)
        warm_mutate_compare(lambda o, x: x * o.scale, lambda: (o, X), lambda: setattr(o, "scale", 5))

    def test_slots_dataclass(self) -> None:
        """A dataclass(slots=True) field changed."""
        o = SlotData(2)
        warm_mutate_compare(lambda o, x: x * o.scale, lambda: (o, X), lambda: setattr(o, "scale", 5))

    def test_nested_object(self) -> None:
        """``o.inner.scale`` changed."""
        o = Outer(2)
        warm_mutate_compare(
            lambda o, x: x * o.inner.scale, lambda: (o, X), lambda: setattr(o.inner, "scale", 8)
        )

    def test_nested_object_replaced(self) -> None:
        """``o.inner`` replaced by another object."""
        o = Outer(2)
        warm_mutate_compare(
            lambda o, x: x * o.inner.scale, lambda: (o, X), lambda: setattr(o, "inner", Inner(6))
        )

    def test_python_attribute_on_parameter(self) -> None:
        """A Python attribute set on a Parameter changed."""
        p = torch.nn.Parameter(torch.ones(3))
        p.scale = 2  # type: ignore[attr-defined]

        def fn(p: Any, x: Any) -> Any:
            return x * p.scale

        warm_mutate_compare(fn, lambda: (p, X), lambda: setattr(p, "scale", 7))

    def test_object_getattribute_read(self) -> None:
        """A read through ``object.__getattribute__``."""
        o = Inner(2)

        def fn(o: Any, x: Any) -> Any:
            return x * object.__getattribute__(o, "scale")

        warm_mutate_compare(fn, lambda: (o, X), lambda: setattr(o, "scale", 4))

    def test_getattr_with_default(self) -> None:
        """``getattr(o, name, default)`` where the attribute appears later."""
        o = types.SimpleNamespace()

        def fn(o: Any, x: Any) -> Any:
            return x * getattr(o, "scale", 1)

        warm_mutate_compare(fn, lambda: (o, X), lambda: setattr(o, "scale", 3))

    def test_property_backing_field(self) -> None:
        """A property's backing field changed."""
        o = WithProperty()
        warm_mutate_compare(lambda o, x: x * o.k, lambda: (o, X), lambda: setattr(o, "_k", 5))

    def test_instance_attr_shadowing_class_attr(self) -> None:
        """An instance attribute added that shadows the class attribute read."""
        o = ClassDefault()
        warm_mutate_compare(lambda o, x: x * o.k, lambda: (o, X), lambda: setattr(o, "k", 11))

    def test_dict_write(self) -> None:
        """An attribute written through ``o.__dict__``."""
        o = Inner(2)
        warm_mutate_compare(
            lambda o, x: x * o.scale, lambda: (o, X), lambda: o.__dict__.__setitem__("scale", 6)
        )

    def test_frozen_dataclass_forced(self) -> None:
        """A frozen dataclass changed through ``object.__setattr__``."""
        o = Frozen(2)
        warm_mutate_compare(
            lambda o, x: x * o.k, lambda: (o, X), lambda: object.__setattr__(o, "k", 9)
        )

    def test_module_float_attribute(self) -> None:
        """A module's plain float attribute changed."""
        m = Scaled()
        cf = jgt.compile(m)
        x = torch.randn(2, 3)
        same(cf(x), m(x))
        m.scale = 5.0
        same(cf(x), m(x))

    def test_module_parameter_replaced(self) -> None:
        """A module's Parameter replaced by another one."""
        m = Scaled()
        cf = jgt.compile(m)
        x = torch.randn(2, 3)
        same(cf(x), m(x))
        m.lin.weight = torch.nn.Parameter(torch.randn(3, 3))
        same(cf(x), m(x))


# ==== class 3: len() of containers that grew ===============================================


class TestLengths:
    """Class 3: ``len()`` of a container that grew or shrank."""

    @pytest.mark.parametrize(
        ("make", "grow"),
        [
            (lambda: {1, 2}, lambda c: c.add(3)),
            (lambda: collections.deque([1, 2]), lambda c: c.append(3)),
            (lambda: bytearray(b"ab"), lambda c: c.extend(b"cd")),
            (lambda: array.array("i", [1, 2]), lambda c: c.append(3)),
            (lambda: collections.defaultdict(int, a=1), lambda c: c.__setitem__("b", 2)),
            (lambda: ListSub([1, 2]), lambda c: c.append(3)),
            (lambda: collections.OrderedDict(a=1), lambda c: c.__setitem__("b", 2)),
            (lambda: DictSub(a=1), lambda c: c.pop("a")),
            (lambda: [1, 2], lambda c: c.clear()),
        ],
        ids=["set", "deque", "bytearray", "array", "defaultdict", "listsub", "ordereddict",
             "dictsub-shrink", "list-clear"],
    )
    def test_len_changed(self, make: Callable[[], Any], grow: Callable[[Any], None]) -> None:
        """``x * len(c)`` after ``c`` changed size in place."""
        c = make()
        warm_mutate_compare(lambda c, x: x * len(c), lambda: (c, X), lambda: grow(c))

    def test_frozenset_arg(self) -> None:
        """A frozenset of another size passed."""
        cf = jgt.compile(lambda s, x: x * len(s))
        same(cf(frozenset({1, 2}), X), X * 2)
        same(cf(frozenset({1, 2, 3, 4}), X), X * 4)

    def test_range_arg(self) -> None:
        """A range of another length passed."""
        cf = jgt.compile(lambda r, x: x * len(r))
        same(cf(range(3), X), X * 3)
        same(cf(range(5), X), X * 5)

    def test_string_arg(self) -> None:
        """A string of another length passed."""
        cf = jgt.compile(lambda s, x: x * len(s))
        same(cf("ab", X), X * 2)
        same(cf("abcde", X), X * 5)

    def test_dict_keys_view(self) -> None:
        """``len(d.keys())`` after a key was added."""
        d = {"a": 1}
        warm_mutate_compare(lambda d, x: x * len(d.keys()), lambda: (d, X), lambda: d.__setitem__("b", 2))

    def test_set_membership(self) -> None:
        """``k in s`` after the set gained ``k``."""
        s = {1}

        def fn(s: Any, x: Any) -> Any:
            return x + 1 if 5 in s else x - 1

        warm_mutate_compare(fn, lambda: (s, X), lambda: s.add(5))


# ==== class 4: class-level changes after compiling ==========================================


class TestClassLevel:
    """Class 4: the class of an object the function uses changed after compiling."""

    def test_module_forward_replaced(self) -> None:
        """``M.forward = g`` on the compiled module's class."""

        class M(torch.nn.Module):
            def forward(self, x: Any) -> Any:
                return x + 1

        m = M()
        cf = jgt.compile(m)
        same(cf(X), X + 1)
        M.forward = lambda self, x: x * 10  # type: ignore[method-assign]
        same(cf(X), X * 10)

    def test_module_helper_replaced(self) -> None:
        """``M.helper = g`` where forward calls ``self.helper``."""

        class M(torch.nn.Module):
            def helper(self, x: Any) -> Any:
                return x + 1

            def forward(self, x: Any) -> Any:
                return self.helper(x)

        m = M()
        cf = jgt.compile(m)
        same(cf(X), X + 1)
        M.helper = lambda self, x: x - 5  # type: ignore[method-assign]
        same(cf(X), X - 5)

    def test_class_table_item(self) -> None:
        """``M.table[0] = 5`` on a class-level list."""

        class M(torch.nn.Module):
            table = [1, 2]

            def forward(self, x: Any) -> Any:
                return x * self.table[0]

        m = M()
        cf = jgt.compile(m)
        same(cf(X), X)
        M.table[0] = 5
        same(cf(X), X * 5)

    def test_dunder_call_replaced(self) -> None:
        """``Foo.__call__ = g`` for an object the function calls."""

        class Foo:
            def __call__(self, x: Any) -> Any:
                return x + 1

        foo = Foo()
        cf = jgt.compile(lambda f, x: f(x))
        same(cf(foo, X), X + 1)
        Foo.__call__ = lambda self, x: x * 3  # type: ignore[method-assign]
        same(cf(foo, X), X * 3)

    def test_class_scalar(self) -> None:
        """A class attribute read through an instance changed on the class."""

        class C:
            k = 2

        o = C()
        cf = jgt.compile(lambda o, x: x * o.k)
        same(cf(o, X), X * 2)
        C.k = 7
        same(cf(o, X), X * 7)

    def test_classmethod_replaced(self) -> None:
        """A classmethod replaced on the class."""

        class C:
            @classmethod
            def k(cls) -> int:
                return 2

        o = C()
        cf = jgt.compile(lambda o, x: x * o.k())
        same(cf(o, X), X * 2)
        C.k = classmethod(lambda cls: 9)  # type: ignore[assignment,method-assign]
        same(cf(o, X), X * 9)

    def test_staticmethod_replaced(self) -> None:
        """A staticmethod replaced on the class."""

        class C:
            @staticmethod
            def k(x: Any) -> Any:
                return x + 1

        o = C()
        cf = jgt.compile(lambda o, x: o.k(x))
        same(cf(o, X), X + 1)
        C.k = staticmethod(lambda x: x * 4)  # type: ignore[assignment,method-assign]
        same(cf(o, X), X * 4)

    def test_instance_class_swapped(self) -> None:
        """``o.__class__`` swapped to a class with another method."""

        class A:
            def f(self, x: Any) -> Any:
                return x + 1

        class B:
            def f(self, x: Any) -> Any:
                return x * 6

        o = A()
        cf = jgt.compile(lambda o, x: o.f(x))
        same(cf(o, X), X + 1)
        o.__class__ = B
        same(cf(o, X), X * 6)

    def test_subclass_shadows_base(self) -> None:
        """A subclass gains an attribute that shadows the base's."""

        class Base:
            k = 2

        class Sub(Base):
            pass

        o = Sub()
        cf = jgt.compile(lambda o, x: x * o.k)
        same(cf(o, X), X * 2)
        Sub.k = 8  # type: ignore[misc]
        same(cf(o, X), X * 8)

    def test_property_replaced(self) -> None:
        """A property replaced on the class."""

        class C:
            @property
            def k(self) -> int:
                return 2

        o = C()
        cf = jgt.compile(lambda o, x: x * o.k)
        same(cf(o, X), X * 2)
        C.k = property(lambda self: 5)  # type: ignore[assignment,method-assign]
        same(cf(o, X), X * 5)

    def test_base_method_replaced(self) -> None:
        """A method of a base class of the module replaced."""

        class Base(torch.nn.Module):
            def act(self, x: Any) -> Any:
                return x + 1

        class M(Base):
            def forward(self, x: Any) -> Any:
                return self.act(x)

        m = M()
        cf = jgt.compile(m)
        same(cf(X), X + 1)
        Base.act = lambda self, x: x * 2  # type: ignore[method-assign]
        same(cf(X), X * 2)

    def test_submodule_class_method_replaced(self) -> None:
        """A method of a submodule's class (read as ``self.child.scale``) replaced."""

        class Child(torch.nn.Module):
            def scale(self, x: Any) -> Any:
                return x * 2

        class M(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.child = Child()

            def forward(self, x: Any) -> Any:
                return self.child.scale(x)

        m = M()
        cf = jgt.compile(m)
        same(cf(X), X * 2)
        Child.scale = lambda self, x: x - 4  # type: ignore[method-assign]
        same(cf(X), X - 4)

    def test_method_of_repeated_layer_class_replaced(self) -> None:
        """A method of a class used by several layers (checked once for all of them)
        replaced, then a layer swapped for a subclass that overrides it."""

        class Layer(torch.nn.Module):
            def scale(self, x: Any) -> Any:
                return x * 2

            def forward(self, x: Any) -> Any:
                return self.scale(x)

        class Other(Layer):
            def scale(self, x: Any) -> Any:
                return x + 100

        class M(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.layers = torch.nn.ModuleList(Layer() for _ in range(3))

            def forward(self, x: Any) -> Any:
                for layer in self.layers:
                    x = layer(x)
                return x

        m = M()
        cf = jgt.compile(m)
        same(cf(X), m(X))
        Layer.scale = lambda self, x: x - 1  # type: ignore[method-assign]
        same(cf(X), m(X))
        m.layers[2] = Other()
        same(cf(X), m(X))

    def test_middle_class_shadows_method(self) -> None:
        """A class between an argument's type and the base that defines a method gains its
        own version of it."""

        class Base:
            def f(self, x: Any) -> Any:
                return x + 1

        class Mid(Base):
            pass

        class Leaf(Mid):
            pass

        o = Leaf()
        cf = jgt.compile(lambda o, x: o.f(x))
        same(cf(o, X), X + 1)
        Mid.f = lambda self, x: x * 7  # type: ignore[attr-defined]
        same(cf(o, X), X * 7)

    def test_nested_object_classmethod_replaced(self) -> None:
        """A classmethod of an object held in an attribute of an argument replaced."""

        class Inner:
            @classmethod
            def k(cls) -> int:
                return 3

        class Outer:
            def __init__(self) -> None:
                self.inner = Inner()

        o = Outer()
        cf = jgt.compile(lambda o, x: x * o.inner.k())
        same(cf(o, X), X * 3)
        Inner.k = classmethod(lambda cls: 11)  # type: ignore[assignment,method-assign]
        same(cf(o, X), X * 11)

    def test_unchanged_classes_keep_hitting(self) -> None:
        """Calls with nothing changed on the classes stay hits (one compile)."""

        class C:
            k = 2

            def f(self, x: Any) -> Any:
                return x * self.k

        cf = jgt.compile(lambda o, x: o.f(x))
        for _ in range(3):
            same(cf(C(), X), X * 2)
        assert stats(cf).compiles == 1 and stats(cf).hits == 2


# ==== class 5: closure contents ================================================================


class TestClosures:
    """Class 5: what a closure of the function, a helper or a hook holds changed."""

    def test_forward_hook_closure(self) -> None:
        """A forward hook ``lambda m, i, o: o * s[0]``, then ``s[0] = 5``."""
        s = [2]
        m = torch.nn.Linear(3, 3)
        m.register_forward_hook(lambda mod, i, o: o * s[0])
        cf = jgt.compile(m)
        x = torch.randn(2, 3)
        same(cf(x), m(x))
        s[0] = 5
        same(cf(x), m(x))

    def test_forward_pre_hook_closure(self) -> None:
        """A forward pre-hook scaling its input by a closed-over list item."""
        s = [2.0]
        m = torch.nn.Linear(3, 3)
        m.register_forward_pre_hook(lambda mod, args: (args[0] * s[0],))
        cf = jgt.compile(m)
        x = torch.randn(2, 3)
        same(cf(x), m(x))
        s[0] = -3.0
        same(cf(x), m(x))

    def test_closure_int_rebound(self) -> None:
        """A closed-over int rebound by ``nonlocal``."""
        k = 2

        def fn(x: Any) -> Any:
            return x * k

        def set_k() -> None:
            nonlocal k
            k = 9

        warm_mutate_compare(fn, lambda: (X,), set_k)

    def test_helper_closure(self) -> None:
        """A helper the function calls reads a closure cell that changes."""
        box = {"k": 2}

        def helper(x: Any) -> Any:
            return x * box["k"]

        def fn(x: Any) -> Any:
            return helper(x) + 1

        warm_mutate_compare(fn, lambda: (X,), lambda: box.__setitem__("k", 7))

    def test_closure_tensor_rebound(self) -> None:
        """A closed-over tensor rebound to another one."""
        w = full(2)

        def fn(x: Any) -> Any:
            return x * w

        def rebind() -> None:
            nonlocal w
            w = full(4)

        warm_mutate_compare(fn, lambda: (X,), rebind)

    def test_closure_tensor_in_place(self) -> None:
        """A closed-over tensor updated in place."""
        w = full(2)
        warm_mutate_compare(lambda x: x * w, lambda: (X,), lambda: w.fill_(6))

    def test_nested_closure(self) -> None:
        """A closure over a closure's cell."""
        k = 2

        def make() -> Callable[[Any], Any]:
            def inner(x: Any) -> Any:
                return x * k

            return inner

        inner = make()

        def fn(x: Any) -> Any:
            return inner(x) - 1

        def set_k() -> None:
            nonlocal k
            k = 6

        warm_mutate_compare(fn, lambda: (X,), set_k)

    def test_cell_contents_assigned(self) -> None:
        """``fn.__closure__[0].cell_contents`` assigned directly."""
        k = 3

        def fn(x: Any) -> Any:
            return x * k

        assert fn.__closure__ is not None
        cell = fn.__closure__[0]
        warm_mutate_compare(fn, lambda: (X,), lambda: setattr(cell, "cell_contents", 10))

    def test_partial_argument(self) -> None:
        """A functools.partial argument with another bound value."""
        import functools

        def scale(x: Any, k: int) -> Any:
            return x * k

        cf = jgt.compile(lambda f, x: f(x))
        same(cf(functools.partial(scale, k=2), X), X * 2)
        same(cf(functools.partial(scale, k=5), X), X * 5)

    def test_lambda_default_changed(self) -> None:
        """A helper's ``__defaults__`` changed."""

        def helper(x: Any, k: int = 2) -> Any:
            return x * k

        def fn(x: Any) -> Any:
            return helper(x)

        warm_mutate_compare(fn, lambda: (X,), lambda: setattr(helper, "__defaults__", (8,)))


# ==== class 6: globals, builtins, code ========================================================

S = 2
G_TENSOR = torch.ones(3)
CONFIG = {"k": 2}
SEQ = [1, 2]
CFG = types.SimpleNamespace(lr=2)


def _helper(x: Any) -> Any:
    return x + 1


def _reads_globals_dict(x: Any) -> Any:
    return x * globals()["S"]


def _reads_s(x: Any) -> Any:
    return x * S


def _reads_tensor(x: Any) -> Any:
    return x + G_TENSOR


def _reads_config(x: Any) -> Any:
    return x * CONFIG["k"]


def _reads_seq(x: Any) -> Any:
    return x * len(SEQ)


def _reads_cfg(x: Any) -> Any:
    return x * CFG.lr


def _calls_helper(x: Any) -> Any:
    return _helper(x) * 2


def _uses_abs(x: Any, n: int) -> Any:
    return x * abs(n)


def _uses_len_and_max(x: Any, xs: list[int]) -> Any:
    return x * len(xs) + max(xs)


def _uses_max(x: Any, a: int, b: int) -> Any:
    return x * max(a, b)


def _uses_math(x: Any) -> Any:
    return x * math.floor(2.5)


class TestGlobals:
    """Class 6: globals, builtins and code objects changed after compiling."""

    def test_globals_dict_read(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A global read through ``globals()['S']``."""
        warm_mutate_compare(
            _reads_globals_dict, lambda: (X,), lambda: monkeypatch.setitem(globals(), "S", 7)
        )

    def test_plain_global(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A global int read by name."""
        warm_mutate_compare(_reads_s, lambda: (X,), lambda: monkeypatch.setitem(globals(), "S", 5))

    def test_global_tensor_rebound(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A global tensor rebound to another one."""
        warm_mutate_compare(
            _reads_tensor, lambda: (X,), lambda: monkeypatch.setitem(globals(), "G_TENSOR", full(5))
        )

    def test_global_dict_item(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An item of a global dict changed."""
        warm_mutate_compare(
            _reads_config, lambda: (X,), lambda: monkeypatch.setitem(CONFIG, "k", 9)
        )

    def test_global_list_grew(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A global list grew."""
        monkeypatch.setitem(globals(), "SEQ", [1, 2])
        warm_mutate_compare(_reads_seq, lambda: (X,), lambda: SEQ.append(3))

    def test_global_object_attr(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An attribute of a global object changed."""
        warm_mutate_compare(_reads_cfg, lambda: (X,), lambda: monkeypatch.setattr(CFG, "lr", 6))

    def test_global_helper_replaced(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A global helper function replaced."""
        warm_mutate_compare(
            _calls_helper, lambda: (X,),
            lambda: monkeypatch.setitem(globals(), "_helper", lambda x: x - 10),
        )

    def test_builtin_shadowed_by_global(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A module global named ``abs`` appears and shadows the builtin."""
        warm_mutate_compare(
            _uses_abs, lambda: (X, -3),
            lambda: monkeypatch.setitem(globals(), "abs", lambda v: 100),
        )

    def test_builtin_shadowed_then_removed(self) -> None:
        """Globals ``len`` and then ``max`` appear (shadowing the builtins) and go away:
        each call equals eager."""
        args = (X, [1, 5, 2])
        cf = warm_mutate_compare(_uses_len_and_max, lambda: args,
                                 lambda: globals().__setitem__("len", lambda v: 10))
        try:
            globals()["max"] = lambda v: -1
            same(cf(*args), _uses_len_and_max(*args))
        finally:
            globals().pop("len", None)
            globals().pop("max", None)
        same(cf(*args), _uses_len_and_max(*args))

    def test_builtins_abs_patched(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``builtins.abs`` patched (differently only for the int the function passes)."""
        real = builtins.abs

        def fake(v: Any) -> Any:
            return 50 if type(v) is int and v == -3 else real(v)

        warm_mutate_compare(_uses_abs, lambda: (X, -3), lambda: monkeypatch.setattr(builtins, "abs", fake))

    def test_builtins_max_patched(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``builtins.max`` patched (differently only for the ints the function passes)."""
        real = builtins.max

        def fake(*args: Any, **kwargs: Any) -> Any:
            if args == (-7, -8):
                return 40
            return real(*args, **kwargs)

        warm_mutate_compare(
            _uses_max, lambda: (X, -7, -8), lambda: monkeypatch.setattr(builtins, "max", fake)
        )

    def test_code_replaced(self) -> None:
        """``f.__code__`` replaced."""

        def fn(x: Any) -> Any:
            return x + 1

        def other(x: Any) -> Any:
            return x * 7

        warm_mutate_compare(fn, lambda: (X,), lambda: setattr(fn, "__code__", other.__code__))

    def test_module_attribute_patched(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A function of an imported module (``math.floor``) patched."""
        warm_mutate_compare(
            _uses_math, lambda: (X,), lambda: monkeypatch.setattr(math, "floor", lambda v: 9)
        )


# ==== class 7: tracing has side effects ========================================================


class Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: Any) -> Any:
        self.count.add_(1)
        return x * self.count


class TestSideEffects:
    """Class 7: compiling must not run side effects twice, consume RNG, or drop hooks."""

    def test_batchnorm_num_batches_tracked(self) -> None:
        """BatchNorm's ``num_batches_tracked`` goes up by one per call, compiling call included."""
        bn = torch.nn.BatchNorm1d(3)
        ref = torch.nn.BatchNorm1d(3)
        cf = jgt.compile(bn)
        x = torch.randn(4, 3)
        for i in range(1, 4):
            same(cf(x), ref(x))
            assert int(bn.num_batches_tracked) == i
        same(bn.running_mean, ref.running_mean)
        same(bn.running_var, ref.running_var)

    def test_buffer_add_once(self) -> None:
        """An in-place buffer update runs once per call."""
        m, ref = Counter(), Counter()
        cf = jgt.compile(m)
        for _ in range(3):
            same(cf(X), ref(X))
        assert float(m.count) == 3.0

    def test_global_tensor_in_place(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An in-place update of a global tensor runs once per call."""
        monkeypatch.setitem(globals(), "G_TENSOR", torch.zeros(3))

        def fn(x: Any) -> Any:
            G_TENSOR.add_(1)
            return x + G_TENSOR

        cf = jgt.compile(fn)
        same(cf(X), X + 1)
        same(cf(X), X + 2)
        same(G_TENSOR, full(2))

    def test_argument_in_place_once(self) -> None:
        """An in-place update of an argument runs once per call."""

        def fn(acc: Any, x: Any) -> Any:
            acc.mul_(2)
            return acc + x

        acc = torch.ones(3)
        cf = jgt.compile(fn)
        cf(acc, X)
        cf(acc, X)
        same(acc, full(4))

    def test_rng_reproduces_eager(self) -> None:
        """``torch.manual_seed(0)`` then the compiled call draws what eager draws, and leaves
        the generator where eager leaves it."""

        def fn(x: Any) -> Any:
            return x + torch.rand(3)

        cf = jgt.compile(fn)
        for _ in range(2):
            torch.manual_seed(0)
            got = cf(X)
            got_next = torch.rand(2)
            torch.manual_seed(0)
            want = fn(X)
            want_next = torch.rand(2)
            same(got, want)
            same(got_next, want_next)

    def test_dropout_rng(self) -> None:
        """Dropout in training mode reproduces eager under the same seed."""
        m = torch.nn.Dropout(0.5)
        cf = jgt.compile(m)
        x = torch.ones(64)
        for _ in range(2):
            torch.manual_seed(1)
            got = cf(x)
            torch.manual_seed(1)
            same(got, m(x))

    def test_tensor_hook_inside_function(self) -> None:
        """A hook registered inside the function on an intermediate runs on backward."""
        seen: list[int] = []

        def fn(x: Any) -> Any:
            y = x * 2
            y.register_hook(lambda g: seen.append(1))
            return y.sum()

        cf = jgt.compile(fn)
        for i in range(1, 3):
            x = torch.ones(3, requires_grad=True)
            cf(x).backward()
            assert len(seen) == i
            same(x.grad, full(2))

    def test_full_backward_hook(self) -> None:
        """A module's full backward hook runs once per backward."""
        seen: list[int] = []
        m = torch.nn.Linear(3, 3)
        m.register_full_backward_hook(lambda mod, gi, go: seen.append(1))
        cf = jgt.compile(m)
        for i in range(1, 3):
            cf(torch.randn(2, 3, requires_grad=True)).sum().backward()
            assert len(seen) == i

    def test_python_side_effect_once(self) -> None:
        """Appending to a list argument happens once per call."""

        def fn(log: list[int], x: Any) -> Any:
            log.append(1)
            return x + len(log)

        log: list[int] = []
        cf = jgt.compile(fn)
        cf(log, X)
        cf(log, X)
        assert log == [1, 1]

    def test_forward_hook_side_effect_once(self) -> None:
        """A forward hook with a Python side effect runs once per call."""
        seen: list[int] = []
        m = torch.nn.Linear(3, 3)
        m.register_forward_hook(lambda mod, i, o: seen.append(1))
        cf = jgt.compile(m)
        cf(torch.randn(2, 3))
        cf(torch.randn(2, 3))
        assert len(seen) == 2

    def test_autocast_cache_enabled_read(self) -> None:
        """``torch.is_autocast_cache_enabled()`` reads what eager reads."""

        def fn(x: Any) -> Any:
            return x + 1 if torch.is_autocast_cache_enabled() else x - 1

        cf = jgt.compile(fn)
        same(cf(X), fn(X))
        prior = torch.is_autocast_cache_enabled()
        torch.set_autocast_cache_enabled(not prior)
        try:
            same(cf(X), fn(X))
        finally:
            torch.set_autocast_cache_enabled(prior)

    def test_rng_state_restored_on_recompile(self) -> None:
        """A recompile (new shape) does not consume RNG draws either."""

        def fn(x: Any) -> Any:
            return x * torch.randn(x.shape)

        cf = jgt.compile(fn, dynamic=False)
        for n in (3, 4, 5):
            x = torch.ones(n)
            torch.manual_seed(3)
            got = cf(x)
            after = torch.rand(1)
            torch.manual_seed(3)
            same(got, fn(x))
            same(after, torch.rand(1))


# ==== class 8: torch function modes active at call time =========================================


class AddOne(TorchFunctionMode):
    """Adds one to the result of every ``torch.add``/``Tensor.add``."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func in (torch.add, torch.Tensor.add, torch.Tensor.__add__):
            out = out + 1
        return out


class Counting(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.calls += 1
        return func(*args, **(kwargs or {}))


class ToDouble(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func is torch.mul:
            out = out * 2
        return out


def _adds(x: Any) -> Any:
    return torch.add(x, 1)


class TestFunctionModes:
    """Class 8: a torch function mode active when the compiled function is called."""

    def test_mode_at_call_time_applied_once(self) -> None:
        """Under a mode, the result equals eager's under the same mode (applied once)."""
        cf = jgt.compile(_adds)
        with AddOne():
            same(cf(X), _adds(X))
            same(cf(X), _adds(X))

    def test_mode_entered_after_warm(self) -> None:
        """Warm without the mode, then call under it."""
        cf = jgt.compile(_adds)
        same(cf(X), X + 1)
        with AddOne():
            same(cf(X), _adds(X))

    def test_mode_exited_after_compile(self) -> None:
        """Compiled under the mode, then called without it."""
        cf = jgt.compile(_adds)
        with AddOne():
            same(cf(X), _adds(X))
        same(cf(X), X + 1)

    def test_nested_modes(self) -> None:
        """Two nested modes: same as eager."""
        cf = jgt.compile(_adds)
        with AddOne(), AddOne():
            same(cf(X), _adds(X))
            same(cf(X), _adds(X))

    @pytest.mark.parametrize("verify", [True, False], ids=["verify", "no_verify"])
    def test_counting_mode_counts_like_eager(self, verify: bool) -> None:
        """A mode with a Python side effect sees as many calls as in eager."""

        def fn(x: Any) -> Any:
            return torch.mul(torch.add(x, 1), 2)

        cf = jgt.compile(fn, verify=verify)
        cf(X)
        eager_mode, compiled_mode = Counting(), Counting()
        with eager_mode:
            want = fn(X)
        with compiled_mode:
            got = cf(X)
        same(got, want)
        assert compiled_mode.calls == eager_mode.calls == 2

    @pytest.mark.parametrize("verify", [True, False], ids=["verify", "no_verify"])
    def test_counting_mode_guard_fails_on_its_next_call(self, verify: bool) -> None:
        """An entry captured at calls == N is not used once the counter moved on."""

        def fn(x: Any) -> Any:
            return torch.mul(torch.add(x, 1), 2)

        cf = jgt.compile(fn, verify=verify)
        eager_mode, compiled_mode = Counting(), Counting()
        for _ in range(3):
            with eager_mode:
                want = fn(X)
            with compiled_mode:
                got = cf(X)
            same(got, want)
            assert compiled_mode.calls == eager_mode.calls
        assert jitguard.cache_of(cf).stats().compiles == 3

    @pytest.mark.parametrize("verify", [True, False], ids=["verify", "no_verify"])
    def test_result_changing_modes_apply_once(self, verify: bool) -> None:
        """A mode that changes results applies once, whether verify mode is on or off."""
        cf = jgt.compile(_adds, verify=verify)
        with AddOne():
            same(cf(X), _adds(X))
            same(cf(X), _adds(X))
        with ToDouble(), AddOne():
            same(cf(X), _adds(X))
        same(cf(X), X + 1)

    def test_mode_changing_results(self) -> None:
        """A mode that doubles every ``torch.mul`` result, applied once."""

        def fn(x: Any) -> Any:
            return torch.mul(x, 3)

        cf = jgt.compile(fn)
        same(cf(X), X * 3)
        with ToDouble():
            same(cf(X), fn(X))
        same(cf(X), X * 3)

    def test_mode_entered_inside_function(self) -> None:
        """A mode entered inside the compiled function applies once."""

        def fn(x: Any) -> Any:
            with AddOne():
                return torch.add(x, 1)

        warm_mutate_compare(fn, lambda: (X,), lambda: None)

    def test_mode_swapped_between_calls(self) -> None:
        """One mode, then another kind of mode."""
        cf = jgt.compile(_adds)
        with AddOne():
            same(cf(X), _adds(X))
        with ToDouble():
            same(cf(X), _adds(X))

    def test_module_under_mode(self) -> None:
        """A compiled module called under a mode matches eager under it."""
        m = torch.nn.Linear(3, 3)
        cf = jgt.compile(m)
        x = torch.randn(2, 3)
        same(cf(x), m(x))
        with ToDouble(), AddOne():
            same(cf(x), m(x))


# ==== class 9: unusual dict keys and attribute names ============================================


class Color(enum.Enum):
    RED = 1
    BLUE = 2


UNUSUAL_KEYS = [
    pytest.param(Color.RED, id="enum"),
    pytest.param(torch.float32, id="dtype"),
    pytest.param(frozenset({1, 2}), id="frozenset"),
    pytest.param(int, id="type"),
    pytest.param(float("nan"), id="nan"),
    pytest.param(1j, id="complex"),
    pytest.param((1, "a"), id="tuple"),
    pytest.param(None, id="none"),
    pytest.param(b"raw", id="bytes"),
    pytest.param(torch.device("cpu"), id="device"),
    pytest.param(math.inf, id="inf"),
    pytest.param(-0.0, id="negzero"),
]


class TestUnusualKeys:
    """Class 9: unusual dict keys and attribute names: no crash, right results."""

    @pytest.mark.parametrize("key", UNUSUAL_KEYS)
    def test_key_value_changed(self, key: Any) -> None:
        """``d[key]`` read, then its value changed."""
        d = {key: 2, "other": 3}

        def fn(d: Any, x: Any) -> Any:
            return x * d[key]

        warm_mutate_compare(fn, lambda: (d, X), lambda: d.__setitem__(key, 7))

    @pytest.mark.parametrize("key", UNUSUAL_KEYS)
    def test_key_iterated(self, key: Any) -> None:
        """A dict with the key iterated over, then a tensor under it replaced."""
        d = {key: full(2), "other": full(3)}

        def fn(d: Any) -> Any:
            out = torch.zeros(3)
            for v in d.values():
                out = out + v
            return out

        warm_mutate_compare(fn, lambda: (d,), lambda: d.__setitem__(key, full(9)))

    def test_enum_keys_swapped(self) -> None:
        """Two enum keys with their values swapped."""
        d = {Color.RED: 1, Color.BLUE: 2}

        def fn(d: Any, x: Any) -> Any:
            return x * d[Color.RED] - d[Color.BLUE]

        def swap() -> None:
            d[Color.RED], d[Color.BLUE] = d[Color.BLUE], d[Color.RED]

        warm_mutate_compare(fn, lambda: (d, X), swap)

    def test_dotted_attribute_unread(self) -> None:
        """An object with an unread attribute named ``a.b`` passed."""
        o = types.SimpleNamespace(k=2)
        setattr(o, "a.b", 5)
        warm_mutate_compare(lambda o, x: x * o.k, lambda: (o, X), lambda: setattr(o, "k", 3))

    def test_dotted_attribute_read(self) -> None:
        """``getattr(o, 'a.b')`` read, then changed."""
        o = types.SimpleNamespace()
        setattr(o, "a.b", 2)

        def fn(o: Any, x: Any) -> Any:
            return x * getattr(o, "a.b")

        warm_mutate_compare(fn, lambda: (o, X), lambda: setattr(o, "a.b", 6))

    def test_odd_attribute_names_on_module(self) -> None:
        """A module with attributes named ``class``, ``my attr`` and ``a.b``."""
        m = torch.nn.Linear(3, 3)
        setattr(m, "class", 1)
        setattr(m, "my attr", 2)
        setattr(m, "a.b", 3)
        cf = jgt.compile(m)
        x = torch.randn(2, 3)
        same(cf(x), m(x))
        setattr(m, "my attr", 4)
        same(cf(x), m(x))

    def test_bool_and_int_keys(self) -> None:
        """``True`` and ``1`` are one key; ``1.0`` too."""
        d = {True: 2}

        def fn(d: Any, x: Any) -> Any:
            return x * d[1]

        warm_mutate_compare(fn, lambda: (d, X), lambda: d.__setitem__(1.0, 8))

    def test_object_key(self) -> None:
        """A plain object as a key, replaced by another object."""
        k1, k2 = object(), object()
        holder = {"key": k1}

        def fn(d: Any, x: Any) -> Any:
            return x * len(d)

        cf = jgt.compile(fn)
        same(cf({holder["key"]: 1}, X), X)
        same(cf({k1: 1, k2: 2}, X), X * 2)

    def test_function_and_module_keys(self) -> None:
        """Functions and modules as dict keys."""
        lin = torch.nn.Linear(3, 3)
        d = {_helper: 2, lin: 3}

        def fn(d: Any, x: Any) -> Any:
            return x * d[_helper] + d[lin]

        warm_mutate_compare(fn, lambda: (d, X), lambda: d.__setitem__(lin, 10))


# ==== class 10: leaks ===================================================================


def _collect() -> None:
    for _ in range(3):
        gc.collect()


class TestLeaks:
    """Class 10: what a call passes in is freed once the caller drops it."""

    def test_example_tensor_freed(self) -> None:
        """The tensor the first (compiling) call received is freed."""
        cf = jgt.compile(lambda x: x * 2)
        x = torch.randn(3)
        ref = weakref.ref(x)
        cf(x)
        del x
        _collect()
        assert ref() is None

    def test_tensors_of_many_shapes_freed(self) -> None:
        """Tensors of several shapes (several entries) are all freed."""
        cf = jgt.compile(lambda x: x + 1, dynamic=False)
        refs = []
        for n in (2, 3, 4):
            x = torch.randn(n)
            refs.append(weakref.ref(x))
            cf(x)
            del x
        _collect()
        assert [r() for r in refs] == [None, None, None]

    def test_module_argument_freed_and_entry_invalidated(self) -> None:
        """A module passed as an argument is freed, and its entry is invalidated."""
        cf = jgt.compile(lambda m, x: m(x))
        m = torch.nn.Linear(3, 3)
        ref = weakref.ref(m)
        cf(m, torch.randn(2, 3))
        assert stats(cf).entries == 1
        del m
        _collect()
        assert ref() is None
        cf(torch.nn.Linear(3, 3), torch.randn(2, 3))
        s = stats(cf)
        assert s.invalidations >= 1 or s.entries == 1

    def test_compiled_module_freed(self) -> None:
        """A compiled module and its wrapper are freed together."""
        m = torch.nn.Linear(3, 3)
        ref = weakref.ref(m)
        cf = jgt.compile(m)
        cf(torch.randn(2, 3))
        del m, cf
        _collect()
        assert ref() is None

    def test_closure_tensor_freed(self) -> None:
        """A tensor a compiled closure captured is freed with the function and the wrapper."""

        def make(w: Any) -> Callable[[Any], Any]:
            def fn(x: Any) -> Any:
                return x * w

            return fn

        w = torch.randn(3)
        ref = weakref.ref(w)
        fn = make(w)
        cf = jgt.compile(fn)
        cf(X)
        del w, fn, cf
        _collect()
        assert ref() is None

    def test_object_argument_freed(self) -> None:
        """An object whose attribute the function read is freed."""
        cf = jgt.compile(lambda o, x: x * o.scale)
        o = Inner(2)
        ref = weakref.ref(o)
        cf(o, X)
        del o
        _collect()
        assert ref() is None

    def test_requires_grad_argument_freed(self) -> None:
        """A requires_grad tensor and the graph of the output are freed."""
        cf = jgt.compile(lambda x: (x * 2).sum())
        x = torch.randn(3, requires_grad=True)
        ref = weakref.ref(x)
        cf(x).backward()
        del x
        _collect()
        assert ref() is None

    def test_replaced_global_freed(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A global tensor replaced after compiling is freed."""
        old = torch.randn(3)
        monkeypatch.setitem(globals(), "G_TENSOR", old)
        ref = weakref.ref(old)
        del old
        cf = jgt.compile(_reads_tensor)
        cf(X)
        globals()["G_TENSOR"] = torch.randn(3)  # not monkeypatch: it would keep ``old``
        same(cf(X), X + G_TENSOR)
        _collect()
        assert ref() is None

    def test_dict_of_tensors_freed(self) -> None:
        """Tensors in a dict argument are freed."""
        cf = jgt.compile(lambda d: d["a"] + d["b"])
        d = {"a": torch.randn(3), "b": torch.randn(3)}
        refs = [weakref.ref(v) for v in d.values()]
        cf(d)
        del d
        _collect()
        assert [r() for r in refs] == [None, None]

    def test_freed_module_entry_not_reused(self) -> None:
        """After a module argument dies, a new module (even at the same address) gets its own
        result, never the dead one's."""
        cf = jgt.compile(lambda m, x: m(x))
        x = torch.randn(2, 3)
        for _ in range(3):
            m = torch.nn.Linear(3, 3)
            same(cf(m, x), m(x))
            del m
            _collect()
