"""More adversarial soundness cases for ``jitguard.torch.compile``: torch state at call
time (grad, inference, autocast, modes, flags), dynamic shapes, compile state (limits,
stances, graph breaks, threads, backends), nested compiles; each compares with eager."""

# ruff: noqa: E731  (the probes are one-line lambdas compared with eager)

from __future__ import annotations

import functools
import threading
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from eager_compare import same, wmc  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("restore_grad_mode")



X = torch.ones(3)



# ---- global torch state at call time ---------------------------------------------------


def test_no_grad_at_call_time() -> None:
    """Called under no_grad after warm: the output does not require grad."""
    w = torch.ones(3, requires_grad=True)
    cf = jgt.compile(lambda x: x * w)
    assert cf(X).requires_grad
    with torch.no_grad():
        assert not cf(X).requires_grad


def test_inference_mode_at_call_time() -> None:
    """Called under inference_mode after warm."""
    fn = lambda x: x * 2
    cf = jgt.compile(fn)
    cf(X)
    with torch.inference_mode():
        y = cf(torch.ones(3))
        assert y.is_inference() == fn(torch.ones(3)).is_inference()


def test_set_default_dtype_at_call_time() -> None:
    """set_default_dtype changes a tensor created inside."""
    fn = lambda x: torch.ones(3) + x.sum()
    cf = jgt.compile(fn)
    cf(X)
    old = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        assert cf(X).dtype == fn(X).dtype
    finally:
        torch.set_default_dtype(old)


def test_autocast_at_call_time() -> None:
    """Called under CPU autocast after warm."""
    fn = lambda a, b: a @ b
    cf = jgt.compile(fn)
    a = torch.ones(4, 4)
    cf(a, a)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert cf(a, a).dtype == fn(a, a).dtype


def test_deterministic_flag_read() -> None:
    """A function branching on are_deterministic_algorithms_enabled."""
    fn = lambda x: x * 2 if torch.are_deterministic_algorithms_enabled() else x * 3
    old = torch.are_deterministic_algorithms_enabled()
    try:
        wmc(fn, lambda: (X,), lambda: torch.use_deterministic_algorithms(not old))
    finally:
        torch.use_deterministic_algorithms(old)


def test_grad_enabled_read() -> None:
    """A function branching on is_grad_enabled."""
    fn = lambda x: x * 2 if torch.is_grad_enabled() else x * 3
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    with torch.no_grad():
        same(cf(X), fn(X))


# ---- dynamic shapes --------------------------------------------------------------------


def test_mark_dynamic_then_size_one() -> None:
    """A dynamic dim then size 0 and 1."""
    fn = lambda x: x.sum() + x.shape[0]
    cf = jgt.compile(fn, dynamic=True)
    for n in (3, 4, 1, 0, 2):
        t = torch.ones(n)
        same(cf(t), fn(t))


def test_automatic_dynamic_branch_on_size() -> None:
    """Automatic dynamic shapes with a branch on size."""
    fn = lambda x: x * 2 if x.shape[0] > 4 else x * 3
    cf = jgt.compile(fn)
    for n in (2, 3, 5, 6, 4, 1, 8):
        t = torch.ones(n)
        same(cf(t), fn(t))


def test_mark_dynamic_broadcast_size_one() -> None:
    """A dim marked maybe dynamic that becomes 1 and broadcasts."""
    fn = lambda x, y: x + y
    cf = jgt.compile(fn)
    for n in (3, 4, 1):
        a = torch.ones(n, 3)
        torch._dynamo.maybe_mark_dynamic(a, 0)
        b = torch.arange(3.0).reshape(1, 3).expand(n, 3) if n != 1 else torch.ones(5, 3)
        same(cf(a, b), fn(a, b))


def test_int_arg_dynamic() -> None:
    """Int arguments that become dynamic."""
    fn = lambda x, n: x * n + (1 if n > 5 else 0)
    cf = jgt.compile(fn)
    for n in (1, 2, 3, 7, 4, 9):
        same(cf(X, n), fn(X, n))


def test_float_arg() -> None:
    """Float arguments that change."""
    fn = lambda x, f: x * f
    cf = jgt.compile(fn)
    for f in (1.5, 2.5, 3.5, float("nan"), -0.0, 0.0, -0.0):
        got, want = cf(X, f), fn(X, f)
        same(got, want)
        assert torch.equal(got.signbit(), want.signbit())


def test_bool_vs_int_arg() -> None:
    """True then 1 then 1.0."""
    fn = lambda x, b: x * 2 if type(b) is bool else x * 3
    cf = jgt.compile(fn)
    for b in (True, 1, 1.0, False, 0):
        same(cf(X, b), fn(X, b))


