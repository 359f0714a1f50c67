"""[Note: A replaced __code__] for ``jitguard.torch.compile``: replacing the ``__code__``
of what was compiled (a function, a module's class ``forward``, a bound method's function,
a class ``__call__``, a partial's function) starts the cache over, in both dispatch modes
and under every compile stance: the new code is captured, never the old entries served."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch._dynamo.testing import CompileCounter  # noqa: E402

import jitguard.torch as jgt  # noqa: E402
from jitguard import cache_of  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo", "dispatch_mode")


def _plus_one(x: Any) -> Any:
    return x + 1


def _times_seven(x: Any) -> Any:
    return x * 7


def _method_plus_one(self: Any, x: Any) -> Any:
    return x + 1


def _method_times_seven(self: Any, x: Any) -> Any:
    return x * 7


def _function() -> tuple[Any, Any, Callable[[], None]]:
    def f(x: Any) -> Any:
        return x + 1

    return f, f, lambda: setattr(f, "__code__", _times_seven.__code__)


def _module() -> tuple[Any, Any, Callable[[], None]]:
    class M(torch.nn.Module):
        forward = _copy(_method_plus_one)

    m = M()
    return m, m, lambda: setattr(M.forward, "__code__", _method_times_seven.__code__)


def _hooked_module() -> tuple[Any, Any, Callable[[], None]]:
    m, _, swap = _module()
    m.register_forward_hook(lambda mod, inp, out: out - 1)
    return m, m, swap


def _method() -> tuple[Any, Any, Callable[[], None]]:
    class C:
        run = _copy(_method_plus_one)

    c = C()
    return c.run, c.run, lambda: setattr(C.run, "__code__", _method_times_seven.__code__)


def _callable_object() -> tuple[Any, Any, Callable[[], None]]:
    class C:
        __call__ = _copy(_method_plus_one)

    c = C()
    return c, c, lambda: setattr(C.__call__, "__code__", _method_times_seven.__code__)


def _partial() -> tuple[Any, Any, Callable[[], None]]:
    def g(scale: Any, x: Any) -> Any:
        return x + scale

    def other(scale: Any, x: Any) -> Any:
        return x * 7 * scale

    p = functools.partial(g, 1)
    return p, p, lambda: setattr(g, "__code__", other.__code__)


def _copy(fn: Any) -> Any:
    """A function of its own with ``fn``'s code (so that a test may replace its code)."""
    return type(fn)(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


TARGETS = {"function": _function, "module": _module, "hooked_module": _hooked_module,
           "method": _method, "callable_object": _callable_object, "partial": _partial}


@pytest.mark.parametrize("stance", ["default", "eager_on_recompile", "fail_on_recompile"])
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_replaced_code_starts_the_cache_over(target: str, stance: str) -> None:
    """After ``__code__`` is replaced, a call gives the new code's result from a new capture
    (the cache started over: one entry, one compile), and hits it after."""
    compiled_obj, eager, swap = TARGETS[target]()
    cnt = CompileCounter()
    cf = jgt.compile(compiled_obj, backend=cnt)
    x = torch.ones(3)
    torch.testing.assert_close(cf(x), eager(x))
    torch.testing.assert_close(cf(x), eager(x))
    frames = cnt.frame_count
    assert frames == 1
    swap()
    with torch.compiler.set_stance(stance):
        for _ in range(2):
            got, want = cf(x), eager(x)
            torch.testing.assert_close(got, want)
    assert cnt.frame_count == frames + 1  # captured again, once, at every stance
    cache = cache_of(cf) if target != "hooked_module" else None
    if cache is not None:
        assert len(cache.entries()) == 1 and cache.stats().compiles == 1
