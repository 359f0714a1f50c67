"""The built-in guard kinds. Each is registered on import and so becomes a ``GuardBuilder``
attribute (``GuardBuilder.TYPE_MATCH`` ...).

May import: errors, global_state, compiler.values, compiler.kinds.

Failure texts follow the forms users know from torch.compile: ``L['n'] == 7 failed: got 8``,
``type(L['cfg']) is Config failed: got dict``.
"""

from __future__ import annotations

import enum
import math
import types
from collections.abc import Hashable
from typing import Any, Optional

from ..errors import GuardKindError, JitGuardError
from ..global_state import global_states
from .kinds import EmitContext, GuardKind, RelationalKind, register_guard_kind
from .values import Ident, describe_ident, show, type_name

__all__ = ["register_constant_type", "strict_equal"]

_SCALAR_TYPES = (int, float, complex, str, bytes, bool, type(None))
# Types whose ``==`` between two values of the type is exact equality.
_EXACT_EQ_TYPES = (str, bytes, int, bool, type(None))
# A list, not a set: membership is decided by identity (see _one_of).
_CONSTANT_TYPES: list[type] = [*_SCALAR_TYPES, tuple, frozenset, range, slice]


def register_constant_type(tp: type) -> None:
    """Let EQUALS_MATCH hold values of ``tp`` (immutable, with a meaningful ``==``)."""
    if not _one_of(tp, _CONSTANT_TYPES):
        _CONSTANT_TYPES.append(tp)


def _one_of(tp: type, types_: Any) -> bool:
    """``tp`` is one of ``types_`` by identity (``in`` would ask a metaclass ``__eq__``)."""
    return any(tp is t for t in types_)


def _is_enum_member(value: Any) -> bool:
    return issubclass(type(value), enum.Enum)


def _is_constant(value: Any) -> bool:
    tp = type(value)
    if _is_enum_member(value):
        return True
    if tp is tuple or tp is frozenset:
        return all(_is_constant(v) for v in value)
    if tp is slice:
        return all(_is_constant(v) for v in (value.start, value.stop, value.step))
    return _one_of(tp, _CONSTANT_TYPES)


def _needs_strict(value: Any) -> bool:
    """True if ``==`` cannot stand for strict equality on ``value``: a NaN (unequal to itself)
    or a float zero (``0.0 == -0.0``), anywhere inside."""
    tp = type(value)
    if tp is float:
        return value == 0.0 or math.isnan(value)
    if tp is complex:
        return _needs_strict(value.real) or _needs_strict(value.imag)
    if tp is tuple or tp is frozenset:
        return any(_needs_strict(v) for v in value)
    if tp is slice:
        return any(_needs_strict(v) for v in (value.start, value.stop, value.step))
    return False


