"""Checked by mypy in tests/test_typing.py (torch itself unfollowed): the lines marked
``# wrong`` must be errors."""

from __future__ import annotations

import jitguard.torch as jgt


@jgt.compile
def scale(x: float, k: int) -> float:
    return x * k


@jgt.compile(backend="eager", fullgraph=True)
def greet(name: str, *, loud: bool = False) -> str:
    return name.upper() if loud else name


ok_scale: float = scale(2.0, 3)
ok_greet: str = greet("a", loud=True)
wrong_arg = scale("a", "b")  # wrong
wrong_kw = greet("a", quiet=True)  # wrong
wrong_result: int = greet("a")  # wrong
