"""Tests for jitguard._src.cache.specialize: the call path end to end, threads, object death,
and the inspection API."""

from __future__ import annotations

import gc
import random
import threading
from collections.abc import Callable
from typing import Any

import pytest

from jitguard import (
    CacheEntry,
    CompileRequest,
    FunctionCache,
    GuardBuilder,
    LocalSource,
    cache_of,
    specialize,
)

# Every test here runs with the C hot path and in pure Python ([Note: The C hot path]).
pytestmark = pytest.mark.usefixtures("dispatch_mode")


def _run_threads(work: Callable[[random.Random], None], n: int) -> list[BaseException]:
    """Run ``work`` on ``n`` threads released together by a barrier, thread ``i`` with
    ``random.Random(i)``; what the threads raised, in the order they raised it."""
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def run(seed: int) -> None:
        rng = random.Random(seed)
        try:
            start.wait(timeout=10)
            work(rng)
        except BaseException as e:  # reported by the caller
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_decorator_forms() -> None:
    """specialize works as a call, a bare decorator and a decorator with options."""
    def f(x):  # type: ignore[no-untyped-def]
        return x + 1

    @specialize
    def g(x):  # type: ignore[no-untyped-def]
        return x + 1

    @specialize(recompile_limit=3)
    def h(x):  # type: ignore[no-untyped-def]
        return x + 1

    for fn in (specialize(f), g, h):
        assert fn(1) == 2 and fn(1) == 2
        assert isinstance(cache_of(fn), FunctionCache)
    assert cache_of(h).recompile_limit == 3
    assert g.__name__ == "g" and g.__wrapped__ is not None  # type: ignore[attr-defined]


def test_hit_miss_compile_counters() -> None:
    """Calls are counted as hits and misses; each miss compiles once."""
    f = specialize(lambda x: x, automatic_dynamic=False)
    for x in (1, 1, 2, 1, 2, 3):
        f(x)
    s = cache_of(f).stats()
    assert (s.hits, s.misses, s.compiles, s.recompiles, s.entries) == (3, 3, 3, 2, 3)


def test_artifact_is_called_with_the_same_arguments() -> None:
    """The artifact gets the call's arguments, defaults and variadics as fn would."""
    seen: list[tuple[Any, ...]] = []

    def compiler(req: CompileRequest) -> Any:
        def artifact(a, b=2, *rest, k=0, **kw):  # type: ignore[no-untyped-def]
            seen.append((a, b, rest, k, kw))
            return "compiled"
        return artifact

    @specialize(compiler=compiler)
    def f(a, b=2, *rest, k=0, **kw):  # type: ignore[no-untyped-def]
        return "eager"

    assert f(1) == "compiled" and f(1, 3, 4, k=5, z=6) == "compiled"
    assert f(1) == "compiled"
    assert seen == [(1, 2, (), 0, {}), (1, 3, (4,), 5, {"z": 6}), (1, 2, (), 0, {})]


def test_keyword_and_positional_calls_share_an_entry() -> None:
    """f(1, 2) and f(b=2, a=1) bind to the same parameter values: one entry."""
    f = specialize(lambda a, b: a - b)
    assert f(1, 2) == -1 and f(b=2, a=1) == -1 and f(1, b=2) == -1
    assert cache_of(f).stats().compiles == 1


def test_call_errors_are_pythons() -> None:
    """A call that does not fit the signature raises TypeError, like fn."""
    f = specialize(lambda a, b: a)
    with pytest.raises(TypeError):
        f(1)


def test_static_entry_wins_over_later_dynamic_one() -> None:
    """After n becomes dynamic, the old n == 7 entry still serves n == 7."""
    made: list[str] = []

    def compiler(req: CompileRequest) -> Any:
        kind = "dynamic" if req.is_dynamic("n") else "static"
        made.append(kind)
        return lambda n: kind

    f = specialize(lambda n: n, compiler=compiler)
    assert f(7) == "static" and f(8) == "dynamic" and f(9) == "dynamic"
    assert f(7) == "static"
    assert made == ["static", "dynamic"]
    assert [e.specificity for e in cache_of(f).entries()] == [8, 2]


def test_aliasing_is_part_of_the_specialization() -> None:
    """f(a, a) and f(a, b) with two equal objects never share an entry."""
    from jitguard import ArgPolicy

    class Box:
        pass

    def compiler(req: CompileRequest) -> Any:
        same = req.arguments["a"] is req.arguments["b"]  # folded into the artifact
        return lambda a, b: same

    # Lists are guarded by contents, so only the aliasing guards tell l1, l2 from l1, l1.
    f = specialize(lambda a, b: a is b, compiler=compiler)
    l1, l2 = [1], [1]
    assert f(l1, l2) is False and f(l1, l1) is True
    assert f(l2, l2) is True and f(l2, l1) is False
    assert cache_of(f).stats().compiles == 2
    # User objects guarded by type only (the case torch.compile 2.13 gets wrong).
    by_type = ArgPolicy()
    by_type.register(Box, lambda ctx, source, value: ctx.by_type(source))
    g = specialize(lambda a, b: a is b, compiler=compiler, policy=by_type)
    b1, b2, b3 = Box(), Box(), Box()
    assert g(b1, b2) is False and g(b3, b3) is True and g(b2, b1) is False
    assert g(b1, b1) is True
    assert cache_of(g).stats().compiles == 2