def _float_equal(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def strict_equal(value: Any, expected: Any) -> bool:
    """Equal with the same exact type at every level; NaN equals NaN, ``0.0`` and ``-0.0``
    differ. So ``1``, ``1.0`` and ``True`` are three different constants,
    ``(1, 2) != (1.0, 2.0)``, ``slice(0, 2) != slice(0.0, 2)``, ``range(0, 4, 2) !=
    range(0, 3, 2)``, and enum members match only themselves."""
    if value is expected:
        return True
    tp = type(expected)
    if type(value) is not tp:
        return False
    if issubclass(tp, enum.Enum):
        return value is expected
    if tp is slice or tp is range:
        return strict_equal(
            (value.start, value.stop, value.step), (expected.start, expected.stop, expected.step)
        )
    if tp is tuple:
        return len(value) == len(expected) and all(
            strict_equal(a, b) for a, b in zip(value, expected, strict=True)
        )
    if tp is frozenset:
        if len(value) != len(expected):
            return False
        unmatched = list(expected)
        for a in value:
            for i, b in enumerate(unmatched):
                if strict_equal(a, b):
                    del unmatched[i]
                    break
            else:
                return False
        return True
    if tp is float:
        return _float_equal(value, expected)
    if tp is complex:
        return _float_equal(value.real, expected.real) and _float_equal(value.imag, expected.imag)
    return bool(value == expected)


def _read_len(value: Any) -> str:
    try:
        return str(len(value))
    except Exception as e:
        return f"len() raised {type(e).__name__}: {e}"


# ---- type and identity --------------------------------------------------------------


class TypeMatch(GuardKind):
    """The value's exact type (subclasses fail)."""

    name = "TYPE_MATCH"
    cost = 2

    def expect(self, value: Any, guard: Any, **options: Any) -> Ident:
        super().expect(value, guard, **options)
        return Ident(type(value))

    def holds(self, value: Any, params: Ident) -> bool:
        return type(value) is params.get()

    def emit(self, var: str, params: Ident, ctx: EmitContext) -> str:
        return ctx.identical(f"type({var})", params, "type")

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


# ---- values ---------------------------------------------------------------------------


class EqualsMatch(GuardKind):
    """The value equals a constant, with the same exact type (``1``, ``1.0`` and ``True``
    differ; NaN matches NaN; ``0.0`` and ``-0.0`` differ; an enum member matches only
    itself). See ``strict_equal``."""

    name = "EQUALS_MATCH"
    cost = 3

    def expect(self, value: Any, guard: Any, **options: Any) -> Any:
        super().expect(value, guard, **options)
        if not _is_constant(value):
            raise GuardKindError(
                f"EQUALS_MATCH on {guard.name}: a {type_name(type(value))} is not a constant "
                f"(int, float, complex, str, bytes, bool, None, enum, range, slice, tuple or "
                f"frozenset of these, or a type passed to register_constant_type); guard a "
                f"container by type, length and items, or an object by ID_MATCH"
            )
        return value

    def holds(self, value: Any, params: Any) -> bool:
        return strict_equal(value, params)

    def emit(self, var: str, params: Any, ctx: EmitContext) -> str:
        tp = type(params)
        if _is_enum_member(params):
            return ctx.identical(var, Ident(params), "member")
        if _one_of(tp, _SCALAR_TYPES) and not _needs_strict(params):
            type_ok = ctx.identical(f"type({var})", Ident(tp), "type")
            return f"{type_ok} and {var} == {ctx.const(params, 'value')}"
        if tp is float and math.isnan(params):
            type_ok = ctx.identical(f"type({var})", Ident(tp), "type")
            return f"{type_ok} and {var} != {var}"
        return f"{ctx.const(strict_equal, 'strict_equal')}({var}, {ctx.const(params, 'value')})"

    def code(self, name: str, params: Any) -> str:
        return f"{name} == {show(params)}"

    def reason(self, name: str, value: Any, params: Any) -> str:
        got = show(value)
        if type(value) is not type(params):
            got += f" ({type_name(type(value))}, expected {type_name(type(params))})"
        return f"{self.code(name, params)} failed: got {got}"

    def fact(self, params: Any) -> Optional[tuple[str, Hashable]]:
        if _is_enum_member(params):
            return ("id", id(params))
        if _needs_strict(params) or not _one_of(type(params), _SCALAR_TYPES):
            return None
        return ("value", (type(params), params))

    def fact_of(self, fact: str, value: Any) -> Hashable:
        if fact == "id":
            return id(value)
        return (type(value), value)


class ConstantMatch(GuardKind):
    """Picks the kind from the value: BOOL_MATCH for a bool, NONE_MATCH for None, else
    EQUALS_MATCH."""

    name = "CONSTANT_MATCH"

    def resolve(self, value: Any, options: dict[str, Any]) -> GuardKind:
        if value is None:
            return NONE_MATCH
        if type(value) is bool:
            return BOOL_MATCH
        return EQUALS_MATCH


class LengthCheck(GuardKind):
    """``len(value)`` equals the length at build time."""

    name = "LENGTH_CHECK"
    cost = 4

    def expect(self, value: Any, guard: Any, **options: Any) -> int:
        super().expect(value, guard, **options)
        return len(value)

    def holds(self, value: Any, params: int) -> bool:
        return len(value) == params

    def emit(self, var: str, params: int, ctx: EmitContext) -> str:
        return f"len({var}) == {ctx.const(params, 'len')}"

    def code(self, name: str, params: int) -> str:
        return f"len({name}) == {params}"

    def reason(self, name: str, value: Any, params: int) -> str:
        return f"{self.code(name, params)} failed: got {_read_len(value)}"

    def fact(self, params: int) -> Optional[tuple[str, Hashable]]:
        return ("len", params)

    def fact_of(self, fact: str, value: Any) -> Hashable:
        return len(value)


class SequenceLength(GuardKind):
    """Exact type and length (a tuple of 3 stays a tuple of 3)."""

    name = "SEQUENCE_LENGTH"
    cost = 4

    def expect(self, value: Any, guard: Any, **options: Any) -> tuple[Ident, int]:
        super().expect(value, guard, **options)
        return (Ident(type(value)), len(value))

    def holds(self, value: Any, params: tuple[Ident, int]) -> bool:
        return type(value) is params[0].get() and len(value) == params[1]

    def emit(self, var: str, params: tuple[Ident, int], ctx: EmitContext) -> str:
        type_ok = ctx.identical(f"type({var})", params[0], "type")
        return f"{type_ok} and len({var}) == {ctx.const(params[1], 'len')}"

    def code(self, name: str, params: tuple[Ident, int]) -> str:
        return f"type({name}) is {describe_ident(params[0])} and len({name}) == {params[1]}"

    def reason(self, name: str, value: Any, params: tuple[Ident, int]) -> str:
        if type(value) is not params[0].get():
            return (
                f"type({name}) is {describe_ident(params[0])} failed: got "
                f"{type_name(type(value))}"
            )
        return f"len({name}) == {params[1]} failed: got {_read_len(value)}"

    def export(self, params: tuple[Ident, int]) -> tuple[Any, Any]:
        return (params[0].weakref(), None)

    def fact(self, params: tuple[Ident, int]) -> Optional[tuple[str, Hashable]]:
        return ("type_len", (params[0].id, params[1]))

    def fact_of(self, fact: str, value: Any) -> Hashable:
        return (id(type(value)), len(value))


class DictKeysMatch(GuardKind):
    """Exact dict type and its keys, in order, each of the same exact type as before and
    strictly equal (``{1: x}``, ``{True: x}`` and ``{1.0: x}`` have different keys).

    The generated check compares the list of the keys' types first (identity, then
    ``type.__eq__``, also identity unless a metaclass overrides it), so a foreign key's
    ``__eq__`` never runs, then the keys with ``==``, which for builtin key types is exact; keys where ``==`` is not (float zeros, NaN) go through
    ``strict_equal``."""

    name = "DICT_KEYS_MATCH"
    cost = 6

    def expect(self, value: Any, guard: Any, **options: Any) -> tuple[Ident, tuple[Any, ...]]:
        super().expect(value, guard, **options)
        if not isinstance(value, dict):
            raise GuardKindError(
                f"DICT_KEYS_MATCH on {guard.name}: expected a dict, found {type_name(type(value))}"
            )
        return (Ident(type(value)), tuple(dict.keys(value)))

    def holds(self, value: Any, params: tuple[Ident, tuple[Any, ...]]) -> bool:
        if type(value) is not params[0].get():
            return False
        keys = tuple(dict.keys(value))
        return len(keys) == len(params[1]) and all(
            type(a) is type(b) and strict_equal(a, b)
            for a, b in zip(keys, params[1], strict=True)
        )

    def emit(self, var: str, params: tuple[Ident, tuple[Any, ...]], ctx: EmitContext) -> str:
        type_ok = ctx.identical(f"type({var})", params[0], "type")
        keys_read = f"[*{var}]" if params[0].get() is dict else f"list(dict.keys({var}))"
        expected = params[1]
        key_types = ctx.const([type(k) for k in expected], "key_types")
        # A list of types compares element by element with identity first and then
        # type.__eq__, which is identity too; only a metaclass that overrides __eq__ to lie
        # could pass a foreign key type (holds() compares with `is` and would disagree).
        types_ok = f"[*map(type, {var if params[0].get() is dict else keys_read})] == {key_types}"
        if not all(_one_of(type(k), _EXACT_EQ_TYPES) for k in expected):
            strict = ctx.const(strict_equal, "strict_equal")
            return f"{type_ok} and {types_ok} and {strict}(tuple({keys_read}), {ctx.const(expected, 'keys')})"
        return f"{type_ok} and {types_ok} and {keys_read} == {ctx.const(list(expected), 'keys')}"

    def code(self, name: str, params: tuple[Ident, tuple[Any, ...]]) -> str:
        return f"list(dict.keys({name})) == {show(list(params[1]))}"

    def reason(self, name: str, value: Any, params: tuple[Ident, tuple[Any, ...]]) -> str:
        if type(value) is not params[0].get():
            return (
                f"type({name}) is {describe_ident(params[0])} failed: got "
                f"{type_name(type(value))}"
            )
        return f"{self.code(name, params)} failed: got {show(list(dict.keys(value)))}"

    def export(self, params: tuple[Ident, tuple[Any, ...]]) -> tuple[Any, Any]:
        return (params[0].weakref(), None)

    def fact(self, params: tuple[Ident, tuple[Any, ...]]) -> Optional[tuple[str, Hashable]]:
        try:
            hash(params[1])
        except TypeError:
            return None
        return ("type_keys", (params[0].id, params[1]))

    def fact_of(self, fact: str, value: Any) -> Hashable:
        return (id(type(value)), tuple(dict.keys(value)))


class DictContains(GuardKind):
    """``key in value`` (or, with ``invert=True``, ``key not in value``)."""

    name = "DICT_CONTAINS"
    cost = 4

    def expect(self, value: Any, guard: Any, **options: Any) -> tuple[Any, bool]:
        unknown = set(options) - {"key", "invert"}
        if unknown or "key" not in options:
            raise GuardKindError(
                f"DICT_CONTAINS on {guard.name} takes key= and optional invert=, got "
                f"{sorted(options)}: use functools.partial(GuardBuilder.DICT_CONTAINS, key=...)"
            )
        hash(options["key"])
        return (options["key"], bool(options.get("invert", False)))

    def holds(self, value: Any, params: tuple[Any, bool]) -> bool:
        return (params[0] in value) is not params[1]

    def emit(self, var: str, params: tuple[Any, bool], ctx: EmitContext) -> str:
        op = "not in" if params[1] else "in"
        return f"{ctx.const(params[0], 'key')} {op} {var}"

    def code(self, name: str, params: tuple[Any, bool]) -> str:
        return f"{show(params[0])} {'not in' if params[1] else 'in'} {name}"


class HasAttr(GuardKind):
    """The base of an ``AttrSource`` has that attribute."""

    name = "HASATTR"
    cost = 5
    on_base = True
    _want = True

    def expect(self, value: Any, guard: Any, **options: Any) -> str:
        super().expect(value, guard, **options)
        member = getattr(guard.originating_source, "member", None)
        if not isinstance(member, str):
            raise GuardKindError(
                f"{self.name} needs an AttrSource (the attribute to test), got {guard.name}"
            )
        return member

    def holds(self, value: Any, params: str) -> bool:
        return hasattr(value, params) is self._want

    def emit(self, var: str, params: str, ctx: EmitContext) -> str:
        test = f"hasattr({var}, {ctx.const(params, 'attr')})"
        return test if self._want else f"not {test}"

    def code(self, name: str, params: str) -> str:
        return f"{'' if self._want else 'not '}hasattr({name}, {params!r})"


class NotHasAttr(HasAttr):
    """The base of an ``AttrSource`` lacks that attribute."""

    name = "NOT_HASATTR"
    _want = False


class FunctionMatch(GuardKind):
    """A Python function with the same code object whose closure cells hold the same
    objects; any other callable must be the same object (as ID_MATCH)."""

    name = "FUNCTION_MATCH"
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


# ---- ambient ------------------------------------------------------------------------------


class GlobalStateKind(GuardKind):
    """Every guarded state of the global-state registry still has its build-time value; with
    ``states=`` (names), exactly those states, guarded or not: a compiler whose artifact does
    not read some state leaves it out (see ``CompileRequest.ignore_global_states``).

    The params are a ``GlobalStateSnapshot``. ``holds`` (the reference) and ``reason`` read
    each state; the generated check calls each group's fast checker and reads only the
    states no group covers ([Note: Global-state groups]): the same meaning, cheaper.
    """

    name = "GLOBAL_STATE"
    cost = 8
    reads_value = False

    def expect(self, value: Any, guard: Any, **options: Any) -> Any:
        states = options.pop("states", None)
        super().expect(value, guard, **options)
        if isinstance(states, str):
            raise GuardKindError(
                f"GLOBAL_STATE states= takes an iterable of state names, got the string "
                f"{states!r}; write states=[{states!r}]"
            )
        try:
            return global_states.snapshot(states)
        except JitGuardError as e:
            raise GuardKindError(f"GLOBAL_STATE on {guard.name}: {e}") from None

    def holds(self, value: Any, params: Any) -> bool:
        # A read that raises is a changed state (the generated code fails on it too); holding
        # instead of raising lets ``reason`` say which state could not be read.
        for state, expected in params.values:
            try:
                if not state.read() == expected:
                    return False
            except Exception:
                return False
        return True

    def emit(self, var: Any, params: Any, ctx: EmitContext) -> str:
        terms = [f"{ctx.const(check, 'check_' + group.name)}()" for group, check in params.checks]
        terms += [
            f"{ctx.const(s.read, 'read_' + s.name)}() == {ctx.const(v, s.name)}"
            for s, v in params.rest
        ]
        return " and ".join(terms) or "True"

    def code(self, name: Any, params: Any) -> str:
        names = ", ".join(s.name for s, _ in params.values)
        return f"GLOBAL_STATE unchanged: {names or '(no states)'}"

    def reason(self, name: Any, value: Any, params: Any) -> str:
        changed = []
        for state, expected in params.values:
            try:
                now = state.read()
            except Exception as e:
                changed.append(f"{state.name} (reading it raised {type(e).__name__}: {e})")
                continue
            if not now == expected:
                changed.append(
                    f"{state.name} (expected {state.describe(expected)}, got {state.describe(now)})"
                )
        if not changed:
            # Only a group checker that breaks its contract gets here.
            failed = []
            for group, check in params.checks:
                try:
                    ok = check()
                except Exception:
                    ok = False
                if not ok:
                    failed.append(group.name)
            changed.append(
                f"group {', '.join(failed) or '(none)'} failed with every member unchanged"
            )
        return "GLOBAL_STATE changed: " + ", ".join(changed)


TYPE_MATCH = TypeMatch()
ID_MATCH = IdMatch()
NONE_MATCH = NoneMatch()
BOOL_MATCH = BoolMatch()
EQUALS_MATCH = EqualsMatch()

for _kind in (
    TYPE_MATCH,
    ID_MATCH,
    EQUALS_MATCH,
    ConstantMatch(),
    NONE_MATCH,
    NotNone(),
    BOOL_MATCH,
    LengthCheck(),
    SequenceLength(),
    DictKeysMatch(),
    DictContains(),
    HasAttr(),
    NotHasAttr(),
    FunctionMatch(),
    WeakrefAlive(),
    DuplicateInput(),
    NoAliasing(),
    GlobalStateKind(),
):
    register_guard_kind(_kind)
del _kind
