"""jitguard._src.cache.observe: compile records, trace events, tlparse, large guard sets
([Note: Compile events], [Note: Large guard sets])."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import jitguard as jg
from jitguard import AttrSource, GetItemSource, LocalSource
from jitguard import GuardBuilder as GB
from jitguard._src import structured
from jitguard._src.cache import observe
from jitguard._src.config import config
from test_structured import read_records


@pytest.fixture(autouse=True)
def _no_trace() -> Iterator[None]:
    jg.set_trace(None)
    yield
    jg.set_trace(None)


def _tlparse() -> str:
    found = shutil.which("tlparse") or str(Path(sys.executable).parent / "tlparse")
    if not Path(found).is_file():
        pytest.skip("tlparse is not installed (it is in the dev extras: pip install tlparse)")
    return found


def _compiled_thrice() -> Any:
    """A specialized function compiled three times: n=1, n=2.5 (a float), a str x."""

    @jg.specialize(automatic_dynamic=False, global_state=False)
    def f(x: Any, n: Any) -> Any:
        return x * n

    f(2, 1)
    f(2, 1)
    f(2, 2.5)
    f("a", 1)
    return f


# ---- compile records ---------------------------------------------------------------------


def test_compile_infos_kept_always() -> None:
    """Every compile is recorded with its time, guard count and the check's cost."""
    f = _compiled_thrice()
    infos = jg.cache_of(f).compile_infos()
    assert [i.outcome for i in infos] == ["compiled"] * 3
    assert [i.recompile for i in infos] == [False, True, True]
    assert [i.guard_count for i in infos] == [2, 2, 2]
    assert all(i.compile_time_s > 0 and i.check_cost_ns and i.check_cost_ns > 0 for i in infos)
    assert [str(i.compile_id) for i in infos] == [str(c) for c in sorted(
        jg.cache_of(f).compile_ids(), key=lambda c: c.frame_compile_id or 0)]
    jg.cache_of(f).clear()
    assert jg.cache_of(f).compile_infos() == ()


def test_failed_compile_recorded() -> None:
    """A compile that raises is recorded as failed, with the error."""

    def bad(request: jg.CompileRequest) -> Any:
        raise ValueError("no")

    f = jg.specialize(lambda n: n, compiler=bad)
    with pytest.raises(ValueError):
        f(1)
    (info,) = jg.cache_of(f).compile_infos()
    assert info.outcome == "failed" and info.error == "ValueError: no" and info.guard_count == 0


def test_compile_not_kept_recorded() -> None:
    """A compile whose compiler changed the arguments is recorded as not kept."""

    def mutating(request: jg.CompileRequest) -> Any:
        request.arguments["xs"].append(9)
        return request.fn

    f = jg.specialize(lambda xs: len(xs), compiler=mutating)
    f([1, 2])
    (info,) = jg.cache_of(f).compile_infos()
    assert info.outcome == "not kept" and info.check_cost_ns is None


def test_measure_check() -> None:
    """The cost is ns per call; a check that raises is not measured."""
    assert (observe.measure_check(lambda n: n == 1, (1,)) or 0) > 0

    def raises(n: int) -> bool:
        raise RuntimeError

    assert observe.measure_check(raises, (1,)) is None


def test_check_cost_runs_the_check_a_bounded_number_of_times() -> None:
    """Measuring runs the check ten times at most."""
    calls: list[int] = []

    def check(n: int) -> bool:
        calls.append(n)
        return True

    observe.measure_check(check, (1,))
    assert len(calls) == 10


def test_check_cost_leaves_out_the_first_call() -> None:
    """The first call (which takes a structure snapshot, warms caches) is not the cost of a
    hit: a check whose first call sleeps 20 ms and whose others are instant costs under 1 ms."""
    import time

    calls: list[int] = []

    def check(n: int) -> bool:
        if not calls:
            time.sleep(0.02)
        calls.append(n)
        return True

    cost = observe.measure_check(check, (1,))
    assert cost is not None and cost < 1_000_000, cost


def test_check_cost_stops_within_its_time_budget() -> None:
    """A check of about 3 ms after its first call is run twice more at most (5 ms spent), and
    one whose first call took 50 ms or more is not run again."""
    import time

    calls: list[int] = []

    def check(n: int) -> bool:
        calls.append(n)
        time.sleep(0.003)
        return True

    cost = observe.measure_check(check, (1,))
    assert len(calls) == 3 and cost is not None and cost >= 3_000_000
    calls.clear()

    def slow(n: int) -> bool:
        calls.append(n)
        time.sleep(0.05)
        return True

    assert (observe.measure_check(slow, (1,)) or 0) >= 50_000_000 and len(calls) == 1


