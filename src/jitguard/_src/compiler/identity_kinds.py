"""The built-in guard kinds on types and identity: TYPE_MATCH, ID_MATCH, NONE_MATCH,
NOT_NONE, BOOL_MATCH, FUNCTION_MATCH, WEAKREF_ALIVE, and the relational DUPLICATE_INPUT and
NO_ALIASING. Registered by ``builtin_kinds``.

May import: errors, compiler.values, compiler.kinds, compiler.bulk.
"""

from __future__ import annotations

import types
from collections.abc import Hashable
from typing import Any, Optional

from ..errors import GuardKindError
from . import bulk
from .kinds import FACT_ID, FACT_TYPE, FACT_VALUE, EmitContext, GuardKind, RelationalKind
from .values import Ident, describe_ident, show, type_name

__all__ = [
    "BOOL_MATCH",
    "ID_MATCH",
    "NONE_MATCH",
    "TYPE_MATCH",
    "BoolMatch",
    "DuplicateInput",
    "FunctionMatch",
    "IdMatch",
    "NoAliasing",
    "NoneMatch",
    "NotNone",
    "TypeMatch",
    "WeakrefAlive",
]


class TypeMatch(GuardKind):
    """The value's exact type (subclasses fail)."""

    name = "TYPE_MATCH"
    specificity = 2
    dispatch_facts = (FACT_TYPE,)
    cost = 2

    def expect(self, value: Any, guard: Any, **options: Any) -> Ident:
        super().expect(value, guard, **options)
        return Ident(type(value))

    def holds(self, value: Any, params: Ident) -> bool:
        return type(value) is params.get()

    def emit(self, var: str, params: Ident, ctx: EmitContext) -> str:
        return ctx.identical(f"type({var})", params, "type")

    def pins_type(self, params: Ident) -> Optional[type]:
        return params.get() if params.alive else None

    def code(self, name: str, params: Ident) -> str:
        return f"type({name}) is {describe_ident(params)}"

    def reason(self, name: str, value: Any, params: Ident) -> str:
        return f"{self.code(name, params)} failed: got {type_name(type(value))}"

    def export(self, params: Ident) -> tuple[Any, Any]:
        return (params.weakref(), None)

    def fact(self, params: Ident) -> Optional[tuple[str, Hashable]]:
        return ("type", params.id)

    def fact_of(self, fact: str, value: Any) -> Hashable:
        return id(type(value))


class IdMatch(GuardKind):
    """The value is one particular object."""

    name = "ID_MATCH"
    specificity = 8
    dispatch_facts = (FACT_ID,)
    cost = 1

    def expect(self, value: Any, guard: Any, **options: Any) -> Ident:
        super().expect(value, guard, **options)
        return Ident(value)

    def holds(self, value: Any, params: Ident) -> bool:
        return params.alive and value is params.get()

    def emit(self, var: str, params: Ident, ctx: EmitContext) -> str:
        return ctx.identical(var, params, "obj")

    def code(self, name: str, params: Ident) -> str:
        return f"{name} is {describe_ident(params)}"

    def reason(self, name: str, value: Any, params: Ident) -> str:
        if not params.alive:
            return f"{self.code(name, params)} failed: the guarded object was deallocated"
        return f"{self.code(name, params)} failed: got {show(value)} at {hex(id(value))}"

    def export(self, params: Ident) -> tuple[Any, Any]:
        return (None, params.weakref())

    def fact(self, params: Ident) -> Optional[tuple[str, Hashable]]:
        return ("id", params.id)

    def fact_of(self, fact: str, value: Any) -> Hashable:
        return id(value)


class NoneMatch(GuardKind):
    """The value is None."""

    name = "NONE_MATCH"
    specificity = 8
    dispatch_facts = (FACT_TYPE,)
    cost = 1

    def expect(self, value: Any, guard: Any, **options: Any) -> None:
        super().expect(value, guard, **options)

    def holds(self, value: Any, params: None) -> bool:
        return value is None

    def emit(self, var: str, params: None, ctx: EmitContext) -> str:
        return f"{var} is None"

    def code(self, name: str, params: None) -> str:
        return f"{name} is None"

    def reason(self, name: str, value: Any, params: None) -> str:
        return f"{name} is None failed: got {show(value)}"

    def fact(self, params: None) -> Optional[tuple[str, Hashable]]:
        return ("type", id(type(None)))

    def fact_of(self, fact: str, value: Any) -> Hashable:
        return id(type(value))


