"""Adversarial module calls under ``jitguard.torch.compile``: a class ``__call__`` other than
``nn.Module``'s (on the compiled module, a base or a submodule, set before or after
compiling) and torch's global module hooks registered or removed after compiling a function
that calls a module. Each case compares with eager after the mutation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.nn.modules.module as torch_module  # noqa: E402

import jitguard as jg  # noqa: E402
import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("restore_grad_mode")


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def same(got: Any, want: Any) -> None:
    torch.testing.assert_close(got, want)


X = torch.randn(2, 3)


def _module_call(self: Any, *args: Any) -> Any:
    return torch.nn.Module.__call__(self, *args)


def call_module(m: Any, x: Any) -> Any:
    return m(x)


# ==== a class __call__ other than nn.Module's ==============================================


def test_subclass_call_override_at_compile() -> None:
    """A module class defining its own __call__ runs it, as eager's m(x) does."""

    class Doubled(torch.nn.Linear):
        def __call__(self, *args: Any) -> Any:
            return super().__call__(*args) * 2

    m = Doubled(3, 3)
    cf = jgt.compile(m)
    same(cf(X), m(X))
    same(cf(X), m(X))


def test_class_call_set_after_compile() -> None:
    """``M.__call__ = g`` after compiling a module is what the next call runs."""

    class M(torch.nn.Linear):
        pass

    m = M(3, 3)
    cf = jgt.compile(m)
    same(cf(X), m(X))
    M.__call__ = lambda self, *a: _module_call(self, *a) + 5  # type: ignore[method-assign]
    same(cf(X), m(X))


def test_class_call_replaced_again_then_deleted() -> None:
    """An overriding __call__ replaced, then deleted: each call matches eager."""

    class M(torch.nn.Linear):
        def __call__(self, *args: Any) -> Any:
            return super().__call__(*args) * 2

    m = M(3, 3)
    cf = jgt.compile(m)
    same(cf(X), m(X))
    M.__call__ = lambda self, *a: _module_call(self, *a) + 3  # type: ignore[method-assign]
    same(cf(X), m(X))
    same(cf(X), m(X))
    del M.__call__
    same(cf(X), m(X))


