"""Symbolic inputs for one trace: fake tensors and SymInts over one ``ShapeEnv``, and the
shape guards that say which later inputs the trace is valid for.

May import: jitguard._src.guards, jitguard._src.sources, torch.

# [Note: From a ShapeEnv to shape guards]
# A trace over symbolic inputs is valid for another input when every int the trace read
# (a size, a stride, a storage offset, an int argument) stands in the same relations. We
# describe that with three families of sympy booleans, each read from a jitguard source:
#   1. bindings and input equalities: every input int has, after the trace, a final
#      expression (the ShapeEnv's replacements applied). The first input whose expression is
#      a bare symbol binds that symbol (its source becomes the symbol's source); every other
#      input int gets a fresh symbol of its own and the guard ``fresh == expression``
#      (this covers equalities found while tracing, e.g. ``x.size(1) == y.size(0)`` for a
#      matmul, and strides that were expressed through sizes). An input whose expression is
#      a number is static: for tensor sizes and strides the tensor guard checks it (see
#      ``TensorLayout``); a storage offset is not checked (aten ops read it from the tensor
#      at run time, so the graph does not depend on it); an int argument gets ``n == 3``.
#   2. every guard the ShapeEnv recorded, simplified, unless the final value ranges of the
#      bound symbols already decide it;
#   3. every bound symbol within its final value range. A size starts at ``[2, oo)``: sizes
#      0 and 1 are never made symbolic ("0/1 specialization"), the trace assumed ``>= 2``,
#      so ``2 <= size`` is a guard.
# Dropping a guard of family 2 is sound only because families 1 and 3 are emitted in full.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from typing import Any, Optional

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
from torch.utils._sympy.numbers import int_oo

from ..guards import ShapeGuard, SLoc, Source
from ..sources import TensorProperty, TensorPropertySource

__all__ = ["ShapeGuardSet", "SymbolicInputs", "TensorLayout"]

_PROPS = {
    "SIZE": TensorProperty.SIZE,
    "STRIDE": TensorProperty.STRIDE,
    "STORAGE_OFFSET": TensorProperty.STORAGE_OFFSET,
}


@dataclasses.dataclass(frozen=True)
class _TorchName(torch._guards.Source):
    """A torch ``Source`` standing for a jitguard source, so that the ShapeEnv's symbols
    and messages carry jitguard's names (``L['x']``)."""

    jg: Any

    @property
    def _name_template(self) -> str:
        return str(self.jg.name()).replace("{", "{{").replace("}", "}}")

    @functools.cached_property
    def name(self) -> str:
        return str(self.jg.name())

    @functools.cached_property
    def guard_source(self) -> Any:
        return torch._guards.GuardSource.LOCAL


@dataclasses.dataclass(frozen=True)
class TensorLayout:
    """What the tensor guard must check statically for one input tensor: sizes and strides,
    ``None`` where the shape guards cover the value instead."""

    sizes: tuple[Optional[int], ...]
    strides: tuple[Optional[int], ...]

    @property
    def dynamic_dims(self) -> frozenset[int]:
        return frozenset(i for i, s in enumerate(self.sizes) if s is None)

    @property
    def is_static(self) -> bool:
        return None not in self.sizes and None not in self.strides


@dataclasses.dataclass
class ShapeGuardSet:
    """The result of ``SymbolicInputs.produce``: what ``compile_guards`` takes as
    ``shape_guards`` and ``symbol_sources``, and each tensor's static layout."""

    shape_guards: list[ShapeGuard]
    symbol_sources: dict[Any, Source]
    layouts: dict[Source, TensorLayout]

    def describe(self) -> list[str]:
        """The shape guards as text over source names (for messages and tests)."""
        names = {s: src.name() for s, src in self.symbol_sources.items()}
        out = []
        for g in self.shape_guards:
            out.append(str(g.expr.xreplace({s: sympy.Symbol(n) for s, n in names.items()})))
        return out


_ZERO_ONE = (
    "0/1 specialization: sizes 0 and 1 are never symbolic, so a dynamic entry assumes >= 2 "
    "and sizes 0 and 1 get entries of their own"
)


def _convert_sloc(sloc: Any) -> SLoc:
    if isinstance(sloc, SLoc):
        return sloc
    return SLoc(getattr(sloc, "framework_loc", None), getattr(sloc, "maybe_user_loc", None))


def _equality_sloc(env: Any, source: Source, value: Any, expr: Any) -> SLoc:
    """Where an input equality came from: the replacement that made the input's symbol
    (or a symbol replaced by the same expression) equal to ``expr``, when recorded."""
    slocs = env.replacements_slocs
    candidates = [getattr(value.node, "_expr", None)]
    candidates += [s for s, r in env.replacements.items() if r == expr]
    for sym in candidates:
        if sym in slocs:
            return _convert_sloc(slocs[sym])
    if isinstance(source, TensorPropertySource) and source.prop is TensorProperty.STRIDE:
        return SLoc(f"{source.name()} follows from the sizes when traced", None)
    return SLoc(f"{source.name()} was equal to {expr} when traced", None)


