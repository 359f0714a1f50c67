"""A list whose length keeps changing: each length compiles once."""

import jitguard as jg


def total(values):
    return sum(values)


f = jg.specialize(total)
for n in range(1, 6):
    f([1.0] * n)
for advice in jg.cache_of(f).advice():
    print(advice)
