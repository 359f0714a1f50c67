"""The caches of one function under ``jitguard.torch.compile`` ([Note: Shared entries]):
what an isolated wrapper takes from the shared cache, and what it must not."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch._dynamo.testing import CompileCounter  # noqa: E402

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def test_isolated_wrapper_uses_a_shared_entry_whose_guards_hold() -> None:
    """An isolated wrapper serves a call from the shared entry that accepts it."""
    cnt = CompileCounter()

    def f(x: Any) -> Any:
        return x * 2

    jgt.compile(f, backend=cnt)(torch.ones(3))
    iso = jgt.compile(f, backend=cnt, isolate_recompiles=True)
    x = torch.arange(3.0)
    torch.testing.assert_close(iso(x), x * 2)
    assert cnt.frame_count == 1
    assert jitguard.cache_of(iso).lookup(x) is not None


def test_isolated_wrapper_compiles_where_the_shared_guards_fail() -> None:
    """A shared entry whose guard fails (another dtype, another global) is not used."""
    cnt = CompileCounter()
    scale = {"k": 2}

    def f(x: Any) -> Any:
        return x * scale["k"]

    jgt.compile(f, backend=cnt)(torch.ones(3))
    iso = jgt.compile(f, backend=cnt, isolate_recompiles=True)
    x = torch.arange(3, dtype=torch.float64)
    torch.testing.assert_close(iso(x), x * 2)
    assert cnt.frame_count == 2
    scale["k"] = 5
    y = torch.ones(3)
    torch.testing.assert_close(iso(y), y * 5)
    assert cnt.frame_count == 3
    assert jitguard.cache_of(iso).stats().entries == 2


def test_isolated_wrapper_does_not_use_another_backends_entry() -> None:
    """The shared entry of another backend does not serve an isolated wrapper."""
    cnt_a, cnt_b = CompileCounter(), CompileCounter()

    def f(x: Any) -> Any:
        return x + 1

    jgt.compile(f, backend=cnt_a)(torch.ones(3))
    iso = jgt.compile(f, backend=cnt_b, isolate_recompiles=True)
    torch.testing.assert_close(iso(torch.ones(3)), torch.full((3,), 2.0))
    assert (cnt_a.frame_count, cnt_b.frame_count) == (1, 1)


def test_shared_wrappers_of_two_backends_keep_their_entries_apart() -> None:
    """Two backends share the limit, not the entries: each compiles for itself."""
    cnt_a, cnt_b = CompileCounter(), CompileCounter()

    def f(x: Any) -> Any:
        return x - 1

    a = jgt.compile(f, backend=cnt_a)
    b = jgt.compile(f, backend=cnt_b)
    a(torch.ones(3))
    torch.testing.assert_close(b(torch.ones(3)), torch.zeros(3))
    assert (cnt_a.frame_count, cnt_b.frame_count) == (1, 1)
    assert jitguard.cache_of(a) is not jitguard.cache_of(b)


def test_limit_counts_every_backend_but_not_isolated_wrappers() -> None:
    """A shared cache's limit counts other backends' compiles; an isolated one's does not."""
    cnt = CompileCounter()

    def f(x: Any) -> Any:
        return x.cos()

    with torch._dynamo.config.patch(recompile_limit=2, fail_on_recompile_limit_hit=True,
                                    automatic_dynamic_shapes=False):
        iso = jgt.compile(f, backend=cnt, dynamic=False, isolate_recompiles=True)
        iso(torch.ones(1))
        iso(torch.ones(2))
        a = jgt.compile(f, backend="eager", dynamic=False)
        a(torch.ones(3))
        b = jgt.compile(f, backend=cnt, dynamic=False)
        b(torch.ones(4))
        with pytest.raises(jitguard.RecompileLimitError, match="recompile limit"):
            b(torch.ones(5))
        with pytest.raises(jitguard.RecompileLimitError):
            iso(torch.ones(6))


def test_accumulated_limit_is_named_when_reached() -> None:
    """Past accumulated_recompile_limit the message names it, and a cached call still hits."""

    def f(x: Any) -> Any:
        return x.tan()

    with torch._dynamo.config.patch(accumulated_recompile_limit=2, recompile_limit=8,
                                    fail_on_recompile_limit_hit=True,
                                    automatic_dynamic_shapes=False):
        a = jgt.compile(f, backend="eager", dynamic=False, isolate_recompiles=True)
        b = jgt.compile(f, backend="eager", dynamic=False, isolate_recompiles=True)
        a(torch.ones(1))
        b(torch.ones(2))
        with pytest.raises(jitguard.RecompileLimitError, match="accumulated_recompile_limit=2"):
            a(torch.ones(3))
        x = torch.ones(2)
        torch.testing.assert_close(b(x), x.tan())


def test_regions_make_one_shared_cache_under_racing_threads() -> None:
    """Threads asking a function's Regions for one option set at once get one shared cache
    (made once); isolated caches added meanwhile can be listed without RuntimeError."""
    import threading
    import time

    from jitguard._src.torch import compile as compile_mod
    from jitguard._src.torch.dynamo_scope import Regions

    class Scope:
        regions: Any = None
        key: Any = None
        isolated = False

    class Made:
        def __init__(self) -> None:
            self.scope = Scope()

    made: list[Any] = []

    def make() -> Any:
        time.sleep(0.01)  # a slow construction: the other threads arrive meanwhile
        made.append(Made())
        return made[-1]

    def fn() -> None:
        pass

    got: list[Any] = []
    listed: list[Any] = []
    start = threading.Barrier(8)

    def ask(i: int) -> None:
        start.wait()
        if i % 2:
            got.append(compile_mod._cache_for(fn, ("k",), False, make))
        else:
            got.append(compile_mod._cache_for(fn, ("k",), True, make))
            listed.append(len(compile_mod._shared[fn].isolated_caches()))

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    regions = compile_mod._shared[fn]
    assert isinstance(regions, Regions)
    shared = [c for c in got if not c.scope.isolated]
    assert len(shared) == 4 and all(c is shared[0] for c in shared)
    assert len(made) == 5 and len(regions.isolated_caches()) == 4
    assert all(c.scope.regions is regions for c in got) and len(listed) == 4
