"""Benchmark: the compiled guard check against a hand-written Python check, and compile time.

Run by hand (not a timed test):

    .venv/bin/python bench/bench_compiler.py            # full run (~15 s)
    .venv/bin/python bench/bench_compiler.py --quick    # < 30 s on a busy 2-core machine
    .venv/bin/python bench/bench_compiler.py --json     # last line: one JSON object

Method. Each scenario builds guards on one frame, compiles them in positional mode
(``arg_names=``) and calls ``check.fn`` directly. The hand-written function takes the same
arguments and does the same checks the way a careful person writes them
(``type(n) is int and n == 7``, one local per value read). For the scenarios too large to
type out (50 leaves, 1,000 guards) the hand-written source is produced by a plain template
in that same style, with literal constants, and compiled once. Timing: ``timeit`` batches
of about 15 ms (5 ms with ``--quick``), gc disabled while timing, compiled and hand-written
alternated within each repetition, medians (and a min) over the repetitions; the ratio is
the median of the per-repetition ratios (each pair timed back to back under the same load).
The machine is shared and noisy, so read medians and ratios, not single figures.

Before timing, every scenario asserts that the compiled check and the hand-written one both
accept the frame and both reject a mutated copy of it.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from typing import Any

from _timing import meta, time_variants

import jitguard
from jitguard import (
    AttrSource,
    GetItemSource,
    Guard,
    GuardBuilder,
    LocalSource,
    compile_guards,
)
from jitguard._src.compiler import codecache  # its code cache, for cold timings

RATIO_TARGET = 1.2
COMPILE_GUARDS = 10_000
COMPILE_TARGET_S = 0.5

EQ = GuardBuilder.EQUALS_MATCH
CONST = GuardBuilder.CONSTANT_MATCH
TYPE = GuardBuilder.TYPE_MATCH
KEYS = GuardBuilder.DICT_KEYS_MATCH
SEQ = GuardBuilder.SEQUENCE_LENGTH


class Node:
    """A plain object for the attribute-graph scenario (module level, so held strongly)."""

    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


class Scenario:
    def __init__(
        self,
        key: str,
        title: str,
        args: dict[str, Any],
        guards: list[Guard],
        hand: Callable[..., bool],
        mutated: dict[str, Any],
    ) -> None:
        self.key, self.title, self.args, self.guards = key, title, args, guards
        self.hand, self.mutated = hand, mutated


def _hand_from_source(name: str, src: str, ns: dict[str, Any]) -> Callable[..., bool]:
    code = compile(src, f"<hand {name}>", "exec")
    exec(code, ns)
    fn: Callable[..., bool] = ns[name]
    return fn


# ---- (a) one int equality --------------------------------------------------------------


def hand_a(n: Any) -> bool:
    return type(n) is int and n == 7


def scenario_a() -> Scenario:
    guards = [LocalSource("n").make_guard(EQ)]
    return Scenario("a", "1 int equality", {"n": 7}, guards, hand_a, {"n": 8})


# ---- (b) five mixed leaves -------------------------------------------------------------


def hand_b(n: Any, lr: Any, mode: Any, flag: Any, opt: Any) -> bool:
    return (
        type(n) is int
        and n == 7
        and type(lr) is float
        and lr == 0.1
        and type(mode) is str
        and mode == "train"
        and flag is True
        and opt is None
    )


def scenario_b() -> Scenario:
    args = {"n": 7, "lr": 0.1, "mode": "train", "flag": True, "opt": None}
    guards = [LocalSource(k).make_guard(CONST) for k in args]
    return Scenario("b", "5 mixed leaves", args, guards, hand_b, {**args, "mode": "eval"})


# ---- (c) nested dict/list, 50 leaves ---------------------------------------------------


def _key_types(d: dict[Any, Any]) -> str:
    """Source text for the list of a dict's key types (builtin types only)."""
    return "[" + ", ".join(type(k).__name__ for k in d) + "]"


def _nested_config() -> dict[str, Any]:
    layers = [
        {"width": 64 * (i + 1), "dropout": 0.1 * i, "act": "relu", "bias": i % 2 == 0}
        for i in range(12)
    ]
    return {"layers": layers, "lr": 0.001, "name": "mlp"}


