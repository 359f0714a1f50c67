"""Benchmark: the same functions under ``torch.compile(backend="eager")`` and under
``jitguard.torch.compile``, in one run: the guard check alone and the whole-call overhead of
a cache hit.

Run by hand (not a timed test):

    .venv/bin/python bench/bench_torch.py            # full run
    .venv/bin/python bench/bench_torch.py --quick    # short run (torch.compile warm-up dominates)
    .venv/bin/python bench/bench_torch.py --json     # last line: one JSON object

Method (as in the reference baseline, /work/shared/reference/torch-guards.md §d):
``torch.set_num_threads(1)``; every figure is a ``timeit`` batch of about 10 ms (3 ms with
``--quick``) with gc disabled, repeated 35 times (9 with ``--quick``); the compared variants
(torch check, jitguard check, torch call, jitguard call, plain call) are timed one after the
other within each repetition, and the order rotates between repetitions; figures are
medians over the repetitions (``call``: minima, below). Where a scenario cycles through several inputs (S5rr, S6),
one timed statement makes one call per input and the figure is per call.

* ``check``: torch: ``cache_entry.guard_manager.check(f_locals)`` (the Python wrapper around
  the C++ root, one pybind call); jitguard: the entry's generated check function called on
  the arguments. S5rr walks the entries in the order the cache keeps them (most recently
  used first) until one accepts: the hit entry is the least recently used one, so seven
  entries fail first; the walk is the same Python loop on both sides.
* ``call``: the compiled call (the eager backend) less the time spent inside its graph,
  clocked within the same timed batch: the graph's ``forward`` is wrapped so that each call
  adds the time it spends inside to a counter, and a batch's figure is its total time minus
  that counter. The graph's intervals lie inside the batch's interval on the same clock,
  so the figure is everything a hit adds around the graph and can never go negative,
  whatever other processes do (it was the compiled call's minimum minus the graph-alone
  call's minimum before: two large noisy figures, whose difference could). The two clock
  reads around the graph count as overhead, on both sides alike.
* ``overhead``: the same measure with a backend whose graph does nothing (it returns as
  many Nones as the graph has outputs): the framework's whole work on a hit, never
  negative (it was the no-op call minus a plain no-op call before). The JSON also has each
  variant's minimum over the repetitions, ``plain_ns`` (the function called uncompiled) and
  ``plain_noop_ns`` (a Python function that does nothing, called on the same arguments).

Before timing, each scenario asserts that both checkers accept its inputs and reject a
mutated one, and around timing that no recompile happens.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import timeit
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any, Optional

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from _timing import time_variants  # noqa: E402
from _torch_models import MLP, f1, f2, f3  # noqa: E402
from torch._dynamo.eval_frame import _debug_get_cache_entry_list  # noqa: E402
from torch._dynamo.pgo import reset_code_state  # noqa: E402

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402
from jitguard._src.torch import native_checks  # noqa: E402

GOALS = (
    "goals: whole-call hit overhead (overhead_ns: a no-op graph's call, less the time inside "
    "the graph) at "
    "most 1/4 of torch.compile's on every scenario; guard check no slower than torch's on S1, "
    "S5, S5rr, S6 and within 2x on S2-S4; 0 guards delegated; cold compile within 1.2x"
)
CHECK_EQUAL = {"S1", "S5", "S5rr", "S6", "S6a"}
CHECK_2X = {"S2", "S3", "S4"}


# ---- scenarios ---------------------------------------------------------------------------


def f4(d: Any) -> Any:
    out = d["a"][0]
    for t in d["a"][1:]:
        out = out + t
    for t in d["b"]:
        out = out + t
    return out


def f5(x: Any, n: Any) -> Any:
    return x * n


def f6(x: Any) -> Any:
    return x * 2 + x.shape[0]


@dataclass
class Scenario:
    key: str
    title: str
    fn: Callable[..., Any]
    names: tuple[str, ...]
    calls: list[tuple[Any, ...]]  # the timed inputs, one call each
    mutated: tuple[Any, ...]
    warm: list[tuple[Any, ...]] = field(default_factory=list)  # compile these first, in order
    dynamic: Any = None
    torch_config: dict[str, Any] = field(default_factory=dict)
    walk: bool = False  # check = walk the entries (S5rr)


def scenarios() -> list[Scenario]:
    x = torch.randn(8, 8)
    out = [Scenario("S1", "one tensor", f1, ("x",), [(x,)], (x.double(),))]
    y, z = torch.randn(8, 8), torch.randn(8, 8)
    out.append(
        Scenario("S2", "3 tensors + int + float", f2, ("x", "y", "z", "n", "s"),
                 [(x, y, z, 3, 0.5)], (x, y, z.t(), 3, 0.5))
    )
    m = MLP()
    xm = torch.randn(4, 32)
    out.append(Scenario("S3", "nn.Module MLP x10 Linear", f3, ("m", "x"), [(m, xm)],
                        (m, xm[:, :16].contiguous())))
    d = {"a": [torch.randn(4) for _ in range(10)], "b": [torch.randn(4) for _ in range(10)]}
    dm = {"a": list(d["a"]), "b": [*d["b"][:9], d["b"][9].double()]}
    out.append(Scenario("S4", "dict/list of 20 tensors", f4, ("d",), [(d,)], (dm,)))
    xs = torch.randn(8)
    static_ints = {"automatic_dynamic_shapes": False}
    warm = [(xs, n) for n in range(8)]
    out.append(
        Scenario("S5", "8 int entries, hit oldest (MRU)", f5, ("x", "n"), [(xs, 0)], (xs, 9),
                 warm=warm, torch_config=static_ints)
    )
    out.append(
        Scenario("S5rr", "8 int entries, round-robin (LRU hit)", f5, ("x", "n"),
                 [(xs, n) for n in range(8)], (xs, 9), warm=warm, torch_config=static_ints, walk=True)
    )
    sizes = [torch.randn(n, 4) for n in range(8, 16)]
    out.append(
        Scenario("S6", "dynamic=True, 8 sizes", f6, ("x",), [(t,) for t in sizes],
                 (torch.randn(1, 4),), warm=[sizes[0]], dynamic=True)
    )
    out.append(
        Scenario("S6a", "automatic dynamic, 8 sizes", f6, ("x",), [(t,) for t in sizes],
                 (torch.randn(8, 4).t(),), warm=[(sizes[0],), (sizes[1],)])
    )
    for s in out:
        if s.warm and not isinstance(s.warm[0], tuple):
            s.warm = [(w,) for w in s.warm]
    return out


# ---- the two sides -----------------------------------------------------------------------
#
# A timed statement is Python source run by ``timeit`` with its own globals, so no extra
# call layer (a lambda) is timed: ``Stmt("chk(a0, a1)", {"chk": ..., "a0": ..., ...})``.


@dataclass
class Stmt:
    code: str
    ns: dict[str, Any]
    # the graphs' clock: a timed batch of this statement counts its time less the time
    # spent inside them ([the module docstring], ``call``)
    inside: Optional[GraphClock] = None

    def __add__(self, other: Stmt) -> Stmt:
        clash = set(self.ns) & set(other.ns)
        if any(self.ns[k] is not other.ns[k] for k in clash):
            raise AssertionError(f"name clash in timed statements: {clash}")
        if self.inside is not other.inside:
            raise AssertionError("timed statements of one variant share one graph clock")
        return Stmt(f"{self.code}; {other.code}", {**self.ns, **other.ns}, self.inside)

    def run(self) -> Any:
        return eval(self.code.split("; ")[-1], self.ns)


def call_stmt(fname: str, fn: Any, args: tuple[Any, ...], tag: str,
              inside: Optional[GraphClock] = None) -> Stmt:
    ns = {fname: fn}
    names = []
    for i, a in enumerate(args):
        ns[f"{tag}_{i}"] = a
        names.append(f"{tag}_{i}")
    return Stmt(f"{fname}({', '.join(names)})", ns, inside)


class GraphClock:
    """A backend wrapper that clocks its graphs: each call adds the nanoseconds it spends
    inside the graph to ``inside`` (``perf_counter_ns``, the clock ``timeit`` reads).
    ``noop=True``: the graph does nothing and returns as many Nones as the graph has
    outputs, so that a compiled call is the framework's own work only."""

    def __init__(self, noop: bool = False) -> None:
        self.noop = noop
        self.inside = 0
        self.graphs = 0

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        clock = self
        self.graphs += 1
        if self.noop:
            (outs,) = next(n for n in gm.graph.nodes if n.op == "output").args
            n = len(outs) if isinstance(outs, (tuple, list)) else 1

            def forward(*args: Any) -> Any:
                return [None] * n
        else:
            forward = gm.forward

        def graph(*args: Any) -> Any:
            start = perf_counter_ns()
            try:
                return forward(*args)
            finally:
                clock.inside += perf_counter_ns() - start

        return graph


