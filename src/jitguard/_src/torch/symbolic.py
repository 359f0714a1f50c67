"""Python meanings of the sympy functions torch's ShapeEnv puts in shape guards
(``torch.utils._sympy.functions``), for SHAPE_ENV guards.

May import: jitguard._src.compiler.shape, sympy (torch imports it), torch (lazily: only to
evaluate ``IsNonOverlappingAndDenseIndicator``).

Each meaning is what torch's own Python printer prints for the function (the code Dynamo's
shape guards run): ``FloorDiv`` and ``CleanDiv`` are ``//``, ``ModularIndexing(x, d, m)``
is ``(x // d) % m``, ``PythonMod`` is ``%``, ``IntTrueDiv``/``FloatTrueDiv`` are ``/``, and
so on. ``Mod``, ``Max``, ``Min``, ``Abs``, ``floor`` and ``ceiling`` the compiler already
knows by name; ``CeilDiv`` never survives construction (it becomes ``FloorDiv``/``CleanDiv``).
``IsNan`` is jitguard's own: 1 for a NaN float, else 0, for a float input's implicit guard
(``not math.isnan(f)`` in Dynamo's code, ``Eq(IsNan(f), 0)`` here).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import sympy

from ..compiler.shape import register_sympy_function

__all__ = ["SYMPY_FUNCTIONS", "IsNan", "register_sympy_functions"]


class IsNan(sympy.Function):
    """1 when its (float) argument is NaN, else 0; stays unevaluated over a symbol."""

    is_integer = True

    @classmethod
    def eval(cls, x: Any) -> Any:
        if x is sympy.nan:
            return sympy.Integer(1)
        if x.is_number:
            return sympy.Integer(0)
        return None


def _is_nan(x: Any) -> int:
    return 1 if isinstance(x, float) and math.isnan(x) else 0


def _modular_indexing(x: Any, div: Any, mod: Any) -> Any:
    return (x // div) % mod


def _where(cond: Any, a: Any, b: Any) -> Any:
    return a if cond else b


def _trunc_to_float(x: Any) -> float:
    return float(math.trunc(x))


def _round_decimal(x: Any, ndigits: Any) -> Any:
    return round(x, int(ndigits))


def _float_pow(a: Any, b: Any) -> float:
    return float(a) ** float(b)


def _identity(x: Any) -> Any:
    return x


def _non_overlapping_and_dense(*args: Any) -> int:
    from torch.fx.experimental.symbolic_shapes import eval_is_non_overlapping_and_dense

    dim = len(args) // 2
    return int(eval_is_non_overlapping_and_dense(list(args[:dim]), list(args[dim:])))


def _log2(x: Any) -> float:
    return math.log2(float(x))


SYMPY_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "FloorDiv": operator.floordiv,
    "CleanDiv": operator.floordiv,
    "ModularIndexing": _modular_indexing,
    "PythonMod": operator.mod,
    "IntTrueDiv": operator.truediv,
    "FloatTrueDiv": operator.truediv,
    "CeilToInt": math.ceil,
    "FloorToInt": math.floor,
    "TruncToInt": math.trunc,
    "TruncToFloat": _trunc_to_float,
    "RoundToInt": round,
    "RoundDecimal": _round_decimal,
    "ToFloat": float,
    "FloatPow": _float_pow,
    "PowByNatural": operator.pow,
    "LShift": operator.lshift,
    "RShift": operator.rshift,
    "Where": _where,
    "Identity": _identity,
    "IsNonOverlappingAndDenseIndicator": _non_overlapping_and_dense,
    "BitwiseFn_bitwise_and": operator.and_,
    "BitwiseFn_bitwise_or": operator.or_,
    "BitwiseFn_bitwise_xor": operator.xor,
    **{
        f"OpaqueUnaryFn_{name}": getattr(math, name)
        for name in (
            "sqrt", "cos", "cosh", "sin", "sinh", "tan", "tanh", "asin", "acos", "atan",
            "exp", "log", "asinh",
        )
    },
    "OpaqueUnaryFn_log2": _log2,
    "IsNan": _is_nan,
}


def register_sympy_functions() -> None:
    for name, fn in SYMPY_FUNCTIONS.items():
        register_sympy_function(name, fn)
