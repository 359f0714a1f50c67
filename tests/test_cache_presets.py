"""Policy presets: ``policy="types"`` guards scalars by type and arrays by ARRAY_MATCH, as
numba types its arguments; ``policy="values"`` is the default."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from jitguard import ArgPolicy, cache_of, specialize
from jitguard._src.cache.policy import default_policy
from jitguard._src.cache.presets import (
    TypesPolicy,
    resolve_policy,
    triton_policy,
    types_policy,
)


def typed(fn: Any = None, **kw: Any) -> Any:
    """A function specialized with the types preset (no global-state guard, which torch's
    states would add once torch is loaded)."""
    kw.setdefault("global_state", False)
    return specialize(fn or (lambda x: x), policy="types", recompile_limit=None, **kw)


def codes(f: Any) -> list[list[str]]:
    return [e.code for e in cache_of(f).entries()]


def test_presets_resolve() -> None:
    """"values" and None are the default policy, "types" the shared types preset, an
    ArgPolicy itself; anything else is refused."""
    assert resolve_policy(None) is default_policy and resolve_policy("values") is default_policy
    assert resolve_policy("types") is types_policy()
    mine = ArgPolicy()
    assert resolve_policy(mine) is mine
    assert resolve_policy("triton") is triton_policy()
    with pytest.raises(ValueError, match=r"policy must be an ArgPolicy or one of \('values', "
                       r"'types', 'triton'\), got 'numba'"):
        specialize(lambda x: x, policy="numba")  # type: ignore[arg-type]


def test_scalars_by_type() -> None:
    """Ints share one entry whatever their value; a float, a bool and None get one each."""
    f = typed()
    assert [f(1), f(2), f(-7), f(1.5), f(2.5), f(True), f(False), f(None)] == [
        1, 2, -7, 1.5, 2.5, True, False, None]
    assert cache_of(f).stats().compiles == 4
    assert codes(f)[0] == ["type(L['x']) is int"]


def test_static_scalars_by_value() -> None:
    """A parameter declared static is guarded by value under the types preset too."""
    f = typed(lambda x, k: x * k, static=["k"])
    f(1, 2), f(5, 2), f(1, 3)
    assert cache_of(f).stats().compiles == 2
    assert ["type(L['x']) is int", "L['k'] == 2"] in codes(f)


def test_default_values_policy_is_unchanged() -> None:
    """Without a policy, ints are guarded by value."""
    f = specialize(lambda x: x, automatic_dynamic=False, global_state=False)
    f(1), f(2)
    assert cache_of(f).stats().compiles == 2
    assert codes(f)[0] == ["L['x'] == 1"]


def test_arrays_by_array_match() -> None:
    """Arrays of one dtype, ndim, layout, writeability and alignment share an entry; each
    of these facts apart makes another."""
    f = typed(lambda x: x.dtype.str)
    ro = np.zeros(3)
    ro.flags.writeable = False
    odd = np.ndarray((3,), np.float64, buffer=np.zeros(25, np.uint8), offset=1)
    calls = [np.zeros(3), np.ones(8), np.zeros(3, np.float32), np.zeros((2, 2)),
             np.zeros((2, 2), order="F"), np.zeros(6)[::2], ro, odd, np.arange(4.0)]
    assert [f(a) for a in calls] == [a.dtype.str for a in calls]
    assert cache_of(f).stats().compiles == 7
    assert codes(f)[0] == ["check_array(L['x'], ndarray, float64, ndim=1, layout='C', "
                           "writeable=True, aligned=True)"]


def test_eight_dtypes_one_exact_key() -> None:
    """Eight array dtypes: the dispatcher keys on the array fact alone, exactly."""
    f = typed(lambda x: x.dtype.str)
    arrays = [np.zeros(4, d) for d in ("f8", "f4", "i8", "i4", "u1", "c16", ">f8", "i2")]
    assert [f(a) for a in arrays * 2] == [a.dtype.str for a in arrays * 2]
    cache = cache_of(f)
    assert cache.stats().compiles == 8 and cache.stats().hits == 8
    assert cache.dispatcher.source.splitlines()[0].rstrip().endswith(
        "dims [x:array_aligned], exact")


def test_mixed_scalars_and_arrays() -> None:
    """Two parameters, an array and a scalar: one entry per (array kind, scalar type)."""
    f = typed(lambda x, y: (x.dtype.str, type(y).__name__))
    calls = [(np.zeros(2), 1), (np.ones(5), 7), (np.zeros(2), 2.0), (np.zeros(2, "i4"), 3)]
    assert [f(*c) for c in calls] == [("<f8", "int"), ("<f8", "int"), ("<f8", "float"),
                                      ("<i4", "int")]
    assert cache_of(f).stats().compiles == 3


def test_arrays_are_not_guarded_for_aliasing() -> None:
    """f(a, b) and f(a, a) share one entry: arrays are left out of the aliasing guards, and
    the dispatcher keys on both arrays' facts exactly."""
    f = typed(lambda x, y: 1)
    a, b = np.zeros(3), np.ones(3)
    f(a, b), f(a, a), f(b, a)
    cache = cache_of(f)
    assert cache.stats().compiles == 1 and cache.stats().hits == 2
    assert cache.dispatcher.source.splitlines()[0].rstrip().endswith(
        "dims [x:array_aligned, y:array_aligned], exact")


