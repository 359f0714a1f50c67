"""SHAPE_ENV conversion: Dynamo's shape guards, as the Python code parts it installed
(``L['x'].size()[0] == L['y'].size()[0]``, ``2 <= L['x'].size()[0]``), become jitguard
shape guards: sympy booleans over symbols, each symbol standing for one jitguard source.

May import: jitguard._src.guards, jitguard._src.sources, jitguard._src.torch.convert_sources,
jitguard._src.torch.adapter_sources, jitguard._src.torch.symbolic, sympy.

# [Note: Converting shape guards]
# Dynamo evaluates each code part as Python over the frame (``L``/``G``). We parse it
# (``ast``) and rebuild the same arithmetic in sympy, accepting only what has one meaning
# on ints in both: int literals, ``+ - *``, ``//`` and ``%`` (torch's ``FloorDiv`` and
# ``PythonMod``, whose Python printing and evaluation are ``//`` and ``%``), ``min``,
# ``max``, ``abs``, comparisons (chained ones as a conjunction), ``and``/``or``/``not``.
# Every other expression is a leaf that must name an int source: its exact source text
# must be the name of a source already converted for the same capture, or of a size,
# stride or storage offset of one (``<tensor>.size()[i]``). Anything else makes the whole
# SHAPE_ENV guard unconvertible; nothing is approximated.
# The sizes and strides that occur in shape guards are exactly the ones Dynamo left
# symbolic (a static dim is a constant, never a symbol), so TENSOR_MATCH leaves those
# unchecked and the shape guards decide them (``shape_checked`` lists them). A size or stride
# of a view's base (``L['x']._base.size()[0]``) is read through ``AttrSource(x, '_base')``:
# when the argument is no view, ``_base`` is None, the read raises, and the guard fails.
# A float input Dynamo made symbolic gets the guard ``not math.isnan(<source>)``: it becomes
# ``Eq(IsNan(f), 0)`` over a symbol without the integer assumption (``symbolic.IsNan``);
# a text read both as an int and as a float is unconvertible.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..guards import ShapeGuard, SLoc, Source
from ..sources import AttrSource, TensorProperty, TensorPropertySource
from . import adapter_sources as adapter
from .convert_sources import Unconvertible
from .symbolic import IsNan

__all__ = ["ParsedShapeGuards", "parse_shape_code"]

_PROP = re.compile(r"^(?P<base>.+)\.(?:(?P<m>size|stride)\(\)\[(?P<i>\d+)\]|storage_offset\(\))$")
_CMP = {ast.Eq: "Eq", ast.NotEq: "Ne", ast.Lt: "Lt", ast.LtE: "Le", ast.Gt: "Gt", ast.GtE: "Ge"}


class ParsedShapeGuards:
    """The shape guards of one SHAPE_ENV guard: ``guards`` (``ShapeGuard``s),
    ``symbol_sources`` (symbol name -> source) and ``shape_checked`` (the names of the
    tensor size/stride/offset sources they read)."""

    def __init__(self) -> None:
        self.guards: list[ShapeGuard] = []
        self.symbol_sources: dict[str, Source] = {}
        self.shape_checked: set[str] = set()
        self._symbols: dict[str, Any] = {}

    def symbol(self, text: str, source: Source, *, integer: bool = True) -> Any:
        """The symbol for ``text``: an integer one, or (``integer=False``) one for a float
        input. One text used both ways is refused (its guards would not mean one thing)."""
        import sympy

        sym = self._symbols.get(text)
        if sym is not None and bool(sym.is_integer) != integer:
            raise Unconvertible(f"{text} is read both as an int and as a float in shape guards")
        if sym is None:
            name = f"jg_shape_{len(self._symbols)}"
            sym = sympy.Symbol(name, integer=True) if integer else sympy.Symbol(name)
            self._symbols[text] = sym
            self.symbol_sources[str(sym)] = source
            if isinstance(source, TensorPropertySource):
                self.shape_checked.add(text)
        return sym


def parse_shape_code(
    code_parts: Iterable[str], sources_by_name: Mapping[str, Source], user_stack: Any = None
) -> ParsedShapeGuards:
    """Parse every code part; raises ``Unconvertible`` naming the first part that cannot be
    stated with the same meaning."""
    out = ParsedShapeGuards()
    for code in dict.fromkeys(code_parts):
        try:
            tree = ast.parse(code, mode="eval")
        except SyntaxError as e:
            raise Unconvertible(f"shape guard {code!r} does not parse: {e}") from None
        expr = _Builder(code, sources_by_name, out).build(tree.body)
        import sympy

        if expr is sympy.true:
            continue
        if expr is sympy.false:
            raise Unconvertible(f"shape guard {code!r} is always false")
        out.guards.append(ShapeGuard(expr, SLoc(code, _user_loc(user_stack)), False))
    return out


def _user_loc(user_stack: Any) -> Any:
    try:
        frame = user_stack[-1]
        return f"{frame.filename}:{frame.lineno} in {frame.name}"
    except Exception:
        return None


def _isnan_call(node: ast.AST) -> bool:
    """Whether ``node`` is ``math.isnan(<one argument>)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and (node.func.value.id, node.func.attr) == ("math", "isnan")
        and len(node.args) == 1
        and not node.keywords
    )


