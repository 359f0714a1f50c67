"""A tour of jitguard.torch.compile: every line printed is real output of the library.

    .venv/bin/python examples/demo_torch.py

TorchDynamo captures the function (one graph per cache entry); jitguard's cache checks the
guards Dynamo made, converted to jitguard guards (the rest delegated to torch's own guard
tree), and says why it recompiles.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def show_entries(fn: Any) -> None:
    infos = jgt.capture_info(fn)
    for entry in jitguard.cache_of(fn).entries():
        info = infos[entry.compile_id]
        kinds = ", ".join(f"{k} x{n}" for k, n in sorted(info.guard_types().items()))
        print(f"  entry {entry.compile_id}: {entry.hits} hits; Dynamo's guards: {kinds}")
        print(f"    delegated to torch's tree: {dict(info.delegated) or 'none'}"
              f"{'; dynamic graph' if info.dynamic else ''}")


def main() -> None:
    logging.basicConfig(format="  [log] %(name)s: %(message)s", level=logging.WARNING)
    logging.getLogger("jitguard.recompiles").setLevel(logging.INFO)

    section("1. a function: a second size makes that dim dynamic, as torch does")

    @jgt.compile
    def f(x: Any, n: int) -> Any:
        return x.sin() * n

    f(torch.randn(3), 2)
    f(torch.randn(3), 2)
    f(torch.randn(5), 2)
    f(torch.randn(7), 2)
    show_entries(f)
    print("  stats:", jitguard.cache_of(f).stats())

    section("2. a module: compiled as its forward, sources read L['self']")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    cm = jgt.compile(model)
    x = torch.randn(2, 4)
    print("  same as eager:", torch.equal(cm(x), model(x)))
    model.train(False)
    model[0].weight.requires_grad_(False)
    print("  after requires_grad_(False), same as eager:", torch.equal(cm(x), model(x)))
    for line in jitguard.cache_of(cm).reasons():
        print("  reason:", line)

    section("3. a graph break: eager, logged once; fullgraph=True raises")

    def breaks(x: Any) -> Any:
        print("  (side effect runs once per call)")
        return x + 1

    jgt.compile(breaks)(torch.ones(1))
    try:
        jgt.compile(breaks, fullgraph=True)(torch.ones(1))
    except jitguard.CaptureError as e:
        print("  CaptureError:", str(e).splitlines()[0])

    section("4. verify mode: torch's own guard tree beside jitguard's check")
    g = jgt.compile(lambda x: x * 2, verify=True)
    g(torch.ones(2))
    g(torch.ones(2, dtype=torch.float64))
    print("  two entries, no disagreement:", jitguard.cache_of(g).stats().entries)


if __name__ == "__main__":
    main()
