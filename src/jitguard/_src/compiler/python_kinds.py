"""Guard kinds for plain Python facts a bytecode frontend (TorchDynamo) relies on that the
built-in kinds do not state: an attribute absent from an instance dict, an item in a set,
an empty hooks dict, a constant subclass's builtin value, a mapping's keys, and ID_MATCH under the readable names Dynamo gives it for modules,
builtins and classes. Registered on import (``GuardBuilder.NOT_PRESENT_IN_GENERIC_DICT``).

May import: errors, compiler.bulk, compiler.constants, compiler.kinds,
compiler.identity_kinds, compiler.values.

Failure texts restate the check in the form Dynamo prints for the same guard
(``not ___dict_contains('forward', L['m'].__dict__)``), then say what was found.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple, Optional

from ..errors import GuardKindError
from . import bulk
from .constants import is_constant
from .identity_kinds import IdMatch
from .kinds import EmitContext, GuardKind, register_guard_kind
from .values import Ident, describe_ident, show, type_name

__all__ = [
    "BuiltinMatch",
    "ClassAttrsMatch",
    "ClassMatch",
    "ConstantSubclassMatch",
    "ContainerEqualsMatch",
    "EmptyHooksDict",
    "MappingKeysCheck",
    "ModuleMatch",
    "NotPresentInGenericDict",
    "SetContains",
]


def _set_contains(value: Any, key: Any) -> bool:
    """``key`` is in the set or frozenset ``value``, by the set's own lookup (a subclass's
    ``__contains__`` is not run); anything else raises TypeError."""
    if isinstance(value, set):
        return set.__contains__(value, key)
    return frozenset.__contains__(value, key)


def _instance_dict(value: Any) -> Any:
    return object.__getattribute__(value, "__dict__")


class _AttrsSpec(NamedTuple):
    attrs: tuple[str, ...]
    plain: Optional[Ident]  # the build-time type, when ``v.__dict__`` is the instance dict


def _plain_type(tp: type) -> Optional[Ident]:
    """``Ident(tp)`` when, for instances of ``tp``, ``v.__dict__`` reads the instance dict
    exactly as ``object.__getattribute__(v, '__dict__')`` does: ``tp`` keeps object's
    ``__getattribute__`` and its ``__dict__`` is the interpreter's own getset descriptor."""
    if getattr(tp, "__getattribute__", None) is not object.__getattribute__:
        return None
    for klass in tp.__mro__:
        descr = klass.__dict__.get("__dict__")
        if descr is not None:
            if type(descr) is not types.GetSetDescriptorType or descr.__objclass__ is not klass:
                return None
            return Ident(tp)
    return None


class NotPresentInGenericDict(GuardKind):
    """None of the attribute names ``attrs=`` is a key of the value's instance ``__dict__``
    (so a class attribute such as a module's ``forward`` is not shadowed per instance).
    ``attr=`` names one attribute. Values without an instance dict fail."""

    name = "NOT_PRESENT_IN_GENERIC_DICT"
    cost = 3
    batches = True

    def expect(self, value: Any, guard: Any, **options: Any) -> Any:
        attrs: Any = options.pop("attrs", None)
        if "attr" in options:
            if attrs is not None:
                raise GuardKindError(f"{self.name} on {guard.name}: give attr= or attrs=, not both")
            attrs = (options.pop("attr"),)
        if options or not attrs:
            raise GuardKindError(
                f"{self.name} on {guard.name} takes attr= (one name) or attrs= (a tuple of "
                f"names), got {sorted(options) or 'neither'}"
            )
        if isinstance(attrs, str) or not all(isinstance(a, str) for a in attrs):
            raise GuardKindError(f"{self.name} on {guard.name}: attrs= must be a tuple of str")
        return _AttrsSpec(tuple(dict.fromkeys(attrs)), _plain_type(type(value)))

    def holds(self, value: Any, params: Any) -> bool:
        try:
            d = _instance_dict(value)
        except AttributeError:
            return False
        return all(a not in d for a in params.attrs)

    def emit(self, var: str, params: Any, ctx: EmitContext) -> str:
        read = f"{ctx.const(object.__getattribute__, 'getattribute')}({var}, '__dict__')"
        if params.plain is not None:
            # For the build-time type ``v.__dict__`` is the instance dict itself (no
            # __getattribute__ override, the standard descriptor): one attribute read.
            plain = ctx.identical(f"type({var})", params.plain, "type")
            read = f"({var}.__dict__ if {plain} else {read})"
        if len(params.attrs) == 1:
            return f"{ctx.const(params.attrs[0], 'attr')} not in {read}"
        return f"{read}.keys().isdisjoint({ctx.const(params.attrs, 'attrs')})"

    def emit_batch(self, vars: Sequence[str], params: Sequence[Any], ctx: EmitContext) -> str:
        # [Note: Batched leaves]: one C call reads every instance dict as ``holds`` does
        # (object.__getattribute__) and tests each name with ``in``; in pure Python the
        # per-leaf tests are faster than the helper's loop
        if not bulk.is_native(bulk.dicts_exclude):
            return super().emit_batch(vars, params, ctx)
        attrs = ctx.const(tuple(p.attrs for p in params), "attrs")
        return f"{ctx.const(bulk.dicts_exclude, 'dicts_exclude')}({attrs}, {', '.join(vars)})"

    def code(self, name: str, params: Any) -> str:
        return " and ".join(f"not ___dict_contains({a!r}, {name}.__dict__)" for a in params.attrs)

    def reason(self, name: str, value: Any, params: Any) -> str:
        try:
            d = _instance_dict(value)
        except AttributeError:
            return f"{self.code(name, params)} failed: {show(value)} has no __dict__"
        for a in params.attrs:
            if a in d:
                return f"not ___dict_contains({a!r}, {name}.__dict__) failed: it is set on the instance"
        return f"{self.code(name, params)} failed"


