"""An object created anew on each call, guarded by identity: create it once."""

import functools

import jitguard as jg


def apply(x, fn):
    return fn(x)


f = jg.specialize(apply)
for _ in range(4):
    f(1, functools.partial(max, 2))  # a new partial each time
for advice in jg.cache_of(f).advice():
    print(advice.source, "|", advice.rule)
    print(advice.message)
    print("fix:", advice.fix, sep="\n")
    print("recompiles:", advice.evidence.recompiles,
          "| distinct objects:", len(advice.evidence.values))

clamp = functools.partial(max, 2)  # once, outside the loop
g = jg.specialize(apply)
for _ in range(4):
    g(1, clamp)
print("after the fix:", jg.cache_of(g).stats().compiles, "compile,",
      jg.cache_of(g).advice(), "advice")
