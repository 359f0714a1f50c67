"""Resolving a check's sources to the values a structure snapshot pins, and recording the
objects that pin them (``Recorder``): the stable reads of [Note: Skipping structure guards
by version tags] in compiler/snapshot.py, which builds the front check from them.

May import: native, guards, sources, more_sources, compiler.coverage.
"""

from __future__ import annotations

import types
import weakref
from typing import Any, Optional

from .. import native
from ..guards import Source
from ..more_sources import ClosureCellSource, DictGetItemSource, TypeDictSource, TypeMROSource
from ..sources import (
    AttrSource,
    ConstDictKeySource,
    DefaultsSource,
    FixedAttr,
    GetItemSource,
    GlobalSource,
    LocalSource,
    Relabel,
    TypeSource,
)
from . import coverage
from .coverage import UNSTABLE as _UNSTABLE
from .coverage import is_data_descriptor as _is_data_descriptor
from .coverage import mro_lookup as _mro_lookup

__all__ = ["Recorder"]

_NODE_TYPE, _NODE_INSTANCE_DICT, _NODE_DICT = 0, 1, 2
_TYPE_MRO = type.__dict__["__mro__"]
_TYPE_GETATTRIBUTE = type.__dict__["__getattribute__"]
_TYPE_NAMES = {"__name__": type.__dict__["__name__"],
               "__qualname__": type.__dict__["__qualname__"]}
_OBJECT_CLASS = object.__dict__["__class__"]
# A function's attributes read from its slots (function slots in
# [Note: Skipping structure guards by version tags]); ``_speedups/tags.c.h`` pins the
# same ones.
_FUNCTION_SLOTS = frozenset(("__code__", "__defaults__", "__kwdefaults__", "__closure__",
                             "__name__", "__qualname__"))


