"""SHAPE_ENV: shape guards (sympy boolean expressions over symbolic sizes) compiled into the
check, each symbol read from the source it stands for.

May import: errors, guards, sources, compiler.kinds, compiler.builder.

sympy is imported only when shape guards are compiled.
"""

from __future__ import annotations

import fractions
import math
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import GuardCompileError
from ..guards import Guard, ShapeGuard, Source
from .builder import GuardBuilder, Leaf
from .kinds import EmitContext, GuardKind, RelationalKind, register_guard_kind

__all__ = ["add_shape_guards", "register_sympy_function"]

# Extra sympy functions (by class name) and the Python callables that evaluate them, e.g.
# torch's FloorDiv; the torch integration registers its own.
_functions: dict[str, Callable[..., Any]] = {}


def register_sympy_function(name: str, fn: Callable[..., Any]) -> None:
    """Let shape guards use the sympy function class ``name``, evaluated by ``fn``."""
    _functions[name] = fn


_REL = {"Equality": "==", "Unequality": "!=", "StrictLessThan": "<", "LessThan": "<=",
        "StrictGreaterThan": ">", "GreaterThan": ">="}
_CALLS: dict[str, Callable[..., Any]] = {"Max": max, "Min": min, "Abs": abs,
                                          "floor": math.floor, "ceiling": math.ceil}


def _print(expr: Any, names: Mapping[Any, str], const: Callable[[Any, str], str]) -> str:
    """Python source for ``expr``; symbols become ``names[symbol]``, numbers bound names."""
    import sympy

    cls = type(expr).__name__
    if expr.is_Symbol:
        try:
            return names[expr]
        except KeyError:
            raise GuardCompileError(
                f"shape guard uses symbol {expr} but no source was given for it "
                f"(pass symbol_sources={{{expr}: <Source>}})"
            ) from None
    if expr is sympy.true or expr is sympy.false:
        return "True" if expr is sympy.true else "False"
    if expr.is_Integer:
        return const(int(expr), "n")
    if expr.is_Rational:
        return const(fractions.Fraction(int(expr.p), int(expr.q)), "q")
    if expr.is_Float:
        return const(float(expr), "f")
    args = [_print(a, names, const) for a in expr.args]
    if cls in _REL:
        return f"({args[0]} {_REL[cls]} {args[1]})"
    if cls in ("And", "Or"):
        return "(" + f" {cls.lower()} ".join(args) + ")"
    if cls == "Not":
        return f"(not {args[0]})"
    if cls == "Add":
        return "(" + " + ".join(args) + ")"
    if cls == "Mul":
        return "(" + " * ".join(args) + ")"
    if cls == "Pow":
        return f"({args[0]} ** {args[1]})"
    if cls == "Mod":
        return f"({args[0]} % {args[1]})"
    fn = _CALLS.get(cls) or _functions.get(cls)
    if fn is None:
        raise GuardCompileError(
            f"shape guard {expr}: no Python form for the sympy function {cls}; register one "
            f"with register_sympy_function({cls!r}, fn)"
        )
    return f"{const(fn, cls)}({', '.join(args)})"


def _display(expr: Any, names: Mapping[Any, str]) -> str:
    return _print(expr, names, lambda v, hint: repr(v) if not callable(v) else hint)


def _number(v: Any) -> Any:
    """A symbol's value as a sympy number: ints exactly, floats as floats (NaN as sympy's
    nan), never an int made of a float."""
    import sympy

    if isinstance(v, float):
        return sympy.Float(v) if not math.isnan(v) else sympy.nan
    return sympy.Integer(v)


class ShapeEnvKind(RelationalKind):
    """One shape guard: a sympy boolean over the sizes its symbols stand for."""

    name = "SHAPE_ENV"
    cost = 15

    def extra_sources(self, guard: Any, **options: Any) -> tuple[Any, ...]:
        return ()

    def holds(self, value: Any, params: Any) -> bool:

        expr, symbols, _ = params
        result = expr.xreplace({s: _number(v) for s, v in zip(symbols, value, strict=True)})
        return bool(result)

    def emit(self, var: Any, params: Any, ctx: EmitContext) -> str:
        expr, symbols, _ = params
        return _print(expr, dict(zip(symbols, var, strict=True)), ctx.const)

    def code(self, name: Any, params: Any) -> str:
        expr, symbols, _ = params
        return _display(expr, dict(zip(symbols, name, strict=True)))

    def reason(self, name: Any, value: Any, params: Any) -> str:
        sloc = params[2]
        got = ", ".join(f"{n} = {v!r}" for n, v in zip(name, value, strict=True))
        text = str(sloc) if sloc is not None else ""
        where = f"  # {text}" if text not in ("", "()") else ""
        return f"{self.code(name, params)} failed: {got}{where}"


_SHAPE = ShapeEnvKind()


class ShapeEnvMarker(GuardKind):
    """The SHAPE_ENV guard on ``ShapeEnvSource()``: stands for all the shape guards passed to
    the compiler, which are installed whether or not this guard is present."""

    name = "SHAPE_ENV"
    reads_value = False

    def expect(self, value: Any, guard: Guard, **options: Any) -> Any:
        return None

    def holds(self, value: Any, params: Any) -> bool:
        return True

    def emit(self, var: Any, params: Any, ctx: EmitContext) -> str:
        return "True"

    def code(self, name: Any, params: Any) -> str:
        return "SHAPE_ENV: the shape guards of this entry"

    def recorded_as(self, params: Any) -> GuardKind:
        # A shape guard is written under this name with its (expr, symbols, sloc); the
        # marker itself has no params.
        return self if params is None else _SHAPE


register_guard_kind(ShapeEnvMarker())


def add_shape_guards(
    builder: GuardBuilder,
    shape_guards: Any,
    symbol_sources: Mapping[Any, Source],
) -> None:
    """Add one leaf per shape guard. ``symbol_sources`` maps each sympy symbol (or its name)
    to the source whose int value it stands for."""
    try:
        import sympy
    except ImportError:  # pragma: no cover - sympy is a dev dependency
        raise GuardCompileError(
            "shape guards need sympy: pip install sympy"
        ) from None
    by_name = {str(k): v for k, v in symbol_sources.items()}
    for sg in shape_guards:
        expr = sg.expr if isinstance(sg, ShapeGuard) else sg
        sloc = sg.sloc if isinstance(sg, ShapeGuard) else None
        expr = sympy.sympify(expr)
        symbols = tuple(sorted(expr.free_symbols, key=str))
        missing = [s for s in symbols if str(s) not in by_name]
        if missing:
            raise GuardCompileError(
                f"shape guard {expr}: no source for symbol(s) {', '.join(map(str, missing))}"
            )
        sources = tuple(by_name[str(s)] for s in symbols)
        for s in sources:
            builder.get(s)
        builder.add_leaf(Leaf(_SHAPE, sources, (expr, symbols, sloc), sloc=sloc))
