"""CapturedStack: cheap capture of (code, line) pairs, formatted on demand; format_frame."""

from __future__ import annotations

import linecache
import sys
import traceback
from typing import Any

import pytest

from jitguard import CapturedStack
from jitguard._src.stacks import format_frame


def _capture(**kwargs: Any) -> CapturedStack:
    return CapturedStack.extract(**kwargs)


def _outer(**kwargs: Any) -> CapturedStack:
    return _capture(**kwargs)


def test_extract_is_oldest_first_ending_at_caller() -> None:
    """The innermost captured frame is the caller of extract; order is oldest first."""
    names = [fs.name for fs in _outer().summary()]
    assert names[-2:] == ["_outer", "_capture"]
    assert "test_extract_is_oldest_first_ending_at_caller" in names[:-2]


def test_extract_records_the_calling_line() -> None:
    """Each captured frame records the line being executed."""
    line = sys._getframe().f_lineno + 1
    stack = CapturedStack.extract()
    last = stack.summary()[-1]
    assert (last.filename, last.lineno, last.name) == (
        __file__,
        line,
        "test_extract_records_the_calling_line",
    )


def test_extract_skip_drops_innermost_frames() -> None:
    """skip=n drops n more innermost frames."""
    assert _outer(skip=1).summary()[-1].name == "_outer"
    assert len(_outer(skip=1)) == len(_outer()) - 1


def test_extract_limit_keeps_innermost() -> None:
    """limit keeps only that many innermost frames."""
    stack = _outer(limit=2)
    assert len(stack) == 2
    assert [fs.name for fs in stack.summary()] == ["_outer", "_capture"]


def test_extract_reads_no_source_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Capturing touches no file: linecache is not consulted until format()."""

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("linecache used during capture")

    for name in ("getline", "getlines", "checkcache", "updatecache", "lazycache"):
        monkeypatch.setattr(linecache, name, boom)
    stack = CapturedStack.extract()
    assert len(stack) > 0
    monkeypatch.undo()
    assert any("stack = CapturedStack.extract()" in line for line in stack.format())


def test_summary_and_format() -> None:
    """summary() is a StackSummary with source lines; format() matches traceback.format_list."""
    stack = CapturedStack.extract()
    summary = stack.summary()
    assert isinstance(summary, traceback.StackSummary)
    assert summary[-1].line == "stack = CapturedStack.extract()"
    lines = stack.format()
    assert lines == traceback.format_list(summary)
    assert lines[-1].startswith(f'  File "{__file__}", line ')
    assert "in test_summary_and_format" in lines[-1]


def test_repr_counts_frames() -> None:
    """repr says how many frames were captured."""
    stack = _outer(limit=3)
    assert repr(stack) == "<CapturedStack of 3 frames>"


def test_format_frame() -> None:
    """format_frame gives 'file:line in name', '' for None and strings unchanged."""
    fs = traceback.FrameSummary("a.py", 3, "f", lookup_line=False, line="x = 1  ")
    assert format_frame(fs) == "a.py:3 in f"
    assert format_frame(fs, line=True) == "a.py:3 in f\n    x = 1"
    assert format_frame(None) == ""
    assert format_frame("given") == "given"
    no_line = traceback.FrameSummary("a.py", 3, "f", lookup_line=False)
    assert format_frame(no_line, line=True) == "a.py:3 in f"


def test_lines_reads_no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """lines() gives (file, line, name) per frame, oldest first, without linecache."""
    line = sys._getframe().f_lineno + 1
    stack = _outer()
    expected = [(fs.filename, fs.lineno, fs.name) for fs in stack.summary()]

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("linecache used by lines()")

    for name in ("getline", "getlines", "checkcache", "updatecache", "lazycache"):
        monkeypatch.setattr(linecache, name, boom)
    got = stack.lines()
    assert got == expected
    assert got[-3] == (__file__, line, "test_lines_reads_no_file")
