"""Adversarial soundness probes of the array and Triton presets, in both dispatch modes:
0-d, byteswapped, structured, unaligned and non-contiguous arrays, views whose base
changes, writeable flags flipped, array-likes and int subclasses in Triton's int classes.
The compilers memoize: a stale entry shows as a wrong answer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from _helpers import preset

pytestmark = pytest.mark.usefixtures("dispatch_mode")


def meta(a: Any) -> Any:
    """What "types" pins of an array: numba's type (layout class C, F or A) and alignment."""
    tp = type(a).__name__
    a = np.asarray(a) if not isinstance(a, np.ndarray) else a
    layout = "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else "A"
    return (tp, str(a.dtype), a.dtype.byteorder, a.dtype.isalignedstruct, a.dtype.metadata,
            a.ndim, layout, a.flags.writeable, a.flags.aligned)


def pointer(a: Any) -> Any:
    """What "triton" pins of an array: type, dtype and 16-byte alignment of its data."""
    tp = type(a).__name__
    a = np.asarray(a) if not isinstance(a, np.ndarray) else a
    return (tp, str(a.dtype), a.dtype.byteorder, a.dtype.metadata,
            a.__array_interface__["data"][0] % 16 == 0)


PINNED = {"types": meta, "triton": pointer}


def arrays() -> list[Any]:
    base = np.zeros(16, dtype=np.uint8)
    st = np.dtype([("a", "<i4"), ("b", "<f8")])
    return [
        np.zeros(3), np.zeros(()), np.float64(1.0), np.zeros(3, dtype=">f8"),
        np.zeros(3, dtype="<f8"), np.zeros(3, dtype=st), np.zeros(3, dtype=np.dtype(st, align=True)),
        np.zeros(3, dtype=[("a", "<i4"), ("c", "<f8")]), base[1:9].view("<f8"),
        np.zeros((3, 4))[:, ::2], np.zeros((3, 4)).T, np.zeros((3, 1)), np.zeros((1, 3)),
        np.zeros((0, 3)), np.zeros(3, dtype="i8"), np.zeros(3, dtype="q"), np.zeros(3, dtype="l"),
        np.zeros(3, dtype="U3"), np.zeros(3, dtype="U4"), np.zeros(3, dtype="S3"),
        np.zeros(3, dtype=object), np.zeros(3, dtype="M8[s]"), np.zeros(3, dtype="M8[ms]"),
        np.zeros(3, dtype=np.dtype("f8", metadata={"k": 1})), np.zeros(3, dtype=bool),
        np.zeros(3, dtype="(2,)f8"), np.ma.zeros(3), np.zeros(3).view(np.recarray),
    ]


@pytest.mark.parametrize("policy", ["types", "triton"])
def test_array_zoo(policy: str) -> None:
    """Arrays that differ in any property the type policy pins never share an entry."""
    m = PINNED[policy]
    f = preset(m, policy)
    for _ in range(2):
        for a in arrays():
            assert f(a) == m(a), a.dtype


@pytest.mark.parametrize("policy", ["types", "triton"])
def test_writeable_flag_flipped(policy: str) -> None:
    """An array made read-only after compiling misses."""
    m = PINNED[policy]
    f = preset(m, policy)
    a = np.zeros(3)
    assert f(a) == m(a)
    a.flags.writeable = False
    assert f(a) == m(a)
    b = np.zeros(3)
    assert f(b) == m(b)


@pytest.mark.parametrize("policy", ["types", "triton"])
def test_view_whose_base_changes(policy: str) -> None:
    """A view of an array changed through its base, and a view made read-only by its base."""
    m = PINNED[policy]
    f = preset(m, policy)
    base = np.zeros(8)
    v = base[::2]
    assert f(v) == m(v)
    w = base[:4]
    assert f(w) == m(w)
    base.flags.writeable = False
    r = base[:4]
    assert f(r) == m(r)
    s = base[1:5]
    assert f(s) == m(s)
    u = np.zeros(17, dtype=np.uint8)[1:].view("<f8")
    assert f(u) == m(u)


class Iface:
    """An array-like through ``__array_interface__`` whose array can change."""

    def __init__(self, arr: Any) -> None:
        self.arr = arr

    @property
    def __array_interface__(self) -> Any:
        return self.arr.__array_interface__


@pytest.mark.parametrize("policy", ["types", "triton"])
def test_array_like_whose_interface_changes(policy: str) -> None:
    """One array-like object whose interface starts describing another dtype or ndim."""
    m = PINNED[policy]
    f = preset(m, policy)
    x = Iface(np.zeros(3))
    for arr in (np.zeros(3, dtype=np.float32), np.zeros((3, 2)), np.zeros((3, 2))[:, 0],
                np.zeros(17, dtype=np.uint8)[1:].view("<f8"), np.zeros(3, dtype=">f8")):
        x.arr = arr
        assert f(x) == m(x)


class DL:
    """A DLPack-only array-like."""

    def __init__(self, arr: Any) -> None:
        self.arr = arr

    def __dlpack__(self, **kw: Any) -> Any:
        return self.arr.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self.arr.__dlpack_device__()


@pytest.mark.parametrize("policy", ["types", "triton"])
def test_dlpack_whose_array_changes(policy: str) -> None:
    """A DLPack array-like whose array changes dtype or ndim misses."""
    m = PINNED[policy]
    f = preset(lambda a: m(np.from_dlpack(a)), policy)
    x = DL(np.zeros(3))
    for arr in (np.zeros(3), np.zeros(3, dtype=np.float32), np.zeros((3, 2)), np.zeros(3),
                np.zeros(17, dtype=np.uint8)[1:].view("<f8"), np.zeros((3, 2))[:, 0]):
        x.arr = arr
        assert f(x) == m(np.from_dlpack(x))


class MyInt(int):
    pass


class Idx:
    def __init__(self, v: int) -> None:
        self.v = v

    def __index__(self) -> int:
        return self.v


def int_class(n: Any) -> Any:
    """What "triton" pins: an int's class (a bool, a float, a numpy int: its type only)."""
    if type(n) is bool or not isinstance(n, int):
        return (type(n).__name__,)
    return (type(n).__name__, n == 1, int(n) % 16 == 0, -2**31 <= n < 2**31, -2**63 <= n < 2**64)


def test_triton_int_classes_of_odd_ints() -> None:
    """bool, int subclasses, numpy ints, big ints and __index__ objects in Triton's int kind."""
    f = preset(int_class, "triton")
    values = [1, True, MyInt(1), np.int64(1), 16, MyInt(16), np.int32(16), 2**31, 2**64,
              -2**63, 2**200, -16, 0, False, np.uint64(2**64 - 1), Idx(16), Idx(1), 17,
              np.int8(16), MyInt(17), 1.0, 16.0]
    for _ in range(2):
        for v in values:
            assert f(v) == int_class(v), v


def test_triton_int_subclass_whose_value_lies() -> None:
    """An int subclass whose ``__mod__``/``__eq__``/``__index__`` lie is classed by value."""
    class Liar(int):
        def __eq__(self, other: object) -> bool:
            return True

        def __mod__(self, other: Any) -> Any:
            return 0

        def __index__(self) -> int:
            return 16

        __hash__ = int.__hash__

    f = preset(lambda n: (type(n).__name__, int.__eq__(n, 1), int.__mod__(n, 16)), "triton")
    for v in (Liar(3), Liar(16), Liar(1), 3, 16, 1):
        assert f(v) == (type(v).__name__, int.__eq__(v, 1), int.__mod__(v, 16)), v
