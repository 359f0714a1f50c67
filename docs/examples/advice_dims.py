"""A tensor dim that keeps changing, compiled static: mark it dynamic."""

import torch

import jitguard as jg
import jitguard.torch as jgt


@jgt.compile(dynamic=False)
def f(x):
    return x.sin() * 2


for n in range(2, 7):
    f(torch.ones(n, 16))
for advice in jg.cache_of(f).advice():
    print(advice)


@jgt.compile
def g(x):
    return x.sin() * 2


for n in range(2, 7):
    x = torch.ones(n, 16)
    torch._dynamo.mark_static(x, 0)
    g(x)
for advice in jg.cache_of(g).advice():
    print(advice)


@jgt.compile(dynamic=False)
def h(x):
    return x.sin() * 2


for n in range(2, 7):
    x = torch.ones(n, 16)
    torch._dynamo.mark_dynamic(x, 0)  # the fix
    h(x)
print("after the fix:", jg.cache_of(h).stats().compiles, "compile,",
      jg.cache_of(h).advice(), "advice")