def scenario_c() -> Scenario:
    cfg = _nested_config()
    root = LocalSource("cfg")
    layers = GetItemSource(root, "layers")
    guards = [root.make_guard(KEYS), layers.make_guard(SEQ)]
    for k in ("lr", "name"):
        guards.append(GetItemSource(root, k).make_guard(CONST))
    for i, layer in enumerate(cfg["layers"]):
        item = GetItemSource(layers, i)
        guards.append(item.make_guard(KEYS))
        for k in layer:
            guards.append(GetItemSource(item, k).make_guard(CONST))
    leaves = 2 + 4 * len(cfg["layers"])
    assert leaves == 50, leaves

    # The hand-written check, in the style a careful person writes it.
    lines = [
        "def hand_c(cfg):",
        # DICT_KEYS_MATCH is type-exact on keys ({1: x} and {True: x} differ), so the
        # hand-written check compares the key types too, as a careful person would.
        f"    if type(cfg) is not dict or [*map(type, cfg)] != {_key_types(cfg)}"
        f" or list(cfg) != {list(cfg)!r}:",
        "        return False",
        "    lr = cfg['lr']",
        f"    if type(lr) is not float or lr != {cfg['lr']!r}:",
        "        return False",
        "    name = cfg['name']",
        f"    if type(name) is not str or name != {cfg['name']!r}:",
        "        return False",
        "    layers = cfg['layers']",
        f"    if type(layers) is not list or len(layers) != {len(cfg['layers'])}:",
        "        return False",
    ]
    for i, layer in enumerate(cfg["layers"]):
        lines += [
            f"    l{i} = layers[{i}]",
            f"    if type(l{i}) is not dict or [*map(type, l{i})] != {_key_types(layer)}"
            f" or list(l{i}) != {list(layer)!r}:",
            "        return False",
        ]
        for k, v in layer.items():
            var = f"l{i}_{k}"
            lines.append(f"    {var} = l{i}[{k!r}]")
            if type(v) is bool:
                lines.append(f"    if {var} is not {v!r}:")
            else:
                lines.append(f"    if type({var}) is not {type(v).__name__} or {var} != {v!r}:")
            lines.append("        return False")
    lines.append("    return True")
    hand = _hand_from_source("hand_c", "\n".join(lines) + "\n", {})
    mutated = _nested_config()
    mutated["layers"][11]["act"] = "gelu"
    return Scenario("c", "nested dict/list, 50 leaves", {"cfg": cfg}, guards, hand, {"cfg": mutated})


# ---- (d) object graph four attributes deep ---------------------------------------------


def _graph() -> Node:
    return Node(a=Node(b=Node(c=Node(d=3, e="x"))))


def hand_d(m: Any) -> bool:
    if type(m) is not Node:
        return False
    a = m.a
    if type(a) is not Node:
        return False
    b = a.b
    if type(b) is not Node:
        return False
    c = b.c
    if type(c) is not Node:
        return False
    d = c.d
    if type(d) is not int or d != 3:
        return False
    e = c.e
    return type(e) is str and e == "x"


def scenario_d() -> Scenario:
    m = LocalSource("m")
    a = AttrSource(m, "a")
    b = AttrSource(a, "b")
    c = AttrSource(b, "c")
    guards = [
        m.make_guard(TYPE),
        a.make_guard(TYPE),
        b.make_guard(TYPE),
        c.make_guard(TYPE),
        AttrSource(c, "d").make_guard(EQ),
        AttrSource(c, "e").make_guard(EQ),
    ]
    mutated = _graph()
    mutated.a.b.c.e = "y"
    return Scenario("d", "object graph, 4 attributes deep", {"m": _graph()}, guards, hand_d,
                    {"m": mutated})


# ---- (e) 1,000 guards ------------------------------------------------------------------


def _records(n: int, shift: int = 0) -> list[dict[str, Any]]:
    return [
        {"id": i + shift, "scale": (i + shift) / 8, "tag": f"t{(i + shift) % 7}",
         "on": (i + shift) % 3 == 0}
        for i in range(n)
    ]


def _record_guards(n: int, arg: str = "records") -> list[Guard]:
    """``n`` records, each a dict guarded by its keys and its four values (5 guards), and the
    list guarded by type and length: ``5 * n + 1`` guards."""
    root = LocalSource(arg)
    guards = [root.make_guard(SEQ)]
    for i in range(n):
        item = GetItemSource(root, i)
        guards.append(item.make_guard(KEYS))
        for k in ("id", "scale", "tag", "on"):
            guards.append(GetItemSource(item, k).make_guard(CONST))
    return guards