class Recorder:
    """Resolves sources to stable values and records the nodes that pin them."""

    def __init__(self, f_locals: dict[str, Any], f_globals: Any, arg_names: tuple[str, ...]
                 ) -> None:
        self.f_locals = f_locals
        self.f_globals = f_globals
        self.arg_names = arg_names
        self.values: dict[Source, Any] = {}
        self.nodes: dict[int, list[Any]] = {}  # id -> [obj, mode]
        self.roots: dict[Source, Any] = {}
        self.keep: list[Any] = []
        self.slots: set[int] = set()  # ids of the nodes whose slots are pinned

    def node(self, obj: Any, mode: int = _NODE_TYPE) -> bool:
        """Record ``obj`` (or raise its mode); False when it cannot be pinned."""
        if issubclass(type(obj), dict):  # by its type: an object's __class__ may raise
            mode = _NODE_DICT
        got = self.nodes.get(id(obj))
        if got is None:
            self.nodes[id(obj)] = got = [obj, mode]
        elif mode == _NODE_INSTANCE_DICT and got[1] == _NODE_TYPE:
            got[1] = mode
        if got[1] == _NODE_INSTANCE_DICT and native.module.instance_dict_id(obj) == 0:
            try:  # materialize it: CPython stores attributes there from now on
                object.__getattribute__(obj, "__dict__")
            except AttributeError:
                return False
            if native.module.instance_dict_id(obj) == 0:
                return False
        return native.module.type_version(type(obj)) != 0

    def instance_dict(self, obj: Any) -> Optional[dict[str, Any]]:
        """``obj``'s instance dict, recorded with its tag (materialized if need be); None
        when it has none."""
        if not self.node(obj, _NODE_INSTANCE_DICT):
            return None
        d = object.__getattribute__(obj, "__dict__")
        return d if type(d) is dict else None

    def resolve(self, src: Source) -> Any:
        got = self.values.get(src, None)
        if got is None and src not in self.values:
            got = self.values[src] = self._resolve(src)
        return got

    def _root(self, src: Source) -> Any:
        """An argument (``L['self']``), or an item of an argument that is an exact tuple
        (``L['args'][0]``: a wrapper's ``*args``), held by identity: its value, _UNSTABLE
        when it cannot be, None when ``src`` is no such root."""
        sub = -1
        local = src
        if type(src) is GetItemSource and type(src.base) is LocalSource \
                and type(src.index) is int and not src.index_is_slice:
            local, sub = src.base, src.index
        if type(local) is not LocalSource:
            return None
        name = local.local_name
        if name not in self.arg_names or name not in self.f_locals:
            return _UNSTABLE
        v = self.f_locals[name]
        if sub >= 0:
            if type(v) is not tuple or not 0 <= sub < len(v):
                return _UNSTABLE
            v = v[sub]
        try:
            ref = weakref.ref(v)
        except TypeError:
            return None if sub >= 0 else _UNSTABLE
        self.roots[src] = (self.arg_names.index(name), sub, ref, v)
        return v if self.node(v) else _UNSTABLE

    def _resolve(self, src: Source) -> Any:
        root = self._root(src)
        if root is not None:
            return root
        if type(src) is LocalSource:
            return _UNSTABLE
        if type(src) is GlobalSource:
            g = self.f_globals
            if type(g) is not dict or src.global_name not in g:
                return _UNSTABLE
            if id(g) not in self.nodes:
                self.keep.append(g)  # pinned: a root the snapshot holds
            self.node(g)
            item = g[src.global_name]
            return item if self.node(item) else _UNSTABLE
        if isinstance(src, Relabel):
            return self.resolve(src.base)
        parent = getattr(src, "base", None)
        base: Any = self.resolve(parent) if isinstance(parent, Source) else _UNSTABLE
        if base is _UNSTABLE:
            return _UNSTABLE
        v: Any = _UNSTABLE
        if isinstance(src, DictGetItemSource):  # DictSubclassGetItemSource too
            if not isinstance(base, dict):
                return _UNSTABLE
            key = src.index
            if isinstance(key, ConstDictKeySource):
                key = self.resolve(key)
                if key is _UNSTABLE:
                    return _UNSTABLE
            try:
                v = dict.__getitem__(base, key)
            except (KeyError, TypeError):
                return _UNSTABLE
        elif type(src) is ConstDictKeySource:
            if not isinstance(base, dict):
                return _UNSTABLE
            keys = list(dict.keys(base))
            if not 0 <= src.index < len(keys):
                return _UNSTABLE
            v = keys[src.index]
        elif type(src) is GetItemSource:
            if src.index_is_slice or type(base) not in (dict, tuple, list):
                return _UNSTABLE
            if type(base) is list and (type(src.index) is not int or not self.pin_slots(base)):
                return _UNSTABLE  # an exact list's items, pinned by address
            try:
                v = base[src.index]
            except (KeyError, IndexError, TypeError):
                return _UNSTABLE
        elif type(src) is TypeSource:
            v = type(base)
        elif type(src) is AttrSource:
            v = self._attr(base, src.member)
        elif isinstance(src, FixedAttr):  # __code__, __closure__, cell_contents
            v = self._attr(base, src._member)
        elif type(src) is ClosureCellSource:
            v = self._cell(base, src.index)
        elif type(src) is DefaultsSource:
            v = self._default(base, src.idx_key, src.is_kw)
        elif type(src) in (TypeDictSource, TypeMROSource):
            v = self._class_slot(base, src)
        if v is _UNSTABLE:
            return _UNSTABLE
        return v if self.node(v) else _UNSTABLE

    def _attr(self, base: Any, member: str) -> Any:
        tp = type(base)
        if (tp is types.FunctionType and member in _FUNCTION_SLOTS) or (
                tp is types.CellType and member == "cell_contents"):
            return self._slot(base, member)
        if member in native.module.MEMBER_SLOTS.get(tp, ()):
            # an exact functools.partial's or property's member slots, as the extension
            # learned them (the same Note's member slots)
            return self._slot(base, member)
        if issubclass(tp, type):
            return self._class_attr(base, member)
        generic = coverage.generic_member(base, member, self)
        if generic is None:
            return _UNSTABLE
        member = generic
        found = _mro_lookup(tp, member)
        if member == "__class__" and found is _OBJECT_CLASS:
            return tp  # object's own descriptor: the exact type, which base's node pins
        if found is not _UNSTABLE and _is_data_descriptor(found):
            return _UNSTABLE
        if not self.node(base, _NODE_INSTANCE_DICT):
            return _UNSTABLE
        d = object.__getattribute__(base, "__dict__")
        if member in d:
            return d[member]
        if found is not _UNSTABLE and not hasattr(type(found), "__get__"):
            return found
        return _UNSTABLE

    def _class_attr(self, cls: Any, member: str) -> Any:
        """``cls.member`` as ``type.__getattribute__`` finds it: the class's name or
        qualname (its slots), or a plain value or function found in a namespace along its
        MRO (each namespace up to it pinned by its tag) where the metaclass has no data
        descriptor of that name; anything else (a descriptor that makes a new object, a
        metaclass ``__getattribute__``) is not stable."""
        meta = type(cls)
        if _mro_lookup(meta, "__getattribute__") is not _TYPE_GETATTRIBUTE:
            return _UNSTABLE
        on_meta = _mro_lookup(meta, member)
        if member in _TYPE_NAMES and on_meta is _TYPE_NAMES[member]:
            return getattr(cls, member) if self.pin_slots(cls) else _UNSTABLE
        if on_meta is not _UNSTABLE and _is_data_descriptor(on_meta):
            return _UNSTABLE
        if not self.pin_slots(cls):
            return _UNSTABLE
        for klass in cls.__mro__:
            if not self.pin_slots(klass):
                return _UNSTABLE
            ns = native.module.slot_values(klass)[1]
            if type(ns) is not dict or not self.node(ns):
                return _UNSTABLE
            if member in ns:
                found = ns[member]
                if type(found) is types.FunctionType or not hasattr(type(found), "__get__"):
                    return found  # a function's __get__(None, cls) is the function
                return _UNSTABLE
        return _UNSTABLE

    def _cell(self, fn: Any, index: int) -> Any:
        """``fn.__closure__[index].cell_contents``, each step pinned."""
        closure = self._attr(fn, "__closure__")
        if type(closure) is not tuple or not 0 <= index < len(closure):
            return _UNSTABLE
        cell = closure[index]
        if not (self.node(closure) and self.node(cell)):
            return _UNSTABLE
        return self._attr(cell, "cell_contents")

    def _default(self, fn: Any, key: Any, is_kw: bool) -> Any:
        """``fn.__defaults__[key]`` or ``fn.__kwdefaults__[key]``, each step pinned."""
        held = self._attr(fn, "__kwdefaults__" if is_kw else "__defaults__")
        if type(held) is not (dict if is_kw else tuple) or not self.node(held):
            return _UNSTABLE
        try:
            return held[key]
        except (KeyError, IndexError, TypeError):
            return _UNSTABLE

    def _class_slot(self, cls: Any, src: Source) -> Any:
        """A class's MRO (``cls.__mro__`` where no metaclass redefines it) or its namespace
        dict (``dict(cls.__dict__)``, read as the real dict: its tag pins its contents),
        with the class's slots pinned."""
        if not issubclass(type(cls), type) or not self.pin_slots(cls):
            return _UNSTABLE
        if type(src) is TypeMROSource:
            return cls.__mro__ if _mro_lookup(type(cls), "__mro__") is _TYPE_MRO else _UNSTABLE
        return native.module.slot_values(cls)[1]

    def pin_slots(self, obj: Any) -> bool:
        """Record ``obj`` with its slots pinned (a function's code, defaults, closure and
        names; a cell's contents; a class's MRO and namespace); False when it has none."""
        if native.module.slot_values(obj) is None or not self.node(obj):
            return False
        self.slots.add(id(obj))
        return True

    def _slot(self, base: Any, member: str) -> Any:
        """A function's, a cell's, a partial's or a property's slot, read by its type's own
        descriptor (the type is exact and immutable), with the object's slots pinned by
        identity."""
        if not self.node(base):
            return _UNSTABLE
        try:
            v = getattr(base, member)
        except ValueError:  # an empty cell
            return _UNSTABLE
        self.slots.add(id(base))
        return v

    def snapshot(self) -> Any:
        m = native.module
        roots = tuple((pos, sub, ref, id(v)) for pos, sub, ref, v in self.roots.values())
        nodes = []
        for obj, mode in self.nodes.values():
            slots = m.slot_values(obj) if id(obj) in self.slots else None
            if slots is not None:
                self.keep.append(slots)  # held: no address compared is ever reused
            tp = type(obj)
            tag = m.type_version(tp)
            if tag == 0:
                return None
            dict_id, dtag = 0, 0
            if mode == _NODE_DICT:
                dtag = m.dict_version(obj)
            elif mode == _NODE_INSTANCE_DICT:
                d = object.__getattribute__(obj, "__dict__")
                dict_id, dtag = m.instance_dict_id(obj), m.dict_version(d)
                if dict_id != id(d):
                    return None
            self.keep.append(tp)
            nodes.append((id(obj), tp, tag, mode, dict_id, dtag, slots))
        return m.TagSnapshot(roots, tuple(nodes), tuple(self.keep))
