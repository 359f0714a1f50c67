"""Tests for jitguard._src.cache.job: one compile (attempts, errors, restarts, ambient
guards) and automatic dynamic."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from jitguard import (
    CompileContext,
    CompileRequest,
    GetItemSource,
    GuardBuilder,
    JitGuardError,
    LocalSource,
    RestartCompile,
    TracingContext,
    cache_of,
    global_states,
    specialize,
)
from jitguard._src.cache.job import covered

GB = GuardBuilder


class CompilerBug(Exception):
    pass


def test_compiler_exception_reaches_caller_unchanged() -> None:
    """The compiler's own exception object reaches the caller, with real_stack."""
    bug = CompilerBug("nope")

    def compiler(req: CompileRequest) -> Any:
        raise bug

    def f(x):  # type: ignore[no-untyped-def]
        return x

    g = specialize(f, compiler=compiler)
    with pytest.raises(CompilerBug) as e:
        g(1)
    assert e.value is bug
    stack = e.value.real_stack  # type: ignore[attr-defined]
    assert stack[-1].name == "f" and stack[-1].filename == __file__
    assert TracingContext.try_get() is None and CompileContext.try_get() is None


def test_failed_compile_leaves_the_cache_as_it_was() -> None:
    """After a failing compile, entries, dynamic markings and counts of compiles stand."""
    fail = {"on": False}

    def compiler(req: CompileRequest) -> Any:
        if fail["on"]:
            raise CompilerBug()
        return req.fn

    f = specialize(lambda n: n, compiler=compiler)
    f(1)
    before = (cache_of(f).entries(), cache_of(f).dynamic)
    fail["on"] = True
    with pytest.raises(CompilerBug):
        f(2)  # would make n dynamic, but the compile fails
    assert (cache_of(f).entries(), cache_of(f).dynamic) == before
    stats = cache_of(f).stats()
    assert stats.compiles == 1 and stats.failures == 1 and stats.misses == 2
    assert cache_of(f).recompiles == ()
    fail["on"] = False
    assert f(2) == 2


def test_bad_guard_from_compiler_is_a_compile_error() -> None:
    """A guard that cannot be built fails the compile; nothing is cached."""
    from jitguard import GuardCompileError

    def compiler(req: CompileRequest) -> Any:
        req.add_guard(GetItemSource(req.source("x"), 5), GB.EQUALS_MATCH)
        return req.fn

    f = specialize(lambda x: x, compiler=compiler)
    with pytest.raises(GuardCompileError):
        f((1, 2))
    assert cache_of(f).entries() == ()


def test_non_callable_artifact_is_refused() -> None:
    """A compiler must return a callable."""
    f = specialize(lambda x: x, compiler=lambda r: 42)
    with pytest.raises(TypeError, match="not a callable artifact"):
        f(1)


def test_too_many_restarts() -> None:
    """A compiler that always restarts is stopped after max_restarts."""
    def compiler(req: CompileRequest) -> Any:
        raise RestartCompile("again")

    f = specialize(lambda x: x, compiler=compiler, max_restarts=2)
    with pytest.raises(JitGuardError, match="restarted 3 times") as e:
        f(1)
    assert isinstance(e.value.__cause__, RestartCompile)
    assert cache_of(f).stats().restarts == 3


def test_global_state_is_guarded_when_registered() -> None:
    """A registered guarded global state is part of every entry's guards."""
    state = {"mode": "a"}
    global_states.register("test_cache_mode", lambda: state["mode"])
    try:
        f = specialize(lambda x: x)
        f(1)
        f(1)
        assert cache_of(f).stats().compiles == 1
        state["mode"] = "b"
        f(1)
        assert cache_of(f).stats().compiles == 2
        assert "GLOBAL_STATE changed: test_cache_mode" in cache_of(f).reasons()[0]
        g = specialize(lambda x: x, global_state=False)
        g(1)
        assert not any("GLOBAL_STATE" in c for c in cache_of(g).entries()[0].code)
    finally:
        global_states.unregister("test_cache_mode")


def test_automatic_dynamic_for_nested_ints() -> None:
    """An int inside a tuple that changes value becomes dynamic, at its own source."""
    f = specialize(lambda t: t[0] + t[1])
    f((1, 2))
    f((5, 2))
    assert cache_of(f).dynamic == {GetItemSource(LocalSource("t"), 0)}
    f((9, 2))
    assert cache_of(f).stats().compiles == 2


def test_automatic_dynamic_needs_int_only_failures() -> None:
    """A miss that also changed a string makes nothing dynamic."""
    f = specialize(lambda n, s: n)
    f(1, "a")
    f(2, "b")
    assert cache_of(f).dynamic == frozenset()


def test_automatic_dynamic_respects_static() -> None:
    """Declared static parameters never become dynamic; the flag turns it off."""
    f = specialize(lambda n: n, static=["n"])
    f(1), f(2)
    assert cache_of(f).dynamic == frozenset()
    g = specialize(lambda n: n, automatic_dynamic=False)
    g(1), g(2)
    assert cache_of(g).dynamic == frozenset()


def test_declared_dynamic_guards_by_type() -> None:
    """A declared dynamic int is guarded by type from the first compile."""
    f = specialize(lambda n: n, dynamic=["n"])
    f(1), f(2), f(3)
    assert cache_of(f).stats().compiles == 1
    assert cache_of(f).entries()[0].dynamic == {LocalSource("n")}


def test_declarations_are_validated() -> None:
    """Unknown or conflicting static/dynamic declarations are errors."""
    with pytest.raises(ValueError, match="not \\(under\\) a parameter"):
        specialize(lambda n: n, static=["m"])
    with pytest.raises(ValueError, match="both static and dynamic"):
        specialize(lambda n: n, static="n", dynamic="n")


def test_covered_walks_bases() -> None:
    """covered() is true for a marked source and everything under it."""
    t = LocalSource("t")
    assert covered(GetItemSource(GetItemSource(t, 0), 1), frozenset({t}))
    assert not covered(t, frozenset({GetItemSource(t, 0)}))


def test_contexts_are_per_thread() -> None:
    """Two threads compiling at once each see their own compile and tracing contexts."""
    barrier = threading.Barrier(2)
    seen: dict[str, tuple[Any, Any]] = {}

    def compiler(req: CompileRequest) -> Any:
        barrier.wait(timeout=10)
        seen[threading.current_thread().name] = (TracingContext.get(), CompileContext.get())
        barrier.wait(timeout=10)
        assert TracingContext.get() is req.tracing_context
        return req.fn

    fs = [specialize(lambda x: x, compiler=compiler) for _ in range(2)]
    threads = [threading.Thread(target=fs[i], args=(i,), name=f"t{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (a, b) = seen.values()
    assert a[0] is not b[0] and a[1] is not b[1]