def scenario_e() -> Scenario:
    n = 200
    records = _records(n)
    guards = _record_guards(n)
    assert len(guards) == 1001
    lines = [
        "def hand_e(records):",
        f"    if type(records) is not list or len(records) != {n}:",
        "        return False",
    ]
    for i, rec in enumerate(records):
        lines += [
            f"    r = records[{i}]",
            f"    if type(r) is not dict or [*map(type, r)] != {_key_types(rec)}"
            f" or list(r) != {list(rec)!r}:",
            "        return False",
        ]
        for k, v in rec.items():
            lines.append(f"    x = r[{k!r}]")
            if type(v) is bool:
                lines.append(f"    if x is not {v!r}:")
            else:
                lines.append(f"    if type(x) is not {type(v).__name__} or x != {v!r}:")
            lines.append("        return False")
    lines.append("    return True")
    hand = _hand_from_source("hand_e", "\n".join(lines) + "\n", {})
    mutated = _records(n)
    mutated[-1]["tag"] = "changed"
    return Scenario("e", "1,000 guards", {"records": records}, guards, hand,
                    {"records": mutated})


SCENARIOS = [scenario_a, scenario_b, scenario_c, scenario_d, scenario_e]


# ---- timing ----------------------------------------------------------------------------


def _timer(fn: Callable[..., bool], args: tuple[Any, ...]) -> timeit.Timer:
    names = [f"a{i}" for i in range(len(args))]
    ns: dict[str, Any] = {"_fn": fn, **{f"_{n}": a for n, a in zip(names, args, strict=True)}}
    setup = "; ".join(["fn = _fn", *(f"{n} = _{n}" for n in names)])
    return timeit.Timer(f"fn({', '.join(names)})", setup=setup, globals=ns)


def time_pair(
    fns: dict[str, Callable[..., bool]], args: tuple[Any, ...], reps: int, batch_s: float
) -> dict[str, list[float]]:
    """ns per call for each function, one batch each per repetition, alternated."""
    return time_variants({k: _timer(f, args) for k, f in fns.items()}, reps, batch_s)


def run_scenario(sc: Scenario, reps: int, batch_s: float) -> dict[str, Any]:
    names = list(sc.args)
    check = compile_guards(sc.guards, f_locals=sc.args, arg_names=names, name=sc.key)
    args = tuple(sc.args[k] for k in names)
    bad = tuple(sc.mutated[k] for k in names)
    fn = check.fn
    assert fn(*args) and sc.hand(*args), f"{sc.key}: a check rejects its own frame"
    assert not fn(*bad) and not sc.hand(*bad), f"{sc.key}: a check accepts the mutated frame"
    times = time_pair({"compiled": fn, "hand": sc.hand}, args, reps, batch_s)
    comp, hand = statistics.median(times["compiled"]), statistics.median(times["hand"])
    # The two batches of one repetition run back to back, so their ratio sees the same load;
    # the median of those ratios is the figure that survives a noisy machine.
    ratio = statistics.median(
        c / h for c, h in zip(times["compiled"], times["hand"], strict=True)
    )
    return {
        "title": sc.title,
        "guards": len(sc.guards),
        "leaves": len(check.leaves),
        "compiled_ns": round(comp, 1),
        "compiled_min_ns": round(min(times["compiled"]), 1),
        "hand_ns": round(hand, 1),
        "hand_min_ns": round(min(times["hand"]), 1),
        "ratio": round(ratio, 3),
        "ratio_of_medians": round(comp / hand, 3),
        "ratio_of_mins": round(min(times["compiled"]) / min(times["hand"]), 3),
        "target": RATIO_TARGET,
        "meets_target": ratio <= RATIO_TARGET,
    }


