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


def test_recompile_message_gives_user_stacks_beyond_the_function() -> None:
    """With user_stack, a failure is followed by its guard's user stack (frame and source
    line each, prefixed like the reasons); frames that are only the function's definition
    are left out; reasons() stays one line."""
    import traceback

    from jitguard import CompileId

    cid = CompileId(frame_id=3, frame_compile_id=1)
    fn_frame = traceback.FrameSummary("x.py", 1, "f", lookup_line=False)
    stack = traceback.StackSummary.from_list([fn_frame, ("x.py", 4, "g", "y = n + 1")])
    failure = GuardFailure("L['n'] == 7 failed: got 8", "EQUALS_MATCH", ("L['n']",),
                           user_stack=stack)
    per_entry = [EntryFailures(cid, (failure,))]
    text = format_recompile("f in x.py:1", cid, per_entry, user_stack=True, fn_frame=fn_frame)
    assert text.splitlines()[2:] == [
        "    - 3/1: L['n'] == 7 failed: got 8",
        "    - User stack trace:",
        '    -   File "x.py", line 4, in g',
        "    -     y = n + 1",
    ]
    only_def = GuardFailure("L['n'] == 7 failed: got 8", "EQUALS_MATCH", ("L['n']",),
                            user_stack=traceback.StackSummary.from_list([fn_frame]))
    text = format_recompile("f in x.py:1", cid, [EntryFailures(cid, (only_def,))],
                            user_stack=True, fn_frame=fn_frame)
    assert "User stack trace" not in text
    assert "User stack trace" not in format_recompile("f in x.py:1", cid, per_entry)
    assert per_entry[0].lines() == ["3/1: L['n'] == 7 failed: got 8"]


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


def test_history_keeps_the_last_records_and_counts_all() -> None:
    """history=K keeps the last K records; recompile_counts counts every one."""
    f = specialize(lambda n: n, automatic_dynamic=False, recompile_limit=None, history=3)
    for v in range(10):
        f(v)
    cache = cache_of(f)
    assert len(cache.recompiles) == 3 and cache.recompile_counts == {"compiled": 9}
    assert [r.compile_id for r in cache.recompiles] == cache.compile_ids()[-3:]
    with pytest.raises(ValueError, match="history must be an int >= 0"):
        specialize(lambda n: n, history=-1)


def test_default_history_is_64() -> None:
    """By default the last 64 recompiles are kept."""
    f = specialize(lambda n: n, automatic_dynamic=False, recompile_limit=None)
    for v in range(70):
        f(v)
    assert len(cache_of(f).recompiles) == 64
    assert cache_of(f).recompile_counts["compiled"] == 69


def test_reasons_cover_the_closest_entries_and_count_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With more entries than are explained, the reasons cover 8 and count the others."""
    f = specialize(lambda n: n, automatic_dynamic=False, recompile_limit=None)
    for v in range(20):
        f(v)
    with caplog.at_level(logging.INFO, logger="jitguard.recompiles"):
        f(100)
    record = cache_of(f).recompiles[-1]
    assert len(record.entries) == 8 and record.unexplained == 12
    assert all(line.endswith("failed: got 100") for line in record.reasons())
    assert "(and 12 other entries, not explained)" in caplog.text
    assert str(record).endswith("(and 12 other entries, not explained)")


def test_reasons_are_explained_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no logger listening, a miss explains nothing; reading the reasons does, once."""
    from jitguard._src.cache import reasons as reasons_module

    calls = []
    real = reasons_module.explain_entry

    def counting(entry: Any, values: Any) -> Any:
        calls.append(entry.compile_id)
        return real(entry, values)

    monkeypatch.setattr(reasons_module, "explain_entry", counting)
    f = specialize(lambda n: n, automatic_dynamic=False, recompile_limit=None)
    logging.getLogger("jitguard.recompiles").setLevel(logging.WARNING)
    try:
        for v in range(30):
            f(v)
    finally:
        logging.getLogger("jitguard.recompiles").setLevel(logging.NOTSET)
    assert calls == []
    first = cache_of(f).reasons()
    assert len(calls) == sum(min(8, i) for i in range(1, 30))
    assert cache_of(f).reasons() == first and len(calls) == sum(min(8, i) for i in range(1, 30))
    assert first[0].endswith("L['n'] == 0 failed: got 1")


def test_values_that_may_change_are_explained_at_once() -> None:
    """A list argument is explained at the miss, not kept: changing it later does not change
    the reason, and the record holds no reference to it."""
    import weakref

    class Box:
        pass

    f = specialize(lambda xs, box: xs, automatic_dynamic=False)
    xs = [1]
    f(xs, Box())
    xs.append(2)
    box = Box()
    f(xs, box)
    xs.append(3)
    (reason,) = [r for r in cache_of(f).reasons() if "L['xs']" in r]
    assert reason.endswith("len(L['xs']) == 1 failed: got 2")
    record = cache_of(f).recompiles[-1]
    assert record.explained
    ref = weakref.ref(box)
    del box
    import gc

    gc.collect()
    assert ref() is None


