"""Tests for jitguard._src.compiler.codecache: the one home of generated code (readable file
names in linecache, reuse of compiled code, DEBUG logging), and that every generator uses it."""

from __future__ import annotations

import gc
import inspect
import linecache
import logging
import re
import traceback
from typing import Any

import pytest

from _helpers import record_compiles
from jitguard import GuardBuilder, LocalSource, compile_guards, specialize
from jitguard._src.compiler import codecache
from jitguard._src.compiler.codecache import (
    compile_generated,
    forget,
    generated_filename,
    internal_prefix,
)

TEXT = "def f(x):\n    return 10 // x\n"
SHOWN = "def f(x):\n    return 10 // x  # divides\n"


class Owner:
    """Something generated code can belong to."""


class CountingStr(str):
    """A str that counts how often it is formatted with ``%s`` or ``str()``."""

    formatted = 0

    def __str__(self) -> str:
        CountingStr.formatted += 1
        return str.__str__(self)


def test_generated_filename_says_what_and_counts() -> None:
    """File names read ``<jitguard WHAT#N>`` and never repeat."""
    a, b = generated_filename("check f"), generated_filename("check f")
    assert re.fullmatch(r"<jitguard check f#\d+>", a) and a != b


def test_internal_prefix_starts_no_given_name() -> None:
    """The prefix for made-up names lengthens until no name it must not shadow starts with it."""
    assert internal_prefix(["x", "y"]) == "___j"
    p = internal_prefix(iter(["___j", "___j_t", "x"]))
    assert p == "___j__" and not any(n.startswith(p) for n in ("___j", "___j_t", "x"))


def test_code_runs_under_its_file_name_with_the_shown_text() -> None:
    """The code runs under the file name; linecache, inspect and tracebacks show ``shown``."""
    filename = generated_filename("test")
    compiled = compile_generated(TEXT, filename, shown=SHOWN)
    ns: dict[str, Any] = {}
    compiled.run(ns)
    f = ns["f"]
    assert f(5) == 2 and f.__code__.co_filename == filename == compiled.filename
    assert "".join(linecache.getlines(filename)) == SHOWN
    assert inspect.getsource(f) == SHOWN
    with pytest.raises(ZeroDivisionError) as info:
        f(0)
    text = "".join(traceback.format_exception(info.value))
    assert f'File "{filename}", line 2, in f' in text and "# divides" in text
    forget(filename)
    assert filename not in linecache.cache


def test_function_picks_a_def_and_renames_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``function`` returns one def with the given globals, under a new name if asked."""
    monkeypatch.setattr(codecache, "RENAME_INTERNS", False)
    compiled = compile_generated("def ___g():\n    return k\n", generated_filename("test"))
    g = compiled.function("___g", {"k": 7}, name="check_mine")
    assert g() == 7 and g.__name__ == "check_mine" and g.__code__.co_name == "check_mine"
    with pytest.raises(LookupError, match="defines no function 'nope'"):
        compiled.function("nope", {})
    forget(compiled.filename)


def test_same_text_compiles_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """An identical text reuses the compiled code, each use under its own file name."""
    calls = record_compiles(monkeypatch)
    a = compile_generated(TEXT, generated_filename("a"))
    b = compile_generated(TEXT, generated_filename("b"), shown=SHOWN)
    assert calls == [TEXT]
    ns_a: dict[str, Any] = {}
    ns_b: dict[str, Any] = {}
    a.run(ns_a)
    b.run(ns_b)
    assert ns_a["f"].__code__.co_filename == a.filename
    assert ns_b["f"].__code__.co_filename == b.filename
    assert ns_a["f"](2) == ns_b["f"](2) == 5
    compile_generated(TEXT + "\n", generated_filename("c"))
    assert len(calls) == 2
    forget(a.filename, b.filename)


def test_cache_keeps_the_most_recently_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``CACHE_SIZE`` texts the least recently used one is compiled again."""
    calls = record_compiles(monkeypatch)
    monkeypatch.setattr(codecache, "CACHE_SIZE", 2)
    texts = [f"x = {i}\n" for i in range(3)]
    for text in (texts[0], texts[1], texts[0], texts[2], texts[0], texts[1]):
        forget(compile_generated(text, generated_filename("lru")).filename)
    # texts[2] pushed out texts[1] (texts[0] had just been used): 0, 1, 2, then 1 again.
    assert calls == [texts[0], texts[1], texts[2], texts[1]]


