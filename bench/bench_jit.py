"""Benchmark: a Numba JIT written on jitguard (examples/numba_jit.py) against Numba's own
dispatcher, per call, with the overload's C entry point alone as the floor.

Run by hand (not a timed test; needs the ``numba`` extra):

    .venv/bin/python bench/bench_jit.py            # full run
    .venv/bin/python bench/bench_jit.py --quick    # a short run
    .venv/bin/python bench/bench_jit.py --json     # last line: one JSON object

Rows (the function is ``kernel(x) -> x``, compiled by Numba for each argument type):
  (int3) an int, with 3 entries (float, complex, int; the int hit);
  (arr) an f64[8] array, one entry;
  (dt8_last, dt8_first) 8 entries for 8 array dtypes, hitting the last made and the first;
  (mixed8) 8 entries of mixed types (bool, int, float, complex, 3 numpy scalars, an f64
      array), hitting the array.
Columns: ``numba`` (Numba's dispatcher, with the same overloads compiled), ``jitguard`` (the
example's ``@myjit``), ``pure`` (the same JIT in a child process run with
``JITGUARD_PURE_PYTHON=1``, which forces the pure-Python dispatcher where a C accelerator
exists; where jitguard has none, both columns time the same path, and the output says so),
``entry`` (the overload's C entry point called directly). Overhead is a column minus
``entry``; the ratios are overhead over Numba's overhead, each the median of per-repetition
ratios. Goals: pure Python within 1.5x of Numba's overhead on every row (within 1x with a C
accelerator); the 8th dtype costs the same as the 1st (``dt8_last`` / ``dt8_first`` near 1).
Timing: each repetition times the variants of a row in ``timeit`` batches of about 5 ms
(2 ms with ``--quick``), best of three, alternated; medians over 41 repetitions (15 with
``--quick``); gc disabled while timing. The machine is shared and noisy: read medians and
ratios, not single figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import timeit
from pathlib import Path
from typing import Any

from _timing import median, meta, time_variants

import jitguard as jg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))

PURE_TARGET = 1.5
C_TARGET = 1.0
PURE_ENV = "JITGUARD_PURE_PYTHON"


def kernel(x: Any) -> Any:
    return x


def rows() -> dict[str, tuple[str, list[Any], Any]]:
    """Row key -> (title, the calls that make the entries, in order; the call timed)."""
    import numpy as np

    dtypes = [np.float64, np.float32, np.int64, np.int32, np.int16, np.int8, np.uint8,
              np.complex128]
    arrays = [np.zeros(8, dtype=d) for d in dtypes]
    mixed = [True, 1, 1.0, 1j, np.float32(1), np.int64(1), np.float64(1), np.zeros(8)]
    return {
        "int3": ("int, 3 entries", [1.0, 1j, 1], 1),
        "arr": ("f64[8] array", [np.zeros(8)], np.zeros(8)),
        "dt8_last": ("8 array dtypes, hit the last", arrays, arrays[-1]),
        "dt8_first": ("8 array dtypes, hit the first", arrays, arrays[0]),
        "mixed8": ("8 mixed types, hit the array", mixed, mixed[-1]),
    }


def accelerated() -> bool:
    """Whether functions specialized now get jitguard's C hot path (so the two modes
    differ); False where this jitguard has none."""
    enabled = getattr(jg, "speedups_enabled", None)
    return bool(enabled is not None and enabled())


def time_row(key: str, reps: int, batch_s: float) -> dict[str, Any]:
    import numba
    from numba_jit import myjit

    title, calls, hit = rows()[key]
    ours = myjit(kernel)
    theirs = numba.njit(kernel)
    for value in calls:
        ours(value)
        theirs(value)
    cache = jg.cache_of(ours)
    entry = cache.lookup(hit)
    assert entry is not None and len(cache.entries()) == len(calls), key
    sig = (numba.typeof(hit),)
    ep = theirs.overloads[sig].entry_point
    timers = {
        "numba": timeit.Timer("f(x)", globals={"f": theirs, "x": hit}),
        "jitguard": timeit.Timer("f(x)", globals={"f": ours, "x": hit}),
        "entry": timeit.Timer("f(x)", globals={"f": ep, "x": hit}),
        "artifact": timeit.Timer("f(x)", globals={"f": entry.artifact, "x": hit}),
    }
    if key == "dt8_first":  # the last dtype too, alternated with the first: a fair ratio
        timers["jitguard_last"] = timeit.Timer("f(x)", globals={"f": ours, "x": calls[-1]})
    samples = time_variants(timers, reps, batch_s, inner=3)
    entry_ns = [min(a, b) for a, b in zip(samples["entry"], samples["artifact"], strict=True)]
    over = {k: [t - e for t, e in zip(samples[k], entry_ns, strict=True)]
            for k in ("numba", "jitguard")}
    ratios = [o / max(n, 1.0) for o, n in zip(over["jitguard"], over["numba"], strict=True)]
    return {
        "title": title,
        "entries": len(calls),
        "numba_ns": median(samples["numba"]),
        "jitguard_ns": median(samples["jitguard"]),
        "entry_ns": median(entry_ns),
        "numba_overhead_ns": median(over["numba"]),
        "jitguard_overhead_ns": median(over["jitguard"]),
        "ratio": median(ratios),
        "last_vs_first": (median(a / b for a, b in zip(samples["jitguard_last"],
                                                         samples["jitguard"], strict=True))
                          if "jitguard_last" in samples else None),
    }


def run_rows(reps: int, batch_s: float) -> dict[str, dict[str, Any]]:
    return {key: time_row(key, reps, batch_s) for key in rows()}


def child(quick: bool) -> dict[str, dict[str, Any]]:
    """The rows timed in a child process with ``JITGUARD_PURE_PYTHON=1``."""
    env = {**os.environ, PURE_ENV: "1"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--json"]
    if quick:
        cmd.append("--quick")
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    result: dict[str, dict[str, Any]] = json.loads(out.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter repetitions")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    reps, batch_s = (15, 0.002) if ns.quick else (41, 0.005)
    try:
        import numba
    except ImportError:
        print("bench_jit needs numba (pip install numba)")
        return 0
    if ns.child:
        print(json.dumps(run_rows(reps, batch_s)))
        return 0
    t_start = time.perf_counter()
    print(f"numba {numba.__version__}  python {sys.version.split()[0]}  reps={reps}  "
          f"batch={batch_s * 1e3:.0f}ms{'  (quick)' if ns.quick else ''}")
    acc = accelerated()
    print("jitguard column: " + ("the C dispatcher" if acc else
          "no C accelerator here: 'jitguard' and 'pure' time the same pure-Python path"))
    print(f"goals: overhead above the entry point within {PURE_TARGET}x of Numba's (pure "
          f"Python), {C_TARGET}x (C); the 8th dtype as fast as the 1st")
    print()
    mine = run_rows(reps, batch_s)
    pure = child(ns.quick)
    header = (f"{'row':<40}{'numba':>7}{'jitguard':>9}{'pure':>7}{'entry':>7}"
              f"{'ovh nb':>8}{'ovh jg':>8}{'ovh pure':>9}{'jg/nb':>7}{'pure/nb':>8}")
    print(header)
    print("-" * len(header))
    results: dict[str, Any] = {}
    for key, r in mine.items():
        p = pure[key]
        r.update(pure_ns=p["jitguard_ns"], pure_overhead_ns=p["jitguard_overhead_ns"],
                 pure_ratio=p["ratio"], pure_numba_overhead_ns=p["numba_overhead_ns"])
        r["meets_target"] = (r["pure_ratio"] <= PURE_TARGET
                             and (not acc or r["ratio"] <= C_TARGET))
        results[key] = r
        print(f"({key}) {r['title']:<{36 - len(key)}}{r['numba_ns']:>7.0f}"
              f"{r['jitguard_ns']:>9.0f}{r['pure_ns']:>7.0f}{r['entry_ns']:>7.0f}"
              f"{r['numba_overhead_ns']:>8.0f}{r['jitguard_overhead_ns']:>8.0f}"
              f"{r['pure_overhead_ns']:>9.0f}{r['ratio']:>7.2f}{r['pure_ratio']:>8.2f}"
              f"  {'ok' if r['meets_target'] else 'MISSED'}", flush=True)
    same = mine["dt8_first"]["last_vs_first"]
    results["dtype_last_vs_first"] = {"jitguard": same,
                                      "pure": pure["dt8_first"]["last_vs_first"]}
    print(f"\n8th dtype vs 1st (hit time, alternated, median of per-repetition ratios): "
          f"jitguard {same:.2f}, pure {pure['dt8_first']['last_vs_first']:.2f}")
    results["accelerated"] = acc
    results["meta"] = {**meta(reps, batch_s, ns.quick),
                       "wall_s": round(time.perf_counter() - t_start, 2)}
    print(f"wall time {results['meta']['wall_s']:.1f} s")
    if ns.json:
        print(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
