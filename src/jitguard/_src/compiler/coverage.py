"""Which leaves a structure snapshot covers ([Note: Skipping structure guards by version
tags]): for each guard kind (by class), the rule that says whether a leaf's verdict is a
function of what the snapshot pins (identities, exact types and their version tags,
dicts' contents), so that it may be skipped while the snapshot holds. A kind outside the
compiler (the torch integration's) registers its own rule with ``cover``.

May import: compiler.* (the kinds it covers).

A rule is ``rule(value, params, rec) -> bool``: ``value`` is the leaf's first source's
value (stable, already recorded), ``params`` the leaf's, ``rec`` the snapshot's recorder,
which offers ``rec.instance_dict(obj)`` (the object's instance dict, recorded with its
tag; None when it has none), ``rec.node(obj)`` (record one more object) and
``rec.pin_slots(obj)`` (record a function with its code, defaults and closure). A rule that
says True must be sure the verdict cannot change while every recorded tag holds.

# [Note: A modelled __getattribute__]
# A read ``v.member`` is stable only where it is a function of dicts, types and identities.
# Object's (or a module's) ``__getattribute__`` is: the instance dict, then the MRO's
# namespaces. A class with its own ``__getattribute__`` runs Python code, which in general
# nothing pins; but a layer that knows that code may register a model of it
# (``model_getattribute``): ``model(v, member, rec)`` returns the name whose generic lookup
# the read is, after recording in ``rec`` everything that makes it so (the functions with
# their code and cells, the dicts they consult, by their tags), or None. ``generic_member``
# asks the models; the recorder's attribute reads and the HASATTR and NOT_HASATTR rules
# then treat the read as the generic lookup of that name. A model must vouch only for code
# it has read (the torch frontend's model of transformers' configs recognizes the
# functions by a fingerprint of their bytecode: [Note: transformers' config reads]).
"""

from __future__ import annotations

import collections
import dis
import types
from collections.abc import Callable
from typing import Any, Optional

from .attr_kinds import ClassAttrsMatch, EmptyHooksDict, NotPresentInGenericDict
from .builtin_kinds import (
    ConstantMatch,
    DictContains,
    DictKeysMatch,
    EqualsMatch,
    HasAttr,
    LengthCheck,
    NotHasAttr,
    SequenceLength,
)
from .identity_kinds import BoolMatch, DuplicateInput, IdMatch, NoneMatch, TypeMatch
from .python_kinds import BuiltinMatch, ClassMatch, ModuleMatch

__all__ = ["UNSTABLE", "Rule", "cover", "extend", "generic_lookup", "generic_member",
           "model_getattribute", "mro_lookup", "rule"]

Rule = Callable[[Any, Any, Any], bool]

#: What a read gives when its value cannot be pinned by the snapshot.
UNSTABLE: Any = object()
_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes)
_DICTS = (dict, collections.OrderedDict)
_OBJECT_GETATTRIBUTE = object.__dict__["__getattribute__"]
_MODULE_GETATTRIBUTE = vars(types.ModuleType)["__getattribute__"]


def mro_lookup(tp: type, name: str) -> Any:
    """What ``name`` finds in the namespaces of ``tp``'s MRO, or ``UNSTABLE``."""
    for klass in tp.__mro__:
        found = klass.__dict__.get(name, UNSTABLE)
        if found is not UNSTABLE:
            return found
    return UNSTABLE


def is_data_descriptor(obj: Any) -> bool:
    tp = type(obj)
    return hasattr(tp, "__set__") or hasattr(tp, "__delete__")


def generic_lookup(tp: type) -> bool:
    """Whether attribute reads on instances of ``tp`` (not a class) follow object's (or a
    module's) ``__getattribute__``: the instance dict and the MRO's namespaces alone."""
    return (not issubclass(tp, type)
            and mro_lookup(tp, "__getattribute__") in (_OBJECT_GETATTRIBUTE, _MODULE_GETATTRIBUTE))


# Models of a class's own ``__getattribute__`` ([Note: A modelled __getattribute__]).
_GETATTRIBUTE_MODELS: list[Callable[[Any, str, Any], Optional[str]]] = []


