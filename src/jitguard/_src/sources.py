"""The library of concrete sources: each a small frozen value object that names a value
(``name()``), says where its root lives (``guard_source()``) and how to read it. The root
sources live in ``root_sources`` and are re-exported here; the chained ones are here.

May import: errors, guards, root_sources.

# [Note: Source evaluation]
# A source is read two ways, and both must agree (the guard compiler's tests check it):
#   * the reference path, ``source.get_value(f_locals, f_globals)``: a root reads the frame
#     (``frame_slot()`` says which mapping and key), a chained source applies
#     ``access(base_value)`` to its base's value;
#   * the compiled path: a root's ``frame_slot()`` becomes a parameter or ``L[key]``/``G[key]``
#     read, and a chained source's ``emit(base_expr, bind)`` returns a Python expression that
#     computes its value from the expression of its base. ``bind(obj, hint)`` binds a constant
#     in the generated function's namespace and returns its name: keys, attribute names and
#     indices are always bound, never pasted into source text, so hostile strings cannot
#     change the generated code.
# A source whose emit returns its base expression unchanged (the nn-module flavours) is a
# pure relabelling: the compiler reads its value once, shared with its base.
# Sources with no frame value (shape env, global state, ephemerals) raise
# ``UnreadableSourceError`` from ``get_value``; only kinds that need no value (GLOBAL_STATE,
# SHAPE_ENV) may guard on them.
"""

from __future__ import annotations

import enum
import math
from typing import Any, ClassVar, Optional, Union

from .errors import SourceError
from .guards import ChainedSource, GuardSource, Source, source_dataclass
from .root_sources import (
    BackwardStateSource,
    Binder,
    ConstantSource,
    EphemeralSource,
    GlobalSource,
    GlobalStateSource,
    LocalSource,
    RandomValueSource,
    ShapeEnvSource,
    SyntheticLocalSource,
    is_plain_identifier,
)

__all__ = [
    "AttrSource",
    "BackwardStateSource",
    "Binder",
    "CellContentsSource",
    "ClosureSource",
    "CodeSource",
    "ConstDictKeySource",
    "ConstantSource",
    "DefaultsSource",
    "EphemeralSource",
    "FSDPNNModuleSource",
    "GetItemSource",
    "GlobalSource",
    "GlobalStateSource",
    "LocalSource",
    "NNModuleSource",
    "RandomValueSource",
    "ShapeEnvSource",
    "SyntheticLocalSource",
    "TensorProperty",
    "TensorPropertySource",
    "TypeSource",
    "UnspecializedBuiltinNNModuleSource",
    "UnspecializedNNModuleSource",
    "WeakRefCallSource",
    "is_plain_identifier",
]


_LITERAL_SCALARS = (int, str, bytes, bool, type(None))
# By identity: ``type(key) in ...`` would call a metaclass ``__eq__``.
_LITERAL_SCALAR_IDS = frozenset(id(t) for t in _LITERAL_SCALARS)


def _check_literal_key(key: Any, what: str) -> None:
    """Keys are shown with ``repr``; allow only values whose repr is a Python literal."""
    if type(key) is float:
        if math.isfinite(key):
            return
    elif type(key) is tuple:
        for item in key:
            _check_literal_key(item, what)
        return
    elif id(type(key)) in _LITERAL_SCALAR_IDS:
        return
    raise SourceError(
        f"{what} {key!r} (a {type(key).__name__}) has no literal form, so no source name can "
        f"show it; use an int, str, bytes, bool, None, finite float or a tuple of these "
        f"(for a dict key by position use ConstDictKeySource)"
    )


# ---- chained sources ----------------------------------------------------------------


class _Chained(ChainedSource):
    """Shared checks and the cached ``name()`` of the chained sources below."""

    def __post_init__(self) -> None:
        if not isinstance(self.base, Source):
            raise SourceError(f"{type(self).__name__} needs a Source as base, got {self.base!r}")
        if not self.base.subguards_allowed():
            raise SourceError(
                f"{type(self).__name__} on {self.base.name()}: its base allows no sub-guards "
                f"({self.base.guard_source().name})"
            )

    def name(self) -> str:
        cached = getattr(self, "_jitguard_name", None)  # see source_dataclass.__hash__
        if cached is None:
            cached = self._name(self.base.name())
            object.__setattr__(self, "_jitguard_name", cached)
        return cached

    def _name(self, base: str) -> str:
        raise NotImplementedError

    def emit(self, base: str, bind: Binder) -> str:
        """A Python expression for this value, given the expression of its base."""
        raise NotImplementedError


