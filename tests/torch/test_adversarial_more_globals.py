"""More adversarial soundness cases for ``jitguard.torch.compile``: globals, closures,
helpers and patched functions read by the function, and leaks of what calls pass in;
each compiles, warms, mutates, calls again and compares with eager."""

# ruff: noqa: E731  (the probes are one-line lambdas compared with eager)

from __future__ import annotations

import functools
import gc
import types
import weakref
from typing import Any

import pytest

torch = pytest.importorskip("torch")


from eager_compare import full, same, wmc  # noqa: E402

import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("restore_grad_mode")



X = torch.ones(3)



# ---- globals and closures ----------------------------------------------------------------

K = 2


def uses_global(x: Any) -> Any:
    return x * K


def test_global_rebound() -> None:
    """A module global int rebound after compiling."""
    global K
    try:
        wmc(uses_global, lambda: (X,), lambda: globals().__setitem__("K", 9))
    finally:
        K = 2


def test_nonlocal_rebound_by_other_closure() -> None:
    """A nonlocal rebound by a sibling closure."""
    def make() -> tuple[Any, Any]:
        k = 2

        def fn(x: Any) -> Any:
            return x * k

        def setk(v: int) -> None:
            nonlocal k
            k = v

        return fn, setk

    fn, setk = make()
    wmc(fn, lambda: (X,), lambda: setk(11))


def test_global_of_other_module() -> None:
    """An attribute of another module (math) patched."""
    import math

    fn = lambda x: x * math.pi
    old = math.pi
    try:
        wmc(fn, lambda: (X,), lambda: setattr(math, "pi", 3.0))
    finally:
        math.pi = old


def test_builtin_shadowed_in_globals() -> None:
    """A builtin shadowed in the function's globals after compiling."""
    g: dict[str, Any] = {"torch": torch}
    exec("def fn(x):\n    return x * len([1, 2])\n", g)
    fn = g["fn"]
    wmc(fn, lambda: (X,), lambda: g.__setitem__("len", lambda s: 10))


# ---- leaks ------------------------------------------------------------------------------


def test_module_freed_after_compiled_call() -> None:
    """A compiled module and its wrapper are freed after del."""
    m = torch.nn.Linear(3, 3)
    cf = jgt.compile(m)
    cf(X)
    ref = weakref.ref(m)
    del m, cf
    gc.collect()
    assert ref() is None


def test_bound_method_module_freed() -> None:
    """A module compiled through its bound forward is freed after del."""
    m = torch.nn.Linear(3, 3)
    cf = jgt.compile(m.forward)
    cf(X)
    ref = weakref.ref(m)
    del m, cf
    gc.collect()
    assert ref() is None


def test_argument_freed_after_graph_break() -> None:
    """Tensors passed to a function that falls back to eager are freed."""
    def fn(x: Any) -> Any:
        print("", end="")
        return x * 2

    cf = jgt.compile(fn)
    x = torch.ones(3)
    cf(x)
    ref = weakref.ref(x)
    del x
    gc.collect()
    assert ref() is None


def test_global_deleted() -> None:
    """A global deleted after compiling raises NameError as eager."""
    g = {"torch": torch, "W": 2}
    exec("def fn(x):\n    return x * W\n", g)
    fn = g["fn"]
    cf = jgt.compile(fn)
    cf(X)
    cf(X)
    del g["W"]
    with pytest.raises(NameError):
        cf(X)


def test_cell_emptied() -> None:
    """A closure cell emptied after compiling raises NameError as eager."""
    def make():
        k = 2
        def fn(x):
            return x * k
        def kill():
            nonlocal k
            del k
        return fn, kill
    fn, kill = make()
    cf = jgt.compile(fn)
    cf(X)
    cf(X)
    kill()
    with pytest.raises(NameError):
        cf(X)


def test_leak_args_on_exception() -> None:
    """An argument of a call that raised is freed."""
    fn = lambda x: x + torch.ones(3)
    cf = jgt.compile(fn)
    cf(X)
    a = torch.ones(4)
    ref = weakref.ref(a)
    try:
        cf(a)
    except RuntimeError:
        pass
    del a
    gc.collect()
    assert ref() is None