def time_compile(reps: int) -> dict[str, Any]:
    """Make 10,000 guards and ``compile_guards`` them, ``reps`` times; medians.

    Cold: each repetition names its argument differently and starts with an empty cache of
    compiled code, so ``compile()`` runs for every distinct text (no reuse from an earlier
    repetition, see [Note: Compiled-code reuse] in codecache.py; within one build, chunks of
    the same shape still share one compile, see [Note: Chunked checks]). Warm: a recompile
    of the same structure with other constant values (every record's values changed), which
    reuses the compiled code objects.
    """
    n = COMPILE_GUARDS // 5
    make_s: list[float] = []
    cold_s: list[float] = []
    warm_s: list[float] = []
    for rep in range(reps):
        records = _records(n)
        arg = f"records_{rep}_{time.perf_counter_ns()}"
        codecache.clear()
        gc.collect()
        t0 = time.perf_counter()
        guards = _record_guards(n, arg)
        t1 = time.perf_counter()
        check = compile_guards(guards, f_locals={arg: records}, arg_names=[arg])
        t2 = time.perf_counter()
        assert check.fn(records)
        make_s.append(t1 - t0)
        cold_s.append(t2 - t1)
        del check, guards
        shifted = _records(n, shift=rep + 1)
        guards = _record_guards(n, arg)
        gc.collect()
        t3 = time.perf_counter()
        check = compile_guards(guards, f_locals={arg: shifted}, arg_names=[arg])
        t4 = time.perf_counter()
        assert check.fn(shifted) and not check.fn(records)
        warm_s.append(t4 - t3)
        del check, guards
    cold = statistics.median(cold_s)
    return {
        "guards": len(_record_guards(n)),
        "reps": reps,
        "make_guards_s": round(statistics.median(make_s), 4),
        "compile_guards_s": round(cold, 4),
        "compile_guards_min_s": round(min(cold_s), 4),
        "make_and_compile_s": round(statistics.median(
            [m + c for m, c in zip(make_s, cold_s, strict=True)]), 4),
        "recompile_same_structure_s": round(statistics.median(warm_s), 4),
        "recompile_same_structure_min_s": round(min(warm_s), 4),
        "target_s": COMPILE_TARGET_S,
        "meets_target": cold <= COMPILE_TARGET_S,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter repetitions")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    ns = parser.parse_args(argv)
    reps, batch_s, compile_reps = (11, 0.005, 3) if ns.quick else (31, 0.015, 7)

    print(
        f"jitguard {getattr(jitguard, '__version__', '')}  python {platform.python_version()}  "
        f"{platform.machine()}  reps={reps}  batch={batch_s * 1e3:.0f}ms"
        f"{'  (quick)' if ns.quick else ''}"
    )
    print(
        f"target: compiled within {RATIO_TARGET}x of hand-written per scenario (ratio: median "
        f"over repetitions of compiled/hand, timed back to back; med/med: ratio of medians)"
    )
    print()
    header = (
        f"{'scenario':<36}{'guards':>7}{'check_ns':>10}{'min':>8}{'hand_ns':>9}{'min':>8}"
        f"{'ratio':>7}{'med/med':>8}  target"
    )
    print(header)
    print("-" * len(header))
    results: dict[str, Any] = {}
    for make in SCENARIOS:
        sc = make()
        r = run_scenario(sc, reps, batch_s)
        results[sc.key] = r
        print(
            f"({sc.key}) {r['title']:<32}{r['guards']:>7}{r['compiled_ns']:>10.0f}"
            f"{r['compiled_min_ns']:>8.0f}{r['hand_ns']:>9.0f}{r['hand_min_ns']:>8.0f}"
            f"{r['ratio']:>7.2f}{r['ratio_of_medians']:>8.2f}  "
            f"{'ok' if r['meets_target'] else 'MISSED'} (<= {RATIO_TARGET})",
            flush=True,
        )
    print()
    c = time_compile(compile_reps)
    results["compile_10k"] = c
    print(
        f"build + compile {c['guards']:,} guards, cold (median of {c['reps']}): "
        f"compile_guards {c['compile_guards_s'] * 1e3:.0f} ms "
        f"(min {c['compile_guards_min_s'] * 1e3:.0f} ms); making the Guard objects "
        f"{c['make_guards_s'] * 1e3:.0f} ms more; target compile_guards < {COMPILE_TARGET_S} s: "
        f"{'ok' if c['meets_target'] else 'MISSED'}"
    )
    print(
        f"recompile, same structure, new constants (compiled code reused): "
        f"{c['recompile_same_structure_s'] * 1e3:.0f} ms "
        f"(min {c['recompile_same_structure_min_s'] * 1e3:.0f} ms)"
    )
    results["meta"] = meta(reps, batch_s, ns.quick)
    if ns.json:
        print(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
