"""Checked by mypy in tests/test_typing.py: the lines marked ``# wrong`` must be errors."""

from __future__ import annotations

import jitguard


@jitguard.specialize
def scale(x: float, k: int) -> float:
    return x * k


@jitguard.specialize(recompile_limit=4)
def greet(name: str, *, loud: bool = False) -> str:
    return name.upper() if loud else name


ok_scale: float = scale(2.0, 3)
ok_greet: str = greet("a", loud=True)
wrong_arg = scale("a", "b")  # wrong
wrong_kw = greet("a", quiet=True)  # wrong
wrong_result: int = greet("a")  # wrong
cache: jitguard.FunctionCache[..., object] = jitguard.cache_of(scale)


class Model:
    @jitguard.specialize
    def forward(self, x: int) -> int:
        return x + 1


ok_method: int = Model().forward(1)
wrong_method = Model().forward("1")  # wrong


class Tools:
    @jitguard.specialize
    @staticmethod
    def double(x: int) -> int:
        return 2 * x


    @jitguard.specialize
    @classmethod
    def make(cls, n: int) -> int:
        return n


ok_static: int = Tools.double(2) + Tools().double(2)
ok_class: int = Tools.make(3) + Tools().make(3)
wrong_static = Tools.double("2")  # wrong
