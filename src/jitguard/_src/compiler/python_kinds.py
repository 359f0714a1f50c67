"""Guard kinds for plain Python facts a bytecode frontend (TorchDynamo) relies on that the
built-in kinds do not state: an item in a set, a constant subclass's builtin value, a
mapping's keys, a container's items, the facts of a float an order guard cannot see
(FLOAT_FACTS_MATCH), and ID_MATCH under the readable names Dynamo gives it
for modules, builtins and classes. Registered on import (``GuardBuilder.SET_CONTAINS``).
The attribute kinds such a frontend needs (an attribute absent from an instance dict, a
class's MRO, empty hooks dicts) are in ``attr_kinds``.

May import: errors, compiler.constants, compiler.kinds, compiler.identity_kinds,
compiler.values.

Failure texts restate the check in the form Dynamo prints for the same guard, then say what
was found.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import GuardKindError
from .constants import is_constant
from .identity_kinds import IdMatch
from .kinds import EmitContext, GuardKind, register_guard_kind
from .values import Ident, describe_ident, show, type_name

__all__ = [
    "BuiltinMatch",
    "ClassMatch",
    "ConstantSubclassMatch",
    "ContainerEqualsMatch",
    "FloatFactsMatch",
    "MappingKeysCheck",
    "ModuleMatch",
    "SetContains",
]


def _set_contains(value: Any, key: Any) -> bool:
    """``key`` is in the set or frozenset ``value``, by the set's own lookup (a subclass's
    ``__contains__`` is not run); anything else raises TypeError."""
    if isinstance(value, set):
        return set.__contains__(value, key)
    return frozenset.__contains__(value, key)




class SetContains(GuardKind):
    """``key=`` is in the set (or frozenset), by the set's own lookup; with ``invert=True``,
    it is not."""

    name = "SET_CONTAINS"
    cost = 4

    def expect(self, value: Any, guard: Any, **options: Any) -> tuple[Any, bool]:
        unknown = set(options) - {"key", "invert"}
        if unknown or "key" not in options:
            raise GuardKindError(
                f"SET_CONTAINS on {guard.name} takes key= and optional invert=, got {sorted(options)}"
            )
        hash(options["key"])
        return (options["key"], bool(options.get("invert", False)))

    def holds(self, value: Any, params: tuple[Any, bool]) -> bool:
        return _set_contains(value, params[0]) is not params[1]

    def emit(self, var: str, params: tuple[Any, bool], ctx: EmitContext) -> str:
        test = f"{ctx.const(_set_contains, 'set_contains')}({var}, {ctx.const(params[0], 'key')})"
        return f"not {test}" if params[1] else test

    def code(self, name: str, params: tuple[Any, bool]) -> str:
        return f"{'not ' if params[1] else ''}set.__contains__({name}, {show(params[0])})"

    def reason(self, name: str, value: Any, params: tuple[Any, bool]) -> str:
        if not isinstance(value, (set, frozenset)):
            return f"{self.code(name, params)} failed: got {type_name(type(value))}, not a set"
        return f"{self.code(name, params)} failed"


class ConstantSubclassMatch(GuardKind):
    """``base_type(value) == base_value`` (``base_type=``): an instance of a subclass of int,
    float or str compared through its builtin value, so the subclass's ``__eq__`` never
    runs. The value's own type is not part of it (guard it with TYPE_MATCH)."""

    name = "CONSTANT_SUBCLASS_MATCH"
    cost = 4

    def expect(self, value: Any, guard: Any, **options: Any) -> tuple[Ident, Any]:
        base = options.pop("base_type", None)
        super().expect(value, guard, **options)
        if base not in (int, float, str) or not isinstance(value, base):
            raise GuardKindError(
                f"{self.name} on {guard.name} takes base_type= (int, float or str, a base of "
                f"the value's type), got {base!r} for a {type_name(type(value))}"
            )
        return (Ident(base), base(value))

    def holds(self, value: Any, params: tuple[Ident, Any]) -> bool:
        return bool(params[0].get()(value) == params[1])

    def emit(self, var: str, params: tuple[Ident, Any], ctx: EmitContext) -> str:
        return f"{ctx.const(params[0].get(), 'base_type')}({var}) == {ctx.const(params[1], 'value')}"

    def code(self, name: str, params: tuple[Ident, Any]) -> str:
        return f"{params[0].get().__name__}({name}) == {params[1]!r}"

    def reason(self, name: str, value: Any, params: tuple[Ident, Any]) -> str:
        try:
            got = repr(params[0].get()(value))
        except Exception as e:
            got = f"{type(e).__name__}: {e}"
        return f"{self.code(name, params)} failed: got {got}"