class _Builder:
    def __init__(self, code: str, sources: Mapping[str, Source], out: ParsedShapeGuards) -> None:
        self.code = code
        self.sources = sources
        self.out = out

    def fail(self, node: ast.AST, why: str) -> Unconvertible:
        text = ast.get_source_segment(self.code, node) or ast.dump(node)
        return Unconvertible(f"shape guard {self.code!r}: {why}: {text}")

    def build(self, node: ast.AST) -> Any:
        import sympy

        if isinstance(node, ast.Constant):
            if type(node.value) is int:
                return sympy.Integer(node.value)
            raise self.fail(node, "only int constants are supported")
        if isinstance(node, ast.Compare):
            terms = []
            left = self.build(node.left)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = self.build(right_node)
                name = _CMP.get(type(op))
                if name is None:
                    raise self.fail(node, f"comparison {type(op).__name__} is not supported")
                terms.append(getattr(sympy, name)(left, right))
                left = right
            return sympy.And(*terms)
        if isinstance(node, ast.BoolOp):
            args = [self.build(v) for v in node.values]
            return sympy.And(*args) if isinstance(node.op, ast.And) else sympy.Or(*args)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and _isnan_call(node.operand):
            # A float input's implicit guard (Dynamo assumes a float symbol is not NaN).
            call = node.operand
            assert isinstance(call, ast.Call)
            text = ast.get_source_segment(self.code, call.args[0])
            source = self.sources.get(text) if text is not None else None
            if text is None or source is None or isinstance(source, TensorPropertySource):
                raise self.fail(call.args[0], "not a float source converted for this capture")
            return sympy.Eq(IsNan(self.out.symbol(text, source, integer=False)), 0)
        if isinstance(node, ast.UnaryOp):
            arg = self.build(node.operand)
            if isinstance(node.op, ast.USub):
                return -arg
            if isinstance(node.op, ast.Not):
                return sympy.Not(arg)
            raise self.fail(node, f"unary {type(node.op).__name__} is not supported")
        if isinstance(node, ast.BinOp):
            a, b = self.build(node.left), self.build(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.FloorDiv):
                return adapter.sympy_floor_div()(a, b)
            if isinstance(node.op, ast.Mod):
                return adapter.sympy_python_mod()(a, b)
            raise self.fail(node, f"operator {type(node.op).__name__} is not supported")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("min", "max", "abs")
            and not node.keywords
            and node.args
        ):
            args = [self.build(a) for a in node.args]
            if node.func.id == "abs":
                if len(args) != 1:
                    raise self.fail(node, "abs takes one argument")
                return sympy.Abs(args[0])
            return (sympy.Min if node.func.id == "min" else sympy.Max)(*args)
        return self.leaf(node)

    def tensor(self, text: str) -> Any:
        """The source of the tensor ``text`` names: a converted source, or the ``._base`` of
        one (a view's base, which Dynamo's shape guards read without guarding it apart)."""
        source = self.sources.get(text)
        if source is None and text.endswith("._base"):
            of = self.sources.get(text[: -len("._base")])
            if of is not None:
                source = AttrSource(of, "_base")
                if source.name() != text:
                    return None
        return source

    def leaf(self, node: ast.AST) -> Any:
        text = ast.get_source_segment(self.code, node)
        if text is None:
            raise self.fail(node, "no source text")
        source = self.sources.get(text)
        if source is None:
            m = _PROP.match(text)
            base = self.tensor(m.group("base")) if m else None
            if m is None or base is None:
                raise self.fail(node, "not a source converted for this capture")
            if m.group("m") is None:
                source = TensorPropertySource(base, TensorProperty.STORAGE_OFFSET)
            else:
                prop = TensorProperty.SIZE if m.group("m") == "size" else TensorProperty.STRIDE
                source = TensorPropertySource(base, prop, int(m.group("i")))
            if source.name() != text:
                raise self.fail(node, f"reads as {source.name()}")
        return self.out.symbol(text, source)