# ---- large guard sets --------------------------------------------------------------------


def _leaves_of(guards: list[Any], f_locals: dict[str, Any]) -> list[Any]:
    return list(jg.compile_guards(guards, f_locals=f_locals, arg_names=tuple(f_locals)).leaves)


def test_heaviest_source_descends_into_the_big_part() -> None:
    """The source named is the one holding nine tenths of the checks, as deep as it goes."""

    class Cfg:
        def __init__(self) -> None:
            self.table = list(range(30))
            self.lr = 0.1

    cfg = Cfg()
    table = AttrSource(LocalSource("cfg"), "table")
    guards = [LocalSource("cfg").make_guard(GB.TYPE_MATCH), table.make_guard(GB.SEQUENCE_LENGTH)]
    guards += [GetItemSource(table, i).make_guard(GB.EQUALS_MATCH) for i in range(30)]
    guards += [AttrSource(LocalSource("cfg"), "lr").make_guard(GB.EQUALS_MATCH),
               LocalSource("n").make_guard(GB.EQUALS_MATCH)]
    source, count = observe.heaviest_source(_leaves_of(guards, {"cfg": cfg, "n": 1}))
    assert source == table and count == 31


def test_heaviest_source_stops_where_checks_spread() -> None:
    """When no part holds nine tenths, the parent is named."""
    guards = [GetItemSource(LocalSource("xs"), i).make_guard(GB.EQUALS_MATCH) for i in range(4)]
    source, count = observe.heaviest_source(_leaves_of(guards, {"xs": [0, 1, 2, 3]}))
    assert source == LocalSource("xs") and count == 4
    assert observe.heaviest_source([]) == (None, 0)