def test_leak_object_arg_attr() -> None:
    """Objects whose attributes were read are freed."""
    class Obj:
        pass
    fn = lambda o, x: x * o.k
    cf = jgt.compile(fn)
    refs = []
    for i in range(3):
        o = Obj()
        o.k = i
        cf(o, X)
        refs.append(weakref.ref(o))
        del o
    gc.collect()
    assert all(r() is None for r in refs)


def test_leak_module_in_list_arg() -> None:
    """A module inside a list argument is freed."""
    fn = lambda ms, x: ms[0](x)
    cf = jgt.compile(fn)
    m = torch.nn.Linear(3, 3)
    cf([m], X)
    ref = weakref.ref(m)
    del m
    gc.collect()
    assert ref() is None


def test_leak_global_module() -> None:
    """A global module replaced is freed; the new one is used."""
    g = {"torch": torch, "M": torch.nn.Linear(3, 3)}
    exec("def fn(x):\n    return M(x)\n", g)
    fn = g["fn"]
    cf = jgt.compile(fn)
    cf(X)
    ref = weakref.ref(g["M"])
    g["M"] = torch.nn.Linear(3, 3)
    gc.collect()
    assert ref() is None
    same(cf(X), fn(X))


def test_global_module_reassigned_attr_path() -> None:
    """An attribute of a module object global changed."""
    mod = types.ModuleType("fake_mod")
    mod.K = 2
    g = {"torch": torch, "mod": mod}
    exec("def fn(x):\n    return x * mod.K\n", g)
    fn = g["fn"]
    wmc(fn, lambda: (X,), lambda: setattr(mod, "K", 5))


def test_global_module_swapped() -> None:
    """A module object global replaced by another module."""
    m1 = types.ModuleType("m1")
    m1.K = 2
    m2 = types.ModuleType("m2")
    m2.K = 7
    g = {"torch": torch, "mod": m1}
    exec("def fn(x):\n    return x * mod.K\n", g)
    fn = g["fn"]
    wmc(fn, lambda: (X,), lambda: g.__setitem__("mod", m2))


def test_closure_of_closure_list_item() -> None:
    """A list two closures up changed."""
    def outer():
        box = [2]
        def mid():
            def inner(x):
                return x * box[0]
            return inner
        return mid(), box
    fn, box = outer()
    wmc(fn, lambda: (X,), lambda: box.__setitem__(0, 5))


def test_recursive_helper_global() -> None:
    """A recursive global helper replaced."""
    g = {"torch": torch}
    exec("def helper(x, n):\n    return x if n == 0 else helper(x * 2, n - 1)\n"
         "def fn(x):\n    return helper(x, 2)\n", g)
    fn = g["fn"]
    wmc(fn, lambda: (X,), lambda: g.__setitem__("helper", lambda x, n: x))


def test_function_attribute_read() -> None:
    """A helper's function attribute changed."""
    def helper(x):
        return x * helper.k
    helper.k = 2
    fn = lambda x: helper(x)
    wmc(fn, lambda: (X,), lambda: setattr(helper, "k", 5))


def test_helper_defaults_changed() -> None:
    """A helper's __defaults__ replaced."""
    def helper(x, k=2):
        return x * k
    fn = lambda x: helper(x)
    wmc(fn, lambda: (X,), lambda: setattr(helper, "__defaults__", (7,)))


def test_helper_kwdefaults_changed() -> None:
    """A helper's __kwdefaults__ replaced."""
    def helper(x, *, k=2):
        return x * k
    fn = lambda x: helper(x)
    wmc(fn, lambda: (X,), lambda: setattr(helper, "__kwdefaults__", {"k": 7}))


def test_helper_code_replaced() -> None:
    """A helper's __code__ replaced."""
    def helper(x):
        return x * 2
    fn = lambda x: helper(x)
    wmc(fn, lambda: (X,), lambda: setattr(helper, "__code__", (lambda x: x * 9).__code__))


def test_method_defaults_changed() -> None:
    """forward's __defaults__ replaced."""
    class M(torch.nn.Module):
        def forward(self, x, k=2):
            return x * k
    m = M()
    wmc(m, lambda: (X,), lambda: setattr(M.forward, "__defaults__", (7,)))


def test_lambda_global_helper_closure_cell() -> None:
    """A helper's cell contents assigned."""
    def make(k):
        return lambda x: x * k
    h = make(2)
    fn = lambda x: h(x)
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    same(cf(X), fn(X))
    h.__closure__[0].cell_contents = 6
    same(cf(X), fn(X))