class NetTimer(timeit.Timer):
    """A ``timeit.Timer`` whose batches count their time less the time ``clock``'s graphs
    spent inside them (never negative: those intervals lie inside the batch's)."""

    def __init__(self, stmt: str, ns: dict[str, Any], clock: GraphClock) -> None:
        super().__init__(stmt, globals=ns, timer=time.perf_counter)
        self.clock = clock

    def timeit(self, number: int = 1000000) -> float:
        self.clock.inside = 0
        total = super().timeit(number)
        return max(0.0, total - self.clock.inside / 1e9)  # max: float rounding only


class TorchSide:
    name = "torch"

    def __init__(self, sc: Scenario, fn: Any = None, backend: Any = "eager") -> None:
        self.sc = sc
        self.fn = fn or sc.fn
        self.compiled = torch.compile(self.fn, backend=backend, dynamic=sc.dynamic)
        with torch._dynamo.config.patch(**sc.torch_config):
            for args in [*sc.warm, *sc.calls]:
                self.compiled(*args)
            for args in sc.calls:  # hits (and MRU order) as in the timed loop
                self.compiled(*args)

    def entries(self) -> list[Any]:
        return list(_debug_get_cache_entry_list(self.fn))

    def frame(self, args: tuple[Any, ...]) -> dict[str, Any]:
        return dict(zip(self.sc.names, args, strict=True))

    def checker(self, args: tuple[Any, ...], tag: str) -> Stmt:
        """The guard check the cache runs for these inputs (the hit entry's, or the walk)."""
        fl = self.frame(args)
        if self.sc.walk:
            managers = [e.guard_manager for e in self.walk_order(args)]
            return call_stmt("walk_t", walk_torch, (managers, fl), tag)
        gm = self.hit_entry(args).guard_manager
        return Stmt(f"gm_{tag}.check(fl_{tag})", {f"gm_{tag}": gm, f"fl_{tag}": fl})

    def walk_order(self, args: tuple[Any, ...]) -> list[Any]:
        """Entries in the order a call with ``args`` finds them in round-robin use: most
        recently used first, so the entry that accepts ``args`` comes last."""
        entries = self.entries()
        hit = self.hit_entry(args)
        return [e for e in entries if e is not hit] + [hit]

    def hit_entry(self, args: tuple[Any, ...]) -> Any:
        fl = self.frame(args)
        for e in self.entries():
            if e.guard_manager.check(fl):
                return e
        raise AssertionError(f"{self.sc.key}: no torch entry accepts the inputs")

    def rejects(self, args: tuple[Any, ...]) -> bool:
        fl = self.frame(args)
        return not any(e.guard_manager.check(fl) for e in self.entries())

    def n_entries(self) -> int:
        return len(self.entries())

    def n_guards(self, args: tuple[Any, ...]) -> int:
        return count_torch_leaves(self.hit_entry(args).guard_manager.root)