@source_dataclass
class AttrSource(_Chained):
    """An attribute: ``L['x'].weight``, or ``getattr(L['x'], 'a-b')`` when the attribute
    is not a plain identifier."""

    member: str

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.member, str):
            raise SourceError(f"AttrSource member must be a str, got {self.member!r}")
        if "." in self.member:
            raise SourceError(
                f"AttrSource member {self.member!r} is dotted; chain one AttrSource per "
                f"attribute (AttrSource(AttrSource(base, 'a'), 'b'))"
            )

    def _name(self, base: str) -> str:
        if is_plain_identifier(self.member):
            return f"{base}.{self.member}"
        return f"getattr({base}, {self.member!r})"

    def access(self, base_value: Any) -> Any:
        return getattr(base_value, self.member)

    def emit(self, base: str, bind: Binder) -> str:
        if is_plain_identifier(self.member):
            return f"{base}.{self.member}"
        return f"getattr({base}, {bind(self.member, 'attr')})"


class _FixedAttr(_Chained):
    _member: ClassVar[str] = ""

    def _name(self, base: str) -> str:
        return f"{base}.{self._member}"

    def access(self, base_value: Any) -> Any:
        return getattr(base_value, self._member)

    def emit(self, base: str, bind: Binder) -> str:
        return f"{base}.{self._member}"


@source_dataclass
class CodeSource(_FixedAttr):
    """A function's code object: ``L['f'].__code__``."""

    _member = "__code__"


@source_dataclass
class ClosureSource(_FixedAttr):
    """A function's closure cells: ``L['f'].__closure__``."""

    _member = "__closure__"


@source_dataclass
class CellContentsSource(_FixedAttr):
    """What a closure cell holds: ``L['f'].__closure__[0].cell_contents``."""

    _member = "cell_contents"


@source_dataclass
class GetItemSource(_Chained):
    """An item by index or key: ``L['t'][0]``, ``L['d']['key']``, ``L['t'][1:3]``.

    ``index`` must have a literal form (see ``_check_literal_key``). With
    ``index_is_slice`` the index is a ``(start, stop, step)`` tuple read as a slice.
    """

    index: Any
    index_is_slice: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.index, slice):
            object.__setattr__(self, "index", (self.index.start, self.index.stop, self.index.step))
            object.__setattr__(self, "index_is_slice", True)
        if self.index_is_slice:
            if not (isinstance(self.index, tuple) and len(self.index) == 3):
                raise SourceError(f"a slice index must be (start, stop, step), got {self.index!r}")
            for part in self.index:
                if part is not None and type(part) is not int:
                    raise SourceError(f"slice bounds must be ints or None, got {self.index!r}")
        else:
            _check_literal_key(self.index, "GetItemSource index")

    def _key(self) -> Any:
        return slice(*self.index) if self.index_is_slice else self.index

    def _name(self, base: str) -> str:
        if self.index_is_slice:
            start, stop, step = ("" if p is None else repr(p) for p in self.index)
            text = f"{start}:{stop}" + (f":{step}" if step else "")
            return f"{base}[{text}]"
        return f"{base}[{self.index!r}]"

    def access(self, base_value: Any) -> Any:
        return base_value[self._key()]

    def emit(self, base: str, bind: Binder) -> str:
        return f"{base}[{bind(self._key(), 'key')}]"


@source_dataclass
class ConstDictKeySource(_Chained):
    """The ``index``-th key of a dict, by insertion order: ``list(dict.keys(L['d']))[0]``."""

    index: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if type(self.index) is not int:
            raise SourceError(f"ConstDictKeySource index must be an int, got {self.index!r}")

    def is_dict_key(self) -> bool:
        return True

    def _name(self, base: str) -> str:
        return f"list(dict.keys({base}))[{self.index!r}]"

    def access(self, base_value: Any) -> Any:
        return list(dict.keys(base_value))[self.index]

    def emit(self, base: str, bind: Binder) -> str:
        return f"list(dict.keys({base}))[{bind(self.index, 'pos')}]"


@source_dataclass
class TypeSource(_Chained):
    """The exact type of a value: ``type(L['x'])``."""

    def _name(self, base: str) -> str:
        return f"type({base})"

    def access(self, base_value: Any) -> Any:
        return type(base_value)

    def emit(self, base: str, bind: Binder) -> str:
        return f"type({base})"


