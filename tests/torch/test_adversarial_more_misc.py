"""More adversarial soundness cases for ``jitguard.torch.compile``: torch.nn utilities
applied after compiling (parametrizations, weight_norm, memory formats, lazy modules), mapping
and view arguments, dynamic scalars and data-dependent branches; each compares with eager."""

# ruff: noqa: E731  (the probes are one-line lambdas compared with eager)

from __future__ import annotations

import collections
import gc
import threading
import weakref

import pytest

torch = pytest.importorskip("torch")

from eager_compare import same, wmc  # noqa: E402
from torch.fx.experimental.symbolic_shapes import ConstraintViolationError  # noqa: E402

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("restore_grad_mode")



X = torch.ones(3)


def test_parametrize_after_compile():
    """A parametrization registered on a weight after compiling."""
    import torch.nn.utils.parametrize as P
    class Double(torch.nn.Module):
        def forward(self, w):
            return w * 2
    m = torch.nn.Linear(3, 3)
    wmc(m, lambda: (X,), lambda: P.register_parametrization(m, "weight", Double()))


def test_weight_norm_after_compile():
    """weight_norm applied after compiling, its parameter scaled."""
    m = torch.nn.Linear(3, 3)
    def mut():
        torch.nn.utils.parametrizations.weight_norm(m)
        with torch.no_grad():
            m.parametrizations.weight.original0.mul_(3)
    wmc(m, lambda: (X,), mut)


def test_hooks_dict_cleared_directly():
    """A module's _forward_hooks dict cleared directly."""
    m = torch.nn.Linear(3, 3)
    m.register_forward_hook(lambda mod, i, o: o * 0)
    wmc(m, lambda: (X,), lambda: m._forward_hooks.clear())


def test_module_half():
    """A module moved to float64 after compiling."""
    m = torch.nn.Linear(3, 3)
    cf = jgt.compile(m)
    same(cf(X), m(X))
    m.to(torch.float64)
    x = X.double()
    same(cf(x), m(x))


def test_channels_last_module():
    """A conv module and its input moved to channels_last."""
    m = torch.nn.Conv2d(2, 2, 1)
    x = torch.randn(1, 2, 3, 3)
    cf = jgt.compile(m)
    same(cf(x), m(x))
    m.to(memory_format=torch.channels_last)
    same(cf(x), m(x))
    xc = x.to(memory_format=torch.channels_last)
    r = cf(xc)
    same(r, m(xc))
    assert r.is_contiguous(memory_format=torch.channels_last) == m(xc).is_contiguous(memory_format=torch.channels_last)


def test_lazy_linear():
    """A LazyLinear materialized by the compiling call, with the RNG as eager."""
    torch.manual_seed(0)
    m1 = torch.nn.LazyLinear(2)
    torch.manual_seed(0)
    m2 = torch.nn.LazyLinear(2)
    cf = jgt.compile(m1)
    torch.manual_seed(1)
    a = cf(X)
    torch.manual_seed(1)
    b = m2(X)
    same(a, b)
    same(cf(X), m2(X))


def test_module_kwarg():
    """A module passed as a keyword-only argument, then another."""
    m = torch.nn.Linear(3, 3)
    fn = lambda x, *, mod: mod(x)
    cf = jgt.compile(fn)
    same(cf(X, mod=m), fn(X, mod=m))
    m2 = torch.nn.Linear(3, 3)
    same(cf(X, mod=m2), fn(X, mod=m2))


def test_rng_state_set_between():
    """The global RNG state set back between calls."""
    fn = lambda x: x + torch.rand(3)
    cf = jgt.compile(fn)
    torch.manual_seed(0)
    a = cf(X)
    torch.manual_seed(0)
    b = fn(X)
    same(a, b)
    s = torch.get_rng_state()
    a = cf(X)
    torch.set_rng_state(s)
    b = fn(X)
    same(a, b)


def test_dropout_train_eval():
    """Dropout in training (same RNG draws), then eval."""
    m = torch.nn.Dropout(0.5)
    cf = jgt.compile(m)
    x = torch.ones(100)
    torch.manual_seed(0)
    a = cf(x)
    torch.manual_seed(0)
    b = m(x)
    same(a, b)
    m.eval()
    same(cf(x), m(x))


def test_dict_of_objects_attr():
    """An attribute of an object inside a dict argument changed."""
    class C:
        def __init__(self, k):
            self.k = k
    d = {"a": C(2)}
    wmc(lambda x, d: x * d["a"].k, lambda: (X, d), lambda: setattr(d["a"], "k", 7))


