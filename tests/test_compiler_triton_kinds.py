"""INT_CLASS and DATA_PTR_ALIGNED, Triton's specialization classes: passing and failing
values with their failure texts pinned, other divisors and alignments, and their exact
dispatch facts."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from _helpers import Hostile, accepts, reason, registry_candidates
from jitguard import (
    ArgPolicy,
    CheckFunction,
    GuardBuilder,
    GuardKindError,
    LocalSource,
    cache_of,
    compile_guards,
    data_ptr_kind,
    int_class_kind,
    specialize,
)
from jitguard._src.compiler.array_facts import data_pointer, int_class

L = LocalSource


def check_on(value: Any, create_fn: Any) -> CheckFunction:
    guard = L("n").make_guard(create_fn)
    return compile_guards([guard], f_locals={"n": value}, arg_names=("n",))


# ---- int_class -----------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "cls"), [
    (1, ("i32", 1)), (0, ("i32", 16)), (32, ("i32", 16)), (-16, ("i32", 16)), (7, ("i32", 0)),
    (2**31 - 1, ("i32", 0)), (2**31, ("i64", 16)), (-(2**31) - 1, ("i64", 0)),
    (2**63, ("u64", 16)), (2**64, ("big", 16)), (-(2**63) - 1, ("big", 0)),
    (True, None), (1.0, None), ("1", None),
])
def test_int_class_definition(value: Any, cls: Any) -> None:
    """Triton's classes: 1, divisible by 16, or neither; the width by range; None for
    anything but an int (a bool included)."""
    assert int_class(value) == cls


def test_int_class_passes_within_the_class() -> None:
    """A guard built on 32 holds for every i32 multiple of 16 and nothing else."""
    check = check_on(32, GuardBuilder.INT_CLASS)
    assert check.leaves[0].code() == "int_class(L['n']) == ('i32', 16)"
    assert all(accepts(check, v) for v in (0, 16, -48, 2**30))
    assert not any(accepts(check, v) for v in (1, 8, 2**32, True, 32.0, Hostile()))


def test_int_class_failure_texts() -> None:
    """The reason names the class the value is in, its width, or that it is no int."""
    check = check_on(32, GuardBuilder.INT_CLASS)
    head = "int_class(L['n']) == ('i32', 16) failed: "
    assert reason(check, 7) == head + "got ('i32', 0) (7: none of the classes, not % 16 == 0)"
    assert reason(check, 1) == head + "got ('i32', 1) (1: == 1, not % 16 == 0)"
    assert reason(check, 2**32) == head + "got ('i64', 16) (4294967296 is i64, not i32)"
    assert reason(check, "x") == head + "got 'x', not an int"
    with pytest.raises(GuardKindError, match=r"INT_CLASS on L\['n'\]: expected an int, found bool"):
        check_on(True, GuardBuilder.INT_CLASS)


def test_int_class_other_divisors() -> None:
    """int_class_kind((16, 8)) is a kind of its own (made once), with the class 8 between 16
    and none."""
    fn = int_class_kind((16, 8))
    assert int_class_kind((16, 8)) is fn and int_class_kind((16,)) is GuardBuilder.INT_CLASS
    check = check_on(24, fn)
    assert check.leaves[0].code() == "int_class(L['n'], (16, 8)) == ('i32', 8)"
    assert accepts(check, 40) and not accepts(check, 32) and not accepts(check, 4)
    assert reason(check, 32).endswith("got ('i32', 16) (32: % 16 == 0, not % 8 == 0)")
    with pytest.raises(GuardKindError, match="divisors must be a non-empty tuple of ints >= 2"):
        int_class_kind((16, 1))


def test_int_class_dispatch_is_exact() -> None:
    """Entries per class share one exact dim: a call is one key lookup."""

    def compiler(request: Any) -> Any:
        request.add_guard("n", GuardBuilder.INT_CLASS)
        cls = int_class(request.values[0])
        return lambda n: cls

    f = specialize(lambda n: n, compiler=compiler, dynamic=["n"], global_state=False)
    assert [f(v) for v in (1, 32, 7, 48, 1, 9, 2**40)] == [
        ("i32", 1), ("i32", 16), ("i32", 0), ("i32", 16), ("i32", 1), ("i32", 0), ("i64", 16)]
    cache = cache_of(f)
    assert cache.stats().compiles == 4
    head = cache.dispatcher.source.splitlines()[0]
    assert "n:int_class" in head and head.endswith(", exact")


def test_int_class_is_drawn_by_the_registry_fuzz() -> None:
    """The registry offers INT_CLASS for an int, not for a bool or a float."""
    names = lambda v: {getattr(f, "func", f).__name__ for f in registry_candidates(L("n"), v)}  # noqa: E731
    assert "INT_CLASS" in names(5) and "INT_CLASS" not in names(True) | names(5.0)


# ---- data pointers -------------------------------------------------------------------------


def _at(offset: int, n: int = 4) -> Any:
    """A float32 array whose data starts ``offset`` bytes into a 64-byte aligned buffer."""
    buf = np.zeros(n * 4 + 128, np.uint8)
    start = (-buf.ctypes.data) % 64
    return np.ndarray((n,), np.float32, buffer=buf, offset=start + offset)


def test_data_pointer_matches_numpy() -> None:
    """The pointer read is numpy's own, views and offsets included."""
    for a in (np.zeros(5), np.zeros(8)[3:], _at(4), np.zeros((4, 4))[:, 1]):
        assert data_pointer(a) == a.__array_interface__["data"][0]