class NotNone(GuardKind):
    """The value is not None."""

    name = "NOT_NONE"
    cost = 1

    def expect(self, value: Any, guard: Any, **options: Any) -> None:
        super().expect(value, guard, **options)

    def holds(self, value: Any, params: None) -> bool:
        return value is not None

    def emit(self, var: str, params: None, ctx: EmitContext) -> str:
        return f"{var} is not None"

    def code(self, name: str, params: None) -> str:
        return f"{name} is not None"

    def reason(self, name: str, value: Any, params: None) -> str:
        return f"{name} is not None failed: got None"


class BoolMatch(GuardKind):
    """The value is ``True`` (or ``False``) itself: exact bool, no truthiness."""

    name = "BOOL_MATCH"
    specificity = 8
    dispatch_facts = (FACT_VALUE,)
    cost = 1

    def expect(self, value: Any, guard: Any, **options: Any) -> bool:
        super().expect(value, guard, **options)
        if type(value) is not bool:
            raise GuardKindError(
                f"BOOL_MATCH on {guard.name}: expected a bool, found {type_name(type(value))}; "
                f"use CONSTANT_MATCH to pick the kind from the value"
            )
        return value

    def holds(self, value: Any, params: bool) -> bool:
        return value is params

    def emit(self, var: str, params: bool, ctx: EmitContext) -> str:
        # Bound, not written as True/False: a recompile after the flag flipped then has the
        # same code text and reuses the compiled code ([Note: Compiled-code reuse]).
        return f"{var} is {ctx.const(params, 'flag')}"

    def code(self, name: str, params: bool) -> str:
        return f"{name} is {params}"

    def reason(self, name: str, value: Any, params: bool) -> str:
        return f"{name} is {params} failed: got {show(value)}"

    def fact(self, params: bool) -> Optional[tuple[str, Hashable]]:
        return ("value", (bool, params))

    def fact_of(self, fact: str, value: Any) -> Hashable:
        return (type(value), value)


class FunctionMatch(GuardKind):
    """A Python function with the same code object whose closure cells hold the same
    objects; any other callable must be the same object (as ID_MATCH)."""

    name = "FUNCTION_MATCH"
    specificity = 8
    cost = 5

    def resolve(self, value: Any, options: dict[str, Any]) -> GuardKind:
        return self if type(value) is types.FunctionType else ID_MATCH

    def expect(self, value: Any, guard: Any, **options: Any) -> Any:
        super().expect(value, guard, **options)
        cells = value.__closure__
        contents: Optional[tuple[Ident, ...]] = None
        if cells is not None:
            contents = tuple(Ident(_cell_value(c)) for c in cells)
        return (Ident(value.__code__), contents)

    def holds(self, value: Any, params: Any) -> bool:
        code, contents = params
        if type(value) is not types.FunctionType or value.__code__ is not code.get():
            return False
        cells = value.__closure__
        if contents is None:
            return cells is None
        return (
            cells is not None
            and len(cells) == len(contents)
            and all(
                i.alive and _cell_value(c) is i.get()
                for c, i in zip(cells, contents, strict=True)
            )
        )

    def emit(self, var: str, params: Any, ctx: EmitContext) -> str:
        code, contents = params
        fn_type = ctx.identical(f"type({var})", Ident(types.FunctionType), "FunctionType")
        parts = [fn_type, ctx.identical(f"{var}.__code__", code, "code")]
        if contents is None:
            parts.append(f"{var}.__closure__ is None")
        else:
            parts.append(f"len({var}.__closure__) == {ctx.const(len(contents), 'n')}")
            cell_value = ctx.const(_cell_value, "cell_value")
            for i, ident in enumerate(contents):
                expr = f"{cell_value}({var}.__closure__[{ctx.const(i, 'i')}])"
                parts.append(ctx.identical(expr, ident, "cell"))
        return " and ".join(parts)

    def code(self, name: str, params: Any) -> str:
        code, contents = params
        text = f"{name}.__code__ is {describe_ident(code)}"
        if contents:
            text += f" and its {len(contents)} closure cells hold the same objects"
        return text

    def reason(self, name: str, value: Any, params: Any) -> str:
        code, _ = params
        if type(value) is not types.FunctionType:
            return f"{self.code(name, params)} failed: got {show(value)}"
        if value.__code__ is not code.get():
            return f"{self.code(name, params)} failed: a different code object"
        return f"{self.code(name, params)} failed: the closure differs"