class SymbolicInputs:
    """Fakes the inputs of one trace over one ``ShapeEnv``.

    ``fake_tensor(t, source, dynamic_dims)`` makes the listed dims symbols (the rest static
    constants) and ``fake_int(n, source)`` makes an int a symbol; after tracing under
    ``fake_mode``, ``produce()`` turns the ShapeEnv's state into shape guards over the
    sources (see [Note: From a ShapeEnv to shape guards]).

    ``duck_shape`` is off by default: sizes that happen to be equal get different symbols,
    so an entry does not silently require them to stay equal (torch turns it on; equalities
    the trace relies on are guarded either way).
    """

    def __init__(self, *, duck_shape: bool = False, specialize_zero_one: bool = True) -> None:
        self.shape_env = ShapeEnv(duck_shape=duck_shape, specialize_zero_one=specialize_zero_one)
        self.fake_mode = FakeTensorMode(shape_env=self.shape_env)
        self._tensors: list[tuple[Source, Any]] = []
        self._ints: list[tuple[Source, Any]] = []

    def fake_tensor(self, value: torch.Tensor, source: Source, dynamic_dims: Iterable[int] = ()) -> Any:
        dyn = set(dynamic_dims)
        ndim = value.dim()
        context: Any = StatelessSymbolicContext(
            dynamic_sizes=[DimDynamic.DYNAMIC if i in dyn else DimDynamic.STATIC for i in range(ndim)],
            dynamic_strides=[DimDynamic.INFER_STRIDE] * ndim,
        )
        fake = self.fake_mode.from_tensor(value, source=_TorchName(source), symbolic_context=context)
        self._tensors.append((source, fake))
        return fake

    def fake_int(self, value: int, source: Source) -> Any:
        env = self.shape_env
        tsrc = _TorchName(source)
        sym = env.create_unspecified_symbol(value, tsrc, dynamic_dim=DimDynamic.DYNAMIC)
        symint = env.create_symintnode(sym, hint=value, source=tsrc)
        self._ints.append((source, symint))
        return symint

    def produce(self, offsets_read: Iterable[Source] = ()) -> ShapeGuardSet:
        """The shape guards; ``offsets_read`` are the tensors whose storage offset the trace
        read (a static one is then guarded too)."""
        offsets_read = set(offsets_read)
        env = self.shape_env
        symbol_sources: dict[Any, Source] = {}
        guards: list[ShapeGuard] = []
        seen: set[Any] = set()
        layouts: dict[Source, TensorLayout] = {}
        fresh = iter(range(1 << 62))

        def emit(expr: Any, sloc: SLoc, size_oblivious: bool = False) -> None:
            if expr is sympy.true or expr in seen:
                return
            if expr is sympy.false:
                raise AssertionError(f"shape guard is false on the traced inputs: {sloc}")
            seen.add(expr)
            guards.append(ShapeGuard(expr, sloc, size_oblivious))

        def track(source: Source, value: Any, pin: Optional[str]) -> Optional[int]:
            """Bind or guard one input int; returns its static value, or None. A static
            value is guarded (``source == value``) when ``pin`` says why."""
            if isinstance(value, torch.SymInt):
                as_int = value.node.maybe_as_int()
                if as_int is None:
                    expr = value.node.expr
                    if isinstance(expr, sympy.Symbol) and expr not in symbol_sources:
                        symbol_sources[expr] = source
                        return None
                    own = sympy.Symbol(f"jg_in{next(fresh)}", integer=True)
                    symbol_sources[own] = source
                    emit(sympy.Eq(own, expr), _equality_sloc(env, source, value, expr))
                    return None
                value = as_int
            if pin is not None:
                own = sympy.Symbol(f"jg_in{next(fresh)}", integer=True)
                symbol_sources[own] = source
                emit(sympy.Eq(own, int(value)), SLoc(pin, None))
            return int(value)

        for source, fake in self._tensors:
            sizes = tuple(
                track(TensorPropertySource(source, TensorProperty.SIZE, i), s, None)
                for i, s in enumerate(fake.size())
            )
            strides = tuple(
                track(TensorPropertySource(source, TensorProperty.STRIDE, i), s, None)
                for i, s in enumerate(fake.stride())
            )
            track(
                TensorPropertySource(source, TensorProperty.STORAGE_OFFSET),
                fake.storage_offset(),
                f"the trace read {source.name()}.storage_offset()" if source in offsets_read else None,
            )
            layouts.setdefault(source, TensorLayout(sizes, strides))
        for source, symint in self._ints:
            track(source, symint, f"{source.name()} was specialized")

        # 2. what the trace decided, unless the final ranges (emitted below) decide it
        for g in env.guards:
            try:
                decided = env._maybe_evaluate_static(g.expr, axioms=(), size_oblivious=g.size_oblivious)
            except Exception:
                decided = None
            if decided is not None:
                continue
            expr = env.simplify(g.expr)
            unknown = [s for s in expr.free_symbols if s not in symbol_sources]
            if unknown:
                raise NotImplementedError(
                    f"shape guard {expr} uses {', '.join(map(str, unknown))}, which no input "
                    f"binds (sources: {[str(s.name) for u in unknown for s in env.var_to_sources.get(u, [])]})"
                )
            emit(expr, _convert_sloc(g.sloc), g.size_oblivious)

        # 3. value ranges of the bound symbols
        for sym in list(symbol_sources):
            vr = env.var_to_range.get(sym)
            if vr is None:
                continue
            slocs = getattr(env, "var_to_range_sloc", {}).get(sym)
            lower, upper = vr.lower, vr.upper
            if lower not in (-int_oo, -sympy.oo) and lower != upper:
                where = getattr(slocs, "lower", None)
                src = symbol_sources[sym]
                if lower == 2 and isinstance(src, TensorPropertySource):
                    sloc = SLoc(_ZERO_ONE, None)
                elif where is not None:
                    sloc = _convert_sloc(where)
                else:
                    sloc = SLoc("value range of the symbol", None)
                emit(sympy.Le(int(lower), sym), sloc)
            if upper not in (int_oo, sympy.oo):
                where = getattr(slocs, "upper", None)
                emit(sympy.Le(sym, int(upper)), _convert_sloc(where) if where is not None
                     else SLoc("value range of the symbol", None))
        return ShapeGuardSet(guards, symbol_sources, layouts)
