"""train() and eval() alternating: each mode compiles once, which is fine: no advice."""

import torch

import jitguard as jg
import jitguard.torch as jgt

model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.1))
compiled = jgt.compile(model)
for _ in range(5):
    model.train()
    compiled(torch.ones(2, 4))
    model.eval()
    compiled(torch.ones(2, 4))
cache = jg.cache_of(compiled)
print("compiles:", cache.stats().compiles, "| advice:", cache.advice())