def test_reasons_of_an_evicted_entry_say_so() -> None:
    """A lazy record read after its entry was evicted says the entry is gone."""
    f = specialize(lambda n: n, maxsize=1, automatic_dynamic=False)
    f(1), f(2), f(3)
    assert [line.split(": ", 1)[1] for line in cache_of(f).reasons()] == [
        "(entry gone: not explained)", "(entry gone: not explained)"
    ]


def _cid() -> Any:
    from jitguard import CompileId

    return CompileId(frame_id=3, frame_compile_id=1)


def _eq(name: str, want: int, got: int, stack: Any = None) -> GuardFailure:
    return GuardFailure(f"L['{name}'] == {want} failed: got {got}", "EQUALS_MATCH",
                        (f"L['{name}']",), user_stack=stack)


def test_log_message_gives_each_entrys_first_failure_and_a_count() -> None:
    """By default the message gives each entry's first failure and "(+N more)"; verbose
    gives every failure; a text given twice is given once."""
    entry = EntryFailures(_cid(), (_eq("a", 1, 2), _eq("b", 1, 2), _eq("a", 1, 2),
                                   _eq("c", 1, 2)))
    short = format_recompile("f in x.py:1", _cid(), [entry])
    assert short.splitlines()[2:] == ["    - 3/1: L['a'] == 1 failed: got 2 (+2 more)"]
    full = format_recompile("f in x.py:1", _cid(), [entry], verbose=True)
    assert full.splitlines()[2:] == [
        "    - 3/1: L['a'] == 1 failed: got 2",
        "    - 3/1: L['b'] == 1 failed: got 2",
        "    - 3/1: L['c'] == 1 failed: got 2",
    ]
    assert entry.lines() == ["3/1: L['a'] == 1 failed: got 2", "3/1: L['b'] == 1 failed: got 2",
                             "3/1: L['c'] == 1 failed: got 2"]


def test_torch_names_write_locals_as_torch_does() -> None:
    """With torch_names, L['x'] is written x (as torch.compile's recompile log writes it);
    G['x'], an attribute named L and text with no local are left as they are."""
    from jitguard._src.cache.reasons import display

    assert display("tensor 'L['a']' size mismatch") == "tensor 'a' size mismatch"
    assert display("len(L['xs']) == 3") == "len(xs) == 3"
    assert display('L["self"]._modules[\'2\'].training') == "self._modules['2'].training"
    assert display("G['L'] == 1 and o.L['k'] == 2") == "G['L'] == 1 and o.L['k'] == 2"
    entry = EntryFailures(_cid(), (_eq("n", 7, 8),))
    assert entry.lines(torch_names=True) == ["3/1: n == 7 failed: got 8"]
    assert entry.lines() == ["3/1: L['n'] == 7 failed: got 8"]


def test_user_stacks_keep_user_frames_only(tmp_path: Any) -> None:
    """Frames in a library's files (hide_frames_under: jitguard's own, torch's once the
    integration is loaded) are left out of a user stack; with none left, no stack."""
    import traceback

    from jitguard._src.cache import reasons

    lib = tmp_path / "lib"
    lib_frame = (str(lib / "container.py"), 253, "forward", "input = module(input)")
    user_frame = (str(tmp_path / "model.py"), 9, "forward", "return self.net(x)")
    stack = traceback.StackSummary.from_list([user_frame, lib_frame])
    reasons.hide_frames_under(str(lib))
    try:
        text = format_recompile("f", _cid(), [EntryFailures(_cid(), (_eq("n", 7, 8, stack),))],
                                user_stack=True)
        assert "model.py" in text and "container.py" not in text
        only_lib = traceback.StackSummary.from_list([lib_frame])
        text = format_recompile("f", _cid(), [EntryFailures(_cid(), (_eq("n", 7, 8, only_lib),))],
                                user_stack=True)
        assert "User stack trace" not in text
    finally:
        reasons._LIBRARY_DIRS.remove(str(lib) + "/")


def test_recompile_logger_picks_the_verbose_form(caplog: pytest.LogCaptureFixture) -> None:
    """recompiles at INFO: the short form; at DEBUG (+recompiles): every failure; the
    recompiles_verbose log on: the verbose form there, and nothing on recompiles."""
    f = specialize(lambda a, b: a, automatic_dynamic=False)
    f(1, 1)
    with caplog.at_level(logging.INFO, logger="jitguard.recompiles"):
        f(2, 2)
    (message,) = [r.getMessage() for r in caplog.records if r.name == "jitguard.recompiles"]
    assert message.splitlines()[2].endswith("L['a'] == 1 failed: got 2 (+1 more)")
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="jitguard.recompiles"):
        f(3, 3)
    (message,) = [r.getMessage() for r in caplog.records if r.name == "jitguard.recompiles"]
    assert "L['b'] == 1 failed: got 3" in message and "more)" not in message
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="jitguard.recompiles_verbose"):
        f(4, 4)
    names = [r.name for r in caplog.records if r.name.startswith("jitguard.recompiles")]
    assert names == ["jitguard.recompiles_verbose"]
    assert "L['b'] == 2 failed: got 4" in caplog.records[-1].getMessage()
