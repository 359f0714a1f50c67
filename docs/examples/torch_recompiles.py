"""A torch model under jitguard.torch.compile: which calls recompile, and why."""

import torch

import jitguard as jg
import jitguard.torch as jgt

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(8, 2)
)
compiled = jgt.compile(model)
cache = jg.cache_of(compiled)


def call(label: str, x: torch.Tensor) -> None:
    before, compiles = len(cache.recompiles), cache.stats().compiles
    compiled(x)
    new = cache.recompiles[before:]
    what = "hit" if cache.stats().compiles == compiles else "recompiled" if new else "compiled"
    print(f"{label:<36} -> {what}")
    for record in new:
        # Every older entry says why it rejected the call; show the newest one's reasons.
        lines = record.reasons()
        newest = lines[-1].split(":")[0]
        shown = [line for line in lines if line.startswith(newest + ":")]
        for line in shown:
            print(f"    {line}")
        if len(lines) > len(shown):
            print(f"    (and {len(lines) - len(shown)} reasons from older entries)")


call("x: 3x4 float32", torch.randn(3, 4))
call("x: 3x4 float32 again", torch.randn(3, 4))
call("x: 5x4 float32 (batch grew)", torch.randn(5, 4))
call("x: 7x4 float32", torch.randn(7, 4))
model.double()
call("x: 7x4 float64, model.double()", torch.randn(7, 4, dtype=torch.float64))
with torch.no_grad():
    call("x: 7x4 float64 under no_grad", torch.randn(7, 4, dtype=torch.float64))
model.eval()
call("x: 7x4 float64, model.eval()", torch.randn(7, 4, dtype=torch.float64))
print(cache.stats())