@source_dataclass
class DefaultsSource(_Chained):
    """A function default: ``G['g'].__defaults__[0]``, or with ``is_kw``
    ``G['g'].__kwdefaults__['k']``."""

    idx_key: Union[int, str]
    is_kw: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        want = str if self.is_kw else int
        if type(self.idx_key) is not want:
            raise SourceError(
                f"DefaultsSource idx_key must be a {want.__name__} "
                f"{'(keyword default name)' if self.is_kw else '(position)'}, got {self.idx_key!r}"
            )

    def _attr(self) -> str:
        return "__kwdefaults__" if self.is_kw else "__defaults__"

    def _name(self, base: str) -> str:
        return f"{base}.{self._attr()}[{self.idx_key!r}]"

    def access(self, base_value: Any) -> Any:
        return getattr(base_value, self._attr())[self.idx_key]

    def emit(self, base: str, bind: Binder) -> str:
        return f"{base}.{self._attr()}[{bind(self.idx_key, 'default')}]"


@source_dataclass
class WeakRefCallSource(_Chained):
    """A weak reference, called: ``L['w']()``."""

    def _name(self, base: str) -> str:
        return f"{base}()"

    def access(self, base_value: Any) -> Any:
        return base_value()

    def emit(self, base: str, bind: Binder) -> str:
        return f"{base}()"


class TensorProperty(enum.Enum):
    """Tensor metadata readable as an int: a size, a stride, the storage offset."""

    SIZE = 0
    STRIDE = 1
    STORAGE_OFFSET = 2

    def method_name(self) -> str:
        return ("size", "stride", "storage_offset")[self.value]


@source_dataclass
class TensorPropertySource(_Chained):
    """``L['x'].size()[1]``, ``L['x'].stride()[0]`` or ``L['x'].storage_offset()``.

    Duck-typed: any value with these methods works, so no torch import is needed."""

    prop: TensorProperty
    idx: Optional[int] = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.prop, TensorProperty):
            raise SourceError(f"prop must be a TensorProperty, got {self.prop!r}")
        if self.prop is TensorProperty.STORAGE_OFFSET:
            if self.idx is not None:
                raise SourceError("storage_offset takes no index")
        elif type(self.idx) is not int:
            raise SourceError(f"{self.prop.method_name()}() needs an int index, got {self.idx!r}")

    def _name(self, base: str) -> str:
        if self.prop is TensorProperty.STORAGE_OFFSET:
            return f"{base}.storage_offset()"
        return f"{base}.{self.prop.method_name()}()[{self.idx!r}]"

    def access(self, base_value: Any) -> Any:
        if self.prop is TensorProperty.STORAGE_OFFSET:
            return base_value.storage_offset()
        return getattr(base_value, self.prop.method_name())()[self.idx]

    def emit(self, base: str, bind: Binder) -> str:
        if self.prop is TensorProperty.STORAGE_OFFSET:
            return f"{base}.storage_offset()"
        return f"{base}.{self.prop.method_name()}()[{bind(self.idx, 'dim')}]"


# ---- nn-module flavours: the same value, a different GuardSource ---------------------


class _Relabel(_Chained):
    """Names and reads its base's value unchanged; only the guard source differs."""

    _local: ClassVar[GuardSource]
    _global: ClassVar[GuardSource]

    def _name(self, base: str) -> str:
        return base

    def guard_source(self) -> GuardSource:
        return self._local if self.base.guard_source().is_local() else self._global

    def access(self, base_value: Any) -> Any:
        return base_value

    def emit(self, base: str, bind: Binder) -> str:
        return base


@source_dataclass
class NNModuleSource(_Relabel):
    """A module whose parameters and structure the JIT specialized on."""

    _local = GuardSource.LOCAL_SPECIALIZED_NN_MODULE
    _global = GuardSource.GLOBAL_SPECIALIZED_NN_MODULE


@source_dataclass
class UnspecializedNNModuleSource(_Relabel):
    """A user module traced like an ordinary object."""

    _local = GuardSource.LOCAL_UNSPECIALIZED_NN_MODULE
    _global = GuardSource.GLOBAL_UNSPECIALIZED_NN_MODULE


@source_dataclass
class UnspecializedBuiltinNNModuleSource(_Relabel):
    """A library (built-in) module traced like an ordinary object."""

    _local = GuardSource.LOCAL_UNSPECIALIZED_BUILTIN_NN_MODULE
    _global = GuardSource.GLOBAL_UNSPECIALIZED_BUILTIN_NN_MODULE


@source_dataclass
class FSDPNNModuleSource(_Relabel):
    """A module managed by FSDP."""

    _local = GuardSource.LOCAL_FSDP_MODULE
    _global = GuardSource.GLOBAL_FSDP_MODULE
