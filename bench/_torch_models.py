"""The functions and the module both torch benchmarks compile (bench_torch.py and
bench_torch_module.py, scenarios S1-S3 of /work/shared/reference/torch-guards.md §d)."""

from __future__ import annotations

from typing import Any

import torch


def f1(x: Any) -> Any:
    return x + 1


def f2(x: Any, y: Any, z: Any, n: Any, s: Any) -> Any:
    return x * y + z * n + s


class MLP(torch.nn.Module):
    def __init__(self, depth: int = 10, width: int = 32) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))

    def forward(self, x: Any) -> Any:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def f3(m: Any, x: Any) -> Any:
    return m(x)
