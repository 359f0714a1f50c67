"""More adversarial soundness cases for ``jitguard.torch.compile``: tensors (subclasses,
views, storage offsets, zero strides, conjugate and negative bits, in-place metadata
changes, aliasing); each compiles, warms, mutates, calls again and compares with eager."""

# ruff: noqa: E731  (the probes are one-line lambdas compared with eager)

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")


from eager_compare import full, same, wmc  # noqa: E402

import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("restore_grad_mode")



X = torch.ones(3)



# ---- tensors: subclasses, views, in-place metadata changes ----------------------------


def test_parameter_vs_tensor() -> None:
    """A Parameter then a plain tensor with requires_grad."""
    fn = lambda t: (t * 2, type(t) is torch.nn.Parameter)
    cf = jgt.compile(fn)
    p = torch.nn.Parameter(torch.ones(3))
    t = torch.ones(3, requires_grad=True)
    assert cf(p)[1] == fn(p)[1]
    assert cf(t)[1] == fn(t)[1]


class MyT(torch.Tensor):
    pass


def test_tensor_subclass_vs_tensor() -> None:
    """A tensor subclass instance then a plain tensor: isinstance branch."""
    fn = lambda t: t + 1 if isinstance(t, MyT) else t - 1
    cf = jgt.compile(fn)
    a = torch.ones(3).as_subclass(MyT)
    same(cf(torch.ones(3)), fn(torch.ones(3)))
    same(cf(a).as_subclass(torch.Tensor), fn(a).as_subclass(torch.Tensor))


def test_storage_offset_view() -> None:
    """A view at another storage offset of the same base."""
    base = torch.arange(10.0)
    fn = lambda t: t * 2
    cf = jgt.compile(fn)
    same(cf(base[0:3]), fn(base[0:3]))
    same(cf(base[4:7]), fn(base[4:7]))


def test_aliasing_between_arguments_in_place() -> None:
    """Two arguments that alias, with an in-place update through one."""
    def fn(a: Any, b: Any) -> Any:
        a.add_(1)
        return b * 2

    cf = jgt.compile(fn)
    same(cf(torch.zeros(3), torch.zeros(3)), fn(torch.zeros(3), torch.zeros(3)))
    t1 = torch.zeros(3)
    t2 = torch.zeros(3)
    same(cf(t1, t1), fn(t2, t2))


def test_overlapping_views_in_place() -> None:
    """Two overlapping views of one base, in-place through one."""
    def fn(a: Any, b: Any) -> Any:
        a.mul_(2)
        return b + 0

    cf = jgt.compile(fn)
    b1 = torch.arange(6.0)
    b2 = torch.arange(6.0)
    same(cf(torch.arange(3.0), torch.arange(3.0)), fn(torch.arange(3.0), torch.arange(3.0)))
    same(cf(b1[0:3], b1[1:4]), fn(b2[0:3], b2[1:4]))


def test_resize_between_calls() -> None:
    """An argument resized in place between calls."""
    t = torch.ones(3)
    wmc(lambda x: x.sum() + x.shape[0], lambda: (t,), lambda: t.resize_(5).fill_(1))


def test_set_between_calls() -> None:
    """An argument given another storage with set_ between calls."""
    t = torch.ones(3)
    wmc(lambda x: x * 2, lambda: (t,), lambda: t.set_(torch.full((4,), 3.0)))


def test_data_assigned_between_calls() -> None:
    """``.data =`` of another shape and dtype between calls."""
    t = torch.ones(3)

    def mutate() -> None:
        t.data = torch.ones(2, 2, dtype=torch.float64)

    wmc(lambda x: x * 2, lambda: (t,), mutate)


def test_requires_grad_toggled() -> None:
    """requires_grad_ on an argument between calls changes the output's requires_grad."""
    t = torch.ones(3)
    cf = jgt.compile(lambda x: x * 2)
    assert not cf(t).requires_grad
    t.requires_grad_(True)
    assert cf(t).requires_grad
    t.requires_grad_(False)
    assert not cf(t).requires_grad