def walk_torch(managers: list[Any], fl: dict[str, Any]) -> bool:
    for m in managers:
        if m.check(fl):
            return True
    return False


def walk_jitguard(checks: list[Callable[..., bool]], args: tuple[Any, ...]) -> bool:
    for c in checks:
        if c(*args):
            return True
    return False


def count_torch_leaves(mgr: Any) -> int:
    n = len(mgr.get_leaf_guards())
    if hasattr(mgr, "get_epilogue_lambda_guards"):
        n += len(mgr.get_epilogue_lambda_guards())
    if hasattr(mgr, "get_key_value_managers"):
        for km, vm in mgr.get_key_value_managers().values():
            n += (count_torch_leaves(km) if km else 0) + (count_torch_leaves(vm) if vm else 0)
    for child in mgr.get_child_managers():
        n += count_torch_leaves(child)
    return n


class JitguardSide:
    name = "jitguard"

    def __init__(self, sc: Scenario, fn: Any = None, backend: Any = "eager") -> None:
        self.sc = sc
        # Dynamo's automatic-dynamic state starts afresh, as it did for the torch side
        reset_code_state()
        with torch._dynamo.config.patch(**sc.torch_config):
            self.compiled = jgt.compile(fn or sc.fn, backend=backend, dynamic=sc.dynamic,
                                        verify=False, isolate_recompiles=True)
            for args in [*sc.warm, *sc.calls]:
                self.compiled(*args)
            for args in sc.calls:
                self.compiled(*args)

    def kinds(self, args: tuple[Any, ...]) -> tuple[dict[str, int], int]:
        """The hit entry's Dynamo guards per kind, and how many were delegated."""
        info = jgt.capture_info(self.compiled)[self.hit_entry(args).compile_id]
        return dict(sorted(info.guard_types().items())), sum(info.delegated.values())

    def entries(self) -> list[Any]:
        return list(jitguard.cache_of(self.compiled).entries())

    def checker(self, args: tuple[Any, ...], tag: str) -> Stmt:
        if self.sc.walk:
            checks = [e.check.fn for e in self.walk_order(args)]
            # the walk passes the arguments on as one tuple, like the torch walk's dict
            return call_stmt("walk_j", walk_jitguard, (checks, args), tag)
        return call_stmt(f"chk_{tag}", self.hit_entry(args).check.fn, args, tag)

    def walk_order(self, args: tuple[Any, ...]) -> list[Any]:
        entries = self.entries()
        hit = self.hit_entry(args)
        return [e for e in entries if e is not hit] + [hit]

    def hit_entry(self, args: tuple[Any, ...]) -> Any:
        for e in self.entries():
            if e.check.fn(*args):
                return e
        raise AssertionError(f"{self.sc.key}: no jitguard entry accepts the inputs")

    def rejects(self, args: tuple[Any, ...]) -> bool:
        return not any(e.check.fn(*args) for e in self.entries())

    def n_entries(self) -> int:
        return len(self.entries())

    def n_guards(self, args: tuple[Any, ...]) -> int:
        return len(self.hit_entry(args).check.leaves)