def test_base_class_call_set_after_compile() -> None:
    """A __call__ set on a base class after compiling reaches the subclass instance."""

    class Base(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x + 1

    class M(Base):
        pass

    m = M()
    cf = jgt.compile(m)
    same(cf(X), m(X))
    Base.__call__ = lambda self, *a: _module_call(self, *a) * 4  # type: ignore[method-assign]
    same(cf(X), m(X))


def test_submodule_class_call_set_after_compile() -> None:
    """A submodule's class gaining a __call__ after compiling changes what forward computes."""

    class Sub(torch.nn.Linear):
        pass

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = Sub(3, 3)

        def forward(self, x: Any) -> Any:
            return self.lin(x)

    m = M()
    cf = jgt.compile(m)
    same(cf(X), m(X))
    same(cf(X), m(X))
    Sub.__call__ = lambda self, *a: _module_call(self, *a) * 4  # type: ignore[method-assign]
    same(cf(X), m(X))


def test_argument_module_class_call_set_after_compile() -> None:
    """A module passed to a compiled function: its class gaining a __call__ is seen."""

    class Sub(torch.nn.Linear):
        pass

    m = Sub(3, 3)
    cf = jgt.compile(call_module)
    same(cf(m, X), m(X))
    Sub.__call__ = lambda self, *a: _module_call(self, *a) - 7  # type: ignore[method-assign]
    same(cf(m, X), m(X))


# ==== torch's global module hooks, seen by a compiled function ============================


def test_global_forward_hook_added_after_compiling_a_function() -> None:
    """A global forward hook registered after compiling a function that calls a module runs."""
    m = torch.nn.Linear(3, 3)
    cf = jgt.compile(call_module)
    same(cf(m, X), m(X))
    handle = torch_module.register_module_forward_hook(lambda mod, i, o: o * 3)
    try:
        same(cf(m, X), m(X))
        same(cf(m, X), m(X))
    finally:
        handle.remove()
    same(cf(m, X), m(X))


def test_global_forward_pre_hook_added_after_compiling_a_function() -> None:
    """A global pre-hook changing the input, added after compiling, is applied."""
    m = torch.nn.Linear(3, 3)
    cf = jgt.compile(call_module)
    same(cf(m, X), m(X))
    handle = torch_module.register_module_forward_pre_hook(lambda mod, i: (i[0] * 5,))
    try:
        same(cf(m, X), m(X))
    finally:
        handle.remove()
    same(cf(m, X), m(X))


def test_global_hook_removed_after_compiling_a_function() -> None:
    """A global hook present at compile time and removed later no longer applies."""
    m = torch.nn.Linear(3, 3)
    handle = torch_module.register_module_forward_hook(lambda mod, i, o: o * 3)
    try:
        cf = jgt.compile(call_module)
        same(cf(m, X), m(X))
    finally:
        handle.remove()
    same(cf(m, X), m(X))


def test_global_hook_in_nested_module_call() -> None:
    """A global hook added later reaches a submodule called inside a compiled function."""

    class Outer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = torch.nn.Linear(3, 3)

        def forward(self, x: Any) -> Any:
            return self.inner(x) + 1

    def f(m: Any, x: Any) -> Any:
        return m.inner(x) * 2

    m = Outer()
    cf = jgt.compile(f)
    same(cf(m, X), f(m, X))
    calls: list[int] = []
    handle = torch_module.register_module_forward_hook(lambda mod, i, o: calls.append(1))
    try:
        same(cf(m, X), f(m, X))
        assert calls == [1, 1]
    finally:
        handle.remove()


def test_global_hook_guard_lists_as_stricter() -> None:
    """The global hook guard is jitguard's own, listed among the entry's stricter guards."""
    def f(m: Any, x: Any) -> Any:
        return m(x)

    cf = jgt.compile(f)
    cf(torch.nn.Linear(3, 3), X)
    (info,) = jgt.capture_info(cf).values()
    assert any(s.startswith("NN_MODULE_GLOBAL_HOOKS") for s in info.stricter)


def test_function_without_module_has_no_global_hook_guard() -> None:
    """A capture that calls no module gets no global hook guard (no cost where none is read)."""
    cf = jgt.compile(lambda x: x + 1)
    cf(X)
    (info,) = jgt.capture_info(cf).values()
    assert not any(s.startswith("NN_MODULE_GLOBAL_HOOKS") for s in info.stricter)


# ==== a bound method of a module ==========================================================


def test_bound_method_of_module_is_the_method() -> None:
    """Compiling ``m.helper`` runs helper, not the module's forward, and follows m's state."""

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.k = 2.0

        def forward(self, x: Any) -> Any:
            return x

        def helper(self, x: Any) -> Any:
            return x * self.k

    m = M()
    bound = m.helper
    cf = jgt.compile(bound)
    same(cf(X), bound(X))
    same(cf(X), bound(X))
    m.k = 4.0
    same(cf(X), bound(X))


# ==== jitguard's own size reads under a torch function mode ===============================


class _Counting(torch.overrides.TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.n += 1
        return func(*args, **(kwargs or {}))


def test_counting_mode_on_dynamic_entries_counts_like_eager() -> None:
    """Under a counting mode, a call that misses dynamic entries compiles (no GuardCompileError)
    and the mode counts what eager counts: jitguard's size reads are not calls of the mode."""

    def f(x: Any) -> Any:
        return x * 2

    cf = jgt.compile(f, dynamic=True)
    cf(torch.randn(4))
    cf(torch.randn(5))
    for n in (6, 7, 7):
        with _Counting() as seen:
            got = cf(torch.ones(n))
        with _Counting() as want:
            expect = f(torch.ones(n))
        same(got, expect)
        assert seen.n == want.n


def test_counting_mode_first_call_dynamic() -> None:
    """The first call of a dynamic=True function under a counting mode compiles and counts
    as eager does (the guard compile's reads of the sizes are not calls of the mode)."""

    def f(x: Any) -> Any:
        return x + x.shape[0]

    cf = jgt.compile(f, dynamic=True)
    with _Counting() as seen:
        got = cf(torch.ones(3))
    with _Counting() as want:
        expect = f(torch.ones(3))
    same(got, expect)
    assert seen.n == want.n


def test_counting_mode_on_dynamic_views_counts_like_eager() -> None:
    """Dynamic entries of views (shape guards on ``x._base``) under a counting mode compile
    and count as eager: the guards' ``_base`` reads are not calls of the mode."""

    def f(x: Any) -> Any:
        return x * 2

    cf = jgt.compile(f, dynamic=True)
    cf(torch.ones(6, 3)[1:])
    cf(torch.ones(7, 3)[1:])
    for n in (8, 9, 9):
        base = torch.ones(n, 3)
        with _Counting() as seen:
            got = cf(base[1:])
        with _Counting() as want:
            expect = f(base[1:])
        same(got, expect)
        assert seen.n == want.n


# ==== an object with a Python __call__, compiled itself ===================================


def test_compiled_object_class_call_replaced() -> None:
    """``Foo.__call__ = g`` after compiling the object itself runs g, as eager's obj(x)."""

    class Foo:
        def __call__(self, x: Any) -> Any:
            return x + 1

    obj = Foo()
    cf = jgt.compile(obj)
    same(cf(X), obj(X))
    Foo.__call__ = lambda self, x: x * 3  # type: ignore[method-assign]
    same(cf(X), obj(X))
    same(cf(X), obj(X))


def test_compiled_object_class_swapped() -> None:
    """An object whose ``__class__`` is swapped after compiling runs the new class's __call__."""

    class A:
        def __call__(self, x: Any) -> Any:
            return x + 1

    class B:
        def __call__(self, x: Any) -> Any:
            return x - 1

    obj = A()
    cf = jgt.compile(obj)
    same(cf(X), obj(X))
    obj.__class__ = B
    same(cf(X), obj(X))
    obj.__class__ = A
    same(cf(X), obj(X))


def test_partial_is_compiled_with_its_arguments_as_inputs() -> None:
    """A functools.partial compiles as its function; its bound arguments are inputs, so
    changing p.keywords after compiling misses (never stale), and calls equal eager."""
    import functools

    def scaled(x: Any, k: Any = 1.0, shift: Any = 0.0) -> Any:
        return x * k + shift

    p = functools.partial(scaled, k=2.0)
    cf = jgt.compile(p)
    x = torch.ones(3)
    assert torch.equal(cf(x), p(x)) and torch.equal(cf(x, shift=1.0), p(x, shift=1.0))
    p.keywords["k"] = 5.0
    assert torch.equal(cf(x), p(x)) and float(cf(x)[0]) == 5.0
    assert jg.cache_of(cf).stats().compiles >= 2
    assert any("k == " in r for r in jg.cache_of(cf).reasons())
    q = functools.partial(torch.nn.Linear(3, 3), x)
    cq = jgt.compile(q)
    assert torch.equal(cq(), q())
