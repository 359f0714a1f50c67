"""The recompile limit hit: the warning names the source that used it up, and the fix."""

import warnings

import jitguard as jg


def lookup(table, key):
    return table.get(key)


f = jg.specialize(lookup, recompile_limit=3)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for key in ["a", "b", "c", "d"]:
        f({"a": 1}, key)
cache = jg.cache_of(f)
print(str(caught[0].message).replace(cache.where, "lookup"))