def test_grad_attribute_read() -> None:
    """A function reading ``t.grad`` after the grad appears and changes."""
    t = torch.ones(3, requires_grad=True)

    def fn(x: Any) -> Any:
        return x.detach() * 2 if x.grad is None else x.grad * 3

    cf = jgt.compile(fn)
    same(cf(t), fn(t))
    t.grad = full(2)
    same(cf(t), fn(t))
    t.grad = full(5)
    same(cf(t), fn(t))
    t.grad = None
    same(cf(t), fn(t))


def test_expand_zero_stride() -> None:
    """A zero-stride expanded view then a contiguous tensor, with an in-place op."""
    def fn(x: Any) -> Any:
        return x.contiguous() * 2 + x.stride()[0]

    cf = jgt.compile(fn)
    a = torch.ones(1).expand(4)
    same(cf(a), fn(a))
    b = torch.ones(4)
    same(cf(b), fn(b))


def test_channels_last() -> None:
    """A channels_last tensor then a contiguous one, reading is_contiguous."""
    def fn(x: Any) -> Any:
        return x * 2 if x.is_contiguous() else x * 3

    cf = jgt.compile(fn)
    a = torch.ones(1, 2, 3, 3)
    same(cf(a), fn(a))
    b = a.to(memory_format=torch.channels_last)
    same(cf(b), fn(b))


def test_version_counter_in_place() -> None:
    """A tensor's ``_version`` read by the function."""
    t = torch.ones(3)

    def fn(x: Any) -> Any:
        return x * x._version

    wmc(fn, lambda: (t,), lambda: t.add_(0))


def test_conj_bit() -> None:
    """A branch on is_conj: a complex tensor, then its conjugate view."""
    f2 = lambda x: x * 1 if x.is_conj() else x * 2
    cf = jgt.compile(f2)
    a = torch.ones(3, dtype=torch.complex64) * (1 + 2j)
    same(cf(a), f2(a))
    same(cf(a.conj()), f2(a.conj()))


def test_neg_bit() -> None:
    """A branch on is_neg: a tensor, then one with the negative bit."""
    f2 = lambda x: x * 1 if x.is_neg() else x * 2
    cf = jgt.compile(f2)
    a = torch.ones(3, dtype=torch.complex64) * (1 + 2j)
    same(cf(a), f2(a))
    b = a.conj().imag
    same(cf(b), f2(b))


def test_meta_vs_cpu() -> None:
    """A CPU tensor, then a meta tensor."""
    f2 = lambda x: torch.tensor(1.0) if x.device.type == "meta" else x * 2
    cf = jgt.compile(f2)
    same(cf(X), f2(X))
    r = cf(torch.ones(3, device="meta"))
    assert r.device == f2(torch.ones(3, device="meta")).device


def test_requires_grad_read() -> None:
    """A branch on requires_grad, toggled in place."""
    f2 = lambda x: x * 2 if x.requires_grad else x * 3
    cf = jgt.compile(f2)
    a = torch.ones(3)
    same(cf(a), f2(a))
    a.requires_grad_(True)
    same(cf(a), f2(a))


def test_python_attr_on_tensor_arg() -> None:
    """A Python attribute on a tensor argument changed."""
    t = torch.ones(3)
    t.k = 2
    wmc(lambda x: x * x.k, lambda: (t,), lambda: setattr(t, "k", 5))

def test_inference_tensor_input() -> None:
    """An inference tensor after a normal one."""
    with torch.inference_mode():
        a = torch.ones(3)
    fn = lambda x: x * 2
    cf = jgt.compile(fn)
    same(cf(torch.ones(3)), fn(torch.ones(3)))
    same(cf(a), fn(a))