# ---- timing -----------------------------------------------------------------------------


def measure(
    variants: dict[str, Stmt], per: int, reps: int, target_s: float
) -> dict[str, list[float]]:
    """ns per call, one sample per repetition; variants alternate within each repetition.
    A variant with a graph clock counts its time less the time inside its graphs."""
    timers = {k: NetTimer(v.code, v.ns, v.inside) if v.inside is not None
              else timeit.Timer(v.code, globals=v.ns) for k, v in variants.items()}
    return time_variants(timers, reps, target_s, per=per, order="rotate")


def _all(parts: list[Stmt]) -> Stmt:
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out


def twin(fn: Any) -> Any:
    """A copy of ``fn`` with a code object of its own (torch keeps entries per code object)."""
    code = fn.__code__.replace(co_name=fn.__name__ + "_noop")
    out = types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)
    return out


def plain_noop(*args: Any) -> None:
    return None


def cold_compile(sc: Scenario, reps: int) -> tuple[float, float]:
    """Median seconds of a first compile and call (fresh wrapper, fresh Dynamo state)."""
    t_times, j_times = [], []
    for _ in range(reps):
        for side, times in (("torch", t_times), ("jg", j_times)):
            torch._dynamo.reset()
            args = (sc.warm or sc.calls)[0]
            with torch._dynamo.config.patch(**sc.torch_config):
                start = time.perf_counter()
                if side == "torch":
                    torch.compile(sc.fn, backend="eager", dynamic=sc.dynamic)(*args)
                else:
                    jgt.compile(sc.fn, dynamic=sc.dynamic, verify=False,
                                isolate_recompiles=True)(*args)
                times.append(time.perf_counter() - start)
    return statistics.median(t_times), statistics.median(j_times)