# ---- compile state ------------------------------------------------------------------------


def test_recompile_limit_falls_back_to_eager() -> None:
    """Past the recompile limit, calls still equal eager."""
    fn = lambda x, k: x * k
    cf = jgt.compile(fn, dynamic=False, recompile_limit=2)
    for k in range(6):
        same(cf(X, k), fn(X, k))


def test_graph_break_falls_back_to_eager() -> None:
    """A graph break (print) falls back to eager with side effects once."""
    calls: list[int] = []

    def fn(x: Any) -> Any:
        calls.append(1)
        print("hi")
        return x * 2

    cf = jgt.compile(fn)
    same(cf(X), X * 2)
    n = len(calls)
    same(cf(X), X * 2)
    assert len(calls) == n + 1


def test_set_stance_force_eager() -> None:
    """set_stance('force_eager') runs eagerly: a global read changes."""
    box = [2]
    fn = lambda x: x * box[0]
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    with torch.compiler.set_stance("force_eager"):
        box[0] = 5
        same(cf(X), fn(X))
    same(cf(X), fn(X))


def test_threads_call_one_function() -> None:
    """Several threads call one compiled function with various shapes."""
    fn = lambda x, k: x * k
    cf = jgt.compile(fn)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            for j in range(5):
                t = torch.ones(i + 1)
                same(cf(t, j), fn(t, j))
        except BaseException as e:
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def test_two_backends_one_function() -> None:
    """One function compiled with eager and aot_eager; a global changed."""
    box = [2]
    fn = lambda x: x * box[0]
    a = jgt.compile(fn, backend="eager")
    b = jgt.compile(fn, backend="aot_eager")
    same(a(X), fn(X))
    same(b(X), fn(X))
    box[0] = 4
    same(a(X), fn(X))
    same(b(X), fn(X))



def test_backward_grads_equal() -> None:
    """Gradients through eager and aot_eager captures equal eager's."""
    w = torch.ones(3, requires_grad=True)
    fn = lambda x: (x * w).sin().sum()
    for be in ("eager", "aot_eager"):
        cf = jgt.compile(fn, backend=be)
        w.grad = None
        cf(X * 2).backward()
        g1 = w.grad.clone()
        w.grad = None
        fn(X * 2).backward()
        same(g1, w.grad)