class MappingKeysCheck(GuardKind):
    """The keys of a mapping (a class's ``__dict__`` proxy), in order, are the build-time
    keys, all strings: ``list(value.keys()) == [...]``."""

    name = "MAPPING_KEYS_CHECK"
    cost = 6

    def expect(self, value: Any, guard: Any, **options: Any) -> tuple[str, ...]:
        super().expect(value, guard, **options)
        keys = tuple(value.keys())
        if not all(type(k) is str for k in keys):
            raise GuardKindError(f"{self.name} on {guard.name}: only str keys are supported")
        return keys

    def holds(self, value: Any, params: tuple[str, ...]) -> bool:
        keys = list(value.keys())
        return [type(k) for k in keys] == [str] * len(params) and keys == list(params)

    def emit(self, var: str, params: tuple[str, ...], ctx: EmitContext) -> str:
        keys = f"[*{var}.keys()]"
        types_ok = f"[*map(type, {var}.keys())] == {ctx.const([str] * len(params), 'key_types')}"
        return f"{types_ok} and {keys} == {ctx.const(list(params), 'keys')}"

    def code(self, name: str, params: tuple[str, ...]) -> str:
        return f"list({name}.keys()) == {list(params)!r}"

    def reason(self, name: str, value: Any, params: tuple[str, ...]) -> str:
        try:
            now = [k for k in value.keys()]
        except Exception as e:
            return f"{self.code(name, params)} failed: {type(e).__name__}: {e}"
        added = [k for k in now if k not in params]
        gone = [k for k in params if k not in now]
        what = ", ".join(
            [*(f"added {k!r}" for k in added), *(f"removed {k!r}" for k in gone)]
        ) or "the order changed"
        return f"{self.code(name, params)} failed: {what}"


class ContainerEqualsMatch(GuardKind):
    """A list or set of constants: the same exact type and ``==`` to a copy taken when the
    check was built (a later change to the object the guard was built from does not move
    what it expects). Dynamo's EQUALS_MATCH on a list or set, which jitguard's EQUALS_MATCH
    (immutable constants only) does not take."""

    name = "CONTAINER_EQUALS_MATCH"
    cost = 5

    def expect(self, value: Any, guard: Any, **options: Any) -> tuple[Ident, Any]:
        super().expect(value, guard, **options)
        tp = type(value)
        if (tp is not list and tp is not set) or not all(is_constant(v) for v in value):
            raise GuardKindError(
                f"{self.name} on {guard.name}: expected a list or set of constants, found "
                f"{show(value)}"
            )
        return (Ident(tp), tp(value))

    def holds(self, value: Any, params: tuple[Ident, Any]) -> bool:
        return type(value) is params[0].get() and bool(value == params[1])

    def emit(self, var: str, params: tuple[Ident, Any], ctx: EmitContext) -> str:
        type_ok = ctx.identical(f"type({var})", params[0], "type")
        return f"{type_ok} and {var} == {ctx.const(params[1], 'value')}"

    def code(self, name: str, params: tuple[Ident, Any]) -> str:
        return f"{name} == {show(params[1]) if type(params[1]) is list else repr(params[1])}"

    def reason(self, name: str, value: Any, params: tuple[Ident, Any]) -> str:
        if type(value) is not params[0].get():
            return f"{self.code(name, params)} failed: got a {type_name(type(value))}"
        return f"{self.code(name, params)} failed: got {show(value)}"


