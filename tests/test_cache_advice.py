"""Tests for jitguard._src.cache.advice and cache.advice_rules: the recompile advisor (which
source churns, the evidence, the fix), its log line, trace record, explain section and the
recompile limit's text. Each test runs with both dispatchers."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import jitguard as jg
from jitguard import (
    NO_ADVICE,
    Advice,
    GlobalSource,
    GuardBuilder,
    RecompileLimitError,
    RecompileLimitWarning,
    cache_of,
    specialize,
)
from jitguard._src import structured
from jitguard._src.cache import advice as advice_mod

pytestmark = pytest.mark.usefixtures("dispatch_mode")

MODE = "a"


class Obj:
    pass


def _read_records(path: str) -> list[tuple[dict[str, Any], str]]:
    out: list[tuple[dict[str, Any], str]] = []
    for line in Path(path).read_text().splitlines():
        if line.startswith("\t"):
            record, payload = out[-1]
            out[-1] = (record, payload + line[1:] + "\n")
        else:
            out.append((json.loads(line.split("] ", 1)[1]), ""))
    return out


def _strings(n: int = 4) -> Any:
    f = specialize(lambda x, n: x)
    for s in "abcdefgh"[:n]:
        f(1, s)
    return f


# ---- no churn ------------------------------------------------------------------------------


def test_no_churn_no_advice() -> None:
    """A function that hits, or recompiled only twice for a source, gets no advice."""
    f = specialize(lambda x: x)
    for _ in range(5):
        f(1)
    assert cache_of(f).advice() == []
    g = _strings(3)  # 2 recompiles: under the threshold of 3
    assert cache_of(g).recompile_counts == {"compiled": 2}
    assert cache_of(g).advice() == []
    assert "advice:" not in str(jg.explain(g))


def test_automatic_dynamic_int_is_no_churn() -> None:
    """An int argument recompiles once, then is dynamic: no advice."""
    f = specialize(lambda x, n: x)
    for n in range(8):
        f(1, n)
    assert cache_of(f).advice() == []


def test_a_source_made_dynamic_has_stopped_churning() -> None:
    """Even at threshold 1, an int that automatic dynamic relaxed gets no advice."""
    f = specialize(lambda x, n: x)
    for n in range(4):
        f(1, n)
    assert cache_of(f).recompile_counts == {"compiled": 1}
    assert cache_of(f).advice(threshold=1) == []


def test_alternating_known_values_is_no_churn() -> None:
    """Values that alternate between ones already compiled hit: no advice."""
    f = specialize(lambda x, s: x)
    for i in range(10):
        f(1, "ab"[i % 2])
    assert cache_of(f).advice() == []


# ---- a scalar argument pinned by value -----------------------------------------------------


def test_pinned_string_argument() -> None:
    """A str argument that changes on every call: dynamic=[...] or a by-type policy."""
    f = _strings(4)
    (a,) = cache_of(f).advice()
    assert a.source == "L['n']" and a.rule == "pinned-scalar"
    assert a.evidence.recompiles == 3
    assert a.evidence.values == ("'a'", "'b'", "'c'", "'d'")
    assert a.fix is not None and 'dynamic=["n"]' in a.fix and 'policy="types"' in a.fix
    assert "n" in a.message and "guarded by its value" in a.message


def test_pinned_float_argument_and_the_fix_works() -> None:
    """A float argument pinned by value gets the advice; following it stops the churn."""

    def h(x: float, scale: float) -> float:
        return x * scale

    f = specialize(h)
    for i in range(5):
        f(1.0, i + 0.5)
    (a,) = cache_of(f).advice()
    assert (a.source, a.rule, a.evidence.recompiles) == ("L['scale']", "pinned-scalar", 4)
    assert a.fix == 'jitguard.specialize(h, dynamic=["scale"])  # or policy="types"'
    fixed = specialize(h, dynamic=["scale"])
    for i in range(5):
        fixed(1.0, i + 0.5)
    assert cache_of(fixed).recompile_counts == {} and cache_of(fixed).advice() == []


def test_threshold_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    """advice(threshold=n) and jitguard.config.advice_threshold move the bar; a bad
    threshold is a ValueError."""
    f = _strings(3)
    assert cache_of(f).advice() == []
    assert [a.source for a in cache_of(f).advice(threshold=2)] == ["L['n']"]
    monkeypatch.setattr(jg.config, "advice_threshold", 2)
    assert [a.source for a in cache_of(f).advice()] == ["L['n']"]
    with pytest.raises(ValueError, match="int >= 1"):
        cache_of(f).advice(threshold=0)


# ---- an object created anew on each call ---------------------------------------------------


def test_new_partial_each_call() -> None:
    """A functools.partial made in the loop: guarded by identity, create it once."""
    f = specialize(lambda x, fn: fn(x))
    keep = [functools.partial(max, 2) for _ in range(4)]
    for fn in keep:
        f(1, fn)
    (a,) = cache_of(f).advice()
    assert (a.source, a.rule) == ("L['fn']", "new-object")
    assert "new partial" in a.message and "outside the loop" in a.message
    assert a.fix is not None and a.fix.startswith("fn = functools.partial(...)")
    assert len(a.evidence.values) == 4 and all("partial" in v for v in a.evidence.values)


def test_new_partial_each_call_dropped() -> None:
    """Partials dropped after each call still recompile each time and get the advice, even
    when a new one reuses a dead one's address (its entry died with it)."""
    f = specialize(lambda x, fn: fn(x))
    for _ in range(4):
        f(1, functools.partial(max, 2))
    (a,) = cache_of(f).advice()
    assert (a.source, a.rule, a.evidence.recompiles) == ("L['fn']", "new-object", 3)
    assert 1 <= len(a.evidence.values) <= 4