def test_owner_takes_the_linecache_entry_along() -> None:
    """With an owner, the linecache entry goes when the owner is collected."""
    owner = Owner()
    filename = compile_generated(TEXT, generated_filename("owned"), owner=owner).filename
    assert linecache.getlines(filename)
    del owner
    gc.collect()
    assert filename not in linecache.cache


def test_syntax_error_propagates() -> None:
    """A generator bug surfaces as the SyntaxError itself."""
    with pytest.raises(SyntaxError):
        compile_generated("def (:\n", generated_filename("broken"))


def test_logged_at_debug_and_formatted_only_then(caplog: pytest.LogCaptureFixture) -> None:
    """The shown text is logged at DEBUG on jitguard.codegen; with the logger off it is not
    even formatted."""
    shown = CountingStr(SHOWN)
    CountingStr.formatted = 0
    with caplog.at_level(logging.INFO, logger="jitguard.codegen"):
        forget(compile_generated(TEXT, generated_filename("quiet"), shown=shown).filename)
    assert CountingStr.formatted == 0 and not caplog.records
    with caplog.at_level(logging.DEBUG, logger="jitguard.codegen"):
        filename = compile_generated(TEXT, generated_filename("loud"), shown=shown).filename
    forget(filename)
    (record,) = caplog.records
    assert record.name == "jitguard.codegen" and record.levelno == logging.DEBUG
    assert record.getMessage() == f"generated {filename}:\n{SHOWN}"


def test_every_generator_goes_through_it(caplog: pytest.LogCaptureFixture) -> None:
    """Check functions, the signature and the dispatcher are all logged, each under its own
    readable file name that linecache knows."""
    with caplog.at_level(logging.DEBUG, logger="jitguard.codegen"):
        check = compile_guards(
            [LocalSource("n").make_guard(GuardBuilder.EQUALS_MATCH)],
            f_locals={"n": 3}, arg_names=["n"], name="mine",
        )

        @specialize(compiler=lambda request: request.fn)
        def twice(n: int) -> int:
            return 2 * n

        assert twice(4) == 8
    names = [re.match(r"generated (<jitguard .*>):\n", r.getMessage()) for r in caplog.records]
    filenames = [m.group(1) for m in names if m]
    assert len(filenames) == len(caplog.records)
    assert check.filename in filenames and linecache.getlines(check.filename)
    (signature,) = [f for f in filenames if f.startswith("<jitguard signature#")]
    assert linecache.getlines(signature)
    # The dispatcher regenerates as entries come; the file of the one installed stays.
    dispatchers = [f for f in filenames if f.startswith("<jitguard dispatch twice#")]
    assert dispatchers and linecache.getlines(dispatchers[-1])


def test_where_renaming_interns_a_function_keeps_the_text_code_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """[Note: Code names on 3.13]: with RENAME_INTERNS (CPython 3.13) a function asked for under
    a name of its own keeps the text's code name (its own name is its __name__ and
    __qualname__), so no code.replace interns a name; the file name is still its own."""
    monkeypatch.setattr(codecache, "RENAME_INTERNS", True)
    compiled = compile_generated("def ___g():\n    return k\n", generated_filename("test"))
    g = compiled.function("___g", {"k": 7}, name="check_mine")
    assert g() == 7 and (g.__name__, g.__qualname__, g.__code__.co_name) == (
        "check_mine", "check_mine", "___g")
    assert g.__code__.co_filename == compiled.filename
    forget(compiled.filename)