def test_method_specialization() -> None:
    """A specialized function works as a method; self is guarded by its type, so one entry
    serves every instance (the artifact, ``fn`` itself, reads ``self.k`` live)."""
    class Model:
        def __init__(self, k: int) -> None:
            self.k = k

        @specialize
        def scale(self, x):  # type: ignore[no-untyped-def]
            return self.k * x

    m1, m2 = Model(2), Model(3)
    assert m1.scale(5) == 10 and m2.scale(5) == 15 and m1.scale(5) == 10
    assert [Model(k).scale(5) for k in range(20)] == [5 * k for k in range(20)]
    assert cache_of(m1.scale).stats().compiles == 1
    entry = cache_of(Model.scale).entries()[0]
    assert "type(L['self']) is" in entry.check.source
    assert "L['self'] is " not in entry.check.source


def test_method_of_a_subclass_is_a_miss() -> None:
    """self's exact type is guarded: an instance of a subclass gets its own entry."""
    class Base:
        @specialize
        def who(self):  # type: ignore[no-untyped-def]
            return type(self).__name__

    class Sub(Base):
        pass

    assert Base().who() == "Base" and Sub().who() == "Sub" and Base().who() == "Base"
    assert cache_of(Base.who).stats().compiles == 2


def test_compiler_may_ask_for_self_by_identity() -> None:
    """A compiler whose artifact bakes in what it read from self pins self by identity."""
    def bake(req: CompileRequest) -> Any:
        req.add_guard("self", GuardBuilder.ID_MATCH)
        k = req.arguments["self"].k
        return lambda self, x: k * x

    class Model:
        def __init__(self, k: int) -> None:
            self.k = k

        @specialize(compiler=bake)
        def scale(self, x):  # type: ignore[no-untyped-def]
            return self.k * x

    m1, m2 = Model(2), Model(3)
    assert m1.scale(5) == 10 and m2.scale(5) == 15 and m1.scale(5) == 10
    assert cache_of(Model.scale).stats().compiles == 2


def test_entry_dies_with_its_object_and_id_reuse_never_hits() -> None:
    """An object whose id is reused after death never hits the dead object's entry."""
    class Obj:
        __slots__ = ("__weakref__",)

    def compiler(req: CompileRequest) -> Any:
        tag = id(req.arguments["o"])
        return lambda o: tag

    f = specialize(lambda o: None, compiler=compiler)
    o = Obj()
    old_id = id(o)
    assert f(o) == old_id
    del o  # no cycle: freed (and its entry invalidated) right here
    reused = None
    keep = []
    for _ in range(100_000):  # CPython hands the freed block out again, usually at once
        cand = Obj()
        if id(cand) == old_id:
            reused = cand
            break
        keep.append(cand)
    assert reused is not None, "could not provoke id reuse"
    assert f(reused) == old_id  # a fresh compile for the new object (same id, new entry)
    stats = cache_of(f).stats()
    assert stats.compiles == 2 and stats.invalidations == 1 and stats.hits == 0
    assert len(cache_of(f).entries()) == 1


def test_dead_entry_is_not_listed() -> None:
    """entries() never shows an entry whose guarded object died."""
    class Obj:
        pass

    f = specialize(lambda o: 1)
    o = Obj()
    f(o)
    assert len(cache_of(f).entries()) == 1
    del o
    gc.collect()
    assert cache_of(f).entries() == ()
    assert cache_of(f).stats().invalidations == 1


def test_threads_hammering_one_function() -> None:
    """8 threads with mixed inputs: every result right, every specialization compiled once."""
    class Obj:
        def __init__(self, k: int) -> None:
            self.k = k

    objs = [Obj(k) for k in range(3)]
    inputs: list[Any] = [0, 1, 2, "a", "b", (1, 2), (3,), None, 1.5, *objs, [4], {"k": 5}]
    compiles: list[Any] = []
    lock = threading.Lock()

    def describe(x: Any) -> Any:
        return ("obj", x.k) if isinstance(x, Obj) else (type(x).__name__, repr(x))

    def compiler(req: CompileRequest) -> Any:
        expected = describe(req.arguments["x"])
        with lock:
            compiles.append(expected)
        return lambda x: expected

    f = specialize(describe, compiler=compiler, recompile_limit=100, automatic_dynamic=False)

    def work(rng: random.Random) -> None:
        for _ in range(400):
            x = rng.choice(inputs)
            got = f(x)
            if got != describe(x):
                raise AssertionError(f"wrong entry for {x!r}: {got!r}")

    errors = _run_threads(work, 8)
    assert errors == []
    assert sorted(map(repr, compiles)) == sorted(repr(describe(x)) for x in inputs)
    stats = cache_of(f).stats()
    assert stats.compiles == len(inputs) and stats.failures == 0
    assert stats.hits + stats.misses == 8 * 400


