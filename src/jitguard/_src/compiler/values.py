"""Helpers shared by the guard kinds: safe display of values and how a kind refers to an
object by identity.

May import: errors, _util, compiler.constants.

# [Note: Identity binding]
# An identity guard must never hit on a different object that happens to reuse a dead
# object's ``id()``. Objects are bound one of two ways:
#   * strongly, comparing with ``is``: objects that live as long as the process anyway
#     (builtins, modules, module-level classes and functions reachable by import), and
#     objects that cannot be weakly referenced (small ints, tuples, ...). Holding them
#     costs nothing extra, and a held object cannot die, so its id cannot be reused.
#   * weakly, comparing ``id()``: everything else. A weakref callback invalidates the
#     check function: the bound id is replaced by -1 (which no object has), so the
#     compiled code fails from then on with no per-call cost, and the CheckFunction
#     reports ``Cache line invalidated because <source> got deallocated``.
"""

from __future__ import annotations

import builtins
import struct
import sys
import types
import weakref
from typing import Any

from .._util import constant_repr, is_scalar_type
from .constants import is_registered_constant

__all__ = ["Ident", "describe_ident", "is_long_lived", "show", "type_name"]

_SEQUENCE_IDS = frozenset(id(t) for t in (tuple, list, frozenset))
_DOUBLE = struct.Struct("<d")
_NAN_BITS = _DOUBLE.pack(float("nan"))  # another NaN (-nan, a payload) is shown by its bits
_BUILTIN_IDS = frozenset(id(v) for v in vars(builtins).values())


def is_long_lived(obj: Any) -> bool:
    """True if ``obj`` lives as long as its module: a builtin, a module in ``sys.modules``,
    or a class/function found at its own ``__module__``/``__qualname__``."""
    if id(obj) in _BUILTIN_IDS or obj is None or obj is True or obj is False:
        return True
    # type(obj), never isinstance: isinstance reads obj.__class__, which a proxy may fake
    # or make raise. A class whose metaclass hooks attribute reads is simply not long-lived.
    cls = type(obj)
    if issubclass(cls, types.ModuleType):
        try:
            return sys.modules.get(obj.__name__) is obj
        except Exception:
            return False
    if not issubclass(cls, (type, types.FunctionType, types.BuiltinFunctionType)):
        return False
    try:
        qualname = getattr(obj, "__qualname__", None)
        module = sys.modules.get(getattr(obj, "__module__", None) or "")
        if module is None or type(qualname) is not str or "<" in qualname:
            return False
        current: Any = module
        for part in qualname.split("."):
            current = vars(current).get(part) if hasattr(current, "__dict__") else None
            if current is None:
                return False
        return current is obj
    except Exception:
        return False


def show(value: Any, limit: int = 80) -> str:
    """Text for a value in a failure reason, never running user code: ``repr`` for builtin
    scalars and small containers of them, else ``<TypeName object>``."""
    if type(value) is float and value != value and _DOUBLE.pack(value) != _NAN_BITS:
        return f"nan (bits {_DOUBLE.pack(value)[::-1].hex()})"  # -nan: its sign shows
    if is_scalar_type(type(value)) or (
        id(type(value)) in _SEQUENCE_IDS and len(value) <= 16
        and all(is_scalar_type(type(v)) for v in value)
    ):
        text = constant_repr(value)
        return text if len(text) <= limit else text[: limit - 3] + "..."
    if issubclass(type(value), type):
        return type_name(value)
    if is_registered_constant(value):  # torch.float32, dtype('float64'): trusted reprs
        text = repr(value)
        return text if len(text) <= limit else text[: limit - 3] + "..."
    return f"<{type_name(type(value))} object>"


def type_name(tp: type) -> str:
    """A type's qualified name (``int``, ``Config``, ``mymod.Config`` when ambiguous)."""
    try:
        name = tp.__qualname__
    except Exception:  # pragma: no cover - hostile metaclass
        return "<type>"
    return name if isinstance(name, str) else "<type>"


class Ident:
    """An object a guard refers to by identity, held strongly or weakly as
    [Note: Identity binding] says. ``get()`` is the object, or None once it died."""

    __slots__ = ("__weakref__", "_listeners", "_ref", "_strong", "id", "type_name")

    def __init__(self, obj: Any) -> None:
        self.id = id(obj)
        self.type_name = type_name(type(obj))
        self._listeners: list[Any] = []
        self._strong: Any = None
        self._ref: Any = None
        if is_long_lived(obj):
            self._strong = obj
            return
        try:
            self._ref = weakref.ref(obj, self._died)
        except TypeError:
            self._strong = obj

    @property
    def is_weak(self) -> bool:
        return self._ref is not None

    def get(self) -> Any:
        return self._ref() if self._ref is not None else self._strong

    @property
    def alive(self) -> bool:
        return self._ref is None or self._ref() is not None

    def on_death(self, callback: Any) -> None:
        """Call ``callback()`` when the object dies (never, for a strongly held one)."""
        self._listeners.append(callback)

    def weakref(self) -> Any:
        """A weak reference for export info, or None when the object allows none."""
        if self._ref is not None:
            return self._ref
        try:
            return weakref.ref(self._strong)
        except TypeError:
            return None

    def _died(self, _ref: Any, _finalizing: Any = sys.is_finalizing) -> None:
        # At interpreter exit objects die while modules are torn down, and no check runs
        # any more: invalidating then can only fail (printing "Exception ignored ...").
        if _finalizing():
            return
        listeners, self._listeners = self._listeners, []
        for callback in listeners:
            callback()

    def __repr__(self) -> str:
        state = "weak" if self.is_weak else "strong"
        return f"<Ident {self.type_name} at {hex(self.id)} ({state}{'' if self.alive else ', dead'})>"


def describe_ident(ident: Ident) -> str:
    """``<Foo object at 0x..>``, or the name of a class, function or module."""
    obj = ident.get()
    if obj is None and ident.is_weak:
        return f"<deallocated {ident.type_name} at {hex(ident.id)}>"
    cls = type(obj)
    try:
        if issubclass(cls, type):
            return type_name(obj)
        if issubclass(cls, types.ModuleType):
            return f"<module {obj.__name__!r}>"
        if issubclass(cls, (types.FunctionType, types.BuiltinFunctionType)):
            return f"<function {getattr(obj, '__qualname__', '?')}>"
    except Exception:
        pass
    if is_scalar_type(type(obj)):
        return show(obj)
    return f"<{ident.type_name} object at {hex(ident.id)}>"
