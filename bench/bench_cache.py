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
import json
import platform
import sys
import time
import timeit
from collections.abc import Callable
from typing import Any

from _timing import median, meta, time_variants

import jitguard
from jitguard import cache_of, specialize

LRU_TARGET = 2.0
ENTRIES_TARGET = 1.5
ENTRY_COUNTS = (1, 8, 64, 512)
LOOP = 512  # values per timed loop in the entry scenarios


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


def scenario_overhead(n_args: int, reps: int, batch_s: float) -> dict[str, Any]:
    art = _artifact(n_args)
    spec = specialize(art, compiler=lambda r: art)
    lru = functools.lru_cache(maxsize=None)(art)
    args = ", ".join(str(i + 1) for i in range(n_args))
    g = {"spec": spec, "art": art, "lru": lru}
    exec(f"spec({args}); spec({args}); lru({args})", g)
    assert cache_of(spec).stats().hits == 1
    times = time_alternating(
        {k: (f"{k}({args})", g) for k in ("art", "spec", "lru")}, reps, batch_s
    )
    overhead = [s - a for s, a in zip(times["spec"], times["art"], strict=True)]
    ratios = [o / lr for o, lr in zip(overhead, times["lru"], strict=True)]
    assert cache_of(spec).stats().compiles == 1, "the benchmark recompiled"
    ratio = median(ratios)
    return {
        "title": f"{n_args} int arg{'s' if n_args > 1 else ''}: hit overhead vs lru_cache",
        "artifact_ns": round(median(times["art"]), 1),
        "hit_ns": round(median(times["spec"]), 1),
        "overhead_ns": round(median(overhead), 1),
        "lru_cache_ns": round(median(times["lru"]), 1),
        "ratio": round(ratio, 3),
        "target": LRU_TARGET,
        "meets_target": ratio <= LRU_TARGET,
    }


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

    spec = specialize(body, compiler=lambda r: body)
    spec(0), spec(1)  # the second call makes n dynamic: entry 2 guards type(n) is int
    cache = cache_of(spec)
    assert cache.stats().compiles == 2 and cache.dynamic
    g = {"spec": spec, "body": body}
    times = time_alternating({k: (f"{k}(100)", g) for k in ("body", "spec")}, reps, batch_s)
    overhead = [s - b for s, b in zip(times["spec"], times["body"], strict=True)]
    assert cache.stats().compiles == 2, "the benchmark recompiled"
    return {
        "title": "hit a dynamic entry (one residual check)",
        "artifact_ns": round(median(times["body"]), 1),
        "hit_ns": round(median(times["spec"]), 1),
        "overhead_ns": round(median(overhead), 1),
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
    print(f"targets: hit overhead within {LRU_TARGET}x of lru_cache (1-3 scalar args); "
          f"512 entries within {ENTRIES_TARGET}x of 1 entry")
    print("for scale: torch.compile ~21 us wrapper overhead per hit, ~1-1.4 us per failing "
          "entry walked past")
    print()
    results: dict[str, Any] = {}
    header = (f"{'scenario':<44}{'artifact':>9}{'hit':>8}{'overhead':>9}{'lru_cache':>10}"
              f"{'ratio':>7}  target")
    print(header)
    print("-" * len(header))
    for n in (1, 2, 3):
        r = scenario_overhead(n, reps, batch_s)
        results[f"o{n}"] = r
        print(f"(o{n}) {r['title']:<39}{r['artifact_ns']:>9.0f}{r['hit_ns']:>8.0f}"
              f"{r['overhead_ns']:>9.0f}{r['lru_cache_ns']:>10.0f}{r['ratio']:>7.2f}  "
              f"{'ok' if r['meets_target'] else 'MISSED'} (<= {LRU_TARGET})", flush=True)
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
    d = scenario_dynamic(reps, batch_s)
    results["dyn"] = d
    print(f"(dyn) {d['title']}: hit {d['hit_ns']:.0f} ns, artifact {d['artifact_ns']:.0f} ns, "
          f"overhead {d['overhead_ns']:.0f} ns")
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
