"""Adversarial tests of the specialized function itself changing under the cache, in both
dispatch modes: its ``__code__`` replaced (and put back), from another thread too. The
compiler reads the function's code when it compiles (as a JIT does), so an entry compiled
from the old code returns a stale answer if it is ever served after the swap."""

from __future__ import annotations

import marshal
import threading
import types
from collections.abc import Callable
from typing import Any

import pytest

from jitguard import CompileRequest, cache_of, specialize

pytestmark = pytest.mark.usefixtures("dispatch_mode")


def from_code(request: CompileRequest) -> Callable[..., Any]:
    """Compile from the function's code as it is now: a new function of that code object."""
    fn = request.fn
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)


def plus_one(x: int) -> int:
    return x + 1


def times_ten(x: int) -> int:
    return x * 10


def test_replaced_code_is_never_served_stale() -> None:
    """After ``fn.__code__`` is replaced the next call compiles from the new code; putting
    the old code back compiles again; every answer is the plain function's."""
    def fn(x: int) -> int:
        return x + 1

    f = specialize(fn, compiler=from_code, automatic_dynamic=False)
    assert [f(1), f(1)] == [2, 2]
    fn.__code__ = times_ten.__code__
    assert [f(1), f(1), f(2)] == [10, 10, 20]
    fn.__code__ = plus_one.__code__
    assert [f(1), f(2), f(1)] == [2, 3, 2]
    assert cache_of(f).stats().hits == 1


def test_replaced_code_starts_the_cache_over() -> None:
    """The entries of the old code are dropped (the cache starts over), and hits resume on
    the new code's entries."""
    def fn(x: int) -> int:
        return x + 1

    f = specialize(fn, compiler=from_code, automatic_dynamic=False)
    f(1), f(2), f(1)
    assert len(cache_of(f).entries()) == 2
    fn.__code__ = times_ten.__code__
    assert f(1) == 10 and f(1) == 10
    assert len(cache_of(f).entries()) == 1
    assert cache_of(f).stats().hits == 1


def test_replaced_code_under_concurrent_calls() -> None:
    """Threads calling while another swaps ``__code__`` back and forth only ever get an
    answer of one of the two codes, and once the swapping stops, the current one's."""
    def fn(x: int) -> int:
        return x + 1

    f = specialize(fn, compiler=from_code, automatic_dynamic=False)
    stop = threading.Event()
    bad: list[Any] = []

    def caller() -> None:
        while not stop.is_set():
            got = f(3)
            if got not in (4, 30):
                bad.append(got)

    threads = [threading.Thread(target=caller) for _ in range(3)]
    for t in threads:
        t.start()
    for i in range(200):
        fn.__code__ = (times_ten if i % 2 else plus_one).__code__
    stop.set()
    for t in threads:
        t.join()
    assert bad == []
    fn.__code__ = times_ten.__code__
    assert f(3) == 30 and f(3) == 30


def test_only_plain_functions_are_watched() -> None:
    """A callable object or a partial is specialized as before (nothing to watch)."""
    import functools

    class Add:
        def __call__(self, x: int) -> int:
            return x + 1

    for target in (Add(), functools.partial(lambda k, x: x + k, 1)):
        f = specialize(target, automatic_dynamic=False)
        assert [f(1), f(1), f(2)] == [2, 2, 3]


class FromCodeStored:
    """``from_code`` with a store: an artifact is stored as its code (marshal), and loaded
    back as a function of that code, as a JIT stores what it compiled."""

    def __call__(self, request: CompileRequest) -> Callable[..., Any]:
        return from_code(request)

    def serialize(self, artifact: Any) -> bytes:
        return marshal.dumps(artifact.__code__)

    def deserialize(self, data: bytes, fn: Any) -> Any:
        return types.FunctionType(marshal.loads(data), fn.__globals__, fn.__name__)


def test_replaced_code_never_loads_the_old_codes_stored_entries(store_dir: Any) -> None:
    """With a store, the cache that starts over under the new code does not load the entries
    the old code stored (they are keyed by the code they came from)."""
    def fn(x: int) -> int:
        return x + 1

    f = specialize(fn, compiler=FromCodeStored(), automatic_dynamic=False, global_state=False,
                   store=store_dir)
    assert f(1) == 2
    fn.__code__ = times_ten.__code__
    assert [f(1), f(1), f(2)] == [10, 10, 20]
    fn.__code__ = plus_one.__code__
    assert f(1) == 2  # the first code's entry is right again (loaded or compiled)


def test_lookup_after_replaced_code_names_no_entry() -> None:
    """``lookup`` says a call would miss once ``__code__`` is replaced (the call starts over)."""
    def fn(x: int) -> int:
        return x + 1

    f = specialize(fn, compiler=from_code, automatic_dynamic=False)
    f(1)
    assert cache_of(f).lookup(1) is not None
    fn.__code__ = times_ten.__code__
    assert cache_of(f).lookup(1) is None
    assert f(1) == 10 and cache_of(f).lookup(1) is not None
