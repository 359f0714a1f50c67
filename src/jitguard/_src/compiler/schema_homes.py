"""Where a function's code object lives by name, for guard-set documents: found from the
module-level function or class of its qualname, through the ``__wrapped__`` chain of a
decorated function, as a property's accessor, or nested in an outer function's code
([Note: Re-binding by name] in compiler/schema_values.py says why that is sound).

May import: errors.

# [Note: Code qualnames on 3.10]
# A code object knows its qualname (``co_qualname``) from CPython 3.11 on; on 3.10 it has
# only ``co_name``. There the qualnames a code may have are found from the functions of
# the module whose file it came from: each module-level function, each function, property
# or static/class method in a module-level class's namespace, and the ``__wrapped__`` chain
# of each, give their ``__qualname__`` when their code is the one sought, and
# ``outer.<locals>.name`` when it is nested in their code. Every candidate is then
# re-found by name exactly as a reading process would (a decorated function's module
# attribute is its wrapper, whose ``__qualname__`` ``functools.wraps`` copied from the
# wrapped), and only one that gives back this very code object is written. Reading
# compares a qualname's last part with ``co_name`` where there is no ``co_qualname``, and
# a nested name must then be unique among all the codes nested in the outer one.
#
# [Note: Class members made by exec]
# A function made from text at run time (``exec``), or nested in a function that is gone
# by now, has a code whose qualname says where it was made, not where it lives: a
# dataclass's ``__init__`` is
# ``__create_fn__.<locals>.__init__`` from ``<string>``, set on its class as
# ``Point.__init__`` (maybe under a wrapper: transformers wraps a ``ModelOutput``'s). Such
# a code is written as the member of its name of the class that holds it (or of the
# module-level object whose instance dict holds it: ``os:environ.encodekey``), and its own
# qualname (``module:Point.__init__``, ``__create_fn__.<locals>.__init__``: found among the
# module-level classes of the loaded modules, and only when reading that home back gives
# this very code), and read back as the code of the one function along that member's
# ``__wrapped__`` chain of that qualname (on 3.10, of that ``co_name``: a wrapper of the
# same name makes it not portable there). The text it was made
# from is not in the guard set: what checks it is the same program is the store's
# fingerprint of every traced code ([Note: Stored captures]), as for any code re-bound by
# name.
#
# [Note: Functions wrapped by an instance]
# A decorator may replace a module-level function by an instance of a class whose methods
# close over it (kernels' ``use_kernel_forward_from_hub``: ``apply_rotary_pos_emb`` is a
# ``Func`` module whose ``forward`` calls the function from a closure cell). The
# function's code is then found from the module attribute of its qualname as the one code
# of that qualname held in a closure cell of the instance's class's own methods, on
# writing and on reading alike; two such codes make it not portable.
#
# [Note: Objects found at module level]
# An instance held by identity means "this very object" to the process that made it, and
# what an artifact assumed of it (a frozen config's fields baked into a kernel) need not
# be guarded: ``ID_MATCH`` held for it. In another process the object at the same name
# may hold other state, so an instance is re-bound by name only where a registered rule
# (``rebind_instances``) says every fact the artifact depends on is guarded apart: the
# torch frontend says so of ``nn.Module`` instances, whose attributes Dynamo guards as it
# reads them and whose parameters are graph inputs (kernels' ``apply_rotary_pos_emb``
# wrapper is one, held in a closure of the decorated ``forward``). Such an instance is
# written by a module-level name it lives at (``"class": "module:name"``, the first in
# sorted order, taken only when looking that name up gives back this very object) and
# its type's ``module:qualname`` (``instance_of``), and read back as the object living
# there, refused unless its type still has that module and qualname. Finding the names
# scans every loaded module's namespace once per document written (``module_objects``).
#
# [Note: Classes made at run time]
# A class made inside a function (``_create_func_module.<locals>.Func``, one per function
# that kernels' ``use_kernel_forward_from_hub`` wraps) has no name to be found by, but an
# instance of it may live at module level (the wrapped function's module attribute is
# one). Such a class is written as the type of that module-level object (``type_of``:
# ``module:name``, the first in sorted order whose type is this very class) with its own
# ``module:qualname`` (``made_as``), and read back as the type of the object living there,
# refused unless that type has the recorded module and qualname. This is [Note:
# Re-binding by name] with the object's name standing for the class's; what checks that
# the class's methods are the same program is the store's fingerprint of every traced
# code ([Note: Stored captures]), as for any class re-bound by name.
#
# [Note: Frozen modules]
# CPython ships some standard modules frozen into the interpreter (``os``,
# ``_collections_abc``, ...): their codes' ``co_filename`` is ``<frozen NAME>``, not the
# module's ``__file__``, so looking a code's module up by file finds nothing. Such a code
# belongs to the module named in that text, taken only when that loaded module's spec
# says it is frozen (``__spec__.origin == "frozen"``); it is then found by qualname in it
# like any other.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Optional

from ..errors import GuardSchemaError

__all__ = [
    "class_home",
    "class_key",
    "code_home",
    "code_qualname",
    "decode_class",
    "decode_code",
    "decode_instance",
    "instance_home",
    "lookup",
    "module_objects",
    "rebind_instances",
]

_CHAIN_LIMIT = 100
# A class's own namespace and qualname, read by type's descriptors: a metaclass may raise
# or compute when asked for them.
_TYPE_DICT = type.__dict__["__dict__"].__get__
_TYPE_QUALNAME = type.__dict__["__qualname__"].__get__
_TYPE_MODULE = type.__dict__["__module__"].__get__


def lookup(module: str, qualname: str) -> Any:
    """The object at ``module:qualname`` among the loaded modules (nothing is imported)."""
    mod = sys.modules.get(module)
    if mod is None:
        raise GuardSchemaError(
            f"{module}:{qualname} is not loaded in this process (import {module} first: "
            f"reading a guard set never imports a module)"
        )
    current: Any = mod
    for part in qualname.split("."):
        try:
            current = vars(current)[part]
        except (KeyError, TypeError):
            raise GuardSchemaError(f"{module} has no {qualname}") from None
    return current


def _named(code: types.CodeType, qualname: str) -> bool:
    """Whether ``code`` is the code of ``qualname`` ([Note: Code qualnames on 3.10])."""
    own = getattr(code, "co_qualname", None)
    if own is not None:
        return bool(own == qualname)
    return code.co_name == qualname.rpartition(".")[2]


def _functions(fn: Any) -> Iterator[Any]:
    """The functions along ``fn``'s ``__wrapped__`` chain, a static or class method's
    function, and a property's accessors."""
    seen: set[int] = set()
    while fn is not None and id(fn) not in seen and len(seen) < _CHAIN_LIMIT:
        seen.add(id(fn))
        fn = getattr(fn, "__func__", fn)  # a staticmethod/classmethod in a class dict
        if isinstance(fn, property):  # its accessors share the property's qualname
            yield from (part for part in (fn.fget, fn.fset, fn.fdel) if part is not None)
            return
        yield fn
        fn = getattr(fn, "__wrapped__", None)