def test_transposed_after_dynamic() -> None:
    """Contiguous then transposed inputs once shapes are dynamic."""
    fn = lambda x: x.contiguous().view(-1)[:3] * 1
    cf = jgt.compile(fn)
    for t in (torch.arange(6.0).reshape(2, 3), torch.arange(12.0).reshape(3, 4),
              torch.arange(12.0).reshape(4, 3).t(), torch.arange(20.0).reshape(5, 4).t()):
        same(cf(t), fn(t))


def test_dtype_int_tensor() -> None:
    """True division of a float then an int64 tensor."""
    fn = lambda x: x / 2
    cf = jgt.compile(fn)
    same(cf(torch.ones(3)), fn(torch.ones(3)))
    same(cf(torch.ones(3, dtype=torch.int64)), fn(torch.ones(3, dtype=torch.int64)))


def test_scalar_tensor_vs_python() -> None:
    """A 0-dim tensor, a Python float, an int64 0-dim tensor."""
    fn = lambda x, s: x * s
    cf = jgt.compile(fn)
    same(cf(X, torch.tensor(2.0)), fn(X, torch.tensor(2.0)))
    same(cf(X, 3.0), fn(X, 3.0))
    same(cf(X, torch.tensor(4)), fn(X, torch.tensor(4)))


def test_dynamic_stride_view() -> None:
    """A stride read on views of different steps, dynamic."""
    fn = lambda x: x + x.stride(0)
    cf = jgt.compile(fn, dynamic=True)
    base = torch.arange(20.0)
    for step in (1, 2, 3, 1):
        v = base[::step][:4]
        same(cf(v), fn(v))


def test_dynamic_storage_offset_read() -> None:
    """A storage_offset read on views at other offsets, dynamic."""
    fn = lambda x: x + x.storage_offset()
    cf = jgt.compile(fn, dynamic=True)
    base = torch.arange(20.0)
    for off in (0, 1, 2, 5):
        v = base[off:off + 4]
        same(cf(v), fn(v))


def test_storage_offset_read_static() -> None:
    """A storage_offset read on views at other offsets."""
    fn = lambda x: x + x.storage_offset()
    cf = jgt.compile(fn)
    base = torch.arange(20.0)
    for off in (0, 0, 1, 2, 5):
        v = base[off:off + 4]
        same(cf(v), fn(v))


def test_untyped_storage_data_ptr_aliasing() -> None:
    """Two views of one storage, one updated in place."""
    def fn(a, b):
        a.add_(1)
        return b.clone()
    cf = jgt.compile(fn)
    base1 = torch.zeros(6)
    base2 = torch.zeros(6)
    same(cf(torch.zeros(3), torch.zeros(3)), fn(torch.zeros(3), torch.zeros(3)))
    same(cf(base1[:3], base1.view(2, 3)[0]), fn(base2[:3], base2.view(2, 3)[0]))


def test_aliasing_arg_and_global() -> None:
    """An argument that is the tensor a closure reads, updated in place."""
    W = torch.zeros(3)
    W2 = torch.zeros(3)
    def mk(w):
        def fn(a):
            a.add_(1)
            return w * 2
        return fn
    fn = mk(W)
    cf = jgt.compile(fn)
    same(cf(torch.zeros(3)), mk(W2)(torch.zeros(3)))
    same(cf(W), mk(W2)(W2))


def test_aliasing_arg_and_module_param() -> None:
    """An argument that is a module's weight, updated in place."""
    m = torch.nn.Linear(3, 3, bias=False)
    m2 = torch.nn.Linear(3, 3, bias=False)
    m2.load_state_dict(m.state_dict())
    def fn(mod, a):
        with torch.no_grad():
            a.mul_(2)
        return mod(X)
    cf = jgt.compile(fn)
    same(cf(m, torch.ones(3, 3)), fn(m2, torch.ones(3, 3)))
    with torch.no_grad():
        same(cf(m, m.weight), fn(m2, m2.weight))


