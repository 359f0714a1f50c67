"""Tests for jitguard._src.cache.reasons: recompile reasons, the jitguard.recompiles logger,
records and per-guard counts."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from jitguard import GuardFailure, RecompileRecord, cache_of, specialize
from jitguard._src.cache.reasons import EntryFailures, failure_key, format_recompile


def test_reason_lines_name_entry_and_guard(caplog: pytest.LogCaptureFixture) -> None:
    """Each recompile logs "<compile id>: <reason>" for every existing entry."""
    f = specialize(lambda n, s: n, automatic_dynamic=False)
    with caplog.at_level(logging.INFO, logger="jitguard.recompiles"):
        f(7, "a")
        first = cache_of(f).compile_ids()[0]
        f(8, "a")
        f(8, "b")
    ids = [str(e.compile_id) for e in sorted(cache_of(f).entries(), key=lambda e: e.seq)]
    assert cache_of(f).reasons() == [
        f"{ids[0]}: L['n'] == 7 failed: got 8",
        f"{ids[0]}: L['n'] == 7 failed: got 8",
        f"{ids[0]}: L['s'] == 'a' failed: got 'b'",
        f"{ids[1]}: L['s'] == 'a' failed: got 'b'",
    ]
    records = [r for r in caplog.records if r.name == "jitguard.recompiles"]
    assert len(records) == 2 and records[0].levelno == logging.INFO
    message = records[0].getMessage()
    assert message.startswith("Recompiling function test_reason_lines_name_entry_and_guard")
    assert f"    - {first}: L['n'] == 7 failed: got 8" in message


def test_first_compile_logs_no_reasons(caplog: pytest.LogCaptureFixture) -> None:
    """The first compile is not a recompile: nothing is logged."""
    f = specialize(lambda n: n)
    with caplog.at_level(logging.INFO, logger="jitguard.recompiles"):
        f(1)
    assert not [r for r in caplog.records if r.name == "jitguard.recompiles"]
    assert cache_of(f).recompiles == ()


def test_records_keep_the_new_compile_id() -> None:
    """A RecompileRecord names the entry it made and the failures of each older entry."""
    f = specialize(lambda n: n, automatic_dynamic=False)
    f(1), f(2)
    (record,) = cache_of(f).recompiles
    ids = sorted(cache_of(f).compile_ids(), key=str)
    assert isinstance(record, RecompileRecord)
    assert record.compile_id == ids[1] and record.outcome == "compiled"
    assert [e.compile_id for e in record.entries] == [ids[0]]
    assert str(record) == f"{ids[0]}: L['n'] == 1 failed: got 2"


def test_type_failures_read_like_torch() -> None:
    """A type failure names the expected and the actual type."""
    f = specialize(lambda x: x)
    f(1.5), f("s")
    (reason,) = cache_of(f).reasons()
    assert reason.endswith("L['x'] == 1.5 failed: got 's' (str, expected float)")


def test_failures_counted_per_guard() -> None:
    """Each guard that failed is counted, on its entry and for the function."""
    f = specialize(lambda n, s: n, automatic_dynamic=False)
    f(1, "a")
    f(2, "a")
    f(3, "a")
    counts = cache_of(f).guard_failure_counts()
    assert counts == {"EQUALS_MATCH L['n']": 3}
    oldest = min(cache_of(f).entries(), key=lambda e: e.seq)
    assert oldest.failure_counts["EQUALS_MATCH L['n']"] == 2


def test_made_dynamic_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """When an int becomes dynamic the log line says so."""
    f = specialize(lambda n: n)
    with caplog.at_level(logging.INFO, logger="jitguard.recompiles"):
        f(1), f(2)
    (record,) = cache_of(f).recompiles
    assert record.made_dynamic == ("L['n']",)
    assert "now dynamic (an int changed value): L['n']" in caplog.text


def test_entry_failures_lines_and_keys() -> None:
    """EntryFailures formats one line per failure; failure_key names kind and sources."""
    from jitguard import CompileId

    cid = CompileId(frame_id=3, frame_compile_id=1)
    failure = GuardFailure("L['x'] is None failed: got 1", "NONE_MATCH", ("L['x']",))
    assert EntryFailures(cid, (failure,)).lines() == ["3/1: L['x'] is None failed: got 1"]
    assert EntryFailures(cid, ()).lines() == ["3/1: (no guard failed when re-evaluated)"]
    assert failure_key(failure) == "NONE_MATCH L['x']"
    assert failure_key(GuardFailure("x", "GLOBAL_STATE", ())) == "GLOBAL_STATE"
    text = format_recompile("f in x.py:1", cid, [EntryFailures(cid, (failure,))], ["L['n']"])
    assert text.splitlines()[0] == "Recompiling function f in x.py:1 as 3/1"


def test_explain_errors_do_not_break_the_call() -> None:
    """An entry whose explanation raises still yields a reason line."""
    from jitguard._src.cache.reasons import collect_failures

    class Broken:
        compile_id = "9/9"

        class check:
            @staticmethod
            def explain(*values: Any) -> Any:
                raise ValueError("boom")

    (item,) = collect_failures([Broken()], (1,))  # type: ignore[list-item]
    assert item.failures[0].kind == "UNEXPLAINED" and "boom" in item.failures[0].reason
