"""A scalar argument pinned by value under specialize: the advice, then the fix applied."""

import jitguard as jg


def scale(x, mode):
    return x * 2 if mode == "double" else x


f = jg.specialize(scale)
for mode in ["double", "same", "half", "triple"]:
    f(1.0, mode)
for advice in jg.cache_of(f).advice():
    print(advice)

fixed = jg.specialize(scale, dynamic=["mode"])
for mode in ["double", "same", "half", "triple"]:
    fixed(1.0, mode)
print("after the fix:", jg.cache_of(fixed).stats().compiles, "compile,",
      jg.cache_of(fixed).advice(), "advice")
