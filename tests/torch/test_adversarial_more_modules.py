"""More adversarial soundness cases for ``jitguard.torch.compile`` on modules: flags,
submodules, parameters, buffers, hooks, class and instance attribute changes, methods;
each compiles, warms, mutates, calls again and compares with eager."""

# ruff: noqa: E731  (the probes are one-line lambdas compared with eager)

from __future__ import annotations

import functools
from typing import Any

import pytest

torch = pytest.importorskip("torch")


from eager_compare import full, same, wmc  # noqa: E402

import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("restore_grad_mode")



X = torch.ones(3)



# ---- modules ----------------------------------------------------------------------------


class Lin(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = torch.nn.Linear(3, 3)
        self.scale = 2

    def forward(self, x: Any) -> Any:
        y = self.l(x) * self.scale
        return y * 2 if self.training else y


def test_training_flag_toggled() -> None:
    """m.eval() after compiling."""
    m = Lin()
    cf = jgt.compile(m)
    same(cf(X), m(X))
    m.eval()
    same(cf(X), m(X))
    m.train()
    same(cf(X), m(X))


def test_submodule_replaced() -> None:
    """A submodule replaced by another of a different type."""
    m = Lin()
    wmc(m, lambda: (X,), lambda: setattr(m, "l", torch.nn.Identity()))


def test_parameter_replaced_by_new_parameter() -> None:
    """A Parameter of a submodule replaced by a new Parameter."""
    m = Lin()
    wmc(m, lambda: (X,), lambda: setattr(m.l, "weight", torch.nn.Parameter(torch.zeros(3, 3))))


def test_parameter_data_assigned() -> None:
    """A Parameter's .data assigned another tensor of the same shape."""
    m = Lin()
    wmc(m, lambda: (X,), lambda: setattr(m.l.weight, "data", torch.zeros(3, 3)))


class BufUser(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        b = getattr(self, "b", None)
        return x if b is None else x + b


def test_register_buffer_after_compile() -> None:
    """A buffer registered after compiling, read through getattr with a default."""
    m = BufUser()
    wmc(m, lambda: (X,), lambda: m.register_buffer("b", full(4)))


def test_dict_entry_shadowing_class_attribute() -> None:
    """A module __dict__ entry added that shadows a class attribute."""
    class M(torch.nn.Module):
        k = 2

        def forward(self, x: Any) -> Any:
            return x * self.k

    m = M()
    wmc(m, lambda: (X,), lambda: m.__dict__.__setitem__("k", 7))


def test_class_attribute_changed() -> None:
    """A module class attribute changed after compiling."""
    class M(torch.nn.Module):
        k = 2

        def forward(self, x: Any) -> Any:
            return x * self.k

    m = M()
    wmc(m, lambda: (X,), lambda: setattr(M, "k", 5))


def test_module_property_backing_changed() -> None:
    """A property on a module whose backing value changes."""
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self._k = 2

        @property
        def k(self) -> int:
            return self._k

        def forward(self, x: Any) -> Any:
            return x * self.k

    m = M()
    wmc(m, lambda: (X,), lambda: setattr(m, "_k", 9))


def test_hook_added_then_removed() -> None:
    """A forward hook added then removed."""
    m = Lin()
    cf = jgt.compile(m)
    same(cf(X), m(X))
    h = m.register_forward_hook(lambda mod, i, o: o + 100)
    same(cf(X), m(X))
    h.remove()
    same(cf(X), m(X))


def test_submodule_hook_added() -> None:
    """A forward hook added on a submodule after compiling."""
    m = Lin()
    wmc(m, lambda: (X,), lambda: m.l.register_forward_hook(lambda mod, i, o: o * 0))


def test_module_positional_vs_bound_method() -> None:
    """One module compiled directly and as a bound forward, both mutated."""
    m = Lin()
    a = jgt.compile(m)
    b = jgt.compile(m.forward)
    same(a(X), m(X))
    same(b(X), m.forward(X))
    m.scale = 5
    same(a(X), m(X))
    same(b(X), m.forward(X))


def test_module_passed_as_argument() -> None:
    """A module passed as an argument, its parameter mutated in place."""
    m = Lin()

    def fn(mod: Any, x: Any) -> Any:
        return mod(x)

    def mutate() -> None:
        with torch.no_grad():
            m.l.weight.fill_(0.5)

    wmc(fn, lambda: (m, X), mutate)


def test_two_module_instances_as_argument() -> None:
    """Two instances of one module class passed in turn."""
    m1, m2 = Lin(), Lin()
    m2.scale = 7
    fn = lambda mod, x: mod(x)
    cf = jgt.compile(fn)
    same(cf(m1, X), fn(m1, X))
    same(cf(m2, X), fn(m2, X))
    same(cf(m1, X), fn(m1, X))


def test_module_attr_increment_inside() -> None:
    """A module attribute incremented inside forward once per call."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = 0
        def forward(self, x):
            self.c += 1
            return x * self.c
    m1, m2 = M(), M()
    cf = jgt.compile(m1)
    for _ in range(4):
        same(cf(X), m2(X))
    assert m1.c == m2.c


def test_module_list_appended() -> None:
    """A ModuleList iterated in forward, appended to."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(3, 3)])
        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x
    m = M()
    wmc(m, lambda: (X,), lambda: m.layers.append(torch.nn.Linear(3, 3)))


def test_module_dict_key_added() -> None:
    """A ModuleDict iterated in forward, gaining a key."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.d = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 3)})
        def forward(self, x):
            for _k, layer in self.d.items():
                x = layer(x)
            return x
    m = M()
    wmc(m, lambda: (X,), lambda: m.d.__setitem__("b", torch.nn.Linear(3, 3)))


def test_parameter_list_replaced_item() -> None:
    """A ParameterList item replaced."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(3))])
        def forward(self, x):
            return x * self.p[0]
    m = M()
    wmc(m, lambda: (X,), lambda: m.p.__setitem__(0, torch.nn.Parameter(torch.full((3,), 4.0))))


def test_module_to_double() -> None:
    """module.double() after compiling, with float64 inputs."""
    m = torch.nn.Linear(3, 3)
    x64 = X.double()
    cf = jgt.compile(m)
    same(cf(X), m(X))
    m.double()
    same(cf(x64), m(x64))


def test_module_requires_grad_off() -> None:
    """requires_grad_(False) on a module after compiling."""
    m = torch.nn.Linear(3, 3)
    cf = jgt.compile(m)
    assert cf(X).requires_grad
    m.requires_grad_(False)
    assert cf(X).requires_grad == m(X).requires_grad


def test_forward_hook_with_kwargs() -> None:
    """A with_kwargs forward hook added after compiling."""
    m = torch.nn.Linear(3, 3)
    def mut():
        m.register_forward_hook(lambda mod, a, kw, o: o * 0, with_kwargs=True)
    wmc(m, lambda: (X,), mut)


def test_forward_pre_hook_with_kwargs() -> None:
    """A with_kwargs forward pre-hook added after compiling."""
    m = torch.nn.Linear(3, 3)
    def mut():
        m.register_forward_pre_hook(lambda mod, a, kw: ((a[0] * 0,), kw), with_kwargs=True)
    wmc(m, lambda: (X,), mut)


def test_classmethod_compiled() -> None:
    """A classmethod compiled, its class attribute changed."""
    class C:
        k = 2
        @classmethod
        def f(cls, x):
            return x * cls.k
    wmc(C.f, lambda: (X,), lambda: setattr(C, "k", 5))


def test_staticmethod_compiled() -> None:
    """A staticmethod compiled."""
    class C:
        @staticmethod
        def f(x):
            return x * 2
    cf = jgt.compile(C.f)
    same(cf(X), C.f(X))


def test_method_self_attr() -> None:
    """A bound method compiled, its instance attribute changed."""
    class C:
        def __init__(self):
            self.k = 2
        def f(self, x):
            return x * self.k
    c = C()
    wmc(c.f, lambda: (X,), lambda: setattr(c, "k", 5))


def test_module_training_of_submodule() -> None:
    """A submodule's training flag changed."""
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.5))
    cf = jgt.compile(m)
    torch.manual_seed(0)
    cf(X)
    m[1].eval()
    same(cf(X), m(X))