def test_new_instance_each_call_kept_alive() -> None:
    """Instances made in the loop (and kept alive) name the class in the fix."""
    f = specialize(lambda o: o)
    keep = [Obj() for _ in range(5)]
    for o in keep:
        f(o)
    (a,) = cache_of(f).advice()
    assert (a.source, a.rule, a.evidence.recompiles) == ("L['o']", "new-object", 4)
    assert a.fix is not None and a.fix.startswith("o = Obj(...)")


def test_same_object_each_call_is_no_churn() -> None:
    """The object created once, outside the loop (the fix), compiles once."""
    f = specialize(lambda x, fn: fn(x))
    fn = functools.partial(max, 2)
    for _ in range(6):
        f(1, fn)
    assert cache_of(f).advice() == []


# ---- a global baked in; the plain advice ---------------------------------------------------


def test_global_baked_in_by_a_compiler() -> None:
    """A compiler that bakes in a module global, which keeps changing: pass it as an
    argument."""
    global MODE

    def compiler(request: jg.CompileRequest) -> Any:
        request.add_guard(GlobalSource("MODE"), GuardBuilder.EQUALS_MATCH)
        return request.fn

    def step(x: int) -> int:
        return x if MODE == "a" else -x

    f = specialize(step, compiler=compiler)
    try:
        for mode in "abcd":
            MODE = mode
            f(1)
    finally:
        MODE = "a"
    (a,) = cache_of(f).advice()
    assert (a.source, a.rule, a.evidence.recompiles) == ("G['MODE']", "baked-in", 3)
    assert "global MODE" in a.message and "as an argument" in a.message
    assert a.fix is not None and "def step(x, ..., MODE)" in a.fix


def test_scalar_inside_an_argument_baked_in() -> None:
    """A str attribute of a config object that keeps changing: pass it as an argument of
    its own."""

    def compiler(request: jg.CompileRequest) -> Any:
        request.add_guard(jg.AttrSource(request.sources["cfg"], "mode"),
                          GuardBuilder.EQUALS_MATCH)
        return request.fn

    def run(x: int, cfg: Any) -> int:
        return x

    f = specialize(run, compiler=compiler)
    cfg = Obj()
    for mode in "abcd":
        cfg.mode = mode  # type: ignore[attr-defined]
        f(1, cfg)
    (a,) = cache_of(f).advice()
    assert (a.source, a.rule, a.evidence.recompiles) == ("L['cfg'].mode", "baked-in", 3)
    assert a.fix == ("def run(x, ..., mode): ...  # read mode from the argument\n"
                     "run(x, ..., cfg.mode)")


