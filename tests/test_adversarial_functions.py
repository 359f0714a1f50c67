"""Adversarial tests of the specialized function itself changing under the cache, in both
dispatch modes: its ``__code__`` replaced (and put back), from another thread too. The
compiler reads the function's code when it compiles (as a JIT does), so an entry compiled
from the old code returns a stale answer if it is ever served after the swap."""

from __future__ import annotations

import functools
import inspect
import json
import marshal
import os
import subprocess
import sys
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import pytest

from jitguard import CompileRequest, cache_of, specialize
from jitguard._src.dispatch import fast

SRC = str(Path(__file__).resolve().parents[1] / "src")

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


# ---- a functools.wraps wrapper: its code and the code of what it wraps ---------------------


def inlining(request: CompileRequest) -> Callable[..., Any]:
    """Compile through a wrapper into what it wraps, as a tracing JIT inlines it: a new
    function of the innermost code as it is now."""
    return from_code(types.SimpleNamespace(fn=inspect.unwrap(request.fn)))  # type: ignore[arg-type]


def _wraps(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


def _wraps_times_ten(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs) * 10

    return wrapper


def test_wrapped_function_code_replaced_is_never_served_stale() -> None:
    """A ``functools.wraps`` wrapper is watched by its own code and by the code of what it
    wraps: replacing the wrapped function's ``__code__`` starts the cache over."""
    def fn(x: int) -> int:
        return x + 1

    f = specialize(_wraps(fn), compiler=inlining, automatic_dynamic=False)
    assert [f(1), f(1)] == [2, 2]
    fn.__code__ = times_ten.__code__
    assert cache_of(f).lookup(1) is None
    assert [f(1), f(1), f(2)] == [10, 10, 20]
    fn.__code__ = plus_one.__code__
    assert [f(1), f(1)] == [2, 2]
    assert cache_of(f).stats().compiles == 1 and cache_of(f).stats().hits == 1


def test_wrapper_code_replaced_is_never_served_stale() -> None:
    """Replacing the wrapper's own ``__code__`` starts the cache over too (the code that
    runs is the wrapper's)."""
    def fn(x: int) -> int:
        return x + 1

    wrapper = _wraps(fn)
    f = specialize(wrapper, compiler=from_code, automatic_dynamic=False)
    assert [f(1), f(1)] == [2, 2]
    wrapper.__code__ = _wraps_times_ten(fn).__code__
    assert [f(1), f(1), f(2)] == [20, 20, 30]


def test_wrapper_store_key_covers_both_codes(store_dir: Any) -> None:
    """With a store, the key of a wrapper's entries changes when either code is replaced,
    and the cache that starts over loads nothing stored under the old codes."""
    def fn(x: int) -> int:
        return x + 1

    wrapper = _wraps(fn)
    f = specialize(wrapper, automatic_dynamic=False, global_state=False, store=store_dir)
    assert f(1) == 2
    keys = [cache_of(f).store_key]
    fn.__code__ = times_ten.__code__
    assert f(1) == 10
    keys.append(cache_of(f).store_key)
    wrapper.__code__ = _wraps_times_ten(fn).__code__
    assert f(1) == 100
    keys.append(cache_of(f).store_key)
    assert len(set(keys)) == 3
    outcomes = [e.outcome for e in cache_of(f).store_events()]
    assert outcomes.count("saved") == 3 and "loaded" not in outcomes


WRAPPED_MODULE = '''
import functools, os, sys, json
import jitguard

def fn(x):
    return x + {inner}

def wrap(g):
    @functools.wraps(g)
    def wrapper(*args, **kwargs):
        return g(*args, **kwargs) * {outer}
    return wrapper

f = jitguard.specialize(wrap(fn), automatic_dynamic=False, global_state=False, store=True)
result = f(1)
events = [e.outcome for e in jitguard.cache_of(f).store_events() if e.outcome != "stale"]
print(json.dumps({{"result": result, "events": events}}))
'''


def _run_wrapped(tmp_path: Any, inner: int, outer: int) -> dict[str, Any]:
    path = tmp_path / "wrapped.py"
    path.write_text(WRAPPED_MODULE.format(inner=inner, outer=outer))
    env = {k: v for k, v in os.environ.items() if not k.startswith("JITGUARD_")}
    env["JITGUARD_CACHE_DIR"] = os.environ["JITGUARD_CACHE_DIR"]
    env["PYTHONPATH"] = SRC
    if not fast.speedups_enabled():
        env["JITGUARD_PURE_PYTHON"] = "1"
    out = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def test_wrapper_entries_across_processes(tmp_path: Any, store_dir: Any) -> None:
    """A wrapper's stored entry is loaded by a new process with the same code, and never by
    one whose wrapper or wrapped function has other code."""
    assert _run_wrapped(tmp_path, 1, 1) == {"result": 2, "events": ["saved"]}
    assert _run_wrapped(tmp_path, 1, 1) == {"result": 2, "events": ["loaded"]}
    assert _run_wrapped(tmp_path, 1, 10) == {"result": 20, "events": ["saved"]}
    assert _run_wrapped(tmp_path, 5, 10) == {"result": 60, "events": ["saved"]}
    assert _run_wrapped(tmp_path, 1, 1) == {"result": 2, "events": ["loaded"]}


# ---- the code swapped while a compile is in progress ---------------------------------------


def _swapping_compiler(fn: Any, during: Any, after: Any,
                       call: Optional[Callable[[], Any]] = None) -> Callable[..., Any]:
    """A compiler that sets ``fn.__code__`` to ``during`` while it compiles (calling
    ``call`` then, if given), compiles from the code it reads then, and leaves ``after``."""
    def compiler(request: CompileRequest) -> Callable[..., Any]:
        fn.__code__ = during.__code__
        if call is not None:
            call()
        artifact = from_code(request)
        fn.__code__ = after.__code__
        return artifact

    return compiler


@pytest.mark.parametrize("first", ["A", "B"], ids=["A_B_A", "B_A_B"])
def test_code_swapped_and_put_back_during_a_compile(first: str) -> None:
    """A -> B -> A during a compile for A never gives A an entry compiled from B, nor B one
    compiled from A (the compiler is given the code the cache holds when it starts)."""
    codes = {"A": plus_one, "B": times_ten}
    this, other = codes[first], codes["B" if first == "A" else "A"]

    def fn(x: int) -> int:
        return x + 1

    fn.__code__ = this.__code__
    f = specialize(fn, compiler=_swapping_compiler(fn, other, this), automatic_dynamic=False)
    want = this(3)
    assert [f(3), f(3), f(3)] == [want, want, want]
    assert cache_of(f).stats().compiles == 1 and cache_of(f).stats().hits == 2


def test_call_from_a_compile_with_the_code_swapped_starts_nothing_over() -> None:
    """The compiler swaps the code, calls the function (it runs uncompiled, with the new
    code) and leaves the new code: the entry compiled for the old code is never served for
    the new one."""
    def fn(x: int) -> int:
        return x + 1

    seen: list[int] = []
    f: Any = None
    f = specialize(fn, compiler=_swapping_compiler(fn, times_ten, times_ten,
                                                   call=lambda: seen.append(f(1))),
                   automatic_dynamic=False)
    assert f(3) == 4  # this call's compile started under plus_one
    assert seen == [10]  # the call from inside the compile ran fn as it was then
    fn_now = fn.__code__
    assert fn_now is times_ten.__code__
    # the next compile is again a swapping one, this time to and from times_ten: unchanged
    assert [f(3), f(3)] == [30, 30]
