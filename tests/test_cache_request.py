"""Tests for jitguard._src.cache.request: what a compiler is given and can do."""

from __future__ import annotations

from typing import Any

import pytest

from jitguard import (
    CompileContext,
    CompileRequest,
    DuplicateInputs,
    GuardBuilder,
    LocalSource,
    RestartCompile,
    TensorProperty,
    TracingContext,
    cache_of,
    specialize,
)

GB = GuardBuilder


def test_request_describes_the_call() -> None:
    """The request names the function, its arguments, sources and ids."""
    seen: list[CompileRequest] = []

    def compiler(req: CompileRequest) -> Any:
        seen.append(req)
        assert TracingContext.get() is req.tracing_context
        assert CompileContext.get().compile_id == req.compile_id
        return req.fn

    def f(a, b=2, *rest, k, **kw):  # type: ignore[no-untyped-def]
        return a

    g = specialize(f, compiler=compiler)
    g(1, 5, 6, k=3, z=4)
    (req,) = seen
    # a copy of f holding the code the entry is compiled for ([Note: A replaced __code__])
    assert req.fn.__code__ is f.__code__ and req.fn.__dict__ is f.__dict__
    assert req.fn.__closure__ is f.__closure__ and req.fn.__defaults__ is f.__defaults__
    assert req.fn.__qualname__ == f.__qualname__ and req.fn.__globals__ is f.__globals__
    assert req.fn.__annotations__ is f.__annotations__
    assert req.arguments == {"a": 1, "b": 5, "rest": (6,), "k": 3, "kw": {"z": 4}}
    assert req.args == (1, 5, 6) and req.kwargs == {"k": 3, "z": 4}
    assert req.source("a") == LocalSource("a")
    assert str(req.compile_id).endswith("/0") and str(req.trace_id) == str(req.compile_id)
    assert req.attempt == 0 and not req.recompile
    assert "CompileRequest" in repr(req)
    with pytest.raises(KeyError, match="not a parameter"):
        req.source("nope")


def test_compiler_guards_are_enforced() -> None:
    """Guards the compiler adds (both ways) become part of the entry."""
    class Cfg:
        lr = 0.1

    def compiler(req: CompileRequest) -> Any:
        from jitguard import AttrSource

        TracingContext.get().guards_context.dynamo_guards.add(
            AttrSource(req.source("cfg"), "lr").make_guard(GB.EQUALS_MATCH)
        )
        req.add_guard("n", GB.TYPE_MATCH)
        return req.fn

    cfg = Cfg()
    f = specialize(lambda cfg, n: cfg.lr * n, compiler=compiler)
    f(cfg, 2)
    f(cfg, 2)
    assert cache_of(f).stats().compiles == 1
    (first,) = cache_of(f).compile_ids()
    cfg.lr = 0.2
    f(cfg, 2)
    assert cache_of(f).stats().compiles == 2
    assert cache_of(f).reasons() == [f"{first}: L['cfg'].lr == 0.1 failed: got 0.2"]


def test_env_exprs_and_aliasing_release() -> None:
    """An env expr from the compiler is compiled; allow_aliasing drops aliasing guards."""
    def compiler(req: CompileRequest) -> Any:
        req.add_env_expr(DuplicateInputs(req.source("a"), req.source("b")))
        req.allow_aliasing("a", "b")
        return req.fn

    f = specialize(lambda a, b: a is b, compiler=compiler)
    shared: list[int] = []
    assert f(shared, shared) is True
    (entry,) = cache_of(f).entries()
    assert "L['a'] is L['b']" in entry.code
    assert not any("NO_ALIASING" in c or "no two" in c for c in entry.code)


def test_shape_guards_through_the_request() -> None:
    """Shape guards with their symbol sources are compiled into the entry."""
    sympy = pytest.importorskip("sympy")
    from jitguard import TensorPropertySource

    class FakeTensor:
        def __init__(self, n: int) -> None:
            self.n = n

        def size(self) -> tuple[int]:
            return (self.n,)

    s0 = sympy.Symbol("s0", integer=True)

    def compiler(req: CompileRequest) -> Any:
        src = TensorPropertySource(req.source("x"), TensorProperty.SIZE, 0)
        req.add_shape_guards([sympy.Ge(s0, 2)], {s0: src})
        return req.fn

    policy_free = specialize(lambda x: x.n, compiler=compiler)
    policy_free(FakeTensor(3))
    (entry,) = cache_of(policy_free).entries()
    assert any("L['x'].size()[0]" in c for c in entry.code)