def test_torch_function_patched() -> None:
    """torch.sin patched after compiling."""
    fn = lambda x: torch.sin(x)
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    same(cf(X), fn(X))
    old = torch.sin
    try:
        torch.sin = torch.cos
        same(cf(X), fn(X))
    finally:
        torch.sin = old


def test_tensor_method_patched() -> None:
    """A method added to torch.Tensor after compiling."""
    fn = lambda x: x.double_it() if hasattr(x, "double_it") else x
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    same(cf(X), fn(X))
    torch.Tensor.double_it = lambda self: self * 2
    try:
        same(cf(X), fn(X))
    finally:
        del torch.Tensor.double_it


def test_nn_functional_patched() -> None:
    """F.relu patched after compiling."""
    import torch.nn.functional as F
    fn = lambda x: F.relu(x - 2)
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    same(cf(X), fn(X))
    old = F.relu
    try:
        F.relu = lambda t: t * 100
        same(cf(X), fn(X))
    finally:
        F.relu = old


def test_tensor_in_place_value_between_calls_closure() -> None:
    """A closure tensor updated in place."""
    w = torch.ones(3)
    fn = lambda x: x * w
    wmc(fn, lambda: (X,), lambda: w.mul_(3))


def test_global_tensor_resized() -> None:
    """A closure tensor resized in place."""
    w = torch.ones(3)
    fn = lambda x: x.sum() * w.sum()
    wmc(fn, lambda: (X,), lambda: w.resize_(5).fill_(1))


def test_closure_tensor_requires_grad_changed() -> None:
    """A closure tensor's requires_grad turned on."""
    w = torch.ones(3)
    fn = lambda x: x * w
    cf = jgt.compile(fn)
    cf(X)
    cf(X)
    w.requires_grad_(True)
    assert cf(X).requires_grad == fn(X).requires_grad


def test_param_grad_read_in_forward() -> None:
    """A parameter's grad appearing, read in forward."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))
        def forward(self, x):
            return x * (self.w.grad if self.w.grad is not None else self.w)
    m = M()
    wmc(m, lambda: (X,), lambda: setattr(m.w, "grad", full(4)))


def test_param_grad_changed_value() -> None:
    """A parameter's grad replaced, read in forward."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))
            self.w.grad = torch.ones(3)
        def forward(self, x):
            return x * self.w.grad
    m = M()
    wmc(m, lambda: (X,), lambda: setattr(m.w, "grad", full(4)))


def test_leak_kwargs_tensor() -> None:
    """A tensor passed by keyword is freed."""
    fn = lambda x, **kw: x * kw["w"]
    cf = jgt.compile(fn)
    w = torch.ones(3)
    cf(X, w=w)
    ref = weakref.ref(w)
    del w
    gc.collect()
    assert ref() is None


def test_leak_partial_arg() -> None:
    """A tensor bound in a compiled partial is freed with it."""
    def f(x, w):
        return x * w
    w = torch.ones(3)
    p = functools.partial(f, w=w)
    cf = jgt.compile(p)
    cf(X)
    ref = weakref.ref(w)
    del w, p, cf
    gc.collect()
    assert ref() is None


def test_leak_module_hooked() -> None:
    """A hooked compiled module is freed with its wrapper."""
    m = torch.nn.Linear(3, 3)
    m.register_forward_hook(lambda mod, i, o: o)
    cf = jgt.compile(m)
    cf(X)
    ref = weakref.ref(m)
    del m, cf
    gc.collect()
    assert ref() is None


def test_leak_bound_method_arg() -> None:
    """The instance of a bound method argument is freed."""
    class C:
        def f(self, x):
            return x * 2
    fn = lambda g, x: g(x)
    cf = jgt.compile(fn)
    c = C()
    cf(c.f, X)
    ref = weakref.ref(c)
    del c
    gc.collect()
    assert ref() is None


def test_leak_after_graph_break_module() -> None:
    """A module whose forward breaks the graph is freed."""
    class M(torch.nn.Module):
        def forward(self, x):
            print("", end="")
            return x
    m = M()
    cf = jgt.compile(m)
    cf(X)
    ref = weakref.ref(m)
    del m, cf
    gc.collect()
    assert ref() is None