_EMPTY_CELL = object()


def _cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY_CELL


class WeakrefAlive(GuardKind):
    """The weak reference still has its referent."""

    name = "WEAKREF_ALIVE"
    cost = 2

    def expect(self, value: Any, guard: Any, **options: Any) -> None:
        super().expect(value, guard, **options)

    def holds(self, value: Any, params: None) -> bool:
        return value() is not None

    def emit(self, var: str, params: None, ctx: EmitContext) -> str:
        return f"{var}() is not None"

    def code(self, name: str, params: None) -> str:
        return f"{name}() is not None"

    def reason(self, name: str, value: Any, params: None) -> str:
        return f"{self.code(name, params)} failed: the referent is dead"


# ---- relational -------------------------------------------------------------------------


class DuplicateInput(RelationalKind):
    """Two sources hold the same object (``functools.partial(DUPLICATE_INPUT,
    source_b=...)``); built from ``DuplicateInputs`` environment expressions too."""

    name = "DUPLICATE_INPUT"

    def extra_sources(self, guard: Any, **options: Any) -> tuple[Any, ...]:
        if set(options) != {"source_b"}:
            raise GuardKindError(
                f"DUPLICATE_INPUT on {guard.name} takes source_b= (the other source), got "
                f"{sorted(options)}"
            )
        return (options["source_b"],)

    def expect(self, value: Any, guard: Any, **options: Any) -> None:
        return None

    def holds(self, value: Any, params: None) -> bool:
        a, b = value
        return a is b

    def emit(self, var: Any, params: None, ctx: EmitContext) -> str:
        return f"{var[0]} is {var[1]}"

    def code(self, name: Any, params: None) -> str:
        return f"{name[0]} is {name[1]}"

    def reason(self, name: Any, value: Any, params: None) -> str:
        return f"{self.code(name, params)} failed: they are different objects"


class NoAliasing(RelationalKind):
    """All the sources hold pairwise distinct objects
    (``functools.partial(NO_ALIASING, others=(source, ...))``)."""

    name = "NO_ALIASING"

    def extra_sources(self, guard: Any, **options: Any) -> tuple[Any, ...]:
        if set(options) != {"others"} or not options["others"]:
            raise GuardKindError(
                f"NO_ALIASING on {guard.name} takes others= (a non-empty tuple of sources), "
                f"got {sorted(options)}"
            )
        return tuple(options["others"])

    def expect(self, value: Any, guard: Any, **options: Any) -> None:
        return None

    def holds(self, value: Any, params: None) -> bool:
        return len({id(v) for v in value}) == len(value)

    def emit(self, var: Any, params: None, ctx: EmitContext) -> str:
        if len(var) == 2:
            return f"{var[0]} is not {var[1]}"
        if bulk.is_native(bulk.distinct):  # one C call, no set of ids
            return f"{ctx.const(bulk.distinct, 'distinct')}({', '.join(var)})"
        return f"len({{{', '.join(f'id({v})' for v in var)}}}) == {ctx.const(len(var), 'n')}"

    def code(self, name: Any, params: None) -> str:
        return f"no two of {', '.join(name)} are the same object"

    def reason(self, name: Any, value: Any, params: None) -> str:
        seen: dict[int, str] = {}
        for n, v in zip(name, value, strict=True):
            if id(v) in seen:
                return f"{self.code(name, params)} failed: {seen[id(v)]} is {n}"
            seen[id(v)] = n
        return f"{self.code(name, params)} failed"


TYPE_MATCH = TypeMatch()
ID_MATCH = IdMatch()
NONE_MATCH = NoneMatch()
BOOL_MATCH = BoolMatch()