def _chain_code(fn: Any, qualname: str) -> Optional[types.CodeType]:
    """The code of the function of ``qualname`` along ``fn``'s chain, or for an instance
    that wraps it, held in a closure cell of its class's own methods ([Note: Functions
    wrapped by an instance]); None if none is."""
    for part in _functions(fn):
        code = getattr(part, "__code__", None)
        if isinstance(code, types.CodeType) and _named(code, qualname):
            return code
    if isinstance(fn, (type, types.FunctionType, types.ModuleType)):
        return None
    found = {id(f.__code__): f.__code__ for f in _closure_functions(type(fn))
             if _named(f.__code__, qualname)}
    return next(iter(found.values())) if len(found) == 1 else None


def _closure_functions(cls: type) -> Iterator[types.FunctionType]:
    """The functions held in the closure cells of ``cls``'s own methods."""
    for member in list(_TYPE_DICT(cls).values()):
        for cell in getattr(member, "__closure__", None) or ():
            try:
                held = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if isinstance(held, types.FunctionType):
                yield held


def _nested(outer: types.CodeType) -> Iterator[types.CodeType]:
    todo = [outer]
    while todo:
        for c in todo.pop().co_consts:
            if isinstance(c, types.CodeType):
                yield c
                todo.append(c)


def _nested_code(outer: types.CodeType, qualname: str) -> Optional[types.CodeType]:
    """The one code object of ``qualname`` among those nested in ``outer``'s constants;
    None if there is none or more than one (two lambdas, two conditional defs)."""
    found = [c for c in _nested(outer) if _named(c, qualname)]
    return found[0] if len(found) == 1 else None


