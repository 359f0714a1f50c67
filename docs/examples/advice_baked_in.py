"""A module global and a closure variable Dynamo baked in, that keep changing: pass them as
arguments."""

import torch

import jitguard as jg
import jitguard.torch as jgt

ACTIVATION = "relu"


@jgt.compile
def layer(x):
    return x.relu() if ACTIVATION == "relu" else x.tanh()


for name in ["relu", "tanh", "gelu", "silu"]:
    ACTIVATION = name  # the global layer reads
    layer(torch.ones(4))
for advice in jg.cache_of(layer).advice():
    print(advice)


def make():
    mode = "sum"

    @jgt.compile
    def reduce(x):
        return x.sum() if mode == "sum" else x.mean()

    def set_mode(m):
        nonlocal mode
        mode = m

    return reduce, set_mode


reduce, set_mode = make()
for m in ["sum", "mean", "max", "min"]:
    set_mode(m)
    reduce(torch.ones(4))
for advice in jg.cache_of(reduce).advice():
    print(advice)
