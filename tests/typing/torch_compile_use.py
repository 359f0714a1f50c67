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


@jgt.compile(backend="aot_eager", store=True)
def stored(x: float) -> float:
    return x + 1


def plain(x: float) -> float:
    return x


stored_in_dir = jgt.compile(plain, store="/tmp/jitguard-store")
ok_stored: float = stored(1.0) + stored_in_dir(2.0)
ok_scale: float = scale(2.0, 3)
ok_greet: str = greet("a", loud=True)
wrong_arg = scale("a", "b")  # wrong
wrong_kw = greet("a", quiet=True)  # wrong
wrong_result: int = greet("a")  # wrong
wrong_stored: str = stored_in_dir(2.0)  # wrong
wrong_store = jgt.compile(plain, store=3.5)  # wrong
