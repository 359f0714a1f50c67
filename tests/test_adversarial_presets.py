"""Adversarial tests of the policy presets ("types", "triton") in both dispatch modes: values
whose type looks like an array's or a pointer's but that cannot be read as one, pointer
arguments whose ``dtype``/``device`` live on the instance or are no constants. The compiler
memoizes (the artifact returns what ``fn`` returned on the compile's own arguments), so an
entry served to a call its guards do not pin returns a stale answer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from _helpers import preset
from jitguard import cache_of

pytestmark = pytest.mark.usefixtures("dispatch_mode")


class Wrapper:
    """Triton's ``TensorWrapper`` shape: ``data_ptr`` on the class, ``dtype`` and ``device``
    on the instance."""

    def __init__(self, base: Any, dtype: Any, device: Any = "cpu") -> None:
        self.base = base
        self.dtype = dtype
        self.device = device

    def data_ptr(self) -> int:
        return int(self.base.__array_interface__["data"][0])


class Flaky:
    """An ``__array_interface__`` that exists only while ``ok``."""

    def __init__(self, ok: bool) -> None:
        self.ok = ok

    @property
    def __array_interface__(self) -> Any:
        if not self.ok:
            raise AttributeError("no interface now")
        return np.zeros(3).__array_interface__


class ListInterface:
    __array_interface__ = [1, 2]


class GpuDLPack:
    def __dlpack__(self, **kwargs: Any) -> Any:
        raise RuntimeError("not on the CPU")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)


class Dtype:
    """A dtype object that is no constant (``==`` by name, as a JIT's own dtype class)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return True  # lies: every Dtype is "equal"

    def __hash__(self) -> int:
        return 0


@pytest.mark.parametrize("policy", ["types", "triton"])
def test_array_like_types_that_refuse_are_served(policy: str) -> None:
    """A value whose type looks like an array's but cannot be read as one is served by the
    plain answer, never a GuardKindError."""
    f = preset(lambda x: (type(x).__name__, getattr(x, "ok", None)), policy)
    for value in [Flaky(True), Flaky(False), ListInterface(), GpuDLPack(), Flaky(True)]:
        assert f(value) == (type(value).__name__, getattr(value, "ok", None))


@pytest.mark.parametrize("policy", ["types", "triton"])
def test_array_like_that_stops_being_readable_misses(policy: str) -> None:
    """An entry made for a readable ``__array_interface__`` never serves the same object
    once its interface raises; another readable one still hits it."""
    f = preset(lambda x: x.ok, policy)
    x = Flaky(True)
    assert f(x) is True
    x.ok = False
    assert f(x) is False
    assert f(Flaky(True)) is True
    assert cache_of(f).stats().hits == 1


def test_triton_instance_dtype_and_device() -> None:
    """A pointer argument with ``dtype`` and ``device`` on the instance (Triton's
    TensorWrapper) is specialized on both: other values miss, equal ones hit."""
    base = np.zeros(8)
    f = preset(lambda p: (p.dtype, p.device), "triton")
    assert f(Wrapper(base, "fp8e4")) == ("fp8e4", "cpu")
    assert f(Wrapper(base, "fp8e5")) == ("fp8e5", "cpu")
    assert f(Wrapper(base, "fp8e4", "cuda:0")) == ("fp8e4", "cuda:0")
    assert f(Wrapper(base, "fp8e4")) == ("fp8e4", "cpu")
    assert cache_of(f).stats().compiles == 3


def test_triton_dtype_that_is_no_constant() -> None:
    """A ``dtype`` that is no constant (and whose ``==`` lies) is guarded by identity: another
    such object misses, the same one hits."""
    base = np.zeros(8)
    a, b = Dtype("a"), Dtype("b")
    f = preset(lambda p: p.dtype.name, "triton")
    assert f(Wrapper(base, a)) == "a"
    assert f(Wrapper(base, b)) == "b"
    assert f(Wrapper(base, a)) == "a"
    assert cache_of(f).stats().compiles == 2


def test_triton_pointer_without_dtype() -> None:
    """A ``data_ptr`` type whose instance has no ``dtype`` is served; one that gains a
    ``dtype`` later misses."""
    base = np.zeros(8)

    class Bare:
        def data_ptr(self) -> int:
            return int(base.__array_interface__["data"][0])

    f = preset(lambda p: getattr(p, "dtype", None), "triton")
    p = Bare()
    assert f(p) is None
    p.dtype = "fp16"  # type: ignore[attr-defined]
    assert f(p) == "fp16"


def test_triton_pointer_whose_data_ptr_fails() -> None:
    """A ``data_ptr()`` that raises or returns no int is guarded as an object, not a failed
    call."""
    class Broken:
        dtype = "fp32"

        def __init__(self, ptr: Any) -> None:
            self.ptr = ptr

        def data_ptr(self) -> Any:
            if self.ptr is None:
                raise RuntimeError("no storage")
            return self.ptr

    f = preset(lambda p: p.ptr, "triton")
    for ptr in [None, "16", 16, 17, None]:
        assert f(Broken(ptr)) == ptr


def test_triton_dtype_property_that_raises() -> None:
    """A pointer whose ``dtype`` property raises (some instances) is served as the plain
    function serves it, before and after entries for readable instances exist."""
    base = np.zeros(8)

    class Lazy:
        def __init__(self, dtype: Any, fail: bool) -> None:
            self._dtype, self.fail = dtype, fail

        @property
        def dtype(self) -> Any:
            if self.fail:
                raise RuntimeError("not materialized")
            return self._dtype

        def data_ptr(self) -> int:
            return int(base.__array_interface__["data"][0])

    def fn(p: Any) -> Any:
        try:
            return p.dtype
        except RuntimeError:
            return "failed"

    f = preset(fn, "triton")
    for p in [Lazy("a", True), Lazy("a", False), Lazy("b", True), Lazy("b", False),
              Lazy("a", False)]:
        assert f(p) == fn(p)