def model_getattribute(model: Callable[[Any, str, Any], Optional[str]]) -> None:
    """Register ``model(v, member, rec)``: for an object whose class has its own
    ``__getattribute__``, the name whose generic lookup (object's: the instance dict, then
    the MRO's namespaces) ``v.member`` reads, once the model has recorded in ``rec``
    everything that makes it so; None when it does not vouch for ``v``
    ([Note: A modelled __getattribute__])."""
    _GETATTRIBUTE_MODELS.append(model)


def generic_member(v: Any, member: str, rec: Any) -> Optional[str]:
    """The name object's generic lookup reads for ``v.member``: ``member`` where
    ``type(v)`` keeps object's (or a module's) ``__getattribute__``, else what a registered
    model says; None when nothing vouches for it."""
    tp = type(v)
    if generic_lookup(tp):
        return member
    if issubclass(tp, type):
        return None
    for model in _GETATTRIBUTE_MODELS:
        got = model(v, member, rec)
        if got is not None:
            return got
    return None


def _immutable(v: Any) -> bool:
    if type(v) in _IMMUTABLE:
        return True
    return type(v) is tuple and all(_immutable(x) for x in v)


def _identity(v: Any, params: Any, rec: Any) -> bool:
    return True


def _immutable_value(v: Any, params: Any, rec: Any) -> bool:
    return _immutable(v)


def _dict_content(v: Any, params: Any, rec: Any) -> bool:
    return type(v) in _DICTS


def _exact_container(v: Any, params: Any, rec: Any) -> bool:
    return type(v) in (dict, tuple)


def _exact_sequence(v: Any, params: Any, rec: Any) -> bool:
    """An exact dict or tuple, or an exact list whose items the snapshot pins."""
    return type(v) in (dict, tuple) or (type(v) is list and rec.pin_slots(v))


def _dict_contains(v: Any, params: Any, rec: Any) -> bool:
    return type(v) in _DICTS and type(params[0]) in (str, int)


def _not_present(v: Any, params: Any, rec: Any) -> bool:
    plain = getattr(params, "plain", None)
    return (plain is not None and plain.get() is type(v)
            and rec.instance_dict(v) is not None)


def _has_attr(v: Any, member: Any, rec: Any, depth: int = 0) -> bool:
    """``hasattr(v, member)`` is True by dicts alone: ``member`` is in the instance dict
    and no class has a data descriptor of that name, or a class has it as a plain
    (non-descriptor) attribute, or as a property that reads an attribute of ``self`` that
    is there so ([Note: A property that reads an attribute]). (An attribute found never
    reaches ``__getattr__``.)"""
    tp = type(v)
    if type(member) is not str:
        return False
    member = generic_member(v, member, rec)
    if member is None:
        return False
    found = mro_lookup(tp, member)
    if type(found) is property and depth < _MAX_PROPERTY_DEPTH:
        read = _property_read(found, rec)
        return read is not None and _has_attr(v, read, rec, depth + 1)
    if found is not UNSTABLE and is_data_descriptor(found):
        return False
    d = rec.instance_dict(v)
    if d is not None and member in d:
        return True
    return found is not UNSTABLE and not hasattr(type(found), "__get__")


# [Note: A property that reads an attribute]
# ``hasattr(v, name)`` where ``name`` finds an exact ``property`` (a data descriptor, so it
# wins over the instance dict) runs the property's ``fget``. Configs have many such
# properties whose getter is ``return self._name`` (transformers' ``output_attentions``,
# which every model's call asks ``hasattr`` of). Where ``fget`` is an exact function whose
# code is exactly that (one positional parameter, no cells, not a generator or coroutine:
# load it, read one attribute of it, return), the verdict is True while the
# read is: ``hasattr(v, '_name')`` by the same rules. What that rests on is pinned: the
# property, found along the MRO (the type's tag), and its ``fget`` (``property.__init__``
# may be called again on it, so its fields are slots: ``rec.pin_slots``); the function's
# code (a function slot), so a replaced ``__code__`` fails the snapshot. The code reads no
# global and calls nothing. Any other getter, or a property subclass, stays volatile.
_MAX_PROPERTY_DEPTH = 2
# CO_VARARGS, CO_VARKEYWORDS, CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE,
# CO_ASYNC_GENERATOR: a getter with any of these is not a plain read (``__future__`` flags
# and the optimizer's are fine)
_CALL_CHANGING_FLAGS = 0x04 | 0x08 | 0x20 | 0x80 | 0x100 | 0x200


