"""Tests for jitguard._src.cache.stance: recompile limits, fallback and raise, and
forbidding recompiles."""

from __future__ import annotations

import gc
import logging
import warnings

import pytest

from jitguard import (
    RecompileError,
    RecompileLimitError,
    RecompileLimitWarning,
    cache_of,
    no_recompiles,
    specialize,
)
from jitguard._src.cache.stance import check_on_limit, recompiles_forbidden


def test_fallback_past_the_limit_warns_once() -> None:
    """Past the limit a miss runs fn uncompiled; the warning, with reasons, comes once."""
    calls: list[int] = []
    f = specialize(lambda n: calls.append(n) or n, recompile_limit=2, automatic_dynamic=False,
                   compiler=lambda r: (lambda n: ("compiled", n)))
    assert f(1) == ("compiled", 1) and f(2) == ("compiled", 2)
    with pytest.warns(RecompileLimitWarning, match=r"hit its recompile limit \(2\)") as w:
        assert f(3) == 3  # the original function ran
    assert "L['n'] == 1 failed: got 3" in str(w[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f(4) == 4  # no second warning
    assert calls == [3, 4]
    assert f(1) == ("compiled", 1)  # entries keep serving
    stats = cache_of(f).stats()
    assert stats.compiles == 2 and stats.fallbacks == 2 and stats.misses == 4


def test_limit_warning_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """The limit is also reported on the jitguard.recompiles logger."""
    f = specialize(lambda n: n, recompile_limit=1)
    f(1)
    with caplog.at_level(logging.INFO, logger="jitguard.recompiles"), \
            pytest.warns(RecompileLimitWarning):
        f(2)
    assert any(r.levelno == logging.INFO and "recompile limit (1)" in r.getMessage()
               for r in caplog.records)
    assert cache_of(f).recompiles[-1].outcome == "limit"


def test_raise_past_the_limit() -> None:
    """With on_limit='raise' every miss past the limit raises, with the reasons."""
    f = specialize(lambda n: n, recompile_limit=1, on_limit="raise")
    f(1)
    for _ in range(2):
        with pytest.raises(RecompileLimitError, match="L\\['n'\\] == 1 failed: got 2") as e:
            f(2)
    assert e.value.record.outcome == "limit"
    assert f(1) == 1
    assert cache_of(f).stats().compiles == 1


def test_no_recompiles_context() -> None:
    """Inside no_recompiles a recompile raises RecompileError; first compiles are fine."""
    f = specialize(lambda n: n, automatic_dynamic=False)
    with no_recompiles():
        assert recompiles_forbidden()
        assert f(1) == 1  # a first compile is allowed
        assert f(1) == 1
        with pytest.raises(RecompileError, match="forbidden") as e:
            f(2)
    assert not recompiles_forbidden()
    assert e.value.record.reasons()[0].endswith("L['n'] == 1 failed: got 2")
    assert cache_of(f).stats().compiles == 1
    assert f(2) == 2  # outside, it recompiles


def test_no_recompiles_nests() -> None:
    """Nested no_recompiles blocks stay in force until the outermost exits."""
    with no_recompiles():
        with no_recompiles():
            pass
        assert recompiles_forbidden()
    assert not recompiles_forbidden()


def test_error_on_recompile_flag() -> None:
    """specialize(error_on_recompile=True) forbids recompiles for that function."""
    f = specialize(lambda n: n, error_on_recompile=True)
    f(1)
    with pytest.raises(RecompileError):
        f(2)


def test_dropped_entries_still_count_toward_the_limit() -> None:
    """Entries dropped because their object died still count, so compiles stay bounded."""
    class Obj:
        pass

    f = specialize(lambda o: 1, recompile_limit=2)
    for _ in range(2):
        o = Obj()
        f(o)
        del o
        gc.collect()
    with pytest.warns(RecompileLimitWarning):
        f(Obj())
    assert cache_of(f).stats().compiles == 2


def test_on_limit_is_validated() -> None:
    """on_limit must be 'fallback' or 'raise'; the limit a positive int."""
    assert check_on_limit("raise") == "raise"
    with pytest.raises(ValueError):
        specialize(lambda: 0, on_limit="ignore")
    with pytest.raises(ValueError):
        specialize(lambda: 0, recompile_limit=0)


def generic(n: int) -> tuple[str, int]:
    """A stand-in for a JIT's generic dispatcher (numba's, say)."""
    return ("generic", n)


def test_named_fallback_is_called_past_the_limit() -> None:
    """fallback= names what a miss past the limit calls; the one warning names it, the
    function and the limit; fn itself is never called."""
    calls: list[int] = []
    f = specialize(lambda n: calls.append(n) or n, recompile_limit=2, automatic_dynamic=False,
                   compiler=lambda r: (lambda n: ("compiled", n)), fallback=generic)
    assert f(1) == ("compiled", 1) and f(2) == ("compiled", 2)
    with pytest.warns(RecompileLimitWarning) as w:
        assert f(3) == ("generic", 3)
    (warning,) = w
    text = str(warning.message)
    assert text.startswith("test_named_fallback_is_called_past_the_limit.<locals>.<lambda> in ")
    assert ("hit its recompile limit (2); a miss now calls the fallback "
            "test_cache_stance.generic. Last reasons:") in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [f(4), f(5)] == [("generic", 4), ("generic", 5)]  # no second warning
    assert calls == [] and f(1) == ("compiled", 1)
    assert cache_of(f).stats().fallbacks == 3


def test_fallback_needs_on_limit_fallback() -> None:
    """fallback= with on_limit='raise', or a fallback that is not callable, is refused."""
    with pytest.raises(ValueError, match="fallback= names what a call past the recompile limit "
                       "runs; it needs on_limit='fallback', got on_limit='raise'"):
        specialize(lambda n: n, on_limit="raise", fallback=generic)
    with pytest.raises(TypeError, match="fallback must be callable, got 3"):
        specialize(lambda n: n, fallback=3)  # type: ignore[arg-type]