def _qualnames(code: types.CodeType, modules: list[Any]) -> list[str]:
    """The qualnames ``code`` may have: its own, or on 3.10 those found from the functions
    of its modules ([Note: Code qualnames on 3.10])."""
    own = getattr(code, "co_qualname", None)
    if own is not None:
        return [own]
    found: list[str] = []
    for mod in modules:
        tops = list(vars(mod).values())
        members = [v for t in tops if issubclass(type(t), type)
                   for v in list(_TYPE_DICT(t).values())]
        for obj in tops + members:
            try:  # a user's object may raise on any attribute read: it is no candidate
                found.extend(_candidates(obj, code))
                if not isinstance(obj, (type, types.FunctionType, types.ModuleType)):
                    # as [Note: Functions wrapped by an instance] finds it
                    found.extend(f.__qualname__ for f in _closure_functions(type(obj))
                                 if f.__code__ is code)
            except Exception:
                continue
    return list(dict.fromkeys(found))


def _candidates(obj: Any, code: types.CodeType) -> list[str]:
    """The qualnames ``code`` may have as ``obj``'s function (or one along its chain), or
    as a code nested in one."""
    out = []
    for fn in _functions(obj):
        fcode, qualname = getattr(fn, "__code__", None), getattr(fn, "__qualname__", None)
        if not (isinstance(fcode, types.CodeType) and isinstance(qualname, str)):
            continue
        if fcode is code:
            out.append(qualname)
        elif any(c is code for c in _nested(fcode)):
            out.append(f"{qualname}.<locals>.{code.co_name}")
    return out


def modules_of(code: types.CodeType) -> list[tuple[str, Any]]:
    """The loaded modules ``code`` may come from, by name: those whose file it was compiled
    from, or the frozen module its ``<frozen NAME>`` file names ([Note: Frozen modules])."""
    filename = code.co_filename
    if filename.startswith("<frozen ") and filename.endswith(">"):
        name = filename[len("<frozen "):-1]
        mod = sys.modules.get(name)
        spec = getattr(mod, "__spec__", None)
        return [(name, mod)] if getattr(spec, "origin", None) == "frozen" else []
    return [(name, mod) for name, mod in list(sys.modules.items())
            if getattr(mod, "__file__", None) == filename]


def code_home(code: types.CodeType) -> Optional[dict[str, Any]]:
    """A function's code by the module-level function (or method) it is, or is nested in
    (``deco.<locals>.wrapper``: inside ``deco``'s code, the one code of that qualname),
    following ``__wrapped__`` from the module attribute ([Note: Re-binding by name]);
    None if it is found nowhere."""
    modules = modules_of(code)
    for qualname in _qualnames(code, [mod for _, mod in modules]):
        outer, nested, _ = qualname.partition(".<locals>.")
        if "<" in outer:
            continue
        for mod_name, _mod in modules:
            try:
                top = _chain_code(lookup(mod_name, outer), outer)
            except GuardSchemaError:
                continue
            if top is None:
                continue
            if not nested and top is code:
                return {"$": "object", "code": f"{mod_name}:{outer}"}
            if nested and _nested_code(top, qualname) is code:
                return {"$": "object", "code": f"{mod_name}:{outer}", "nested": qualname}
    # on 3.10 a code does not say it was made inside another function: try the classes
    made_inside = "<locals>" in getattr(code, "co_qualname", "<locals>")
    return _member_home(code) if made_inside else None


