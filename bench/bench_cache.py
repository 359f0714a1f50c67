"""Benchmark: what a cache hit of ``jitguard.specialize`` costs, next to ``functools.lru_cache``,
and how hit time changes with the number of entries.

Run by hand (not a timed test):

    .venv/bin/python bench/bench_cache.py            # full run
    .venv/bin/python bench/bench_cache.py --quick    # well under 30 s on a busy 2-core machine
    .venv/bin/python bench/bench_cache.py --json     # last line: one JSON object

Scenarios.
  (o1..o3) Hit overhead for 1-3 scalar (int) arguments: ``spec(*args)`` minus calling the
      artifact directly, against ``lru_cache(artifact)(*args)`` (the whole cost of an
      lru_cache hit, which returns a stored value and calls nothing). Target: overhead
      within 2x of lru_cache.
  (e1..e512) Hit time (whole call) with 1, 8, 64 and 512 entries of ``f(n)`` (one entry
      per int value), when the hit entry is the newest (the same value every call) and when
      it is the least recently used (the calls cycle through every value, so each call's
      entry is the one used longest ago). Target: 512 entries within 1.5x of 1 entry.
  (s10, s1000, s10000) Scale: ``f(n)`` specialized on every value
      (``recompile_limit=None, automatic_dynamic=False``, the identity compiler) built up to
      10, 1,000 and 10,000 entries. For each: time per miss (one more entry; median of single
      timed misses, each on a cache of that size: rebuilt for 10, growing by at most 1% for
      the others; the sizes timed in turn, rotated), bytes per entry (tracemalloc, growth from 1 entry to N over N - 1; with
      ``--quick`` measured up to 1,000 entries and the 10,000 row reuses that figure's
      method on its own build), and hit time (a call of an existing value, against a
      1-entry cache, alternated). Targets: a miss at 10,000 within 1.5x of at 10 and under
      0.3 ms; at most 8 KB per entry; a hit at 10,000 within 1.2x of at 1.
  (lru) For information: a hit of ``specialize(maxsize=512)`` (it stamps each hit for
      least-recently-used eviction) against lru_cache(maxsize=512).
  (dyn) For information: a hit on a dynamic entry (``type(n) is int``, reached when the
      value is not one of the static entries' values: one residual check runs).
Timing: each repetition times every compared variant in ``timeit`` batches of about 5 ms
(2 ms with ``--quick``), three batches each, alternated (order reversed every other pass),
and keeps each variant's best batch; figures are medians over 41 repetitions (15 with
``--quick``), ratios the median of per-repetition ratios; gc disabled while timing. The entry
scenarios time a loop over 512 precomputed values, reported per call. The machine is shared
and noisy: read medians and ratios, not single figures.

For scale (torch 2.13 on this kind of machine; bench/bench_torch.py measures both in one run:
S1's whole-call overhead, and S5rr minus S5): torch.compile pays
about 21 us of wrapper overhead per hit and about 1-1.4 us per failing entry it walks past.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import platform
import sys
import time
import timeit
import tracemalloc
from collections.abc import Callable
from typing import Any

from _timing import median, meta, time_variants

import jitguard
from jitguard import cache_of, specialize
from jitguard._src.dispatch import fast

LRU_TARGET = 2.0  # the pure-Python dispatcher
LRU_TARGET_C = 1.2  # with the C hot path (issue 13)
ENTRIES_TARGET = 1.5
ENTRY_COUNTS = (1, 8, 64, 512)
LOOP = 512  # values per timed loop in the entry scenarios
SCALE_SIZES = (10, 1_000, 10_000)
MISS_RATIO_TARGET = 1.5
MISS_MS_TARGET = 0.3
BYTES_TARGET = 8 * 1024
SCALE_HIT_TARGET = 1.2


def time_alternating(
    stmts: dict[str, tuple[str, dict[str, Any]]], reps: int, batch_s: float, per: int = 1,
    inner: int = 3,
) -> dict[str, list[float]]:
    """ns per call of each statement (divided by ``per``): per repetition, the best of
    ``inner`` batches, the statements alternated within the repetition (order reversed on
    every other pass); gc disabled."""
    timers = {k: timeit.Timer(s, globals=g) for k, (s, g) in stmts.items()}
    return time_variants(timers, reps, batch_s, per=per, inner=inner)


# ---- scenario o: overhead against lru_cache ----------------------------------------------


def _artifact(n: int) -> Callable[..., Any]:
    ns: dict[str, Any] = {}
    params = ", ".join(f"a{i}" for i in range(n))
    exec(f"def artifact({params}):\n    return a0\n", ns)
    return ns["artifact"]  # type: ignore[no-any-return]


def _modes() -> list[str]:
    """The dispatcher modes this run can time: "c" (the C hot path, when built) and "py"."""
    return (["c"] if fast.available() else []) + ["py"]


def _specialize_in(mode: str, *args: Any, **kwargs: Any) -> Any:
    """``specialize`` with the C hot path on ("c") or off ("py")."""
    old = fast.set_enabled(mode == "c")
    try:
        spec = specialize(*args, **kwargs)
    finally:
        fast.set_enabled(old)
    assert cache_of(spec).dispatcher.c_path == (mode == "c")
    return spec


def scenario_overhead(n_args: int, reps: int, batch_s: float) -> dict[str, Any]:
    art = _artifact(n_args)
    modes = _modes()
    specs = {m: _specialize_in(m, art, compiler=lambda r: art) for m in modes}
    lru = functools.lru_cache(maxsize=None)(art)
    args = ", ".join(str(i + 1) for i in range(n_args))
    g: dict[str, Any] = {"art": art, "lru": lru, **{f"spec_{m}": specs[m] for m in modes}}
    exec("; ".join(f"spec_{m}({args}); spec_{m}({args})" for m in modes) + f"; lru({args})", g)
    for spec in specs.values():
        assert cache_of(spec).stats().hits == 1
    names = ["art", "lru", *(f"spec_{m}" for m in modes)]
    times = time_alternating({k: (f"{k}({args})", g) for k in names}, reps, batch_s)
    out: dict[str, Any] = {
        "title": f"{n_args} int arg{'s' if n_args > 1 else ''}: hit overhead vs lru_cache",
        "artifact_ns": round(median(times["art"]), 1),
        "lru_cache_ns": round(median(times["lru"]), 1),
    }
    for m in modes:
        spec = specs[m]
        assert cache_of(spec).stats().compiles == 1, "the benchmark recompiled"
        overhead = [s - a for s, a in zip(times[f"spec_{m}"], times["art"], strict=True)]
        ratios = [o / lr for o, lr in zip(overhead, times["lru"], strict=True)]
        ratio = median(ratios)
        target = LRU_TARGET_C if m == "c" else LRU_TARGET
        out[m] = {
            "hit_ns": round(median(times[f"spec_{m}"]), 1),
            "overhead_ns": round(median(overhead), 1),
            "ratio": round(ratio, 3),
            "target": target,
            "meets_target": ratio <= target,
        }
    return out


# ---- scenario e: hit time by number of entries -------------------------------------------


def _loop_fn(fn: Callable[..., Any]) -> Callable[[list[int]], None]:
    def loop(values: list[int]) -> None:
        for v in values:
            fn(v)

    return loop


def scenario_entries(reps: int, batch_s: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    setup: dict[int, float] = {}
    stmts: dict[str, tuple[str, dict[str, Any]]] = {}

    def body(n: int) -> int:
        return n

    direct = _loop_fn(body)
    stmts["direct"] = ("loop(values)", {"loop": direct, "values": [0] * LOOP})
    for count in ENTRY_COUNTS:
        spec = specialize(body, compiler=lambda r: body, automatic_dynamic=False,
                          recompile_limit=max(ENTRY_COUNTS) * 2)
        t0 = time.perf_counter()
        for v in range(count):
            spec(v)
        setup[count] = time.perf_counter() - t0
        cache = cache_of(spec)
        assert cache.stats().compiles == count
        loop = _loop_fn(spec)
        newest = [count - 1] * LOOP
        cycle = [i % count for i in range(LOOP)]
        stmts[f"e{count}_newest"] = ("loop(values)", {"loop": loop, "values": newest})
        stmts[f"e{count}_lru"] = ("loop(values)", {"loop": loop, "values": cycle})
        out[f"_cache{count}"] = cache
    times = time_alternating(stmts, reps, batch_s, per=LOOP)
    base = {kind: times[f"e1_{kind}"] for kind in ("newest", "lru")}
    results: dict[str, Any] = {}
    for count in ENTRY_COUNTS:
        cache = out[f"_cache{count}"]
        assert cache.stats().compiles == count, "the benchmark recompiled"
        for kind in ("newest", "lru"):
            key = f"e{count}_{kind}"
            ratios = [t / b for t, b in zip(times[key], base[kind], strict=True)]
            ratio = median(ratios)
            results[key] = {
                "title": f"{count} entr{'y' if count == 1 else 'ies'}, hit the "
                         f"{'newest' if kind == 'newest' else 'least recently used'}",
                "entries": count,
                "hit_ns": round(median(times[key]), 1),
                "hit_min_ns": round(min(times[key]), 1),
                "ratio_vs_1_entry": round(ratio, 3),
                "target": ENTRIES_TARGET,
                "meets_target": ratio <= ENTRIES_TARGET,
                "setup_s": round(setup[count], 3),
                "dims": [f"{d.param}:{d.fact}" for d in cache.snapshot().dims],
            }
    results["direct"] = {
        "title": "the body called directly (same loop)",
        "call_ns": round(median(times["direct"]), 1),
    }
    return results


# ---- scenario dyn: a dynamic entry ---------------------------------------------------------


def scenario_dynamic(reps: int, batch_s: float) -> dict[str, Any]:
    def body(n: int) -> int:
        return n

    modes = _modes()
    specs = {m: _specialize_in(m, body, compiler=lambda r: body) for m in modes}
    for spec in specs.values():
        spec(0), spec(1)  # the second call makes n dynamic: entry 2 guards type(n) is int
        assert cache_of(spec).stats().compiles == 2 and cache_of(spec).dynamic
    g: dict[str, Any] = {"body": body, **{f"spec_{m}": specs[m] for m in modes}}
    names = ["body", *(f"spec_{m}" for m in modes)]
    times = time_alternating({k: (f"{k}(100)", g) for k in names}, reps, batch_s)
    out: dict[str, Any] = {
        "title": "hit a dynamic entry (one residual check)",
        "artifact_ns": round(median(times["body"]), 1),
    }
    for m in modes:
        overhead = [s - b for s, b in zip(times[f"spec_{m}"], times["body"], strict=True)]
        assert cache_of(specs[m]).stats().compiles == 2, "the benchmark recompiled"
        out[m] = {"hit_ns": round(median(times[f"spec_{m}"]), 1),
                  "overhead_ns": round(median(overhead), 1)}
    return out


# ---- scenario s: scale ---------------------------------------------------------------------


def _scale_body(n: int) -> int:
    return n


def _scaled(count: int, *, trace: bool = False) -> tuple[Callable[..., Any], float]:
    """A cache of ``count`` entries (values 0..count-1); with ``trace``, the bytes per entry
    that tracemalloc saw between the first entry and the last."""
    spec = specialize(_scale_body, recompile_limit=None, automatic_dynamic=False)
    per_entry = float("nan")
    if trace:
        gc.collect()
        tracemalloc.start()
        try:
            spec(0)
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            for v in range(1, count):
                spec(v)
            gc.collect()
            per_entry = (tracemalloc.get_traced_memory()[0] - before) / max(1, count - 1)
        finally:
            tracemalloc.stop()
    else:
        for v in range(count):
            spec(v)
    assert cache_of(spec).stats().entries == count
    return spec, per_entry


def _time_one_miss(spec: Callable[..., Any], value: int) -> float:
    t0 = time.perf_counter()
    spec(value)
    return (time.perf_counter() - t0) * 1e3


def scenario_scale(reps: int, batch_s: float, quick: bool) -> dict[str, Any]:
    misses = 15 if quick else 41
    caches: dict[int, Callable[..., Any]] = {}
    out: dict[str, Any] = {}
    for count in SCALE_SIZES:
        trace = not quick or count <= 1_000
        t0 = time.perf_counter()
        spec, per_entry = _scaled(count, trace=trace)
        build_s = time.perf_counter() - t0
        caches[count] = spec
        out[f"s{count}"] = {
            "title": f"{count:,} entries",
            "entries": count,
            "bytes_per_entry": None if per_entry != per_entry else round(per_entry),
            "build_s": round(build_s, 2),
            "traced": trace,
        }
    # Small sizes: a fresh cache of that size for each timed miss. The sizes are timed in
    # turn, the order rotated each round, so that the machine's load falls on all alike.
    fresh = {c: [_scaled(c)[0] for _ in range(misses)] for c in SCALE_SIZES if c <= 100}
    times: dict[int, list[float]] = {c: [] for c in SCALE_SIZES}
    for i in range(misses):
        order = SCALE_SIZES[i % len(SCALE_SIZES):] + SCALE_SIZES[: i % len(SCALE_SIZES)]
        for count in order:
            if count in fresh:
                times[count].append(_time_one_miss(fresh[count][i], count))
            else:
                times[count].append(_time_one_miss(caches[count], 10**7 + i))
    for count in SCALE_SIZES:
        out[f"s{count}"]["miss_ms"] = round(median(times[count]), 4)
        out[f"s{count}"]["miss_min_ms"] = round(min(times[count]), 4)
    one, _ = _scaled(1)
    g: dict[str, Any] = {"one": one, **{f"c{c}": caches[c] for c in SCALE_SIZES}}
    hit_value = {c: c // 2 for c in SCALE_SIZES}
    stmts = {"one": ("one(0)", g)}
    stmts.update({f"c{c}": (f"c{c}({hit_value[c]})", g) for c in SCALE_SIZES})
    hits = time_alternating(stmts, reps, batch_s)
    base_miss = out[f"s{SCALE_SIZES[0]}"]["miss_ms"]
    for count in SCALE_SIZES:
        r = out[f"s{count}"]
        ratios = [t / b for t, b in zip(hits[f"c{count}"], hits["one"], strict=True)]
        r["hit_ns"] = round(median(hits[f"c{count}"]), 1)
        r["hit_ratio_vs_1"] = round(median(ratios), 3)
        r["miss_ratio_vs_10"] = round(r["miss_ms"] / base_miss, 3)
        r["meets_target"] = (
            r["miss_ratio_vs_10"] <= MISS_RATIO_TARGET
            and (count != SCALE_SIZES[-1] or r["miss_ms"] <= MISS_MS_TARGET)
            and (r["bytes_per_entry"] is None or r["bytes_per_entry"] <= BYTES_TARGET)
            and r["hit_ratio_vs_1"] <= SCALE_HIT_TARGET
        )
        assert cache_of(caches[count]).stats().entries >= count, "entries were lost"
    out["one_hit_ns"] = round(median(hits["one"]), 1)
    return out


def scenario_lru(reps: int, batch_s: float) -> dict[str, Any]:
    body = _scale_body
    spec = specialize(body, maxsize=512, automatic_dynamic=False)
    lru = functools.lru_cache(maxsize=512)(body)
    for v in range(512):
        spec(v), lru(v)
    g = {"spec": spec, "lru": lru, "body": body}
    times = time_alternating({k: (f"{k}(7)", g) for k in ("body", "spec", "lru")}, reps, batch_s)
    overhead = [s - b for s, b in zip(times["spec"], times["body"], strict=True)]
    ratios = [o / lr for o, lr in zip(overhead, times["lru"], strict=True)]
    assert cache_of(spec).stats().evictions == 0
    return {
        "title": "maxsize=512: hit overhead vs lru_cache(maxsize=512)",
        "hit_ns": round(median(times["spec"]), 1),
        "overhead_ns": round(median(overhead), 1),
        "lru_cache_ns": round(median(times["lru"]), 1),
        "ratio": round(median(ratios), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter repetitions")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    ns = parser.parse_args(argv)
    reps, batch_s = (15, 0.002) if ns.quick else (41, 0.005)
    t_start = time.perf_counter()
    print(
        f"jitguard {getattr(jitguard, '__version__', '')}  python {platform.python_version()}  "
        f"{platform.machine()}  reps={reps}  batch={batch_s * 1e3:.0f}ms"
        f"{'  (quick)' if ns.quick else ''}"
    )
    print(f"targets: hit overhead within {LRU_TARGET_C}x of lru_cache with the C hot path, "
          f"{LRU_TARGET}x in pure Python (1-3 scalar args); "
          f"512 entries within {ENTRIES_TARGET}x of 1 entry")
    print("for scale: torch.compile ~21 us wrapper overhead per hit, ~1-1.4 us per failing "
          "entry walked past")
    print()
    results: dict[str, Any] = {}
    print(f"dispatcher modes: {', '.join(_modes())}"
          + (f" (no C hot path: {fast.why_not()})" if "c" not in _modes() else ""))
    header = (f"{'scenario':<44}{'mode':>5}{'artifact':>9}{'hit':>8}{'overhead':>9}"
              f"{'lru_cache':>10}{'ratio':>7}  target")
    print(header)
    print("-" * len(header))
    for n in (1, 2, 3):
        r = scenario_overhead(n, reps, batch_s)
        results[f"o{n}"] = r
        for m in _modes():
            rm = r[m]
            print(f"(o{n}) {r['title']:<39}{m:>5}{r['artifact_ns']:>9.0f}{rm['hit_ns']:>8.0f}"
                  f"{rm['overhead_ns']:>9.0f}{r['lru_cache_ns']:>10.0f}{rm['ratio']:>7.2f}  "
                  f"{'ok' if rm['meets_target'] else 'MISSED'} (<= {rm['target']})", flush=True)
    print()
    header = f"{'scenario':<52}{'hit_ns':>8}{'min':>8}{'vs 1 entry':>11}  target"
    print(header)
    print("-" * len(header))
    entries = scenario_entries(reps, batch_s)
    for key, r in entries.items():
        if key == "direct":
            continue
        results[key] = r
        label = f"({key}) {r['title']}"
        print(f"{label:<52}{r['hit_ns']:>8.0f}{r['hit_min_ns']:>8.0f}"
              f"{r['ratio_vs_1_entry']:>11.2f}  "
              f"{'ok' if r['meets_target'] else 'MISSED'} (<= {ENTRIES_TARGET})", flush=True)
    results["direct"] = entries["direct"]
    print(f"(direct) {entries['direct']['title']}: {entries['direct']['call_ns']:.0f} ns per call")
    print("setup (compiling the entries, with their recompile reasons): "
          + ", ".join(f"{c}: {entries[f'e{c}_newest']['setup_s']:.2f} s" for c in ENTRY_COUNTS))
    print()
    print(f"scale targets: miss at 10,000 within {MISS_RATIO_TARGET}x of at 10 and under "
          f"{MISS_MS_TARGET} ms; <= {BYTES_TARGET} bytes per entry; hit at 10,000 within "
          f"{SCALE_HIT_TARGET}x of at 1")
    header = (f"{'scenario':<22}{'miss_ms':>9}{'min':>8}{'vs 10':>7}{'bytes/entry':>13}"
              f"{'hit_ns':>8}{'vs 1':>7}{'build_s':>9}  target")
    print(header)
    print("-" * len(header))
    scale = scenario_scale(reps, batch_s, ns.quick)
    for count in SCALE_SIZES:
        r = scale[f"s{count}"]
        results[f"s{count}"] = r
        per = "-" if r["bytes_per_entry"] is None else f"{r['bytes_per_entry']:,}"
        print(f"(s{count}) {r['title']:<{16 - len(str(count))}}{r['miss_ms']:>9.3f}"
              f"{r['miss_min_ms']:>8.3f}{r['miss_ratio_vs_10']:>7.2f}{per:>13}"
              f"{r['hit_ns']:>8.0f}{r['hit_ratio_vs_1']:>7.2f}{r['build_s']:>9.2f}  "
              f"{'ok' if r['meets_target'] else 'MISSED'}", flush=True)
    print(f"(1 entry: hit {scale['one_hit_ns']:.0f} ns)")
    print()
    lr = scenario_lru(reps, batch_s)
    results["lru"] = lr
    print(f"(lru) {lr['title']}: hit {lr['hit_ns']:.0f} ns, overhead {lr['overhead_ns']:.0f} ns, "
          f"lru_cache {lr['lru_cache_ns']:.0f} ns, ratio {lr['ratio']:.2f}")
    d = scenario_dynamic(reps, batch_s)
    results["dyn"] = d
    print(f"(dyn) {d['title']}: artifact {d['artifact_ns']:.0f} ns; "
          + "; ".join(f"{m}: hit {d[m]['hit_ns']:.0f} ns, overhead {d[m]['overhead_ns']:.0f} ns"
                      for m in _modes()))
    results["meta"] = {
        **meta(reps, batch_s, ns.quick),
        "wall_s": round(time.perf_counter() - t_start, 2),
    }
    print(f"\nwall time {results['meta']['wall_s']:.1f} s")
    if ns.json:
        print(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
