"""jitguard.explain: a specialized function's cache as text and JSON ([Note: Explaining a
cache])."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

import jitguard as jg


def _scaled() -> Any:
    """scale(x, k): an entry for k=3, one for x='a' after k became dynamic, hits on each."""

    @jg.specialize(global_state=False)  # the same checks whether torch is loaded or not
    def scale(x: Any, k: int) -> Any:
        return x * k

    scale(2.0, 3)
    scale(2.0, 3)
    scale(2.0, 3)
    scale(2.0, 4)  # k becomes dynamic
    scale(2.0, 5)
    scale("a", 2)
    return scale


def test_explain_json_lists_entries_guards_and_counts() -> None:
    """The JSON report has every entry with its guards, hits, failure counts, check cost and
    compile time, the counters, every compile and every recompile's reasons."""
    f = _scaled()
    cache = jg.cache_of(f)
    data = json.loads(jg.explain(f).to_json())
    assert data["function"] == cache.where
    assert data["stats"] == {
        "hits": 3, "misses": 3, "compiles": 3, "recompiles": 2, "restarts": 0, "failures": 0,
        "fallbacks": 0, "invalidations": 0, "entries": 3,
        "capture_failures": 0, "backend_failures": 0, "frame_path": 0,
    }
    entries = data["entries"]
    assert [e["compile_id"] for e in entries] == [str(c) for c in cache.compile_ids()]
    static = entries[0]
    assert static["hits"] == 2 and static["guard_count"] == 2 and static["dynamic"] == []
    assert [(g["kind"], g["code"]) for g in static["guards"]] == [
        ("EQUALS_MATCH", "L['k'] == 3"), ("EQUALS_MATCH", "L['x'] == 2.0")]
    assert static["check_cost_ns"] > 0 and static["compile_time_s"] > 0
    assert static["failure_counts"] == {"EQUALS_MATCH L['k']": 2, "EQUALS_MATCH L['x']": 1}
    assert [g.get("failures", 0) for g in static["guards"]] == [2, 1]
    dyn = next(e for e in entries if e["dynamic"] == ["L['k']"] and e["hits"] == 1)
    assert [g["code"] for g in dyn["guards"]] == ["type(L['k']) is int", "L['x'] == 2.0"]
    assert [c["compile_id"] for c in data["compiles"]] == sorted(e["compile_id"] for e in entries)
    assert all(c["outcome"] == "compiled" for c in data["compiles"])
    assert [r["reasons"] for r in data["recompiles"]] == [r.reasons() for r in cache.recompiles]
    assert data["rejections"] == 3
    assert data["most_rejecting_guard"] == {"guard": "EQUALS_MATCH L['k']", "failures": 2}


def test_explain_text_report() -> None:
    """str(explain(f)) is a readable report of the same facts."""
    f = _scaled()
    cache = jg.cache_of(f)
    text = str(jg.explain(f))
    first = cache.compile_ids()[0]
    lines = text.splitlines()
    assert lines[0] == f"jitguard.explain: {cache.where}"
    assert lines[1] == ("  entries 3; hits 3, misses 3, compiles 3 (recompiles 2, failed 0), "
                        "fallbacks 0, invalidated 0")
    assert lines[2] == "  guard that rejects most: EQUALS_MATCH L['k'] (2 of 3 rejections)"
    assert lines[3].startswith(f"  entry {first}: 2 hits, 2 checks, check ")
    assert "us per call, compiled in " in lines[3] and lines[3].endswith(" ms, specificity 16")
    assert lines[4] == "    EQUALS_MATCH: L['k'] == 3   [failed 2x]"
    assert lines[5] == "    EQUALS_MATCH: L['x'] == 2.0   [failed 1x]"
    assert "  recompiles:" in lines
    assert f"      - {first}: L['k'] == 3 failed: got 4" in lines
    assert "      now dynamic: L['k']" in lines


