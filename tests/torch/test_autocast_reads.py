"""Tests for jitguard._src.torch.autocast_reads: which autocast dtypes a block reads."""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")

from jitguard._src.torch.autocast_reads import UNKNOWN, autocast_dtype_reads  # noqa: E402

READERS = ("get_autocast_dtype", "get_autocast_cpu_dtype", "get_autocast_gpu_dtype")


def test_records_each_reader_and_restores_torch() -> None:
    """Reads through torch.get_autocast_dtype and the deprecated per-device forms are
    recorded by device; afterwards torch's own readers are back in place."""
    before = {name: getattr(torch, name) for name in READERS}
    with autocast_dtype_reads() as access:
        assert torch.get_autocast_dtype is not before["get_autocast_dtype"]
        assert torch.get_autocast_dtype("cpu") == before["get_autocast_dtype"]("cpu")
        with pytest.warns(Warning):
            torch.get_autocast_gpu_dtype()
    assert access.dtypes == {"cpu", "cuda"} and access.direct_writes == []
    assert {name: getattr(torch, name) for name in READERS} == before


def test_autocast_entry_reads_its_device_dtype() -> None:
    """Entering torch.autocast reads that device's dtype, also with an explicit dtype, and
    its own setter calls are not direct writes."""
    with autocast_dtype_reads() as access:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pass
    assert access.dtypes == {"cpu"} and access.direct_writes == []


def test_device_strings_are_normalized() -> None:
    """A device string with an index counts as its device type; junk counts as every
    device."""
    with autocast_dtype_reads() as access:
        with torch.autocast("cpu:0"):
            pass
    assert access.dtypes == {"cpu"}
    with autocast_dtype_reads() as access:
        with pytest.raises(RuntimeError):
            torch.get_autocast_dtype("no-such-device")
    assert access.dtypes == {UNKNOWN}


def test_direct_setter_calls_are_recorded() -> None:
    """torch.set_autocast_enabled called by code outside torch.autocast is recorded with
    its caller's module."""
    with autocast_dtype_reads() as access:
        torch.set_autocast_enabled("cpu", True)
        torch.set_autocast_enabled("cpu", False)
    assert access.direct_writes == [f"torch.set_autocast_enabled from {__name__}"] * 2


def test_a_non_string_device_is_unknown() -> None:
    """A reader called with something that is not a device-type string records UNKNOWN."""
    with autocast_dtype_reads() as access:
        with pytest.raises(TypeError):
            torch.get_autocast_dtype(torch.device("cpu"))
    assert access.dtypes == {UNKNOWN}


def test_nested_blocks_and_other_threads() -> None:
    """An inner block's reads count for the outer one; a read on another thread counts for
    neither, and still answers."""
    answers = []
    with autocast_dtype_reads() as outer:
        with autocast_dtype_reads() as inner:
            torch.get_autocast_dtype("cuda")
        t = threading.Thread(target=lambda: answers.append(torch.get_autocast_dtype("cpu")))
        t.start()
        t.join()
    assert inner.dtypes == {"cuda"} and outer.dtypes == {"cuda"}
    assert answers == [torch.get_autocast_dtype("cpu")]


def test_nothing_recorded_outside_a_block() -> None:
    """Outside any block torch's reader is torch's own function."""
    assert torch.get_autocast_dtype is torch._C.get_autocast_dtype