def test_containers_hold_typed_items() -> None:
    """A tuple is guarded by length and each item by type."""
    f = typed()
    f((1, 2.0)), f((3, 4.0)), f((3, 4)), f((1, 2.0, 3))
    assert cache_of(f).stats().compiles == 3
    assert ["type(L['x']) is tuple and len(L['x']) == 2", "type(L['x'][0]) is int",
            "type(L['x'][1]) is float"] in codes(f)


def test_numpy_scalars() -> None:
    """A numpy scalar by type; a datetime64 by type and dtype (its unit)."""
    f = typed()
    f(np.float64(1.0)), f(np.float64(2.0)), f(np.float32(1.0))
    assert cache_of(f).stats().compiles == 2
    g = typed()
    g(np.datetime64(1, "s")), g(np.datetime64(2, "s")), g(np.datetime64(1, "ns"))
    assert cache_of(g).stats().compiles == 2
    assert ["type(L['x']) is datetime64", "L['x'].dtype == dtype('<M8[s]')"] in codes(g)


def test_own_rules_come_first() -> None:
    """A rule registered on a TypesPolicy beats its preset rules."""
    policy = TypesPolicy()
    policy.register(int, lambda ctx, source, value: ctx.by_value(source, value),
                    subclasses=False, replace=True)
    f = specialize(lambda x: x, policy=policy, automatic_dynamic=False, global_state=False)
    f(1), f(2), f(np.zeros(2)), f(np.ones(3))
    assert cache_of(f).stats().compiles == 3


# ---- triton ------------------------------------------------------------------------------


def _at(offset: int, n: int = 4, dtype: Any = np.float32) -> Any:
    """A 1-d array whose data starts ``offset`` bytes into a 64-byte aligned buffer."""
    size = np.dtype(dtype).itemsize
    buf = np.zeros(n * size + 128, np.uint8)
    start = (-buf.ctypes.data) % 64
    return np.ndarray((n,), dtype, buffer=buf, offset=start + offset)


def test_triton_preset() -> None:
    """Ints by class, arrays by dtype and pointer alignment (not shape or layout): one entry
    per (alignment, dtype, int class), as Triton's specialization key."""
    f = specialize(lambda x, n: None, policy="triton", global_state=False,
                   recompile_limit=None)
    f(_at(0), 32), f(_at(16, n=9), 48), f(_at(0).reshape(2, 2), 64)  # one entry
    f(_at(4), 32)                      # unaligned: another
    f(_at(0, dtype=np.float64), 32)    # another dtype
    f(_at(0), 7), f(_at(0), 1)         # other int classes
    cache = cache_of(f)
    assert cache.stats().compiles == 5 and cache.stats().hits == 2
    head = cache.dispatcher.source.splitlines()[0].rstrip()
    assert "L['x'].dtype:dtype" in head and "n:int_class" in head and head.endswith(", exact")
    assert sorted(["type(L['x']) is ndarray", "L['x'].dtype == dtype('float32')",
                   "data_ptr(L['x']) % 16 == 0", "int_class(L['n']) == ('i32', 16)"]) in [
        sorted(c) for c in codes(f)]
