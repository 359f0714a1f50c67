"""Benchmark: the per-forward framework overhead of a cache hit on real transformers models
(Qwen3 x36, Llama x32, GPT-2 x12 from bench/_llm_models.py: full depth, tiny width, batch 1),
under torch.compile and under jitguard.torch.compile, in one process per model.

Run by hand (not a timed test):

    .venv/bin/python bench/bench_llm.py                  # full run
    .venv/bin/python bench/bench_llm.py --quick          # short run (a few minutes: compiles dominate)
    .venv/bin/python bench/bench_llm.py --json           # last line: one JSON object
    .venv/bin/python bench/bench_llm.py --models gpt2 --layers 2   # a subset, at another depth
    .venv/bin/python bench/bench_llm.py --models mistral,gemma2,starcoder2,opt,phi  # others
    # the survey of more architectures, one --models list (README):
    #   qwen2,bloom,gpt_neox,falcon,gptj,granite,olmo2,phi3,stablelm,mixtral,qwen3_moe,gemma3
    .venv/bin/python bench/bench_llm.py --device cuda    # on a GPU (absolute times hold there)

Variants, each a copy of the model (its own instance of its own subclass, so that torch
keeps one cache entry per variant and none hits another's):
  * ``eager``: the model called uncompiled (the real forward, at tiny width);
  * ``torch``: ``torch.compile(m, backend=replay)``;
  * ``torch_tags``: the same, compiled with
    ``torch._dynamo.config.use_recursive_dict_tags_for_guards=True``;
  * ``floor``: ``torch.compile(m, backend=replay)`` called under
    ``torch.compiler.set_stance(skip_guard_eval_unsafe=True)`` (entered around each timed
    batch, not each call): no guards at all, the floor of any guard layer. This copy is
    compiled with a ``guard_filter_fn`` that counts torch's guards (and keeps them all);
    the timed ``torch`` copy has none, as a filter makes torch's check slower;
  * ``jg_c`` / ``jg_py``: ``jitguard.torch.compile(m, backend=replay)`` with the C hot path
    and with the pure-Python dispatcher (``fast.set_enabled`` at compile time; the process
    imports jitguard with the extension, so the generated checks' C batch helpers and the
    structure snapshot serve both);
  * ``jg_noskip``: ``jg_c`` without the structure snapshot (every guard on every call:
    jitguard before [Note: Skipping structure guards by version tags]).

``replay`` is a backend that runs the graph once on the example inputs and returns those
outputs on every call, so a call costs the framework's own work alone (guards, Dynamo's
pre-graph reads, the output's reconstruction): the overhead. Method: ``torch.set_num_threads(1)``,
``torch.no_grad()``; bench/_timing.py's interleaved batches (about 30 ms, 10 ms with
``--quick``), medians over the repetitions. Before timing, each compiled variant's output
equals what the replay recorded, and no variant recompiles while timed.

Printed per model: torch's guard count (``guard_filter_fn``'s list) and per kind,
jitguard's Dynamo guards per kind, its check's leaves, the guards delegated to torch's
tree, the overhead of each variant and the ratios jitguard/torch.compile and
jitguard/floor. Goals (issue 19): jitguard <= 0.25x torch.compile and <= 1.5x the floor,
0 delegated.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import timeit
import types
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

HERE = Path(__file__).resolve().parent
MODELS = ("qwen3", "llama", "gpt2")
GOAL_TORCH = 0.25
GOAL_FLOOR = 1.5
VARIANTS = ("eager", "torch", "torch_tags", "floor", "jg_c", "jg_py", "jg_noskip")


class Replay:
    """A backend that runs the graph once, on the example inputs, and returns those
    outputs on every later call (``graphs``: how many graphs it was given)."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        self.graphs += 1
        outs = gm(*example_inputs)

        def replay(*args: Any) -> Any:
            return outs

        return replay


class StanceTimer(timeit.Timer):
    """A ``timeit.Timer`` whose batches run under a torch stance entered once per batch."""

    def __init__(self, stmt: str, ns: dict[str, Any], stance: Any) -> None:
        super().__init__(stmt, globals=ns)
        self.stance = stance

    def timeit(self, number: int = 1000000) -> float:
        with self.stance():
            return super().timeit(number)


def variant_copy(model: Any, tag: str) -> Any:
    """A deep copy of ``model`` whose class is a subclass of its own made for ``tag``, with a
    ``forward`` of its own: the same function, on a copy of its code object. torch keeps
    cache entries per code object, so no variant's call walks another variant's entries
    first (one failing 8,000-guard check per timed call, otherwise)."""
    cls = type(model)
    fwd = cls.forward
    code = fwd.__code__.replace(co_name=f"{fwd.__name__}_{tag}")
    twin = types.FunctionType(code, fwd.__globals__, code.co_name, fwd.__defaults__,
                              fwd.__closure__)
    twin.__kwdefaults__ = fwd.__kwdefaults__
    twin.__dict__.update(fwd.__dict__)
    twin.__qualname__ = fwd.__qualname__
    sub = type(f"{cls.__name__}_{tag}", (cls,), {"__module__": cls.__module__, "forward": twin})
    m = copy.deepcopy(model)
    m.__class__ = sub
    return m