class _ClassAttr(NamedTuple):
    attr: str
    owner: int  # the index in the MRO of the class whose namespace holds it
    found: Optional[Ident]  # what it holds there; None when no class of the MRO has it


class _ClassAttrsSpec(NamedTuple):
    type: Ident
    attrs: tuple[_ClassAttr, ...]


_ABSENT = object()


def _class_lookup(tp: type, attr: str) -> tuple[int, Any]:
    """Where the attribute lookup of ``attr`` on instances of ``tp`` finds it in the
    classes (the MRO index and the namespace's object), as ``type.__getattribute__``
    walks the MRO: ``(len(mro), _ABSENT)`` when no class has it."""
    mro = tp.__mro__
    for i, klass in enumerate(mro):
        found = klass.__dict__.get(attr, _ABSENT)
        if found is not _ABSENT:
            return i, found
    return len(mro), _ABSENT


class ClassAttrsMatch(GuardKind):
    """For each name of ``attrs=``, the lookup through the value's class finds the same
    object in the same class as when compiled: no class before it in the MRO gained the
    name (a subclass shadowing its base), and that class's namespace still holds the very
    object (a method, classmethod or class attribute replaced after compiling). The value's
    type is compared too (by identity). jitguard's own kind: TorchDynamo resolves such
    attributes through the class and guards only that the instance does not shadow them
    (``NOT_PRESENT_IN_GENERIC_DICT``)."""

    name = "CLASS_ATTRS_MATCH"
    cost = 4

    def expect(self, value: Any, guard: Any, **options: Any) -> Any:
        attrs: Any = options.pop("attrs", None)
        if options or not attrs or isinstance(attrs, str) or not all(isinstance(a, str) for a in attrs):
            raise GuardKindError(f"{self.name} on {guard.name} takes attrs= (a tuple of str)")
        tp = type(value)
        out = []
        for attr in dict.fromkeys(attrs):
            owner, found = _class_lookup(tp, attr)
            out.append(_ClassAttr(attr, owner, None if found is _ABSENT else Ident(found)))
        return _ClassAttrsSpec(Ident(tp), tuple(out))

    def holds(self, value: Any, params: Any) -> bool:
        tp = type(value)
        if tp is not params.type.get():
            return False
        for a in params.attrs:
            owner, found = _class_lookup(tp, a.attr)
            if owner != a.owner:
                return False
            if a.found is not None and (not a.found.alive or found is not a.found.get()):
                return False
        return True

    def emit(self, var: str, params: Any, ctx: EmitContext) -> str:
        parts = [ctx.identical(f"type({var})", params.type, "type")]
        absent = ctx.const(_ABSENT, "absent")
        tp = params.type.get()
        if params.type.is_weak or tp is None:
            # read each namespace through the live type (binding one would keep it alive)
            def namespace(i: int) -> str:
                return f"type({var}).__mro__[{i}].__dict__"
        else:
            # a type held strongly anyway: its MRO's namespaces are bound (live views of
            # the class dicts) while its MRO is the same tuple; after a ``__bases__``
            # assignment the reference lookup decides
            mro = tp.__mro__
            slow = ctx.const(functools.partial(self.holds, params=params), "lookup")
            same = f"{ctx.const(tp, 'cls')}.__mro__ is {ctx.const(mro, 'mro')}"

            def namespace(i: int) -> str:
                return ctx.const(mro[i].__dict__, "namespace") if i < len(mro) else "()"

            fast = []
            for a in params.attrs:
                name = ctx.const(a.attr, "attr")
                fast += [f"{name} not in {namespace(i)}" for i in range(a.owner)]
                if a.found is not None:
                    fast.append(ctx.identical(f"{namespace(a.owner)}.get({name}, {absent})",
                                              a.found, "class_attr"))
            parts.append(f"(({' and '.join([same, *fast])}) or {slow}({var}))")
            return " and ".join(parts)
        for a in params.attrs:
            name = ctx.const(a.attr, "attr")
            parts += [f"{name} not in {namespace(i)}" for i in range(a.owner)]
            if a.found is not None:
                parts.append(ctx.identical(f"{namespace(a.owner)}.get({name}, {absent})",
                                           a.found, "class_attr"))
        return " and ".join(parts)

    def code(self, name: str, params: Any) -> str:
        out = []
        for a in params.attrs:
            if a.found is None:
                out.append(f"no class of type({name}).__mro__ has {a.attr!r}")
            else:
                out.append(f"type({name}).__mro__[{a.owner}].__dict__[{a.attr!r}] is "
                           f"{describe_ident(a.found)} (and no class before it has it)")
        return " and ".join(out)

    def reason(self, name: str, value: Any, params: Any) -> str:
        tp = type(value)
        if tp is not params.type.get():
            return f"type({name}) is {describe_ident(params.type)} failed: got {type_name(tp)}"
        for a in params.attrs:
            owner, found = _class_lookup(tp, a.attr)
            if owner != a.owner or (a.found is not None and found is not a.found.get()):
                now = ("no class has it" if found is _ABSENT else
                       f"it finds {show(found)} in {tp.__mro__[owner].__qualname__}")
                return (f"{self.code(name, params._replace(attrs=(a,)))} failed: the lookup "
                        f"of {a.attr!r} changed ({now})")
        return f"{self.code(name, params)} failed"


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