# [Note: Float facts a symbolic guard cannot see]
# A float that a frontend keeps symbolic (TorchDynamo with ``dynamic=True``) is guarded by
# order and equality relations over a real symbol: ``L['k'] == 0.0``, ``L['k'] >= 0``.
# Those hold for ``-0.0`` as for ``0.0`` (and a zero passes ``k >= 0`` whatever was baked
# in for a positive value), and the symbolic reasoning takes a symbol to be finite (it
# simplifies ``k - k == 0`` to true, which ``inf`` breaks). FLOAT_FACTS_MATCH states what
# such relations cannot: the value is finite, infinite or NaN as at build time, and its sign
# is the one it had when either value is a zero (two non-zero finite values are left to the
# order guards: their signs are facts those see). Stricter than the relations alone: a
# ``-0.0`` after a positive value recompiles once, as it should where the sign mattered.
def _float_class(value: Any) -> str:
    """Which of finite non-zero, zero, infinite or NaN a number is."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf"
    return "zero" if value == 0 else "finite"


class FloatFactsMatch(GuardKind):
    """The facts of a float that order and equality relations over it cannot see are as at
    build time ([Note: Float facts a symbolic guard cannot see]): finite, infinite or NaN,
    and the sign wherever a zero is involved."""

    name = "FLOAT_FACTS_MATCH"
    cost = 4

    def expect(self, value: Any, guard: Any, **options: Any) -> tuple[str, float]:
        super().expect(value, guard, **options)
        if not isinstance(value, float):
            raise GuardKindError(
                f"FLOAT_FACTS_MATCH on {guard.name} needs a float, got {type_name(type(value))}: "
                f"guard a float source"
            )
        return (_float_class(value), math.copysign(1.0, value))

    def holds(self, value: Any, params: tuple[str, float]) -> bool:
        kind, sign = params
        if not isinstance(value, (float, int)):
            return False
        if kind == "nan":
            return math.isnan(value)
        if kind == "inf":
            return math.isinf(value) and math.copysign(1.0, value) == sign
        if not math.isfinite(value):
            return False
        if kind == "zero":
            return math.copysign(1.0, value) == sign
        return value != 0 or math.copysign(1.0, value) == sign

    def emit(self, var: str, params: tuple[str, float], ctx: EmitContext) -> str:
        kind, sign = params
        sign_test = f"{ctx.const(math.copysign, 'copysign')}(1.0, {var}) == {sign!r}"
        if kind == "nan":
            return f"{ctx.const(math.isnan, 'isnan')}({var})"
        if kind == "inf":
            return f"{ctx.const(math.isinf, 'isinf')}({var}) and {sign_test}"
        finite = f"{ctx.const(math.isfinite, 'isfinite')}({var})"
        if kind == "zero":
            return f"{finite} and {sign_test}"
        return f"{finite} and ({var} != 0 or {sign_test})"

    def code(self, name: str, params: tuple[str, float]) -> str:
        kind, sign = params
        sign_test = f"math.copysign(1.0, {name}) == {sign!r}"
        if kind == "nan":
            return f"math.isnan({name})"
        if kind == "inf":
            return f"math.isinf({name}) and {sign_test}"
        if kind == "zero":
            return f"math.isfinite({name}) and {sign_test}"
        return f"math.isfinite({name}) and ({name} != 0 or {sign_test})"

    def reason(self, name: str, value: Any, params: tuple[str, float]) -> str:
        return f"{self.code(name, params)} failed: got {show(value)}"


class _NamedIdMatch(IdMatch):
    """ID_MATCH under the name Dynamo uses when the object is a module, builtin or class.
    Same meaning, params and reasons as ID_MATCH."""

    _what = "object"

    def expect(self, value: Any, guard: Any, **options: Any) -> Ident:
        if options:
            raise GuardKindError(f"{self.name} takes no options, got {sorted(options)}")
        return Ident(value)

    def code(self, name: str, params: Ident) -> str:
        return f"{name} is {describe_ident(params)}"


class ModuleMatch(_NamedIdMatch):
    """The value is one particular Python module (an ID_MATCH)."""

    name = "MODULE_MATCH"


class BuiltinMatch(_NamedIdMatch):
    """The value is one particular builtin function (an ID_MATCH)."""

    name = "BUILTIN_MATCH"


class ClassMatch(_NamedIdMatch):
    """The value is one particular class (an ID_MATCH)."""

    name = "CLASS_MATCH"


for _kind in (
    SetContains(),
    ConstantSubclassMatch(),
    MappingKeysCheck(),
    ContainerEqualsMatch(),
    FloatFactsMatch(),
    ModuleMatch(),
    BuiltinMatch(),
    ClassMatch(),
):
    register_guard_kind(_kind)
del _kind