def torch_leaves(mgr: Any) -> int:
    """The leaf guards of a torch guard manager's tree."""
    n = len(mgr.get_leaf_guards())
    if hasattr(mgr, "get_epilogue_lambda_guards"):
        n += len(mgr.get_epilogue_lambda_guards())
    if hasattr(mgr, "get_key_value_managers"):
        for km, vm in mgr.get_key_value_managers().values():
            n += (torch_leaves(km) if km else 0) + (torch_leaves(vm) if vm else 0)
    for child in mgr.get_child_managers():
        n += torch_leaves(child)
    return n


def same(a: Any, b: Any) -> bool:
    """Whether two forward outputs (ModelOutputs, tuples, tensors) hold equal tensors."""
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def child(name: str, layers: int | None, device: str, reps: int, batch_s: float) -> dict[str, Any]:
    """Measure one model (this runs in a process of its own)."""
    import torch
    import torch._dynamo
    from _llm_models import DEPTHS, build
    from _timing import median, time_variants

    import jitguard
    import jitguard.torch as jgt
    from jitguard._src.compiler import snapshot
    from jitguard._src.dispatch import fast

    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    base, kw = build(name, layers=layers, device=device)
    eager_out = base(**kw)
    models = {v: variant_copy(base, v)
              for v in ("torch", "torch_tags", "floor", "jg_c", "jg_py", "jg_noskip")}
    backends = {v: Replay() for v in models}
    torch_kinds: Counter[str] = Counter()

    def count(entries: Any) -> list[bool]:
        torch_kinds.update(e.guard_type for e in entries)
        return [True] * len(entries)

    compiled: dict[str, Any] = {
        "torch": torch.compile(models["torch"], backend=backends["torch"]),
        "torch_tags": torch.compile(models["torch_tags"], backend=backends["torch_tags"]),
        # the floor runs no guards, so it is the copy that counts them (a guard_filter_fn
        # makes torch's guard check slower)
        "floor": torch.compile(models["floor"], backend=backends["floor"],
                               options={"guard_filter_fn": count}),
    }
    outs = {"torch": compiled["torch"](**kw), "floor": compiled["floor"](**kw)}
    with torch._dynamo.config.patch(use_recursive_dict_tags_for_guards=True):
        outs["torch_tags"] = compiled["torch_tags"](**kw)
    for v, on, skip in (("jg_c", True, True), ("jg_py", False, True),
                        ("jg_noskip", True, False)):
        old = fast.set_enabled(on and fast.available())
        old_skip, snapshot.enabled = snapshot.enabled, skip
        try:
            compiled[v] = jgt.compile(models[v], backend=backends[v], verify=False,
                                      isolate_recompiles=True)
            outs[v] = compiled[v](**kw)
        finally:
            fast.set_enabled(old)
            snapshot.enabled = old_skip
    for v, out in outs.items():
        again = compiled[v](**kw)
        if not (same(out, again) and same(out, eager_out)):
            raise AssertionError(f"{name}: the {v} variant's output differs from eager's")
    entries = {v: list(jitguard.cache_of(compiled[v]).entries())
               for v in ("jg_c", "jg_py", "jg_noskip")}
    infos = {v: jgt.capture_info(compiled[v]) for v in entries}
    jg_kinds = Counter[str]()
    delegated = 0
    for info in infos["jg_c"].values():
        jg_kinds.update(info.guard_types())
        delegated += sum(info.delegated.values())
    leaves = sum(len(e.check.leaves) for e in entries["jg_c"])
    skips = [getattr(e.check, "structure_skip", None) for e in entries["jg_c"]]
    covered = sum(len(p.covered) for p in skips if p is not None)
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    # the frame torch.compile(m) catches: the variant's own forward
    torch_entries = list(_debug_get_cache_entry_list(type(models["torch"]).forward.__code__))
    torch_tree = max((torch_leaves(e.guard_manager.root) for e in torch_entries), default=0)

    ns: dict[str, Any] = {"kw": kw, "eager": base, **compiled}
    timers: dict[str, timeit.Timer] = {
        "eager": timeit.Timer("eager(**kw)", globals=ns),
        "torch": timeit.Timer("torch(**kw)", globals=ns),
        "torch_tags": timeit.Timer("torch_tags(**kw)", globals=ns),
        "floor": StanceTimer("floor(**kw)", ns,
                             lambda: torch.compiler.set_stance(skip_guard_eval_unsafe=True)),
        "jg_c": timeit.Timer("jg_c(**kw)", globals=ns),
        "jg_py": timeit.Timer("jg_py(**kw)", globals=ns),
        "jg_noskip": timeit.Timer("jg_noskip(**kw)", globals=ns),
    }
    graphs = {v: b.graphs for v, b in backends.items()}
    n_entries = {v: len(list(jitguard.cache_of(compiled[v]).entries())) for v in entries}
    samples = time_variants(timers, reps, batch_s, order="rotate")
    if graphs != {v: b.graphs for v, b in backends.items()} or n_entries != {
            v: len(list(jitguard.cache_of(compiled[v]).entries())) for v in entries}:
        raise AssertionError(f"{name}: a variant recompiled while timed")
    us = {k: round(median(v) / 1e3, 2) for k, v in samples.items()}
    # how many more times each front check may take its snapshot again (REARMS at most):
    # fewer means the structure it watches changed while timed
    rearms = {v: [e.check.fn.__globals__["___snap"][2] for e in es
                  if "___snap" in e.check.fn.__globals__] for v, es in entries.items()}
    ratios = {}
    for v in ("jg_c", "jg_py", "jg_noskip"):
        ratios[f"{v}/torch"] = round(us[v] / us["torch"], 3)
        ratios[f"{v}/floor"] = round(us[v] / us["floor"], 3)
    ratios["torch_tags/torch"] = round(us["torch_tags"] / us["torch"], 3)
    ratios["floor/torch"] = round(us["floor"] / us["torch"], 3)
    return {
        "model": name,
        "layers": DEPTHS[name] if layers is None else layers,
        "device": device,
        "torch_guards": sum(torch_kinds.values()),
        "torch_tree_leaves": torch_tree,
        "torch_entries": len(torch_entries),
        "torch_kinds": dict(torch_kinds.most_common()),
        "jg_kinds": dict(jg_kinds.most_common()),
        "jg_leaves": leaves,
        "jg_covered": covered,
        "rearms_left": rearms,
        "jg_entries": n_entries,
        "delegated": delegated,
        "us": us,
        "ratios": ratios,
        "goals": {
            "jg_c<=0.25x torch": ratios["jg_c/torch"] <= GOAL_TORCH,
            "jg_c<=1.5x floor": ratios["jg_c/floor"] <= GOAL_FLOOR,
            "delegated=0": delegated == 0,
        },
    }