def code_qualname(code: types.CodeType) -> str:
    return str(getattr(code, "co_qualname", code.co_name))


def _member_home(code: types.CodeType) -> Optional[dict[str, Any]]:
    """A code made inside another function (by ``exec``, or nested in a function that is
    gone) and set under its name on a module-level class (a dataclass's ``__init__``:
    ``__create_fn__.<locals>.__init__`` from ``<string>``) or in the instance dict of a
    module-level object (``os.environ.encodekey``, made in ``os._createenviron``, which
    ``os`` deletes), by the member it is ([Note: Class members made by exec]); None if no
    such class or object holds it."""
    name = code.co_name
    for mod_name, top_name, top in _module_tops():
        # type() and the class's own dict only, read by type's own descriptors (a
        # metaclass may raise or compute on __qualname__ or __dict__): a module's
        # other objects may warn or compute when asked for an attribute
        if issubclass(type(top), type):
            ns = _TYPE_DICT(top)
            if ns.get("__module__") != mod_name:
                continue
            where, holder = _TYPE_QUALNAME(top), ns
        else:
            holder = _plain_instance_dict(top)
            if holder is None or not isinstance(top_name, str):
                continue
            where = top_name
        # by its own name first; an object may hold it under another (os.environ's
        # encodekey is os._createenviron's encode)
        keys = [name] if name in holder else []
        keys += [k for k in list(holder) if isinstance(k, str) and k != name
                 and not issubclass(type(top), type)]
        for key in keys:
            member = holder.get(key)
            try:  # a user's object may raise on any attribute read
                held = member is not None and any(
                    getattr(f, "__code__", None) is code for f in _functions(member))
            except Exception:
                held = False
            if not held:
                continue
            home = {"$": "object", "code": f"{mod_name}:{where}.{key}",
                    "member": code_qualname(code)}
            try:
                if decode_code(home, "") is code:
                    return home
            except GuardSchemaError:
                continue
    return None


def _module_tops() -> Iterator[tuple[str, Any, Any]]:
    """(module name, name, object) of every loaded module's namespace."""
    for mod_name, mod in list(sys.modules.items()):
        try:
            tops = list(vars(mod).items())
        except TypeError:
            continue
        for name, top in tops:
            yield mod_name, name, top


def _plain_instance_dict(obj: Any) -> Optional[dict[str, Any]]:
    """``obj``'s instance dict where its class keeps the standard ``__dict__`` descriptor
    (no property or ``__getattr__`` runs to read it); None otherwise."""
    tp = type(obj)
    for klass in tp.__mro__:
        descr = vars(klass).get("__dict__")
        if descr is not None:
            if type(descr) is not _DICT_DESCRIPTOR:
                return None
            d = descr.__get__(obj, tp)
            return d if type(d) is dict else None
    return None


class _WithDict:
    pass



_DICT_DESCRIPTOR = type(vars(_WithDict)["__dict__"])


def decode_code(data: Mapping[str, Any], where: str) -> types.CodeType:
    """The code ``code_home`` wrote, found again the same way."""
    module, _, qualname = data["code"].partition(":")
    found = lookup(module, qualname)
    member = data.get("member")
    if member is not None:  # [Note: Class members made by exec]
        codes = [f.__code__ for f in _functions(found)
                 if isinstance(getattr(f, "__code__", None), types.CodeType)
                 and _named(f.__code__, str(member))]
        if len(codes) != 1:
            raise GuardSchemaError(
                f"{where}: {data['code']} holds no single function made as {member!r}")
        return codes[0]
    code = _chain_code(found, qualname)
    if code is None:
        raise GuardSchemaError(f"{where}: {data['code']} is not a Python function")
    nested = data.get("nested")
    if nested is not None:
        inner = _nested_code(code, str(nested))
        if inner is None:
            raise GuardSchemaError(
                f"{where}: {data['code']} holds no single code object named {nested!r}")
        code = inner
    return code