def test_restart_counts_attempts_from_a_fresh_context() -> None:
    """RestartCompile starts over: attempt 1 shows in the trace id, guards start afresh."""
    seen: list[tuple[str, int, Any]] = []

    def compiler(req: CompileRequest) -> Any:
        gs = req.tracing_context.guards_context.dynamo_guards
        seen.append((str(req.trace_id), len(gs), req.tracing_context))
        if req.attempt == 0:
            req.add_guard("n", GB.TYPE_MATCH)
            req.restart("try again")
        return req.fn

    f = specialize(lambda n: n, compiler=compiler)
    f(4)
    (first, second) = seen
    assert first[0].endswith("/0") and second[0].endswith("/0_1")
    assert first[2] is not second[2] and first[1] == second[1]
    assert cache_of(f).stats().restarts == 1


def test_restart_can_make_arguments_dynamic() -> None:
    """A restart may mark arguments dynamic; later compiles keep the marking."""
    attempts: list[frozenset[str]] = []

    def compiler(req: CompileRequest) -> Any:
        attempts.append(req.dynamic)
        if not req.is_dynamic("n"):
            raise RestartCompile("n varies", dynamic=["n"])
        return req.fn

    f = specialize(lambda n: n, compiler=compiler)
    f(1), f(2), f(3)
    assert attempts == [frozenset(), frozenset({"n"})]
    assert LocalSource("n") in cache_of(f).dynamic
    assert cache_of(f).stats().compiles == 1


def test_static_names_are_reported() -> None:
    """Declared static parameters are listed on the request."""
    seen: list[CompileRequest] = []
    f = specialize(lambda a, b: a, compiler=lambda r: seen.append(r) or r.fn, static=["a"])
    f(1, 2)
    assert seen[0].static == {"a"} and seen[0].dynamic == frozenset()


def test_restart_carries_its_reason() -> None:
    """RestartCompile keeps its reason and what it asks for (names or sources, as given)."""
    r = RestartCompile("why", dynamic=["x"], static=[LocalSource("y")])
    assert r.reason == "why" and str(r) == "why"
    assert r.dynamic == ("x",) and r.static == (LocalSource("y"),)
    assert str(RestartCompile()) == "restart requested"


def test_restart_names_and_sources_mean_the_same() -> None:
    """A restart naming a parameter and one giving its LocalSource make it dynamic alike."""
    for what in ("n", LocalSource("n", is_input=True)):
        def compiler(req: CompileRequest, what: object = what) -> Any:
            if req.attempt == 0:
                raise RestartCompile("n varies", dynamic=[what])  # type: ignore[list-item]
            return req.fn

        f = specialize(lambda n: n, compiler=compiler)
        assert f(1) == 1 and f(2) == 2
        assert cache_of(f).stats().compiles == 1, what


def test_ignore_global_states_leaves_a_state_out() -> None:
    """A compiler that ignores a state (guarding a weaker one instead): a change of the
    ignored state is a hit, a change of the weaker one a miss that names it; an unknown
    name is refused with the registered names listed."""
    from jitguard import JitGuardError, global_states

    box = {"knob": 1, "weak": "a"}
    global_states.register("test_knob", lambda: box["knob"])
    global_states.register("test_knob_weak", lambda: box["weak"], guarded=False)
    try:
        def compiler(req: CompileRequest) -> Any:
            with pytest.raises(JitGuardError, match=r"no global state named 'nope'; registered: "):
                req.ignore_global_states("nope")
            req.ignore_global_states("test_knob", guard_instead=["test_knob_weak"])
            return req.fn

        g = specialize(lambda x: x, compiler=compiler)
        g(1)
        (entry,) = cache_of(g).entries()
        (line,) = [c for c in entry.code if "GLOBAL_STATE" in c]
        assert "test_knob_weak" in line and "test_knob," not in line
        box["knob"] = 2
        g(1)
        assert cache_of(g).stats().compiles == 1
        box["weak"] = "b"
        g(1)
        assert cache_of(g).stats().compiles == 2
        assert "test_knob_weak (expected 'a', got 'b')" in cache_of(g).reasons()[0]
    finally:
        global_states.unregister("test_knob")
        global_states.unregister("test_knob_weak")
