"""A custom compiler on jitguard.specialize: unroll a loop over a config the caller passes."""

from dataclasses import dataclass

import jitguard as jg
from jitguard import GuardBuilder as GB


@dataclass
class Config:
    steps: int
    decay: float


def smooth(cfg: Config, x: float) -> float:
    for _ in range(cfg.steps):
        x = x * cfg.decay
    return x


def unroll(request: jg.CompileRequest):
    """Bake cfg.steps and cfg.decay into straight-line code, and guard what was baked in."""
    cfg = request.arguments["cfg"]
    request.add_guard(jg.AttrSource(request.source("cfg"), "steps"), GB.EQUALS_MATCH)
    request.add_guard(jg.AttrSource(request.source("cfg"), "decay"), GB.EQUALS_MATCH)
    body = " * ".join(["x"] + [repr(cfg.decay)] * cfg.steps)
    print(f"  compile {request.trace_id}: return {body}")
    namespace: dict = {}
    exec(f"def artifact(cfg, x):\n    return {body}\n", namespace)
    return namespace["artifact"]


# x is dynamic: guarded by its type only, so any float reuses an entry.
fast = jg.specialize(smooth, compiler=unroll, dynamic=["x"])
cfg = Config(steps=3, decay=0.5)
print("first call:", fast(cfg, 8.0))        # compiles
print("same config:", fast(cfg, 2.0))       # hit
cfg.steps = 2
print("steps changed:", fast(cfg, 8.0))     # recompiles, and says why
cache = jg.cache_of(fast)
print("reasons:", cache.reasons())
print("stats:", cache.stats())
print("entries:")
for entry in cache.entries():
    print(f"  {entry.compile_id}: {[leaf.code() for leaf in entry.check.leaves]}")