def test_reentrant_call_runs_uncompiled() -> None:
    """A call made by the compiler itself runs the function uncompiled."""
    holder: dict[str, Any] = {}

    def compiler(req: CompileRequest) -> Any:
        probe = holder["f"](req.arguments["x"] + 100)  # the compiler runs the function
        return lambda x: ("compiled", probe)

    holder["f"] = f = specialize(lambda x: x, compiler=compiler, automatic_dynamic=False)
    assert f(1) == ("compiled", 101)
    assert cache_of(f).stats().fallbacks == 1 and cache_of(f).stats().compiles == 1


def test_inspection_api() -> None:
    """Entries expose compile id, guards, code, hits, specificity and validity."""
    f = specialize(lambda n, s: n, automatic_dynamic=False)
    f(1, "a"), f(1, "a"), f(2, "a")
    cache = cache_of(f)
    entries = cache.entries()
    assert all(isinstance(e, CacheEntry) and e.valid for e in entries)
    assert [e.hits for e in entries] == [1, 0]
    assert cache.compile_ids() == [e.compile_id for e in entries]
    assert "L['n'] == 1" in entries[0].code
    assert {g.name for g in entries[0].guards} >= {"L['n']", "L['s']"}
    assert cache.lookup(2, "a") is entries[1] and cache.lookup(3, "a") is None
    assert cache.lookup(s="a", n=1) is entries[0]
    assert "2 entries" in repr(cache) and "CacheEntry" in repr(entries[0])
    assert cache.static == frozenset() and cache.snapshot().entries == entries


def test_clear_forgets_everything() -> None:
    """clear() drops entries, records, counts and dynamic markings."""
    f = specialize(lambda n: n)
    f(1), f(2), f(3)
    cache = cache_of(f)
    assert cache.dynamic == {LocalSource("n")}
    cache.clear()
    assert cache.entries() == () and cache.recompiles == () and cache.dynamic == frozenset()
    assert cache.stats().misses == 0
    f(5)
    assert cache.stats().compiles == 1 and cache.dynamic == frozenset()


def test_cache_of_rejects_plain_functions() -> None:
    """cache_of needs a function returned by specialize."""
    with pytest.raises(TypeError, match=r"not a function returned by jitguard\.specialize"):
        cache_of(len)


def test_bad_arguments_to_specialize() -> None:
    """specialize checks its fn and compiler."""
    with pytest.raises(TypeError):
        specialize(42)
    with pytest.raises(TypeError):
        specialize(lambda: 0, compiler=42)  # type: ignore[arg-type]


def test_specialize_without_torch() -> None:
    """The cache does not import torch."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import jitguard\n"
        "f = jitguard.specialize(lambda x: x)\n"
        "assert f(1) == 1 and f(1) == 1\n"
        "print(jitguard.cache_of(f).stats().hits)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"


def test_compiler_may_inspect_its_own_cache() -> None:
    """A compiler can read entries() and stats() of its function mid-compile (no deadlock)."""
    class Obj:
        pass

    holder: dict[str, Any] = {}
    seen: list[int] = []

    def compiler(req: CompileRequest) -> Any:
        cache = cache_of(holder["f"])
        seen.append(len(cache.entries()) + cache.stats().entries)
        return req.fn

    holder["f"] = f = specialize(lambda o: 1, compiler=compiler)
    o = Obj()
    f(o)
    del o
    gc.collect()  # the entry is dead; it is dropped on the next miss, under the lock
    f(Obj())
    assert seen == [0, 0]


def test_threads_while_the_layout_changes() -> None:
    """Threads keep getting right answers while recompiles swap the dispatcher's code."""
    def compiler(req: CompileRequest) -> Any:
        dynamic = req.is_dynamic("n")
        baked = (req.arguments["n"], req.arguments["tag"])  # what this entry assumes
        return lambda n, tag: ("dyn" if dynamic else "static", baked, n)

    f = specialize(lambda n, tag: None, compiler=compiler, recompile_limit=64)

    def work(rng: random.Random) -> None:
        for i in range(300):
            n = rng.randrange(50) if i % 3 else i
            tag = rng.choice(("a", "b", (1,), None))
            kind, (baked_n, baked_tag), got_n = f(n, tag)
            wrong = baked_tag != tag or type(baked_tag) is not type(tag) or got_n != n
            if wrong or (kind == "static" and baked_n != n):
                raise AssertionError(f"wrong entry for {(n, tag)}: {kind} {baked_n, baked_tag}")

    errors = _run_threads(work, 8)
    assert errors == []
    stats = cache_of(f).stats()
    assert stats.failures == 0 and stats.hits + stats.misses == 8 * 300
    assert stats.compiles <= 64