def test_large_guard_set_warns_once_naming_the_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past config.large_guard_set checks a compile warns once per function, naming the
    source that made them, the count, and what to do."""
    monkeypatch.setattr(config, "large_guard_set", 50)

    @jg.specialize(global_state=False)
    def total(xs: list[int], k: int) -> int:
        return sum(xs) * k

    with pytest.warns(jg.LargeGuardSetWarning) as caught:
        total(list(range(100)), 1)
    (w,) = caught
    text = str(w.message)
    assert "made 102 checks (more than jitguard.config.large_guard_set = 50)" in text
    assert "101 of them on L['xs'] and the values under it" in text
    assert "register_arg_rule" in text
    assert w.filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        total(list(range(100)), 2)  # a second large compile: no second warning


def test_default_threshold_is_a_thousand() -> None:
    """A 1,000-item list argument (1,001 checks) warns under the default threshold."""
    assert config.large_guard_set == 1000
    f = jg.specialize(lambda xs: xs, global_state=False)
    with pytest.warns(jg.LargeGuardSetWarning, match="1,001 of them on L\\['xs'\\]"):
        f(list(range(1000)))
    g = jg.specialize(lambda xs: xs, global_state=False)  # 1,000 checks: not more
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g(list(range(999)))


# ---- trace events ------------------------------------------------------------------------


def test_trace_events_of_each_compile(tmp_path: Path) -> None:
    """Each compile writes dynamo_start (the user's stack, then the function), its
    reasons, its guards with kind and sources, its check source and its metrics."""
    jg.set_trace(str(tmp_path))
    f = _compiled_thrice()
    cache = jg.cache_of(f)
    path = structured.trace_file()
    assert path is not None
    records = read_records(path)
    strings = {r["str"][1]: r["str"][0] for r, _ in records if "str" in r}
    events = [(next(iter(r)), r, p) for r, p in records if "frame_id" in r]
    cids = sorted({(r["frame_id"], r["frame_compile_id"]) for _, r, _ in events})
    frame = cids[0][0]
    assert cids == [(frame, 0), (frame, 1), (frame, 2)]
    by_compile: dict[int, list[str]] = {}
    for name, r, _ in events:
        by_compile.setdefault(r["frame_compile_id"], []).append(
            name if name != "artifact" else r["artifact"]["name"])
    assert by_compile[0] == ["dynamo_start", "dynamo_guards", "jitguard_check_source",
                             "compilation_metrics"]
    assert by_compile[1] == by_compile[2] == ["dynamo_start", "recompile_reasons",
                                              "dynamo_guards", "jitguard_check_source",
                                              "compilation_metrics"]
    start = next(r for n, r, _ in events if n == "dynamo_start")["dynamo_start"]["stack"]
    assert strings[start[-1]["filename"]] == __file__ and start[-1]["name"] == "f"
    assert strings[start[-2]["filename"]] == __file__
    assert start[-2]["name"] == "_compiled_thrice"  # the call that compiled, jitguard left out
    reasons = [json.loads(p or "") for n, r, p in events
               if n == "artifact" and r["artifact"]["name"] == "recompile_reasons"]
    assert reasons == [rec.reasons() for rec in cache.recompiles]
    guards = json.loads(next(p for n, _, p in events if n == "dynamo_guards") or "")
    assert {(g["kind"], tuple(g["sources"])) for g in guards} == {
        ("EQUALS_MATCH", ("L['x']",)), ("EQUALS_MATCH", ("L['n']",))}
    source = next(p for n, r, p in events
                  if n == "artifact" and r["artifact"]["name"] == "jitguard_check_source")
    first_entry = next(e for e in cache.entries() if e.compile_id.frame_compile_id == 0)
    assert source == first_entry.check.source
    metrics = [r["compilation_metrics"] for n, r, _ in events if n == "compilation_metrics"]
    assert [m["cache_size"] for m in metrics] == [0, 1, 2]
    assert [m["guard_count"] for m in metrics] == [2, 2, 2]
    assert metrics[0]["co_name"] == "f" and metrics[0]["co_filename"] == __file__
    assert metrics[0]["recompile_reason"] is None
    assert metrics[1]["recompile_reason"] == "; ".join(cache.recompiles[0].reasons())
    assert all(m["guard_latency_us"] > 0 and m["entire_frame_compile_time_s"] > 0
               for m in metrics)


def test_trace_of_a_failed_compile(tmp_path: Path) -> None:
    """A compile that raises writes its metrics with the failure."""
    jg.set_trace(str(tmp_path))

    def bad(request: jg.CompileRequest) -> Any:
        raise ValueError("cannot")

    f = jg.specialize(lambda n: n, compiler=bad)
    with pytest.raises(ValueError):
        f(1)
    metrics = [r["compilation_metrics"] for r, _ in read_records(structured.trace_file() or "")
               if "compilation_metrics" in r]
    assert [(m["fail_type"], m["fail_reason"], m["guard_count"]) for m in metrics] == [
        ("ValueError", "cannot", 0)]


def test_nothing_built_without_a_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no trace sink, no guard report or user stack is built on a compile."""
    built: list[int] = []
    monkeypatch.setattr(observe, "guard_report", lambda *a, **k: built.append(1))
    monkeypatch.setattr(observe, "_user_frames", lambda *a, **k: built.append(1))
    _compiled_thrice()
    assert built == []


def test_tlparse_renders_every_compile(tmp_path: Path) -> None:
    """Real tlparse renders a trace of a few recompiles: compile_directory.json lists every
    compile with its guards and reasons, and index.html lists each compile id."""
    tlparse = _tlparse()
    trace_dir = tmp_path / "trace"
    jg.set_trace(str(trace_dir))
    f = _compiled_thrice()
    cache = jg.cache_of(f)
    jg.set_trace(None)
    (log_file,) = trace_dir.iterdir()
    out = tmp_path / "out"
    done = subprocess.run(
        [tlparse, str(log_file), "-o", str(out), "--no-browser", "--strict",
         "--strict-compile-id"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    directory = json.loads((out / "compile_directory.json").read_text())
    frame = cache.compile_infos()[0].compile_id.frame_id
    ids = [f"[{frame}/{i}]" for i in range(3)]
    assert [k for k in directory if k != "[-/-]"] == ids
    records = {str(r.compile_id): r for r in cache.recompiles}
    for i, key in enumerate(ids):
        names = [a["name"].rsplit("_", 1)[0] for a in directory[key]["artifacts"]]
        assert "dynamo_guards" in names and "compilation_metrics" in names
        guards_page = next(a["url"] for a in directory[key]["artifacts"]
                           if a["name"].startswith("dynamo_guards"))
        html = (out / guards_page).read_text()
        entry_code = "L[&#39;n&#39;] == 1" if i != 1 else "L[&#39;n&#39;] == 2.5"
        assert entry_code in html
        if i == 0:
            assert "recompile_reasons" not in names
            continue
        reasons_file = next(a["url"] for a in directory[key]["artifacts"]
                            if a["name"].startswith("recompile_reasons"))
        assert json.loads((out / reasons_file).read_text()) == \
            records[f"{frame}/{i}"].reasons()
    index = (out / "index.html").read_text()
    assert all(k in index for k in ids)
