"""A tour of jitguard.torch.compile: every line printed is real output of the library.

    .venv/bin/python examples/demo_torch.py

A function compiled with ``jitguard.torch.compile`` is a specializing cache
(``jitguard.specialize``) whose entries are ``make_fx`` traces over fake tensors under a
ShapeEnv; each entry's check holds the tensors' guards and the ShapeEnv's shape guards.
"""

from __future__ import annotations

import logging
import textwrap
import warnings
from typing import Any

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def show_entries(fn: Any) -> None:
    infos = jgt.traced_info(fn)
    for entry in jitguard.cache_of(fn).entries():
        info = infos[entry.compile_id]
        dims = {s.name(): sorted(d) for s, d in info.symbolic_dims().items()}
        print(f"  entry {entry.compile_id}: {entry.hits} hits, symbolic dims {dims or '{}'}, "
              f"shape guards {info.shape_guards() or '[]'}")


def last_reasons(fn: Any) -> list[str]:
    records = jitguard.cache_of(fn).recompiles
    return records[-1].reasons() if records else []


def main() -> None:
    torch.manual_seed(0)
    logging.getLogger("torch").setLevel(logging.ERROR)

    def f(x: Any, w: Any) -> Any:
        h = (x @ w).relu()
        if x.shape[0] > 2:
            h = h * 2
        return h.sum(0) + x.shape[0]

    cf = jgt.compile(f)
    x, w = torch.randn(4, 3), torch.randn(3, 5)

    section("1. First call compiles, the next one hits")
    out = cf(x, w)
    print("same as eager:", torch.equal(out, f(x, w)))
    cf(torch.randn(4, 3), w)
    print("stats:", jitguard.cache_of(cf).stats())
    (info,) = jgt.traced_info(cf).values()
    print("the traced graph:")
    print("  " + info.graph_module.code.strip().replace("\n", "\n  "))

    section("2. A dtype change recompiles, and says why")
    cf(x.double(), w.double())
    for line in last_reasons(cf):
        print("  reason:", line)

    section("3. A size change: automatic dynamic shapes")
    cf(torch.randn(6, 3), w)
    for line in last_reasons(cf):
        print("  reason:", line)
    show_entries(cf)
    before = jitguard.cache_of(cf).stats().compiles
    for n in (3, 9, 17):
        cf(torch.randn(n, 3), w)
    print(f"sizes 3, 9, 17: {jitguard.cache_of(cf).stats().compiles - before} new compiles")

    section("4. Shape guards reject the sizes the trace did not cover")
    print("x of 2 rows (the trace took `x.shape[0] > 2`):")
    cf(torch.randn(2, 3), w)
    for line in last_reasons(cf):
        print("  reason:", line)
    show_entries(cf)

    section("5. dynamic=True, equalities between dims, mark_dynamic")
    mm = jgt.compile(lambda a, b: a @ b, dynamic=True)
    mm(torch.randn(5, 3), torch.randn(3, 4))
    show_entries(mm)
    (entry,) = jitguard.cache_of(mm).entries()
    for failure in entry.check.explain(torch.randn(5, 3), torch.randn(2, 4)):
        print("  a (5, 3) @ (2, 4) fails:", failure.reason.split("  #")[0])
    g = jgt.compile(lambda t: t.cumsum(1))
    g(jgt.mark_dynamic(torch.randn(2, 8), 1))
    g(torch.randn(2, 30))
    show_entries(g)
    print("a size of 1 (0/1 specialization: a symbolic size is >= 2; 0 and 1 are static):")
    g(torch.randn(2, 1))
    for line in last_reasons(g):
        print("  reason:", line)

    section("6. What the function cannot be traced for runs eagerly")
    h = jgt.compile(lambda t: t + 1 if t.sum() > 0 else t - 1)
    print("results:", h(torch.ones(2)).tolist(), h(-torch.ones(2)).tolist())
    (info,) = jgt.traced_info(h).values()
    reason = (info.fallback_reason or "(none)").strip().split("\n\n")[0]
    print(textwrap.fill(reason, width=96, initial_indent="fallback reason: ", subsequent_indent="  "))


if __name__ == "__main__":
    main()