def test_list_of_objects_replaced():
    """An object inside a list argument replaced."""
    class C:
        def __init__(self, k):
            self.k = k
    lst = [C(2)]
    wmc(lambda x, lst: x * lst[0].k, lambda: (X, lst), lambda: lst.__setitem__(0, C(9)))


def test_chainmap_arg():
    """A ChainMap whose first map loses the key read."""
    cm = collections.ChainMap({"a": 2}, {"a": 5, "b": 1})
    wmc(lambda x, c: x * c["a"], lambda: (X, cm), lambda: cm.maps[0].pop("a"))


def test_counter_arg():
    """A Counter updated in place."""
    c = collections.Counter(a=2)
    wmc(lambda x, c: x * c["a"], lambda: (X, c), lambda: c.update(a=3))


def test_userdict_arg():
    """A UserDict item changed."""
    from collections import UserDict
    d = UserDict(a=2)
    wmc(lambda x, d: x * d["a"], lambda: (X, d), lambda: d.__setitem__("a", 5))


def test_userlist_arg():
    """A UserList item changed."""
    from collections import UserList
    d = UserList([2])
    wmc(lambda x, d: x * d[0], lambda: (X, d), lambda: d.__setitem__(0, 5))


def test_mappingproxy_arg():
    """A mappingproxy whose underlying dict changed."""
    import types
    base = {"a": 2}
    mp = types.MappingProxyType(base)
    wmc(lambda x, d: x * d["a"], lambda: (X, mp), lambda: base.__setitem__("a", 5))


def test_dict_view_values_arg():
    """A dict values view whose dict changed."""
    d = {"a": 2}
    wmc(lambda x, v: x * sum(v), lambda: (X, d.values()), lambda: d.__setitem__("a", 5))


def test_weakref_arg():
    """A weakref argument whose referent's attribute changed."""
    import weakref
    class C:
        k = 2
    c = C()
    r = weakref.ref(c)
    wmc(lambda x, r: x * r().k, lambda: (X, r), lambda: setattr(c, "k", 6))


def test_tensor_list_in_place_item():
    """A tensor in a list argument updated in place."""
    lst = [torch.ones(3)]
    wmc(lambda x, lst: x + lst[0], lambda: (X, lst), lambda: lst[0].add_(1))


def test_nested_tuple_structure_change():
    """A tuple item that becomes a nested tuple."""
    fn = lambda x, t: x * (t[0] if isinstance(t[0], int) else t[0][0])
    cf = jgt.compile(fn)
    same(cf(X, (2,)), fn(X, (2,)))
    same(cf(X, ((3,),)), fn(X, ((3,),)))


def test_global_list_of_module_changed():
    """A global list of modules iterated, appended to."""
    g = {"torch": torch, "LAYERS": [torch.nn.Linear(3, 3)]}
    exec("def fn(x):\n    for l in LAYERS:\n        x = l(x)\n    return x\n", g)
    fn = g["fn"]
    wmc(fn, lambda: (X,), lambda: g["LAYERS"].append(torch.nn.Linear(3, 3)))


def test_int_dynamic_then_specialized_branch():
    """Int arguments, dynamic after a change, with a branch on parity."""
    fn = lambda x, n: x * (n if n % 2 else -n)
    cf = jgt.compile(fn)
    for n in (1, 2, 3, 4, 5, 6, 7, 8):
        same(cf(X, n), fn(X, n))


def test_size_from_int_arg():
    """A tensor size from an int argument, 0 and 1 included."""
    fn = lambda n: torch.ones(n) * n
    cf = jgt.compile(fn)
    for n in (2, 3, 4, 0, 1, 5):
        same(cf(n), fn(n))


def test_float_dynamic_sequence():
    """Float arguments with a branch on their value."""
    fn = lambda x, f: x * f + (1 if f > 2.0 else 0)
    cf = jgt.compile(fn)
    for f in (1.0, 1.5, 2.5, 0.5, 3.0):
        same(cf(X, f), fn(X, f))


def test_unspecialized_int_module_attr():
    """A module int attribute changed before each call."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.n = 1
        def forward(self, x):
            return x * self.n
    m = M()
    cf = jgt.compile(m)
    for n in (1, 2, 3, 4, 5):
        m.n = n
        same(cf(X), m(X))


def test_item_graph_break():
    """A branch on x.item(): the capture fails and torch's frame path runs the call."""
    fn = lambda x: x * 2 if x.sum().item() > 3 else x * 3
    cf = jgt.compile(fn)
    for v in (1.0, 2.0, 0.5):
        t = torch.full((3,), v)
        same(cf(t), fn(t))