class Doubler(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.mul.Tensor:
            return out * 2
        return out




def test_dispatch_mode_at_call_time() -> None:
    """A dispatch mode that changes results, entered after warm."""
    fn = lambda x: x * 3
    cf = jgt.compile(fn)
    cf(X)
    cf(X)
    with Doubler():
        got = cf(X)
    with Doubler():
        want = fn(X)
    same(got, want)


def test_dispatch_mode_first_call() -> None:
    """A dispatch mode active on the compiling call, then none."""
    fn = lambda x: x * 3
    cf = jgt.compile(fn)
    with Doubler():
        got = cf(X)
    with Doubler():
        want = fn(X)
    same(got, want)
    same(cf(X), fn(X))


def test_exception_then_ok() -> None:
    """A call that raises as in eager, then a valid call."""
    fn = lambda x: x + torch.ones(3)
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    with pytest.raises(RuntimeError):
        fn(torch.ones(4))
    with pytest.raises(RuntimeError):
        cf(torch.ones(4))
    same(cf(X), fn(X))


def test_returns_input_identity() -> None:
    """An input returned as is stays the same object."""
    fn = lambda x, y: (x, y + 1)
    cf = jgt.compile(fn)
    a = torch.ones(3)
    cf(a, a)
    assert cf(a, X)[0] is a


def test_returns_view_of_input() -> None:
    """A returned view aliases the input as in eager."""
    fn = lambda x: x[1:]
    cf = jgt.compile(fn)
    a = torch.ones(3)
    cf(a)
    v = cf(a)
    v.fill_(5)
    assert a[2].item() == 5


def test_generator_argument() -> None:
    """A torch.Generator argument advances as in eager."""
    fn = lambda x, g: x + torch.rand(3, generator=g)
    cf = jgt.compile(fn)
    g1 = torch.Generator().manual_seed(1)
    g2 = torch.Generator().manual_seed(1)
    for _ in range(3):
        same(cf(X, g1), fn(X, g2))


def test_manual_seed_inside() -> None:
    """manual_seed inside the function reproduces eager."""
    def fn(x):
        torch.manual_seed(3)
        return x + torch.rand(3)
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    same(cf(X), fn(X))


def test_matmul_precision_read() -> None:
    """A branch on get_float32_matmul_precision, changed."""
    fn = lambda x: x * 2 if torch.get_float32_matmul_precision() == "highest" else x * 3
    old = torch.get_float32_matmul_precision()
    try:
        wmc(fn, lambda: (X,), lambda: torch.set_float32_matmul_precision("high"))
    finally:
        torch.set_float32_matmul_precision(old)


def test_anomaly_read() -> None:
    """A branch on is_anomaly_enabled under detect_anomaly."""
    fn = lambda x: x * 2 if torch.is_anomaly_enabled() else x * 3
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    with torch.autograd.detect_anomaly(check_nan=False):
        same(cf(X), fn(X))


def test_inference_mode_read() -> None:
    """A branch on is_inference_mode_enabled."""
    fn = lambda x: x * 2 if torch.is_inference_mode_enabled() else x * 3
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    with torch.inference_mode():
        same(cf(X), fn(X))


def test_autocast_enabled_read() -> None:
    """A branch on is_autocast_enabled('cpu')."""
    fn = lambda x: x * 2 if torch.is_autocast_enabled("cpu") else x * 3
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    with torch.autocast("cpu"):
        same(cf(X), fn(X))


def test_default_device_read() -> None:
    """A branch on get_default_device under a meta default device."""
    fn = lambda x: x * 2 if torch.get_default_device().type == "cpu" else x * 3
    cf = jgt.compile(fn)
    same(cf(X), fn(X))
    with torch.device("meta"):
        r = cf(X)
        w = fn(X)
    same(r, w)


def test_num_threads_read() -> None:
    """torch.get_num_threads read, then changed."""
    fn = lambda x: x * torch.get_num_threads()
    old = torch.get_num_threads()
    try:
        wmc(fn, lambda: (X,), lambda: torch.set_num_threads(old + 1))
    finally:
        torch.set_num_threads(old)


def test_set_grad_enabled_inside() -> None:
    """set_grad_enabled toggled inside the function, restored after."""
    def fn(x):
        torch.set_grad_enabled(False)
        y = x * 2
        torch.set_grad_enabled(True)
        return y
    w = torch.ones(3, requires_grad=True)
    cf = jgt.compile(fn)
    a = cf(w)
    b = fn(w)
    assert a.requires_grad == b.requires_grad
    assert torch.is_grad_enabled()


def test_mark_static_after_dynamic() -> None:
    """mark_static on a dim that automatic dynamic made dynamic."""
    fn = lambda x: x * x.shape[0]
    cf = jgt.compile(fn)
    for n in (2, 3, 4):
        same(cf(torch.ones(n)), fn(torch.ones(n)))
    t = torch.ones(5)
    torch._dynamo.mark_static(t, 0)
    same(cf(t), fn(t))


def test_nested_compiled() -> None:
    """A compiled function calling another compiled function whose cell changes."""
    box = [2]
    f = lambda x: x * box[0]
    inner = jgt.compile(f)
    outer_f = lambda x: inner(x) + 1
    outer = jgt.compile(outer_f)
    same(outer(X), f(X) + 1)
    same(outer(X), f(X) + 1)
    box[0] = 7
    same(outer(X), f(X) + 1)
    same(inner(X), f(X))


def test_torch_compiled_inside() -> None:
    """A torch.compile'd function called inside, its list changed."""
    box = [2]
    f = lambda x: x * box[0]
    inner = torch.compile(f, backend="eager")
    outer = jgt.compile(lambda x: inner(x) + 1)
    same(outer(X), f(X) + 1)
    same(outer(X), f(X) + 1)
    box[0] = 7
    same(outer(X), f(X) + 1)


def test_wraps_decorator() -> None:
    """A functools.wraps decorator whose closure list changes."""
    box = [2]
    def deco(f):
        @functools.wraps(f)
        def w(*a, **k):
            return f(*a, **k) * box[0]
        return w
    @deco
    def fn(x):
        return x + 1
    wmc(fn, lambda: (X,), lambda: box.__setitem__(0, 5))


def test_try_except_in_function() -> None:
    """A KeyError caught inside the function."""
    def fn(x, d):
        try:
            return x * d["k"]
        except KeyError:
            return x * 100
    cf = jgt.compile(fn)
    same(cf(X, {"k": 2}), fn(X, {"k": 2}))
    same(cf(X, {"j": 2}), fn(X, {"j": 2}))
    same(cf(X, {"k": 3}), fn(X, {"k": 3}))