def test_changing_length() -> None:
    """A list whose length keeps changing: keep it fixed or pass one array."""
    f = specialize(lambda xs: xs)
    for n in range(1, 6):
        f([0] * n)
    (a,) = cache_of(f).advice()
    assert (a.source, a.rule, a.fix) == ("L['xs']", "length", None)
    assert a.evidence.values == ("1", "2", "3", "4", "5") and a.evidence.recompiles == 4
    assert "length of L['xs'] kept changing" in a.message


def test_generic_advice_names_the_source() -> None:
    """A churn no rule knows (a dict's keys) still names the source and its guard."""
    f = specialize(lambda d: d)
    for key in "abcd":
        f({key: 0})
    (a,) = cache_of(f).advice()
    assert a.source == "L['d']" and a.rule == "generic" and a.fix is None
    assert a.evidence.recompiles == 3 and "DICT_KEYS_MATCH" in a.message


# ---- the recompile limit -------------------------------------------------------------------


def test_limit_hit_names_the_source_that_used_it_up() -> None:
    """At the limit (below the threshold) the source that used it up is advised, in the
    warning's text too."""
    f = specialize(lambda x, s: x, recompile_limit=2)
    f(1, "a")
    f(1, "b")
    with pytest.warns(RecompileLimitWarning) as w:
        f(1, "c")
    (a,) = cache_of(f).advice()
    assert a.source == "L['s']" and a.evidence.limit == 2 and a.evidence.recompiles == 1
    assert a.message.startswith("Recompile limit (2) hit: The argument s")
    text = str(w[0].message)
    assert "Advice:" in text and a.message in text and 'dynamic=["s"]' in text
    assert "evidence: 1 recompile (recompile limit 2 hit); values seen: 'a', 'b'" in str(
        jg.explain(f))


def test_limit_error_carries_the_advice() -> None:
    """on_limit='raise': RecompileLimitError's text ends with the advice and its fix."""
    f = specialize(lambda o: o, recompile_limit=3, on_limit="raise")
    keep = [Obj() for _ in range(4)]
    for o in keep[:3]:
        f(o)
    with pytest.raises(RecompileLimitError) as e:
        f(keep[3])
    text = str(e.value)
    assert "Advice:" in text and "L['o'] is guarded by identity" in text
    assert "fix: o = Obj(...)  # once, before the loop" in text


# ---- where a user meets it -----------------------------------------------------------------


def test_one_log_line_per_advice(caplog: pytest.LogCaptureFixture) -> None:
    """jitguard.recompiles at INFO logs each advice once, when its rule first fires; clear()
    starts over."""
    with caplog.at_level(logging.INFO, logger="jitguard.recompiles"):
        f = _strings(7)
        lines = [r.getMessage() for r in caplog.records if "advice for" in r.getMessage()]
        assert len(lines) == 1
        assert "advice for L['n']: The argument n" in lines[0]
        assert "\n" not in lines[0] and 'Fix: jitguard.specialize(' in lines[0]
        caplog.clear()
        cache_of(f).clear()
        for s in "abcd":
            f(1, s)
        assert sum("advice for" in r.getMessage() for r in caplog.records) == 1


def test_limit_logs_one_message(caplog: pytest.LogCaptureFixture) -> None:
    """At the limit jitguard.recompiles gets one message, the limit's, ending with the
    advice: no advice line of its own. A limit of 1 (no recompile yet) has no advice."""
    with caplog.at_level(logging.INFO, logger="jitguard.recompiles"):
        f = specialize(lambda x, s: x, recompile_limit=2)
        f(1, "a")
        f(1, "b")
        caplog.clear()
        with pytest.warns(RecompileLimitWarning):
            f(1, "c")
        (message,) = [r.getMessage() for r in caplog.records]
        assert "hit its recompile limit (2)" in message and "Advice:" in message
        g = specialize(lambda x, s: x, recompile_limit=1)
        g(1, "a")
        caplog.clear()
        with pytest.warns(RecompileLimitWarning) as w:
            g(1, "b")
        (message,) = [r.getMessage() for r in caplog.records]
        assert "Advice:" not in message and "Advice:" not in str(w[0].message)
        assert cache_of(g).advice() == []