def test_fullgraph_graph_break_raises():
    """With fullgraph=True a graph break raises."""
    def fn(x):
        print("", end="")
        return x
    cf = jgt.compile(fn, fullgraph=True)
    with pytest.raises(jitguard.CaptureError):
        cf(X)


def test_stance_eager_on_recompile():
    """eager_on_recompile: a changed read runs eagerly, the old one still hits."""
    box = [2]
    fn = lambda x: x * box[0]
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    with torch.compiler.set_stance("eager_on_recompile"):
        box[0] = 5
        same(cf(X), fn(X))
        box[0] = 2
        same(cf(X), fn(X))


def test_stance_fail_on_recompile():
    """fail_on_recompile: a changed read raises instead of serving the old entry."""
    box = [2]
    fn = lambda x: x * box[0]
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    with torch.compiler.set_stance("fail_on_recompile"):
        box[0] = 5
        with pytest.raises(jitguard.RecompileError):
            cf(X)
    same(cf(X), fn(X))


def test_recompile_limit_fullgraph_raises():
    """Past the recompile limit with fullgraph=True the call raises."""
    fn = lambda x, k: x * k
    cf = jgt.compile(fn, dynamic=False, recompile_limit=1, fullgraph=True)
    same(cf(X, 1), fn(X, 1))
    with pytest.raises(jitguard.RecompileLimitError):
        cf(X, 2)


def test_mark_dynamic_specialized_raises():
    """A marked dim the function specializes raises, as in torch."""
    fn = lambda x: x.view(3, 4) + 1
    cf = jgt.compile(fn)
    x = torch.randn(3, 4)
    torch._dynamo.mark_dynamic(x, 0)
    with pytest.raises(ConstraintViolationError):
        cf(x)


def test_threads_different_grad_modes():
    """Threads with different grad modes get their own mode's result."""
    w = torch.ones(3, requires_grad=True)
    fn = lambda x: x * w
    cf = jgt.compile(fn)
    errors = []
    def worker(grad):
        try:
            with torch.set_grad_enabled(grad):
                for _ in range(20):
                    assert cf(X).requires_grad == grad
        except BaseException as e:
            errors.append(e)
    ts = [threading.Thread(target=worker, args=(i % 2 == 0,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def test_wrapper_freed_frees_captures():
    """A closure tensor is freed with the function and its wrapper."""
    def make():
        ww = torch.ones(3)
        return (lambda x: x * ww), weakref.ref(ww)
    fn, ref = make()
    cf = jgt.compile(fn)
    cf(X)
    del fn, cf
    gc.collect()
    assert ref() is None


def test_module_deleted_while_wrapper_alive():
    """The wrapper of a deleted module still equals eager on it."""
    m = torch.nn.Linear(3, 3)
    cf = jgt.compile(m)
    cf(X)
    ref = weakref.ref(m)
    del m
    gc.collect()
    # the wrapper keeps the module alive, as torch.compile's OptimizedModule does
    if ref() is not None:
        same(cf(X), ref()(X))


def test_set_stance_decorator():
    """set_stance('force_eager') as a decorator runs eagerly."""
    box = [2]
    fn = lambda x: x * box[0]
    cf = jgt.compile(fn)
    cf(X)
    @torch.compiler.set_stance("force_eager")
    def call():
        return cf(X)
    box[0] = 4
    same(call(), fn(X))


def test_dynamic_false_then_sizes():
    """dynamic=False: each size its own entry, equal to eager."""
    fn = lambda x: x.sum() * x.shape[0]
    cf = jgt.compile(fn, dynamic=False)
    for n in (2, 3, 4, 5, 2):
        t = torch.ones(n)
        same(cf(t), fn(t))


def test_mark_unbacked():
    """Dims marked unbacked, two sizes."""
    fn = lambda x: x * 2
    cf = jgt.compile(fn)
    for n in (3, 4):
        t = torch.ones(n)
        if hasattr(torch._dynamo, "decorators") and hasattr(torch._dynamo.decorators, "mark_unbacked"):
            torch._dynamo.decorators.mark_unbacked(t, 0)
        same(cf(t), fn(t))


def test_requires_grad_output_backward_after_recompile():
    """Gradients through repeated hits equal eager's."""
    w = torch.ones(3, requires_grad=True)
    fn = lambda x: (x * w).sum()
    cf = jgt.compile(fn)
    for _ in range(2):
        w.grad = None
        cf(torch.ones(3)).backward()
        g = w.grad.clone()
        w.grad = None
        fn(torch.ones(3)).backward()
        same(g, w.grad)
