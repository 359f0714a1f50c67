"""Tests for static types in the generated dispatcher ([Note: Static types in the generated
dispatcher]): a static type is tested and keyed as itself, a heap type by its id, and no
metaclass code runs or fakes a match."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from jitguard import CompileRequest, cache_of, specialize
from jitguard._src.dispatch.layout import note_static_types, static_type


def by_type() -> Any:
    """A function specialized by type (``policy="types"``) whose entries return their
    compile number (0, 1, ...)."""
    count = iter(range(1000))

    def compiler(request: CompileRequest) -> Any:
        k = next(count)
        return lambda x: k

    # global_state=False: torch, once imported by another test, registers global states whose
    # guard joins every entry as a residual, and a lone entry with a residual is tried
    # linearly; these tests are about the keyed dispatcher, whatever the process imported
    return specialize(lambda x: x, compiler=compiler, policy="types", global_state=False)


class Liar(type):
    """A metaclass whose classes claim to equal every class and hash like int; it counts
    each call of those methods."""

    calls = 0

    def __eq__(cls, other: object) -> bool:
        Liar.calls += 1
        return True

    def __hash__(cls) -> int:
        Liar.calls += 1
        return hash(int)


class Impostor(metaclass=Liar):
    pass


def test_only_static_types_with_metaclass_type_are_noted() -> None:
    """note_static_types keeps builtin and C types, never a Python class or another metaclass."""
    import numpy as np

    class Local:
        pass

    note_static_types((np.zeros(1), Local(), Impostor(), 1))
    assert static_type(id(np.ndarray)) is np.ndarray
    assert static_type(id(int)) is int
    assert static_type(id(Local)) is None
    assert static_type(id(Impostor)) is None
    assert static_type("not an id") is None


def test_pure_dispatcher_keys_static_types_by_themselves(dispatch_mode: str) -> None:
    """Static types key the pure-Python dispatcher's index as objects (the C path: by id);
    each call still reaches its own entry."""
    f = by_type()
    assert (f(1), f(1.5), f(2j)) == (0, 1, 2)
    assert (f(3), f(2.5), f(1j)) == (0, 1, 2)
    cache = cache_of(f)
    assert cache.stats().hits == 3
    keyed_by_type = f"{cache.dispatcher.sig.prefix}type({cache.dispatcher.sig.prefix}t" in (
        cache.dispatcher.source)
    assert keyed_by_type == (dispatch_mode == "py")


def test_lying_metaclass_never_runs_nor_matches(dispatch_mode: str) -> None:
    """A class whose metaclass claims to be int (equal, same hash) gets its own entry; its
    __eq__ and __hash__ never run on a dispatch."""
    f = by_type()
    assert (f(1), f(1.5), f(2j)) == (0, 1, 2)
    Liar.calls = 0
    obj = Impostor()
    assert f(obj) == 3  # its own compile, not int's entry
    calls_after_compile = Liar.calls
    assert f(obj) == 3 and f(1) == 0 and f(1.5) == 1
    assert Liar.calls == calls_after_compile  # no dispatch ran them
    assert cache_of(f).stats().compiles == 4


def test_heap_type_with_static_types_keys_by_id_and_can_die(dispatch_mode: str) -> None:
    """A Python class among static types: the index holds it by id only, so it can die,
    and the static types still hit their entries."""
    def make() -> Any:
        class Local:
            pass
        return Local

    f = by_type()
    cls = make()
    obj = cls()
    assert (f(1), f(1.5), f(obj)) == (0, 1, 2)
    assert f(obj) == 2 and f(2) == 0
    ref = weakref.ref(cls)
    del cls, obj
    gc.collect()
    assert ref() is None
    assert f(3) == 0 and f(2.5) == 1


@pytest.mark.parametrize("n", [1, 3])
def test_hoisted_static_type_is_tested_by_identity(dispatch_mode: str, n: int) -> None:
    """ndarray, the one type every entry has, is tested as ``type(x) is T``; a subclass
    instance misses (its own entry), whatever it claims to be."""
    np = pytest.importorskip("numpy")

    class Sub(np.ndarray):
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return np.ndarray

    f = by_type()
    dtypes = [np.float64, np.float32, np.int64][:n]
    got = [f(np.zeros(2, dtype=d)) for d in dtypes]
    assert got == list(range(n))
    prefix = cache_of(f).dispatcher.sig.prefix
    assert f"{prefix}type(x) is {prefix}T" in cache_of(f).dispatcher.source
    sub = np.zeros(2).view(Sub)
    assert f(sub) == n
    assert [f(np.ones(2, dtype=d)) for d in dtypes] == list(range(n))