def test_nothing_computed_without_a_listener(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no INFO log and no trace, a recompile computes no advice."""
    calls: list[int] = []
    monkeypatch.setattr(advice_mod, "advise", lambda *a, **k: calls.append(1) or [])
    logging.getLogger("jitguard.recompiles").setLevel(logging.WARNING)
    try:
        _strings(6)
    finally:
        logging.getLogger("jitguard.recompiles").setLevel(logging.NOTSET)
    assert calls == []


def test_trace_record(tmp_path: Path) -> None:
    """A trace gets one jitguard_advice artifact (json) per advice, under the compile that
    fired it."""
    jg.set_trace(str(tmp_path))
    try:
        f = _strings(6)
        path = structured.trace_file()
    finally:
        jg.set_trace(None)
    assert path is not None
    found = [(r, p) for r, p in _read_records(path)
             if r.get("artifact", {}).get("name") == "jitguard_advice"]
    assert len(found) == 1
    record, payload = found[0]
    assert record["artifact"]["encoding"] == "json" and record["frame_compile_id"] == 3
    (item,) = json.loads(payload)
    (a,) = cache_of(f).advice()
    assert item["source"] == a.source == "L['n']" and item["fix"] == a.fix
    assert item["evidence"]["recompiles"] == 3


def test_tlparse_renders_the_advice(tmp_path: Path) -> None:
    """Real tlparse (--strict) files each jitguard_advice artifact under its function's
    compile: the one that fired it, and at the limit the function's last compile."""
    tlparse = shutil.which("tlparse") or str(Path(sys.executable).parent / "tlparse")
    if not Path(tlparse).is_file():
        pytest.skip("tlparse is not installed (it is in the dev extras: pip install tlparse)")
    jg.set_trace(str(tmp_path / "trace"))
    try:
        f = specialize(lambda x, s: x, recompile_limit=5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RecompileLimitWarning)
            for s in "abcdefg":
                f(1, s)
    finally:
        jg.set_trace(None)
    (log_file,) = (tmp_path / "trace").iterdir()
    out = tmp_path / "out"
    done = subprocess.run(
        [tlparse, str(log_file), "-o", str(out), "--no-browser", "--strict",
         "--strict-compile-id"], capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    directory = json.loads((out / "compile_directory.json").read_text())
    frame = cache_of(f).compile_infos()[0].compile_id.frame_id
    advised = [key for key, v in directory.items()
               if any(a["name"].startswith("jitguard_advice") for a in v["artifacts"])]
    assert advised == [f"[{frame}/3]", f"[{frame}/4]"]


def test_explain_section() -> None:
    """jitguard.explain(f) has an advice section, and as_dict() the records."""
    f = _strings(5)
    advice = cache_of(f).advice()
    e = jg.explain(f)
    assert e.as_dict()["advice"] == [a.as_dict() for a in advice]
    text = str(e)
    assert "  advice:\n    L['n']: The argument n" in text
    assert "      fix: jitguard.specialize(" in text
    assert "      evidence: 4 recompiles; values seen: 'a', 'b', 'c', 'd', 'e'" in text


def test_advice_is_frozen_with_a_repr() -> None:
    """An Advice is immutable, has a repr naming the source, and a text form."""
    (a,) = cache_of(_strings(4)).advice()
    assert isinstance(a, Advice)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.source = "x"  # type: ignore[misc]
    assert repr(a).startswith("Advice(L['n']: ") and "fix=" in repr(a)
    assert str(a).splitlines()[0] == a.message
    assert "evidence: 3 recompiles" in str(a)


def test_registered_rule_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """A registered rule answers before the built-in ones; NO_ADVICE silences a source."""
    monkeypatch.setattr(advice_mod, "_rules", [])

    def mine(churn: Any, ctx: Any) -> Any:
        if churn.source == "L['n']":
            return Advice(churn.source, "mine.", churn.evidence(), "fix()", rule="mine")
        return None

    jg.register_advice_rule("mine", mine)
    f = _strings(4)
    assert [(a.rule, a.fix) for a in cache_of(f).advice()] == [("mine", "fix()")]
    jg.register_advice_rule("mine", lambda churn, ctx: NO_ADVICE)  # replaces it
    assert cache_of(f).advice() == []
