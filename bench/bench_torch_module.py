"""Benchmark: the cost of jitguard's torch guards on a cache hit, per scenario, with the
parts broken out (tensor guards, module guards, GLOBAL_STATE).

Run by hand (not a timed test):

    .venv/bin/python bench/bench_torch_module.py            # full run
    .venv/bin/python bench/bench_torch_module.py --quick    # short run
    .venv/bin/python bench/bench_torch_module.py --json     # last line: one JSON object
    .venv/bin/python bench/bench_torch_module.py --torch    # also time torch's own guards

Scenarios (as in /work/shared/reference/torch-guards.md §d): one tensor; 3 tensors + int +
float; an MLP of 10 Linear layers in a ModuleList (module + input tensor); the same with 100
layers. Variants:
  * ``full``: the default guards: one TENSOR_MATCH per input tensor, ``module_guards`` (its
    tensors batched in one TENSORS_MATCH), the core's NO_ALIASING, GLOBAL_STATE;
  * ``fast``: the input tensors batched too (TENSORS_MATCH) and TORCH_GLOBAL_STATE (now an
    alias of GLOBAL_STATE, see [Note: Batched tensor checks], [Note: TORCH_GLOBAL_STATE]);
  * ``args``: ``full`` without the ambient guard;
  * ``unbatched``: ``full`` with the module's tensors one TENSOR_MATCH each
    (``module_guards(batch=False)``): the pure-Python floor.

Method: ``torch.set_num_threads(1)``; each figure is the median over repetitions of a
``timeit`` batch of about 10 ms (3 ms with ``--quick``), gc disabled, variants interleaved
within each repetition. The check is the generated function itself, called with the
arguments positionally (``check.fn(*args)``). Before timing, each variant must accept its
inputs and reject a mutated one. With ``--torch``, torch's figure is
``cache_entry.guard_manager.check(f_locals)`` of ``torch.compile(backend="eager")`` on the
same inputs (its whole tree, ambient guards included), timed the same way.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import statistics
import sys
import timeit
import warnings
from collections.abc import Callable
from typing import Any

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
from _timing import time_variants  # noqa: E402
from _torch_models import MLP, f1, f2, f3  # noqa: E402

import jitguard.torch as jgt  # noqa: E402
from jitguard import GlobalStateSource, Guard, GuardBuilder, LocalSource, compile_guards  # noqa: E402

GLOBAL = GlobalStateSource().make_guard(GuardBuilder.GLOBAL_STATE)
TORCH_GLOBAL = GlobalStateSource().make_guard(jgt.TORCH_GLOBAL_STATE)
VARIANTS = ("full", "fast", "args", "unbatched")


def tensor_guards(names: tuple[str, ...], *, batch: bool) -> list[Guard]:
    if batch:
        first, *others = (LocalSource(n) for n in names)
        return [first.make_guard(functools.partial(jgt.TENSORS_MATCH, others=tuple(others)))]
    return [LocalSource(n).make_guard(jgt.TENSOR_MATCH) for n in names]


def build(kind: str, variant: str, args: tuple[Any, ...], names: tuple[str, ...]) -> Any:
    """The check function of one scenario variant (see the module docstring)."""
    fast = variant == "fast"
    guards: list[Guard] = []
    if kind == "S1":
        guards = tensor_guards(("x",), batch=fast)
    elif kind == "S2":
        guards = tensor_guards(("x", "y", "z"), batch=fast)
        guards += [LocalSource(n).make_guard(GuardBuilder.EQUALS_MATCH) for n in ("n", "s")]
        others = (LocalSource("y"), LocalSource("z"))
        guards.append(LocalSource("x").make_guard(functools.partial(GuardBuilder.NO_ALIASING, others=others)))
    else:
        guards = jgt.module_guards(LocalSource("m"), args[0], batch=variant != "unbatched")
        guards += tensor_guards(("x",), batch=fast)
    if variant in ("full", "unbatched"):
        guards.append(GLOBAL)
    elif fast:
        guards.append(TORCH_GLOBAL)
    frame = dict(zip(names, args, strict=True))
    return compile_guards(guards, f_locals=frame, arg_names=list(names), name=f"{kind}_{variant}")


Scenario = tuple[str, str, Callable[..., Any], tuple[str, ...], tuple[Any, ...], tuple[Any, ...]]


def scenarios() -> list[Scenario]:
    x, y, z = torch.randn(8, 8), torch.randn(8, 8), torch.randn(8, 8)
    out: list[Scenario] = [("S1", "one tensor", f1, ("x",), (x,), (x.double(),))]
    out.append(("S2", "3 tensors + int + float", f2, ("x", "y", "z", "n", "s"), (x, y, z, 3, 0.5),
                (x, y, z.t(), 3, 0.5)))
    for depth, key in ((10, "S3"), (100, "S3L")):
        m = MLP(depth)
        xm = torch.randn(4, 32)
        out.append((key, f"MLP x{depth} Linear (module + input)", f3, ("m", "x"), (m, xm),
                    (m, xm[:, :16].contiguous())))
    return out


def torch_check(fn: Callable[..., Any], names: tuple[str, ...], args: tuple[Any, ...]) -> Callable[[], Any]:
    import torch._dynamo
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="eager")
    compiled(*args)
    (entry,) = _debug_get_cache_entry_list(fn.__code__)
    check = entry.guard_manager.check
    frame = dict(zip(names, args, strict=True))
    assert check(frame)
    return functools.partial(check, frame)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--torch", action="store_true", help="also time torch.compile's guards")
    opts = parser.parse_args()
    torch.set_num_threads(1)
    reps, budget = (7, 0.003) if opts.quick else (25, 0.01)
    variants = VARIANTS
    results: dict[str, Any] = {}
    print(f"torch {torch.__version__}  python {platform.python_version()}  {platform.machine()}  reps={reps}")
    print(f"{'scenario':40} {'leaves':>6} " + " ".join(f"{v + '_ns':>13}" for v in variants)
          + (f" {'torch_ns':>10}" if opts.torch else ""))
    for key, title, fn, names, args, mutated in scenarios():
        checks = {v: build(key, v, args, names) for v in variants}
        timers: dict[str, timeit.Timer] = {}
        for v, c in checks.items():
            assert c.fn(*args), (key, v)
            assert not c.fn(*mutated), (key, v, "accepted the mutated input")
            timers[v] = timeit.Timer(functools.partial(c.fn, *args))
        if opts.torch:
            timers["torch"] = timeit.Timer(torch_check(fn, names, args))
        samples = time_variants(timers, reps, budget, order="rotate")
        med = {k: statistics.median(v) for k, v in samples.items()}
        results[key] = {"title": title, "leaves": len(checks["full"].leaves), **{f"{k}_ns": round(v) for k, v in med.items()}}
        line = f"{key + ' ' + title:40} {len(checks['full'].leaves):>6} " + " ".join(
            f"{med[v]:>13.0f}" for v in variants
        )
        if opts.torch:
            line += f" {med['torch']:>10.0f}"
        print(line)
        sys.stdout.flush()
    if opts.json:
        print(json.dumps({"torch": torch.__version__, "reps": reps, "results": results}))


if __name__ == "__main__":
    main()
