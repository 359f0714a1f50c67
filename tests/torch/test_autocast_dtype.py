"""[Note: Autocast dtypes a capture did not read]: jitguard.torch.compile pins the autocast
dtypes only for a capture that could have baked one in; every other entry still misses
when a dtype changes while its device's autocast is on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402

X = torch.ones(2, 2)
_read = torch.get_autocast_dtype


@pytest.fixture(autouse=True)
def restore_autocast_dtypes() -> Iterator[None]:
    """Put back the CPU and CUDA autocast dtypes."""
    saved = {d: torch.get_autocast_dtype(d) for d in ("cpu", "cuda")}
    try:
        yield
    finally:
        for device, dtype in saved.items():
            torch.set_autocast_dtype(device, dtype)


def reads_cpu(x: Any) -> Any:
    return x.to(torch.get_autocast_dtype("cpu"))


def reads_cuda(x: Any) -> Any:
    return x.to(torch.get_autocast_gpu_dtype())


def reads_through_default(x: Any, get: Any = torch.get_autocast_dtype) -> Any:
    return x.to(get("cpu"))


def reads_through_alias(x: Any) -> Any:
    return x.to(_read("cpu"))


def reads_c_function(x: Any) -> Any:
    return x.to(torch._C.get_autocast_dtype("cpu"))


def enters_autocast(x: Any) -> Any:
    with torch.autocast("cpu"):
        return x @ x


READERS: list[tuple[Callable[..., Any], str]] = [
    (reads_cpu, "cpu"), (reads_cuda, "cuda"), (reads_through_default, "cpu"),
    (reads_through_alias, "cpu"), (reads_c_function, "cpu"), (enters_autocast, "cpu"),
]


def _other(dtype: Any) -> Any:
    return torch.float16 if dtype != torch.float16 else torch.bfloat16


@pytest.mark.parametrize(("fn", "device"), READERS, ids=[f.__name__ for f, _ in READERS])
def test_a_capture_that_reads_the_dtype_misses_when_it_changes(fn: Any, device: str) -> None:
    """A function that reads the autocast dtype (directly, through an alias or a default,
    or by entering torch.autocast) recompiles when the dtype changes with autocast off."""
    cf = jgt.compile(fn, isolate_recompiles=True)
    want = fn(X)
    torch.testing.assert_close(cf(X), want)
    torch.set_autocast_dtype(device, _other(torch.get_autocast_dtype(device)))
    got, want = cf(X), fn(X)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)
    assert jitguard.cache_of(cf).stats().compiles == 2


def plain(x: Any) -> Any:
    return x * 2 + 1


def test_a_capture_that_does_not_read_it_ignores_it_while_autocast_is_off() -> None:
    """A function that never reads the dtype keeps its entry when the dtype changes with
    autocast off, and misses when autocast is turned on (any dtype)."""
    cf = jgt.compile(plain, isolate_recompiles=True)
    torch.testing.assert_close(cf(X), plain(X))
    torch.set_autocast_dtype("cpu", _other(torch.get_autocast_dtype("cpu")))
    torch.set_autocast_dtype("cuda", _other(torch.get_autocast_dtype("cuda")))
    torch.testing.assert_close(cf(X), plain(X))
    assert jitguard.cache_of(cf).stats().compiles == 1
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.testing.assert_close(cf(X), plain(X))
    assert jitguard.cache_of(cf).stats().compiles == 2


def matmul(x: Any) -> Any:
    return x @ x


def test_a_dtype_change_while_autocast_is_on_misses() -> None:
    """With autocast on, the entry pins the dtype even when the function never reads it:
    the dtype decides what the graph computes."""
    cf = jgt.compile(matmul, isolate_recompiles=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.testing.assert_close(cf(X), matmul(X))
    with torch.autocast("cpu", dtype=torch.float16):
        got, want = cf(X), matmul(X)
    assert got.dtype == want.dtype == torch.float16
    assert jitguard.cache_of(cf).stats().compiles == 2