def class_key(cls: type) -> str:
    """``module:qualname`` of a class, read by type's own descriptors (a metaclass may
    compute or raise on them)."""
    return f"{_TYPE_MODULE(cls)}:{_TYPE_QUALNAME(cls)}"


def class_home(cls: type) -> Optional[dict[str, Any]]:
    """A class with no home of its name (made inside a function), by a module-level object
    that is an instance of it ([Note: Classes made at run time]); None if there is none."""
    found = _module_objects().by_type.get(id(cls))
    if not found:
        return None
    return {"$": "object", "type_of": min(found), "made_as": class_key(cls)}


def decode_class(data: Mapping[str, Any], where: str) -> type:
    """The class ``class_home`` wrote: the type of the object living at ``type_of``, when
    it is still the recorded class by module and qualname."""
    module, _, name = str(data["type_of"]).partition(":")
    cls = type(lookup(module, name))
    if class_key(cls) != data["made_as"]:
        raise GuardSchemaError(
            f"{where}: {data['type_of']} is a {class_key(cls)} in this process, a "
            f"{data['made_as']} where the guard set was written")
    return cls


class _Scan:
    """Every module-level object's names (``module:name``), by the object's id and by its
    type's id: made at most once per document written."""

    def __init__(self) -> None:
        self.by_id: dict[int, list[str]] = {}
        self.by_type: dict[int, list[str]] = {}
        for mod_name, name, top in _module_tops():
            if isinstance(name, str) and "." not in name:
                where = f"{mod_name}:{name}"
                self.by_id.setdefault(id(top), []).append(where)
                self.by_type.setdefault(id(type(top)), []).append(where)


_scans: contextvars.ContextVar[Optional[list[_Scan]]] = contextvars.ContextVar(
    "jitguard_module_objects", default=None)


@contextlib.contextmanager
def module_objects() -> Iterator[None]:
    """While open, on this thread: the loaded modules' namespaces are scanned at most once
    ([Note: Objects found at module level])."""
    token = _scans.set([])
    try:
        yield
    finally:
        _scans.reset(token)


def _module_objects() -> _Scan:
    memo = _scans.get()
    if memo is None:
        return _Scan()
    if not memo:
        memo.append(_Scan())
    return memo[0]


# Objects that stand for their value: held by identity they are never re-bound by a name
# (a module constant 5 is not "the object 5" in another process).
_VALUES = (int, float, complex, str, bytes, bool, tuple, frozenset, range, slice, type(None))


_instance_rules: list[Callable[[Any], bool]] = []


def rebind_instances(rule: Callable[[Any], bool]) -> None:
    """Let instances ``rule`` accepts be re-bound by a module-level name they live at
    ([Note: Objects found at module level]: only where every fact an artifact may assume
    of the object is guarded apart)."""
    if rule not in _instance_rules:
        _instance_rules.append(rule)


def instance_home(obj: Any) -> Optional[dict[str, Any]]:
    """``obj`` by a module-level name it lives at and its type ([Note: Objects found at
    module level]); None if it lives at none, or no rule lets it be re-bound."""
    if type(obj) in _VALUES or not any(rule(obj) for rule in list(_instance_rules)):
        return None
    for where in sorted(_module_objects().by_id.get(id(obj), [])):
        module, _, name = where.partition(":")
        try:
            if lookup(module, name) is obj:
                return {"$": "object", "class": where, "instance_of": class_key(type(obj))}
        except GuardSchemaError:
            continue
    return None


def decode_instance(data: Mapping[str, Any], where: str) -> Any:
    """The object ``instance_home`` wrote, refused unless its type is the recorded one."""
    module, _, name = str(data["class"]).partition(":")
    obj = lookup(module, name)
    if class_key(type(obj)) != data["instance_of"]:
        raise GuardSchemaError(
            f"{where}: {data['class']} is a {class_key(type(obj))} in this process, a "
            f"{data['instance_of']} where the guard set was written")
    return obj