def run_scenario(sc: Scenario, reps: int, target_s: float) -> dict[str, Any]:
    torch._dynamo.reset()
    clocks = {k: GraphClock(noop=k.endswith("noop")) for k in
              ("torch_call", "jg_call", "torch_noop", "jg_noop")}
    with torch._dynamo.config.patch(**sc.torch_config):
        ts = TorchSide(sc, None, clocks["torch_call"])
        tn = TorchSide(sc, twin(sc.fn), clocks["torch_noop"])
        for args in [*sc.warm, *sc.calls, *sc.calls]:
            ts.compiled(*args)
            tn.compiled(*args)
    js = JitguardSide(sc, None, clocks["jg_call"])
    jn = JitguardSide(sc, twin(sc.fn), clocks["jg_noop"])
    for side in (ts, js):
        for i, args in enumerate(sc.calls):
            if not side.checker(args, f"c{i}").run():
                raise AssertionError(f"{sc.key}: the {side.name} check rejects its own inputs")
        if not side.rejects(sc.mutated):
            raise AssertionError(f"{sc.key}: the {side.name} check accepts a mutated input")
    before = (ts.n_entries(), js.n_entries())
    calls = list(enumerate(sc.calls))
    variants = {
        "torch_check": _all([ts.checker(a, f"t{i}") for i, a in calls]),
        "jg_check": _all([js.checker(a, f"j{i}") for i, a in calls]),
        "plain": _all([call_stmt("pf", sc.fn, a, f"p{i}") for i, a in calls]),
        "plain_noop": _all([call_stmt("pn", plain_noop, a, f"p{i}") for i, a in calls]),
    }
    sides = {"torch_call": ("tf", ts), "jg_call": ("jf", js),
             "torch_noop": ("tn", tn), "jg_noop": ("jn", jn)}
    for key, (fname, side) in sides.items():
        tag = key[0]
        variants[key] = _all([call_stmt(fname, side.compiled, a, f"{tag}{i}", clocks[key])
                              for i, a in calls])
    graphs = {k: c.graphs for k, c in clocks.items()}
    samples = measure(variants, len(sc.calls), reps, target_s)
    after = (ts.n_entries(), js.n_entries())
    if before != after or graphs != {k: c.graphs for k, c in clocks.items()}:
        raise AssertionError(f"{sc.key}: recompiled while timing: entries {before} -> {after}")
    res = {k: statistics.median(v) for k, v in samples.items()}
    mins = {k: min(v) for k, v in samples.items()}
    # everything a hit adds around the graph: each batch less the time inside its graphs,
    # clocked within the batch (never negative; the module docstring)
    torch_call, jg_call = res["torch_call"], res["jg_call"]
    # the framework's own work: the same, with a graph that does nothing
    torch_over, jg_over = res["torch_noop"], res["jg_noop"]
    kinds, delegated = js.kinds(sc.calls[0])
    ratio = res["jg_check"] / res["torch_check"]
    limit = 1.0 if sc.key in CHECK_EQUAL else 2.0 if sc.key in CHECK_2X else None
    costs = kind_costs(js, sc.calls[0]) if limit is not None and ratio > limit else None
    return {
        "title": sc.title,
        "entries_torch": before[0],
        "entries_jg": before[1],
        "guards_torch": ts.n_guards(sc.calls[0]),
        "guards_jg": js.n_guards(sc.calls[0]),
        "check_torch_ns": round(res["torch_check"], 1),
        "check_jg_ns": round(res["jg_check"], 1),
        "check_ratio": round(res["jg_check"] / res["torch_check"], 3),
        "call_torch_ns": round(torch_call, 1),
        "call_jg_ns": round(jg_call, 1),
        "call_ratio": round(jg_call / torch_call, 3) if torch_call > 0 else None,
        "plain_ns": round(res["plain"], 1),
        "plain_noop_ns": round(res["plain_noop"], 1),
        "overhead_torch_ns": round(torch_over, 1),
        "overhead_jg_ns": round(jg_over, 1),
        "overhead_ratio": round(jg_over / torch_over, 3),
        "kinds": kinds,
        "delegated": delegated,
        "min_ns": {k: round(v, 1) for k, v in mins.items()},
        "jg_check_by_kind": costs,
    }


def kind_costs(js: JitguardSide, args: tuple[Any, ...], number: int = 2000) -> dict[str, Any]:
    """Why jitguard's check costs what it does: per guard kind, how many leaves the hit
    entry has and what a check made of only those leaves (with the reads they need) costs,
    in ns (the empty check's cost subtracted)."""
    from jitguard._src.compiler.check import CheckFunction

    entry = js.hit_entry(args)
    check = entry.check

    def cost(leaves: list[Any]) -> float:
        sub = CheckFunction(leaves, [], name="part", arg_names=check.arg_names,
                            f_globals=check.f_globals)
        assert sub.fn(*args)
        timer = timeit.Timer(lambda: sub.fn(*args))
        return min(timer.repeat(repeat=7, number=number)) / number * 1e9

    empty = cost([])
    groups: dict[str, list[Any]] = {}
    for leaf in check.leaves:
        groups.setdefault(leaf.kind.name, []).append(leaf)
    out = {"full_ns": round(cost(list(check.leaves)) - empty)}
    for kind, leaves in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        out[kind] = {"leaves": len(leaves), "alone_ns": round(cost(leaves) - empty)}
    return out


