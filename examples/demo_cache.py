"""A tour of the specializing cache, ``jitguard.specialize``.

Each section prints real output of the library; nothing here is canned. A toy "compiler"
turns ``poly(coeffs, x)`` into a straight-line Python function for the coefficients it was
given (so the coefficients become part of what the entry assumes), and says what it did.
"""

from __future__ import annotations

import gc
import logging
import sys
import warnings
from typing import Any

import jitguard as jg


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def poly(coeffs: tuple[float, ...], x: float, scale: int = 1) -> float:
    """sum(c * x**i) * scale, the slow way."""
    return sum(c * x**i for i, c in enumerate(coeffs)) * scale


def unrolling_compiler(request: jg.CompileRequest) -> Any:
    """Unroll the polynomial for these coefficients; ``scale`` stays a parameter when the cache
    says it is dynamic, else it is baked in too."""
    coeffs = request.arguments["coeffs"]
    terms = " + ".join(f"{c!r} * x**{i}" for i, c in enumerate(coeffs)) or "0"
    dynamic_scale = request.is_dynamic("scale")
    scale = "scale" if dynamic_scale else repr(request.arguments["scale"])
    src = f"def artifact(coeffs, x, scale=1):\n    return ({terms}) * {scale}\n"
    print(f"  [compiler] {request.trace_id}: {src.splitlines()[1].strip()}"
          f"{'   (scale is dynamic)' if dynamic_scale else ''}")
    ns: dict[str, Any] = {}
    exec(src, ns)
    return ns["artifact"]


def tour_basics() -> None:
    section("1. Compile, hit, recompile (with the reasons)")
    logging.basicConfig(level=logging.WARNING, format="  [log %(name)s] %(message)s",
                        stream=sys.stdout)
    logging.getLogger("jitguard.recompiles").setLevel(logging.INFO)
    f = jg.specialize(poly, compiler=unrolling_compiler)
    print("f((1, 2), 3.0) =", f((1, 2), 3.0), "  <- compiles")
    print("f((1, 2), 3.0) =", f((1, 2), 3.0), "  <- hit")
    print("f((1, 2), 4.0) =", f((1, 2), 4.0), "  <- x changed: recompiles")
    print("f((1, 2), 4.0, scale=2) =", f((1, 2), 4.0, scale=2), "  <- an int changed: it becomes dynamic")
    print("f((1, 2), 4.0, scale=5) =", f((1, 2), 4.0, scale=5), "  <- hit on the dynamic entry")
    print("f((1, 2), 4.0, scale=1) =", f((1, 2), 4.0, scale=1), "  <- the static entry is more specific: it wins")

    section("2. Inspecting the cache")
    cache = jg.cache_of(f)
    for e in cache.entries():
        print(f"  entry {e.compile_id}: specificity {e.specificity}, {e.hits} hits, "
              f"dynamic {sorted(s.name() for s in e.dynamic)}")
        for line in e.code:
            print(f"      {line}")
    print("  stats:", cache.stats())
    print("  reasons so far:")
    for line in cache.reasons():
        print(f"    - {line}")
    print("  failures per guard:", cache.guard_failure_counts())
    print("  dispatch:", cache.snapshot())
    print("  counters summed over every live specialized function:", jg.cache_counters())


class Model:
    def __init__(self, width: int) -> None:
        self.width = width


def tour_soundness() -> None:
    section("3. Identity, object death, aliasing")
    g = jg.specialize(lambda m, x: m.width * x)
    m = Model(3)
    print("g(m, 2) =", g(m, 2), "| entries:", [str(c) for c in jg.cache_of(g).compile_ids()])
    del m
    gc.collect()
    print("after the model died: entries", [str(c) for c in jg.cache_of(g).compile_ids()],
          "| invalidations:", jg.cache_of(g).stats().invalidations)

    def same(a: list[int], b: list[int]) -> bool:
        return a is b

    h = jg.specialize(same)
    a, b = [1], [1]
    print("h(a, b) =", h(a, b), "| h(a, a) =", h(a, a), "| h(b, b) =", h(b, b),
          "(equal lists, but aliasing is part of the specialization)")
    for e in jg.cache_of(h).entries():
        print(f"  entry {e.compile_id}: {[c for c in e.code if ' is ' in c or 'no two' in c]}")


def tour_limits() -> None:
    section("4. The recompile limit, and forbidding recompiles")
    logging.getLogger("jitguard.recompiles").setLevel(logging.WARNING)
    k = jg.specialize(lambda word: len(word), recompile_limit=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for word in ("a", "bb", "ccc", "dddd", "eeeee"):
            print(f"  k({word!r}) = {k(word)}")
    print(f"  {len(caught)} warning ({caught[0].category.__name__}):")
    for line in str(caught[0].message).splitlines():
        print(f"    {line}")
    print("  stats:", jg.cache_of(k).stats())

    strict = jg.specialize(lambda word: len(word), recompile_limit=2, on_limit="raise")
    strict("a"), strict("b")
    try:
        strict("c")
    except jg.RecompileLimitError as e:
        print(f"  on_limit='raise': {type(e).__name__}:")
        for line in str(e).splitlines():
            print(f"    {line}")

    warm = jg.specialize(lambda n: n * 2)
    warm(1)
    with jg.no_recompiles():
        print("  inside no_recompiles, a hit is fine:", warm(1))
        try:
            warm(2)
        except jg.RecompileError as e:
            print("  and a recompile raises:", e.record.reasons())


def main() -> None:
    tour_basics()
    tour_soundness()
    tour_limits()


if __name__ == "__main__":
    main()