def test_data_ptr_aligned_passes_and_fails() -> None:
    """A 16-byte aligned array holds the guard built on another; one 4 bytes off fails it,
    with its pointer in the reason."""
    check = check_on(_at(0), GuardBuilder.DATA_PTR_ALIGNED)
    assert check.leaves[0].code() == "data_ptr(L['n']) % 16 == 0"
    assert accepts(check, _at(16)) and accepts(check, _at(32, n=9))
    off = _at(4)
    assert reason(check, off) == (
        f"data_ptr(L['n']) % 16 == 0 failed: the pointer is {hex(data_pointer(off))}")
    unaligned = check_on(_at(8), GuardBuilder.DATA_PTR_ALIGNED)
    assert unaligned.leaves[0].code() == "data_ptr(L['n']) % 16 != 0"
    assert accepts(unaligned, _at(4)) and not accepts(unaligned, _at(0))


def test_data_ptr_aligned_type_is_exact() -> None:
    """The guard pins the exact type: a list fails it, saying so; building on one says
    there is no data pointer."""
    check = check_on(_at(0), GuardBuilder.DATA_PTR_ALIGNED)
    assert reason(check, [1.0]) == (
        "data_ptr(L['n']) % 16 == 0 failed: expected type ndarray, got list")
    with pytest.raises(GuardKindError, match=r"DATA_PTR_ALIGNED on L\['n'\]: no data pointer"):
        check_on([1.0], GuardBuilder.DATA_PTR_ALIGNED)


class Tensorish:
    """An object with ``data_ptr()``, as torch tensors have (Triton's convention)."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def data_ptr(self) -> int:
        return self.ptr


def test_data_ptr_method_is_used() -> None:
    """A type with ``data_ptr`` is read through it."""
    check = check_on(Tensorish(4096), GuardBuilder.DATA_PTR_ALIGNED)
    assert accepts(check, Tensorish(48)) and not accepts(check, Tensorish(40))
    assert reason(check, Tensorish(40)).endswith("the pointer is 0x28")


def test_data_ptr_other_alignment() -> None:
    """data_ptr_kind(64) guards 64-byte alignment, as a kind of its own."""
    fn = data_ptr_kind(64)
    assert data_ptr_kind(64) is fn and data_ptr_kind(16) is GuardBuilder.DATA_PTR_ALIGNED
    check = check_on(Tensorish(128), fn)
    assert check.leaves[0].code() == "data_ptr(L['n']) % 64 == 0"
    assert accepts(check, Tensorish(64)) and not accepts(check, Tensorish(32))
    with pytest.raises(GuardKindError, match="align must be a power of two"):
        data_ptr_kind(24)


def test_triton_style_dispatch() -> None:
    """A kernel launcher guarding (pointer alignment, n's class) hits one entry per
    combination, with an exact key of two dims."""

    def compiler(request: Any) -> Any:
        request.add_guard("x", GuardBuilder.DATA_PTR_ALIGNED)
        request.add_guard("n", GuardBuilder.INT_CLASS)
        x, n = request.values
        key = (data_pointer(x) % 16 == 0, int_class(n))
        return lambda x, n: key

    by_type = ArgPolicy()
    by_type.register(np.ndarray, lambda ctx, source, value: ctx.by_type(source, value))
    f = specialize(lambda x, n: None, compiler=compiler, dynamic=["n"], policy=by_type,
                   global_state=False)
    calls = [(_at(0), 32), (_at(4), 32), (_at(16), 64), (_at(8), 7), (_at(0), 7)]
    assert [f(x, n) for x, n in calls] == [
        (True, ("i32", 16)), (False, ("i32", 16)), (True, ("i32", 16)), (False, ("i32", 0)),
        (True, ("i32", 0))]
    cache = cache_of(f)
    assert cache.stats().compiles == 4
    head = cache.dispatcher.source.splitlines()[0]
    assert "x:data_ptr_16" in head and "n:int_class" in head and head.endswith(", exact")
