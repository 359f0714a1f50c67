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


class Block(torch.nn.Module):
    """A small pre-norm transformer block: self-attention and an MLP, each with a residual."""

    def __init__(self, width: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.norm2 = torch.nn.LayerNorm(width)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width)
        )

    def forward(self, x: Any) -> Any:
        b, t, c = x.shape
        h = self.heads
        q, k, v = self.qkv(self.norm1(x)).split(c, dim=-1)
        q = q.view(b, t, h, c // h).transpose(1, 2)
        k = k.view(b, t, h, c // h).transpose(1, 2)
        v = v.view(b, t, h, c // h).transpose(1, 2)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.norm2(x))
