"""Tests for jitguard._src.torch.global_reads: recording which code of one module ran."""

from __future__ import annotations

import sys
from typing import Any

import pytest

pytest.importorskip("torch")

from jitguard._src.torch.global_reads import codes_run_with


def _helper() -> int:
    return 1


def test_records_code_run_with_the_root_globals_only() -> None:
    """Functions of this module that ran are recorded; code of other modules is not."""
    import json

    with codes_run_with(globals()) as seen:
        _helper()
        json.dumps([1])
    assert seen is not None
    codes = seen[id(globals())]
    assert _helper.__code__ in codes and all(code.co_filename == __file__ for code in codes)
    assert sys.getprofile() is None


def test_chains_a_python_profile_function() -> None:
    """A Python profile function set before keeps receiving events, and is put back."""
    events: list[str] = []

    def mine(frame: Any, event: str, arg: Any) -> None:
        events.append(event)

    sys.setprofile(mine)
    try:
        with codes_run_with(globals()) as seen:
            _helper()
        assert sys.getprofile() is mine
    finally:
        sys.setprofile(None)
    assert seen is not None and _helper.__code__ in seen[id(globals())] and "call" in events


def test_nothing_recorded_under_a_c_profiler() -> None:
    """Under a C profiler (cProfile) nothing is recorded and the profiler keeps running."""
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    try:
        with codes_run_with(globals()) as seen:
            _helper()
        assert seen is None and sys.getprofile() is not None
    finally:
        prof.disable()


class _Autovivify:
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name != "__wrapped__":
            raise AttributeError(name)
        return _Autovivify()  # every attribute, __wrapped__ included, is a new object


class _Raising:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("working outside of request context")


OPTS = _Autovivify()
REQUEST = _Raising()


def _names_them() -> Any:
    return OPTS, REQUEST


def test_compile_survives_hostile_globals() -> None:
    """Globals whose ``__getattr__`` makes up values (``__wrapped__`` too) or raises do not
    break a compile of a function in their module, and it still runs traced."""
    import torch

    import jitguard.torch as jgt

    cf = jgt.compile(lambda x: x + 1)
    assert cf(torch.ones(2)).tolist() == [2.0, 2.0]
    (info,) = jgt.traced_info(cf).values()
    assert info.fallback_reason is None