class EmptyHooksDict(GuardKind):
    """The value (a module's hooks dict) is empty: ``not value``. For a dict that is
    ``len(value) == 0``; Dynamo emits it for every hooks dict of every module a graph
    calls, so the check is one truth test, no call."""

    name = "EMPTY_NN_MODULE_HOOKS_DICT"
    cost = 1
    batches = True
    batch_reads_once = True

    def expect(self, value: Any, guard: Any, **options: Any) -> None:
        super().expect(value, guard, **options)
        if value:
            raise GuardKindError(
                f"{self.name} on {guard.name}: the hooks dict is not empty ({show(value)}); "
                f"guard its contents instead"
            )

    def holds(self, value: Any, params: None) -> bool:
        return not value

    def emit(self, var: str, params: None, ctx: EmitContext) -> str:
        return f"not {var}"

    def emit_batch(self, vars: Sequence[str], params: Sequence[None], ctx: EmitContext) -> str:
        # [Note: Batched leaves]: one truth test chain, no jump per dict
        return f"not ({' or '.join(vars)})"

    def emit_batch_attrs(self, bases: Sequence[str], attrs: Sequence[str],
                         params: Sequence[None], ctx: EmitContext) -> Optional[str]:
        # Dynamo's hooks dicts are attributes of modules (``m._forward_hooks``): one C call
        # makes every read (PyObject_GetAttr, what ``m._forward_hooks`` runs: a class's
        # descriptor, __getattribute__ or __getattr__ included) and truth test, in the
        # chain's order. The Python helper's loop is slower than the chain: not used.
        if not bulk.is_native(bulk.attrs_falsy):
            return None
        names = ctx.const(tuple(attrs), "hook_attrs")
        return f"{ctx.const(bulk.attrs_falsy, 'attrs_falsy')}({names}, {', '.join(bases)})"

    def code(self, name: str, params: None) -> str:
        return f"not {name}"

    def reason(self, name: str, value: Any, params: None) -> str:
        try:
            n = f"{len(value)} entries"
        except Exception:
            n = show(value)
        return f"not {name} failed: a hook was registered ({n})"

    def fact(self, params: None) -> Optional[tuple[str, Hashable]]:
        return ("empty", True)

    def fact_of(self, fact: str, value: Any) -> Hashable:
        return not value


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
    NotPresentInGenericDict(),
    ClassAttrsMatch(),
    SetContains(),
    ConstantSubclassMatch(),
    MappingKeysCheck(),
    ContainerEqualsMatch(),
    EmptyHooksDict(),
    ModuleMatch(),
    BuiltinMatch(),
    ClassMatch(),
):
    register_guard_kind(_kind)
del _kind