def test_module_hook_kwargs_mutated() -> None:
    """A forward hook's closure list changed."""
    m = torch.nn.Linear(3, 3)
    box = [1.0]
    m.register_forward_hook(lambda mod, i, o: o * box[0])
    wmc(m, lambda: (X,), lambda: box.__setitem__(0, 4.0))


def test_parameter_setattr_to_tensor_buffer() -> None:
    """A buffer replaced by assignment."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.ones(3))
        def forward(self, x):
            return x + self.b
    m = M()
    wmc(m, lambda: (X,), lambda: setattr(m, "b", torch.full((3,), 5.0)))


def test_buffer_set_to_none() -> None:
    """A buffer set to None."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.ones(3))
        def forward(self, x):
            return x if self.b is None else x + self.b
    m = M()
    wmc(m, lambda: (X,), lambda: setattr(m, "b", None))


def test_delattr_submodule() -> None:
    """A submodule deleted, read through hasattr."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(3, 3)
        def forward(self, x):
            return self.l(x) if hasattr(self, "l") else x
    m = M()
    wmc(m, lambda: (X,), lambda: delattr(m, "l"))


def test_module_class_swapped() -> None:
    """A module's __class__ swapped for a subclass."""
    class A(torch.nn.Module):
        def forward(self, x):
            return x * self.k()
        def k(self):
            return 2
    class B(A):
        def k(self):
            return 5
    m = A()
    wmc(m, lambda: (X,), lambda: setattr(m, "__class__", B))