def _property_read(prop: Any, rec: Any) -> Optional[str]:
    """The attribute name ``prop``'s getter returns of ``self`` (``return self.name``), with
    the property and the getter pinned in ``rec``; None for any other getter."""
    fget = prop.fget
    if type(fget) is not types.FunctionType:
        return None
    code = fget.__code__
    if (code.co_argcount != 1 or code.co_kwonlyargcount or code.co_posonlyargcount
            or code.co_freevars or code.co_cellvars or code.co_flags & _CALL_CHANGING_FLAGS):
        return None
    ins = [(i.opname, i.argval) for i in dis.get_instructions(code)
           if i.opname not in ("RESUME", "NOP")]
    if (len(ins) != 3 or ins[0] != ("LOAD_FAST", code.co_varnames[0])
            or ins[1][0] != "LOAD_ATTR" or ins[2][0] != "RETURN_VALUE"
            or type(ins[1][1]) is not str):
        return None
    if not (rec.pin_slots(prop) and rec.pin_slots(fget)):
        return None
    return str(ins[1][1])


def _lacks_attr(v: Any, member: Any, rec: Any) -> bool:
    """``hasattr(v, member)`` is False by dicts alone: no class has ``member`` nor a
    ``__getattr__``, and neither has the instance dict (a module's ``__getattr__`` lives
    there)."""
    tp = type(v)
    if type(member) is not str:
        return False
    member = generic_member(v, member, rec)
    if member is None:
        return False
    if mro_lookup(tp, member) is not UNSTABLE or mro_lookup(tp, "__getattr__") is not UNSTABLE:
        return False
    d = rec.instance_dict(v)
    return d is not None and member not in d and "__getattr__" not in d


def absent_from_instance_dict(names: frozenset[str]) -> Rule:
    """A rule for a kind whose verdict, for a value of a generic-lookup type whose
    instance dict and classes lack every one of ``names``, is True while they still do."""

    def rule(v: Any, params: Any, rec: Any) -> bool:
        tp = type(v)
        if not generic_lookup(tp) or any(mro_lookup(tp, n) is not UNSTABLE for n in names):
            return False
        if mro_lookup(tp, "__getattr__") is not UNSTABLE:
            return False
        d = rec.instance_dict(v)
        return d is not None and names.isdisjoint(d)

    return rule


# By kind class, not name ([Note: Kinds own their cache data]): a kind registered under
# one of these names by someone else is not covered.
_COVERED: dict[type, Rule] = {
    **dict.fromkeys((TypeMatch, IdMatch, NoneMatch, BoolMatch, ClassMatch, ModuleMatch,
                     BuiltinMatch, DuplicateInput), _identity),
    # a function of type(v) and its MRO's namespaces: the type's version tag
    ClassAttrsMatch: _identity,
    EqualsMatch: _immutable_value,
    ConstantMatch: _immutable_value,
    EmptyHooksDict: _dict_content,
    LengthCheck: _dict_content,
    DictContains: _dict_contains,
    DictKeysMatch: _exact_container,
    SequenceLength: _exact_sequence,
    NotPresentInGenericDict: _not_present,
    HasAttr: _has_attr,
    NotHasAttr: _lacks_attr,
}


def cover(kind_class: type, rule: Rule) -> None:
    """Register the rule for leaves of ``kind_class`` (exactly that class)."""
    _COVERED[kind_class] = rule


def extend(kind_class: type, rule: Rule) -> None:
    """Cover more leaves of ``kind_class``: one is covered when the rule it had already
    says so, or else ``rule`` does."""
    old = _COVERED.get(kind_class)
    if old is None:
        _COVERED[kind_class] = rule
        return

    def either(v: Any, params: Any, rec: Any) -> bool:
        return old(v, params, rec) or rule(v, params, rec)

    _COVERED[kind_class] = either


def rule(kind: Any) -> Optional[Rule]:
    """The rule for ``kind``'s leaves, None when they are never covered."""
    return _COVERED.get(type(kind))