def verdicts(key: str, r: dict[str, Any]) -> list[str]:
    out = []
    # jg <= torch / 4, which also reads right when torch's compiled call is cheaper than the
    # plain call (S3: the graph skips nn.Module.__call__): then jitguard must be cheaper still
    met = r["overhead_jg_ns"] <= r["overhead_torch_ns"] / 4
    out.append("overhead<=1/4 " + ("met" if met else "MISSED"))
    out.append("delegated=0 " + ("met" if r["delegated"] == 0 else "MISSED"))
    if key in CHECK_EQUAL:
        out.append("check<=1x " + ("met" if r["check_ratio"] <= 1.0 else "MISSED"))
    elif key in CHECK_2X:
        out.append("check<=2x " + ("met" if r["check_ratio"] <= 2.0 else "MISSED"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer, shorter repetitions")
    ap.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    ap.add_argument("--only", default="", help="comma-separated scenario keys")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    reps, target = (9, 0.003) if args.quick else (35, 0.010)
    only = {k for k in args.only.split(",") if k}
    results: dict[str, Any] = {}
    print(f"torch {torch.__version__}  python {platform.python_version()}  "
          f"{platform.machine()}  reps={reps}  batch={target * 1e3:.0f} ms")
    print(f"tensor checks: {native_checks.describe()}")
    print(GOALS)
    head = (f"{'scenario':<40}{'entries':>9}{'guards':>9}{'check_ns':>18}{'ratio':>7}"
            f"{'call_ns':>18}{'overhead_ns':>18}{'ratio':>7}  verdict")
    sub = (f"{'':<40}{'t / jg':>9}{'t / jg':>9}{'torch / jg':>18}{'':>7}{'torch / jg':>18}"
           f"{'torch / jg':>18}")
    print(head)
    print(sub)
    print("-" * len(head))
    for sc in scenarios():
        if only and sc.key not in only:
            continue
        r = run_scenario(sc, reps, target)
        r["verdict"] = verdicts(sc.key, r)
        results[sc.key] = r
        print(
            f"{sc.key + ' ' + sc.title:<40}"
            f"{str(r['entries_torch']) + '/' + str(r['entries_jg']):>9}"
            f"{str(r['guards_torch']) + '/' + str(r['guards_jg']):>9}"
            f"{r['check_torch_ns']:>10.0f} /{r['check_jg_ns']:>6.0f}{r['check_ratio']:>7.2f}"
            f"{r['call_torch_ns']:>10.0f} /{r['call_jg_ns']:>6.0f}"
            f"{r['overhead_torch_ns']:>10.0f} /{r['overhead_jg_ns']:>6.0f}"
            f"{r['overhead_ratio']:>7.2f}  "
            + ", ".join(r["verdict"]),
            flush=True,
        )
    print("\nDynamo's guards per kind on the hit entry (delegated to torch's tree):")
    for key, r in results.items():
        kinds = ", ".join(f"{k} {n}" for k, n in r["kinds"].items())
        print(f"  {key}: {kinds}; delegated {r['delegated']}")
    print("\ncold compile + first call, median of "
          f"{1 if args.quick else 3} (torch.compile eager vs jitguard):")
    for sc in scenarios():
        if only and sc.key not in only:
            continue
        t, j = cold_compile(sc, 1 if args.quick else 3)
        ok = j <= 1.2 * t
        results[sc.key]["cold_torch_s"], results[sc.key]["cold_jg_s"] = round(t, 4), round(j, 4)
        results[sc.key]["verdict"].append("cold<=1.2x " + ("met" if ok else "MISSED"))
        print(f"  {sc.key:<6}{t * 1e3:>9.1f} ms /{j * 1e3:>8.1f} ms  ratio {j / t:.2f}  "
              + ("met" if ok else "MISSED"))
    for key, r in results.items():
        costs = r["jg_check_by_kind"]
        if costs:
            print(f"\n{key}: jitguard's check by guard kind (a check of only those leaves, "
                  f"with their reads; full {costs['full_ns']} ns):")
            for kind, c in costs.items():
                if kind != "full_ns":
                    print(f"  {kind:<24} {c['leaves']:>4} leaves {c['alone_ns']:>8} ns")
    missed = [f"{k}: {v}" for k, r in results.items() for v in r["verdict"] if "MISSED" in v]
    print("all goals met" if not missed else "goals missed: " + "; ".join(missed))
    if args.json:
        print(json.dumps({"torch": torch.__version__, "tensor_checks": native_checks.describe(),
                          "reps": reps, "scenarios": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