def test_explain_counts_fallbacks_and_failures() -> None:
    """Fallbacks past the limit and compiles that raised appear in the report."""
    calls = []

    def flaky(request: jg.CompileRequest) -> Any:
        calls.append(1)
        if request.arguments["n"] == 99:
            raise ValueError("not this one")
        return request.fn

    f = jg.specialize(lambda n: n, compiler=flaky, recompile_limit=2, automatic_dynamic=False)
    f(1)
    with pytest.raises(ValueError):
        f(99)
    f(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jg.RecompileLimitWarning)
        f(3)
        f(4)
    report = jg.explain(f)
    data = report.as_dict()
    assert data["stats"]["fallbacks"] == 2 and data["stats"]["failures"] == 1
    outcomes = [(c["outcome"], c["error"]) for c in data["compiles"]]
    assert outcomes == [("compiled", None), ("failed", "ValueError: not this one"),
                        ("compiled", None)]
    assert data["recompiles"][-1]["compile_id"] is None
    text = str(report)
    assert ": failed in " in text and "ValueError: not this one" in text
    assert ", fallbacks 2," in text


def test_explain_leaves_out_dead_entries_and_counts_them() -> None:
    """An entry whose guarded object died is not listed, and counts as invalidated."""

    class Box:
        pass

    f = jg.specialize(lambda b: 1)
    box = Box()
    f(box)
    del box
    import gc

    gc.collect()
    data = jg.explain(f).as_dict()
    assert data["entries"] == [] and data["stats"]["invalidations"] == 1


def test_explain_truncates_long_guard_lists_in_text_only() -> None:
    """The text shows max_guards checks per entry and counts the rest; JSON has all."""
    f = jg.specialize(lambda xs: xs, global_state=False)
    f(list(range(30)))
    report = jg.explain(f, max_guards=5)
    assert "    ... and 26 more checks (explain(f).as_dict() has them all)" in str(report)
    assert len(report.entries[0]["guards"]) == 31


def test_explain_takes_the_cache_and_rejects_other_callables() -> None:
    """explain accepts a FunctionCache; a plain function is a TypeError saying what it is."""
    f = jg.specialize(lambda n: n)
    f(1)
    assert jg.explain(jg.cache_of(f)).as_dict()["stats"]["entries"] == 1
    with pytest.raises(TypeError, match=r"is not a function returned by jitguard\.specialize"):
        jg.explain(len)


def test_explain_of_an_empty_cache() -> None:
    """A function never called has an empty report, not an error."""
    f = jg.specialize(lambda n: n)
    report = jg.explain(f)
    assert report.as_dict()["entries"] == [] and report.as_dict()["most_rejecting_guard"] is None
    assert "entries 0; hits 0, misses 0" in str(report)
    assert repr(report).endswith(": 0 entries>")


def test_explain_asks_the_kind_for_detail() -> None:
    """A kind's detail() is reported beside its guard (in JSON and on one text line)."""
    from jitguard._src.compiler.builtin_kinds import SequenceLength

    class Detailed(SequenceLength):
        name = "TEST_EXPLAIN_DETAILED_LEN"

        def detail(self, params: Any) -> dict[str, Any]:
            return {"length": params[1], "type": params[0].get().__name__}

    create_fn = jg.register_guard_kind(Detailed(), replace=True)

    def compiler(request: jg.CompileRequest) -> Any:
        request.add_guard("xs", create_fn)
        return request.fn

    f = jg.specialize(lambda xs: xs, compiler=compiler)
    f((1, 2))
    report = jg.explain(f)
    (g,) = [g for g in report.entries[0]["guards"] if g["kind"] == Detailed.name]
    assert g["detail"] == {"length": 2, "type": "tuple"}
    assert f"    {Detailed.name} L['xs']: length=2 type=tuple" in str(report).splitlines()


def test_a_kind_without_detail_reports_none() -> None:
    """The base kind has no detail: only the code is shown."""
    from jitguard._src.compiler.builtin_kinds import EqualsMatch

    assert EqualsMatch().detail(3) is None
