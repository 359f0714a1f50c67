"""The built-in guard kinds. Each is registered on import and so becomes a ``GuardBuilder``
attribute (``GuardBuilder.TYPE_MATCH`` ...). The kinds on values and containers live here;
those on types and identity in ``identity_kinds``, GLOBAL_STATE in ``global_state_kind``,
what a constant is and strict equality in ``constants``.

May import: _util, errors, compiler.values, compiler.kinds, compiler.constants, compiler.array_facts,
compiler.identity_kinds, compiler.global_state_kind, compiler.bulk.

Failure texts follow the forms users know from torch.compile: ``L['n'] == 7 failed: got 8``,
``type(L['cfg']) is Config failed: got dict``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Optional

from .._util import is_scalar_type
from ..errors import GuardKindError
from . import bulk
from .array_facts import dtype_key
from .constants import (
    EXACT_EQ_TYPES,
    is_constant,
    is_dtype,
    is_enum_member,
    needs_strict,
    one_of,
    register_constant_type,
    strict_equal,
)
from .global_state_kind import GlobalStateKind
from .identity_kinds import (
    BOOL_MATCH,
    ID_MATCH,
    NONE_MATCH,
    TYPE_MATCH,
    BoolMatch,
    DuplicateInput,
    FunctionMatch,
    IdMatch,
    NoAliasing,
    NoneMatch,
    NotNone,
    TypeMatch,
    WeakrefAlive,
)
from .kinds import (
    FACT_LEN,
    FACT_TYPE_KEYS,
    FACT_TYPE_LEN,
    FACT_VALUE,
    DispatchFact,
    EmitContext,
    GuardKind,
    register_guard_kind,
)
from .values import Ident, describe_ident, show, type_name

__all__ = [
    "BOOL_MATCH",
    "EQUALS_MATCH",
    "ID_MATCH",
    "NONE_MATCH",
    "TYPE_MATCH",
    "BoolMatch",
    "ConstantMatch",
    "DictContains",
    "DictKeysMatch",
    "EqualsMatch",
    "GlobalStateKind",
    "HasAttr",
    "IdMatch",
    "LengthCheck",
    "NoneMatch",
    "NotHasAttr",
    "SequenceLength",
    "TypeMatch",
    "register_constant_type",
    "strict_equal",
]


def _read_len(value: Any) -> str:
    try:
        return str(len(value))
    except Exception as e:
        return f"len() raised {type(e).__name__}: {e}"


# ---- values -----------------------------------------------------------------------------


# A numpy dtype constant's fact: its class (by id, tested first) and its dtype_key, whose
# equality is exactly strict_equal's for dtypes ([Note: Array facts]).
FACT_DTYPE = DispatchFact("dtype", "{dtype_key}({v})", typed="id", gate="types", spread=True,
                          consts=(("dtype_key", dtype_key),))


class EqualsMatch(GuardKind):
    """The value equals a constant, with the same exact type (``1``, ``1.0`` and ``True``
    differ; a NaN matches a NaN of the same bits (sign, payload); ``0.0`` and ``-0.0``
    differ; an enum member matches only itself). See ``strict_equal``."""

    name = "EQUALS_MATCH"
    specificity = 8
    dispatch_facts = (FACT_VALUE, FACT_DTYPE)
    cost = 3

    def expect(self, value: Any, guard: Any, **options: Any) -> Any:
        super().expect(value, guard, **options)
        if not is_constant(value):
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
        if is_enum_member(params):
            return ctx.identical(var, Ident(params), "member")
        if is_scalar_type(tp) and not needs_strict(params):
            type_ok = ctx.identical(f"type({var})", Ident(tp), "type")
            return f"{type_ok} and {var} == {ctx.const(params, 'value')}"
        return f"{ctx.const(strict_equal, 'strict_equal')}({var}, {ctx.const(params, 'value')})"

    def code(self, name: str, params: Any) -> str:
        return f"{name} == {show(params)}"

    def reason(self, name: str, value: Any, params: Any) -> str:
        got = show(value)
        if type(value) is not type(params):
            got += f" ({type_name(type(value))}, expected {type_name(type(params))})"
        return f"{self.code(name, params)} failed: got {got}"

    def fact(self, params: Any) -> Optional[tuple[str, Hashable]]:
        if is_enum_member(params):
            return ("id", id(params))
        if is_dtype(params):
            return ("dtype", (id(type(params)), dtype_key(params)))
        if needs_strict(params) or not is_scalar_type(type(params)):
            return None
        return ("value", (type(params), params))

    def fact_of(self, fact: str, value: Any) -> Hashable:
        if fact == "id":
            return id(value)
        if fact == "dtype":
            return (id(type(value)), dtype_key(value))
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
    specificity = 4
    dispatch_facts = (FACT_LEN,)
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
    specificity = 4
    dispatch_facts = (FACT_TYPE_LEN,)
    cost = 4

    def expect(self, value: Any, guard: Any, **options: Any) -> tuple[Ident, int]:
        super().expect(value, guard, **options)
        return (Ident(type(value)), len(value))

    def holds(self, value: Any, params: tuple[Ident, int]) -> bool:
        return type(value) is params[0].get() and len(value) == params[1]

    def emit(self, var: str, params: tuple[Ident, int], ctx: EmitContext) -> str:
        type_ok = ctx.identical(f"type({var})", params[0], "type")
        return f"{type_ok} and len({var}) == {ctx.const(params[1], 'len')}"

    def pins_type(self, params: tuple[Ident, int]) -> Optional[type]:
        return params[0].get() if params[0].alive else None

    def pins_len(self, params: tuple[Ident, int]) -> Optional[int]:
        return params[1]

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
    ``strict_equal``.

    For an ``OrderedDict`` (or a subclass) the order it iterates in is compared too: it is
    its own linked list, which ``move_to_end`` changes without changing ``dict.keys``'s
    order (params: type, keys in ``dict.keys`` order, keys in iteration order or None for
    other dicts)."""

    name = "DICT_KEYS_MATCH"
    specificity = 4
    dispatch_facts = (FACT_TYPE_KEYS,)
    cost = 6

    def expect(self, value: Any, guard: Any, **options: Any) -> tuple[Any, ...]:
        super().expect(value, guard, **options)
        if not isinstance(value, dict):
            raise GuardKindError(
                f"DICT_KEYS_MATCH on {guard.name}: expected a dict, found {type_name(type(value))}"
            )
        ordered = tuple(OrderedDict.keys(value)) if isinstance(value, OrderedDict) else None
        return (Ident(type(value)), tuple(dict.keys(value)), ordered)

    def holds(self, value: Any, params: tuple[Any, ...]) -> bool:
        if type(value) is not params[0].get():
            return False
        if not _same_keys(tuple(dict.keys(value)), params[1]):
            return False
        ordered = _ordered(params)
        return ordered is None or _same_keys(tuple(OrderedDict.keys(value)), ordered)

    def emit(self, var: str, params: tuple[Any, ...], ctx: EmitContext) -> str:
        type_ok = ctx.identical(f"type({var})", params[0], "type")
        if bulk.is_native(bulk.keys_are) and all(
            one_of(type(k), EXACT_EQ_TYPES) for k in params[1]
        ):
            # one C call walks the keys in ``dict.keys`` order: no list of them, no list of
            # their types
            keys = ctx.const(tuple(params[1]), "keys")
            out = f"{type_ok} and {ctx.const(bulk.keys_are, 'keys_are')}({var}, {keys})"
        else:
            keys_read = f"[*{var}]" if params[0].get() is dict else f"list(dict.keys({var}))"
            out = f"{type_ok} and {self._keys_ok(var, keys_read, params[1], ctx)}"
        ordered = _ordered(params)
        if ordered is not None:
            od_keys = ctx.const(OrderedDict.keys, "ordered_keys")
            out += f" and {self._keys_ok(var, f'list({od_keys}({var}))', ordered, ctx)}"
        return out

    @staticmethod
    def _keys_ok(var: str, keys_read: str, expected: tuple[Any, ...], ctx: EmitContext) -> str:
        key_types = ctx.const([type(k) for k in expected], "key_types")
        # A list of types compares element by element with identity first and then
        # type.__eq__, which is identity too; only a metaclass that overrides __eq__ to lie
        # could pass a foreign key type (holds() compares with `is` and would disagree).
        source = var if keys_read == f"[*{var}]" else keys_read
        types_ok = f"[*map(type, {source})] == {key_types}"
        if not all(one_of(type(k), EXACT_EQ_TYPES) for k in expected):
            strict = ctx.const(strict_equal, "strict_equal")
            return f"{types_ok} and {strict}(tuple({keys_read}), {ctx.const(expected, 'keys')})"
        return f"{types_ok} and {keys_read} == {ctx.const(list(expected), 'keys')}"

    def code(self, name: str, params: tuple[Any, ...]) -> str:
        out = f"list(dict.keys({name})) == {show(list(params[1]))}"
        ordered = _ordered(params)
        if ordered is not None:
            out += f" and list({name}.keys()) == {show(list(ordered))}"
        return out

    def reason(self, name: str, value: Any, params: tuple[Any, ...]) -> str:
        if type(value) is not params[0].get():
            return (
                f"type({name}) is {describe_ident(params[0])} failed: got "
                f"{type_name(type(value))}"
            )
        got = show(list(dict.keys(value)))
        if _ordered(params) is not None:
            got += f" (iterating as {show(list(OrderedDict.keys(value)))})"
        return f"{self.code(name, params)} failed: got {got}"

    def export(self, params: tuple[Any, ...]) -> tuple[Any, Any]:
        return (params[0].weakref(), None)

    def fact(self, params: tuple[Any, ...]) -> Optional[tuple[str, Hashable]]:
        try:
            hash(params[1])
        except TypeError:
            return None
        return ("type_keys", (params[0].id, params[1]))

    def fact_of(self, fact: str, value: Any) -> Hashable:
        return (id(type(value)), tuple(dict.keys(value)))


def _ordered(params: tuple[Any, ...]) -> Optional[tuple[Any, ...]]:
    """DICT_KEYS_MATCH's iteration order of an OrderedDict (None for another dict, or for
    params made before the order was a part of them, as a schema document's)."""
    return params[2] if len(params) > 2 else None


def _same_keys(keys: tuple[Any, ...], expected: tuple[Any, ...]) -> bool:
    return len(keys) == len(expected) and all(
        type(a) is type(b) and strict_equal(a, b) for a, b in zip(keys, expected, strict=True)
    )


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

    def sample_options(self, value: Any) -> list[dict[str, Any]]:
        if type(value) is not dict:
            return []
        return [{"key": k} for k in list(value)[:2]] + [{"key": "absent-key", "invert": True}]


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
