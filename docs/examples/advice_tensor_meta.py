"""A dtype and a requires_grad that flip-flop: cast or set them once, at the call site."""

import torch

import jitguard as jg
import jitguard.torch as jgt


@jgt.compile
def f(x):
    return x.sin()


for dtype in [torch.float32, torch.float64, torch.float16, torch.bfloat16]:
    f(torch.ones(8, dtype=dtype))
for advice in jg.cache_of(f).advice():
    print(advice)

# One entry kept (maxsize=1), so each flip of requires_grad recompiles.
g = jg.specialize(lambda x: x * 2, maxsize=1)
for step in range(6):
    g(torch.ones(8, requires_grad=step % 2 == 0))
for advice in jg.cache_of(g).advice():
    print(advice)