def test_module_instance_method_shadow() -> None:
    """A method shadowed by an instance attribute."""
    class A(torch.nn.Module):
        def forward(self, x):
            return x * self.k()
        def k(self):
            return 2
    m = A()
    wmc(m, lambda: (X,), lambda: setattr(m, "k", lambda: 7))


def test_module_getattr_override() -> None:
    """A module __getattr__ whose backing dict changes."""
    class A(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.extra = {"k": 2}
        def __getattr__(self, name):
            if name == "k":
                return self.extra["k"]
            return super().__getattr__(name)
        def forward(self, x):
            return x * self.k
    m = A()
    wmc(m, lambda: (X,), lambda: m.extra.__setitem__("k", 6))


def test_descriptor_class_attr() -> None:
    """A descriptor whose value changes."""
    class D:
        v = 2
        def __get__(self, obj, tp=None):
            return D.v
    class A(torch.nn.Module):
        k = D()
        def forward(self, x):
            return x * self.k
    m = A()
    wmc(m, lambda: (X,), lambda: setattr(D, "v", 9))


def test_functools_cached_property() -> None:
    """A cached_property value replaced in __dict__."""
    class A(torch.nn.Module):
        @functools.cached_property
        def k(self):
            return 2
        def forward(self, x):
            return x * self.k
    m = A()
    wmc(m, lambda: (X,), lambda: m.__dict__.__setitem__("k", 8))


def test_partial_with_tensor_and_mutated_func() -> None:
    """A partial whose function's __code__ is replaced."""
    def f(x, k):
        return x * k
    p = functools.partial(f, k=2)
    cf = jgt.compile(p)
    same(cf(X), p(X))
    same(cf(X), p(X))
    f.__code__ = (lambda x, k: x + k).__code__
    same(cf(X), p(X))