def run_child(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one model's measurement in a fresh process; its last stdout line is JSON."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name,
           "--device", args.device]
    if args.quick:
        cmd.append("--quick")
    if args.layers is not None:
        cmd += ["--layers", str(args.layers)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    if proc.returncode != 0:
        raise RuntimeError(f"{name}: the child process failed ({proc.returncode}):\n"
                           f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def report(r: dict[str, Any]) -> None:
    us, ratios = r["us"], r["ratios"]
    print(f"\n{r['model']} x{r['layers']} ({r['device']}): torch guards {r['torch_guards']} "
          f"(tree leaves {r['torch_tree_leaves']}), jitguard check leaves {r['jg_leaves']} "
          f"({r['jg_covered']} skipped while the structure is unchanged), "
          f"delegated {r['delegated']}")
    print("  torch's guards per kind:    "
          + ", ".join(f"{k} {n}" for k, n in r["torch_kinds"].items()))
    print("  jitguard's Dynamo guards:   "
          + ", ".join(f"{k} {n}" for k, n in r["jg_kinds"].items()))
    print("  overhead us: " + "  ".join(f"{k} {us[k]:.1f}" for k in VARIANTS))
    print("  ratios:      " + "  ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    print("  goals:       " + ", ".join(f"{k} {'met' if ok else 'MISSED'}"
                                        for k, ok in r["goals"].items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer, shorter repetitions")
    ap.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"comma-separated, of {', '.join(MODELS)} (also bert, vit, mistral, "
                         "gemma2, starcoder2, opt, phi: bench/_llm_models.py)")
    ap.add_argument("--layers", type=int, default=None, help="depth of every model (default: real)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    reps, batch_s = (7, 0.01) if args.quick else (21, 0.03)
    if args.child:
        sys.path.insert(0, str(HERE))
        print(json.dumps(child(args.child, args.layers, args.device, reps, batch_s)))
        return 0
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no CUDA device here")
    import platform

    import torch

    from jitguard._src.torch import native_checks

    print(f"torch {torch.__version__}  python {platform.python_version()}  "
          f"{platform.machine()}  reps={reps}  batch={batch_s * 1e3:.0f} ms  device={args.device}")
    print(f"tensor checks: {native_checks.describe()}")
    print(f"goals: jitguard's hit overhead <= {GOAL_TORCH}x torch.compile's and <= {GOAL_FLOOR}x "
          "the skip-guards floor; 0 delegated")
    results = []
    for name in [m for m in args.models.split(",") if m]:
        r = run_child(name, args)
        results.append(r)
        report(r)
    missed = [f"{r['model']}: {k}" for r in results for k, ok in r["goals"].items() if not ok]
    print("\nall goals met" if not missed else "\ngoals missed: " + "; ".join(missed))
    if args.json:
        print(json.dumps({"torch": torch.__version__, "tensor_checks": native_checks.describe(),
                          "reps": reps, "batch_s": batch_s,
                          "models": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
