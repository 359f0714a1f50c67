"""Helpers of the adversarial tests of ``jitguard.torch.compile`` against eager
(tests/torch/test_adversarial_more*.py): compare a compiled call with the plain one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

import jitguard.torch as jgt


def same(got: Any, want: Any) -> None:
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)


def full(v: float, n: int = 3) -> Any:
    return torch.full((n,), float(v))


def wmc(fn: Callable[..., Any], args: Callable[[], tuple[Any, ...]],
        mutate: Callable[[], None], **opts: Any) -> Any:
    """Compile, call twice against eager, mutate, call again against eager."""
    cf = jgt.compile(fn, **opts)
    same(cf(*args()), fn(*args()))
    same(cf(*args()), fn(*args()))
    mutate()
    same(cf(*args()), fn(*args()))
    return cf
