"""Guard kinds for attributes as a bytecode frontend (TorchDynamo) reads them: a name absent
from an instance dict, what the class's MRO gives for a name, and a module's hooks dicts
being empty. Registered on import (``GuardBuilder.NOT_PRESENT_IN_GENERIC_DICT``,
``CLASS_ATTRS_MATCH``, ``EMPTY_NN_MODULE_HOOKS_DICT``); the other kinds such a frontend needs
are in ``python_kinds``.

May import: errors, compiler.bulk, compiler.kinds, compiler.values.

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
from .kinds import EmitContext, GuardKind, register_guard_kind
from .values import Ident, describe_ident, show, type_name

__all__ = ["ClassAttrsMatch", "EmptyHooksDict", "NotPresentInGenericDict"]

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


for _kind in (NotPresentInGenericDict(), ClassAttrsMatch(), EmptyHooksDict()):
    register_guard_kind(_kind)
del _kind
