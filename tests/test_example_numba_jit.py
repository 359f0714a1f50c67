"""Tests for examples/numba_jit.py: the Numba JIT written on jitguard gives Numba's own
answers and compiles once per argument types (skipped without numba)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")
numba = pytest.importorskip("numba")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
from numba_jit import myjit  # noqa: E402

import jitguard as jg  # noqa: E402


def describe(x: Any) -> Any:
    return x


def unaligned() -> Any:
    raw = np.zeros(8 * 4 + 1, dtype=np.uint8)
    out = raw[1:].view(np.float64)
    assert not out.flags.aligned
    return out


def readonly() -> Any:
    out = np.arange(3.0)
    out.setflags(write=False)
    return out


CASES: list[Any] = [
    1, -2, 1.5, -0.0, 0.0, 2j, True, np.float32(1.5), np.int64(3), np.float64(2.0),
    np.arange(4.0), np.arange(4, dtype=np.float32), np.arange(4, dtype=np.int64),
    np.arange(8.0)[::2], np.ones((2, 3)), np.asfortranarray(np.ones((2, 3))), readonly(),
    unaligned(),
]


def test_every_case_matches_numba_and_compiles_once_per_type() -> None:
    """Each case gives Numba's result and Numba's type; repeating a call is a hit; there is
    one entry per Python type and Numba type (``1`` and ``np.int64(1)`` are both int64 to
    Numba, two types to the guards; numpy scalars by type too), whose artifact is an overload's C entry point."""
    ours = myjit(describe)
    theirs = numba.njit(describe)
    for x in CASES:
        for _ in range(2):
            got, want = ours(x), theirs(x)
            assert type(got) is type(want) and numba.typeof(got) == numba.typeof(want)
            assert np.array_equal(got, want) if isinstance(want, np.ndarray) else got == want
    cache = jg.cache_of(ours)
    # Numba types an unaligned array as aligned; the example's guards tell them apart.
    kinds = {(type(x), numba.typeof(x), getattr(getattr(x, "flags", None), "aligned", None))
             for x in CASES}
    assert len(cache.entries()) == len(kinds) == 15
    for x in CASES:
        entry = cache.lookup(x)
        assert entry is not None
        # The overload's C entry point itself, no Python wrapper around it.
        assert type(entry.artifact) is type(theirs.overloads[(numba.typeof(x),)].entry_point)


def test_new_dtype_is_one_recompile_with_a_reason() -> None:
    """An array of a new dtype compiles one more entry, and the reason names the dtype."""
    ours = myjit(describe)
    ours(np.zeros(3))
    ours(np.zeros(3, dtype=np.float32))
    ours(np.zeros(3, dtype=np.float32))
    cache = jg.cache_of(ours)
    assert len(cache.entries()) == 2
    assert len(cache.recompiles) == 1
    (reason,) = cache.reasons()
    assert reason.endswith("expected dtype float64, got float32"), reason


def test_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The example script runs and reports its entries."""
    runpy.run_path(str(EXAMPLES / "numba_jit.py"), run_name="__main__")
    assert "5 entries" in capsys.readouterr().out


def test_past_the_limit_numbas_dispatcher_serves_the_call() -> None:
    """With ``limit=2``, a third argument type is not compiled by jitguard: Numba's own
    dispatcher answers it (after one RecompileLimitWarning), and the entries stay two."""
    ours = myjit(describe, limit=2)
    ours(1)
    ours(1.5)
    with pytest.warns(jg.RecompileLimitWarning):
        assert ours(2j) == 2j
    assert ours(np.arange(3.0)).tolist() == [0.0, 1.0, 2.0]
    cache = jg.cache_of(ours)
    assert len(cache.entries()) == 2 and cache.stats().fallbacks == 2
    assert isinstance(cache.fallback, numba.core.registry.CPUDispatcher)
    assert len(cache.fallback.overloads) == 4  # compiled by Numba: the two past the limit too
