"""The library of concrete sources: each a small frozen value object that names a value
(``name()``), says where its root lives (``guard_source()``) and how to read it. The root
sources live in ``root_sources`` and are re-exported here; the chained ones are here.

May import: _util, errors, guards, root_sources.

# [Note: Source protocol]
# A source is a small frozen value object; it keeps three things apart:
#   * identity: its dataclass fields (equality, hash). Build one with ``@source_dataclass``
#     (frozen, hash cached);
#   * display: ``name()``, a Python expression over ``L`` and ``G`` (``L['x'].a[0]``);
#   * evaluation, two ways that must agree (the guard compiler's tests check it):
#       - the reference path, ``get_value(f_locals, f_globals)``;
#       - the compiled path, code the guard compiler generates.
# A root source (``guards.Source``) says where it sits in the frame with ``frame_slot()``
# (``("L", "x")``): the reference path reads ``f_locals["x"]``, the compiled path a
# parameter or ``L[key]``/``G[key]``. A source with no frame value (shape env, global state,
# ephemerals) subclasses ``Unreadable``: no frame slot, and ``get_value`` raises
# ``UnreadableSourceError``; only kinds that read no value (GLOBAL_STATE, SHAPE_ENV) guard it.
# A chained source (``guards.ChainedSource``) has a ``base``; ``access(base_value)`` is the
# reference path and ``emit(base_expr, bind)`` the compiled one: a Python expression for its
# value, given the expression of its base's value. ``bind(obj, hint)`` binds a constant in
# the generated function's namespace and returns its name: keys, attribute names and
# indices are always bound, never pasted into code, so hostile strings cannot change it.
# The library's chained sources subclass ``Chained`` and write their text once, in
# ``render(base, bind)``: ``emit`` is ``render`` with the compiler's ``bind``, and ``name()``
# is ``render`` of the base's name with ``literal`` as ``bind`` (the constant's literal
# text), computed once and cached. So display and code cannot drift apart. (A source whose
# code must differ from its name, such as a read that bypasses user overrides written as the
# plain read torch shows, overrides ``emit`` too: ``more_sources``.)
#
#     @source_dataclass
#     class ItemSource(Chained):
#         key: str
#
#         def render(self, base: str, bind: Binder) -> str:
#             return f"{base}[{bind(self.key, 'key')}]"
#
#         def access(self, base_value: Any) -> Any:
#             return base_value[self.key]
#
# ``guard_source()``, ``is_dict_key()`` and ``is_ephemeral()`` follow the base unless a
# source says otherwise. A source whose ``render`` returns its base unchanged (``Relabel``:
# the nn-module flavours) is a pure relabelling: the compiler reads its value once, shared
# with its base. ``chain()`` is the one walk of a source's bases (root: ``chain()[-1]``).
# Adding a source never means editing the compiler, the cache or any ``elif`` chain: a new
# family of sources goes in a module of its own above this one (add it to [Note: Layering]),
# built on these bases (``Chained``, ``FixedAttr``, ``Relabel``, ``Unreadable``, or
# ``guards.Source`` with a ``frame_slot`` for a root).
"""

from __future__ import annotations

import enum
import keyword
import math
from typing import Any, ClassVar, Optional, Union

from ._util import constant_repr, is_scalar_type
from .errors import SourceError, SourceTypeError
from .guards import Binder, ChainedSource, FrameSlot, GuardSource, Source, source_dataclass
from .root_sources import (
    BackwardStateSource,
    ConstantSource,
    EphemeralSource,
    GlobalSource,
    GlobalStateSource,
    LocalSource,
    RandomValueSource,
    ShapeEnvSource,
    SyntheticLocalSource,
    Unreadable,
)

__all__ = [
    "AttrSource",
    "BackwardStateSource",
    "Binder",
    "CellContentsSource",
    "Chained",
    "ClosureSource",
    "CodeSource",
    "ConstDictKeySource",
    "ConstantSource",
    "DefaultsSource",
    "EphemeralSource",
    "FSDPNNModuleSource",
    "FixedAttr",
    "FrameSlot",
    "GetItemSource",
    "GlobalSource",
    "GlobalStateSource",
    "LocalSource",
    "NNModuleSource",
    "RandomValueSource",
    "Relabel",
    "ShapeEnvSource",
    "SyntheticLocalSource",
    "TensorProperty",
    "TensorPropertySource",
    "TypeSource",
    "UnspecializedBuiltinNNModuleSource",
    "UnspecializedNNModuleSource",
    "Unreadable",
    "WeakRefCallSource",
    "has_literal_form",
    "install_property_reader",
    "is_plain_identifier",
    "literal",
]


def is_plain_identifier(text: str) -> bool:
    """True if ``text`` can be pasted after a dot: ASCII (so no NFKC folding changes which
    attribute is read), an identifier, and not a keyword."""
    return text.isascii() and text.isidentifier() and not keyword.iskeyword(text)


def literal(obj: Any, hint: str = "") -> str:
    """The literal text of a constant in a source's name: the ``bind`` of ``Chained.name``.
    A slice shows as inside brackets (``1:3``, ``::2``)."""
    if type(obj) is slice:
        start, stop, step = ("" if p is None else constant_repr(p)
                             for p in (obj.start, obj.stop, obj.step))
        return f"{start}:{stop}" + (f":{step}" if step else "")
    return constant_repr(obj)


def has_literal_form(key: Any) -> bool:
    """``repr(key)`` is a Python literal of an equal key: a builtin scalar (``SCALAR_TYPES``;
    a float or complex only when finite) or a tuple of these. Decided by exact type identity:
    a metaclass ``__eq__`` cannot pass a key off as an int."""
    tp = type(key)
    if tp is tuple:
        return all(has_literal_form(k) for k in key)
    if tp is float:
        return math.isfinite(key)
    if tp is complex:
        return math.isfinite(key.real) and math.isfinite(key.imag)
    return is_scalar_type(tp)


def _check_literal_key(key: Any, what: str) -> None:
    """Keys are shown with ``repr``; allow only values whose repr is a Python literal."""
    if not has_literal_form(key):
        raise SourceError(
            f"{what} {constant_repr(key)} (a {type(key).__name__}) has no literal form, so no source name "
            f"can show it; use an int, str, bytes, bool, None, finite float or complex, or a "
            f"tuple of these (for a dict key by position use ConstDictKeySource)"
        )


# ---- chained sources ----------------------------------------------------------------


class Chained(ChainedSource):
    """Base of the library's chained sources: a subclass writes ``render`` and ``access``
    ([Note: Source protocol]); its base must be a source that allows sub-guards."""

    def __post_init__(self) -> None:
        if not isinstance(self.base, Source):
            raise SourceTypeError(f"{type(self).__name__} needs a Source as base, got {self.base!r}")
        if not self.base.subguards_allowed():
            raise SourceError(
                f"{type(self).__name__} on {self.base.name()}: its base allows no sub-guards "
                f"({self.base.guard_source().name})"
            )

    def render(self, base: str, bind: Binder) -> str:
        """This source as an expression over ``base`` (its base's expression), each constant
        written as ``bind(constant, hint)``: the one text behind ``name`` and ``emit``."""
        raise NotImplementedError

    def name(self) -> str:
        cached = getattr(self, "_jitguard_name", None)  # see source_dataclass.__hash__
        if cached is None:
            cached = self.render(self.base.name(), literal)
            object.__setattr__(self, "_jitguard_name", cached)
        return cached

    def emit(self, base: str, bind: Binder) -> str:
        return self.render(base, bind)


@source_dataclass
class AttrSource(Chained):
    """An attribute: ``L['x'].weight``, or ``getattr(L['x'], 'a-b')`` when the attribute
    is not a plain identifier."""

    member: str

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.member, str):
            raise SourceTypeError(f"AttrSource member must be a str, got {self.member!r}")
        if "." in self.member:
            raise SourceError(
                f"AttrSource member {self.member!r} is dotted; chain one AttrSource per "
                f"attribute (AttrSource(AttrSource(base, 'a'), 'b'))"
            )

    def access(self, base_value: Any) -> Any:
        if _attr_reader and self.member in _attr_reader[0][2] and _attr_reader[0][0]():
            return _attr_reader[0][1](base_value, self.member)
        return getattr(base_value, self.member)

    def render(self, base: str, bind: Binder) -> str:
        if is_plain_identifier(self.member):
            return f"{base}.{self.member}"
        return f"getattr({base}, {bind(self.member, 'attr')})"

    def emit(self, base: str, bind: Binder) -> str:
        if not (_attr_reader and self.member in _attr_reader[0][2]):
            return self.render(base, bind)
        # attributes a mode must not see: [Note: Tensor properties past function modes]
        active, read_attr, _ = _attr_reader[0]
        return (f"({self.render(base, bind)} if not {bind(active, 'modes_on')}() else "
                f"{bind(read_attr, 'read_attr_past_modes')}({base}, {bind(self.member, 'attr')}))")


class FixedAttr(Chained):
    """An attribute every instance of the class reads: ``_member``."""

    _member: ClassVar[str] = ""

    def access(self, base_value: Any) -> Any:
        return getattr(base_value, self._member)

    def render(self, base: str, bind: Binder) -> str:
        return f"{base}.{self._member}"


@source_dataclass
class CodeSource(FixedAttr):
    """A function's code object: ``L['f'].__code__``."""

    _member = "__code__"


@source_dataclass
class ClosureSource(FixedAttr):
    """A function's closure cells: ``L['f'].__closure__``."""

    _member = "__closure__"


@source_dataclass
class CellContentsSource(FixedAttr):
    """What a closure cell holds: ``L['f'].__closure__[0].cell_contents``."""

    _member = "cell_contents"


@source_dataclass
class GetItemSource(Chained):
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
                raise SourceError(
                    f"a slice index must be (start, stop, step), got {constant_repr(self.index)}")
            for part in self.index:
                if part is not None and type(part) is not int:
                    raise SourceTypeError(
                        f"slice bounds must be ints or None, got {constant_repr(self.index)}")
        else:
            _check_literal_key(self.index, "GetItemSource index")

    def _key(self) -> Any:
        return slice(*self.index) if self.index_is_slice else self.index

    def access(self, base_value: Any) -> Any:
        return base_value[self._key()]

    def render(self, base: str, bind: Binder) -> str:
        return f"{base}[{bind(self._key(), 'key')}]"


@source_dataclass
class ConstDictKeySource(Chained):
    """The ``index``-th key of a dict, by insertion order: ``list(dict.keys(L['d']))[0]``."""

    index: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if type(self.index) is not int:
            raise SourceTypeError(f"ConstDictKeySource index must be an int, got {self.index!r}")

    def is_dict_key(self) -> bool:
        return True

    def access(self, base_value: Any) -> Any:
        return list(dict.keys(base_value))[self.index]

    def render(self, base: str, bind: Binder) -> str:
        return f"list(dict.keys({base}))[{bind(self.index, 'pos')}]"


@source_dataclass
class TypeSource(Chained):
    """The exact type of a value: ``type(L['x'])``."""

    def access(self, base_value: Any) -> Any:
        return type(base_value)

    def render(self, base: str, bind: Binder) -> str:
        return f"type({base})"


@source_dataclass
class DefaultsSource(Chained):
    """A function default: ``G['g'].__defaults__[0]``, or with ``is_kw``
    ``G['g'].__kwdefaults__['k']``."""

    idx_key: Union[int, str]
    is_kw: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        want = str if self.is_kw else int
        if type(self.idx_key) is not want:
            raise SourceTypeError(
                f"DefaultsSource idx_key must be a {want.__name__} "
                f"{'(keyword default name)' if self.is_kw else '(position)'}, got {self.idx_key!r}"
            )

    def _attr(self) -> str:
        return "__kwdefaults__" if self.is_kw else "__defaults__"

    def access(self, base_value: Any) -> Any:
        return getattr(base_value, self._attr())[self.idx_key]

    def render(self, base: str, bind: Binder) -> str:
        return f"{base}.{self._attr()}[{bind(self.idx_key, 'default')}]"


@source_dataclass
class WeakRefCallSource(Chained):
    """A weak reference, called: ``L['w']()``."""

    def access(self, base_value: Any) -> Any:
        return base_value()

    def render(self, base: str, bind: Binder) -> str:
        return f"{base}()"


class TensorProperty(enum.Enum):
    """Tensor metadata readable as an int: a size, a stride, the storage offset."""

    SIZE = 0
    STRIDE = 1
    STORAGE_OFFSET = 2

    def method_name(self) -> str:
        return ("size", "stride", "storage_offset")[self.value]


# [Note: Tensor properties past function modes]
# A tensor's ``size()``, ``stride()`` and ``storage_offset()`` are calls a torch function
# mode sees when made in Python; torch's C++ guards read them unseen. A guard's reads must
# not be calls of the user's mode (a counting mode would count them; one whose counter
# Dynamo guards would make a new entry fail its own guards). The torch integration installs
# a reader (``install_property_reader(active, read)``): while ``active()`` (a mode is on),
# the reference path and the generated code read the property through ``read(value,
# method_name)``, which sets torch-function dispatch aside; otherwise the plain call. The
# same holds for the attributes it names (``attrs``: a view's ``_base``, a tensor's
# ``grad``), read by ``AttrSource`` through ``read_attr(value, name)`` while a mode is on.
# The TENSOR_MATCH check of a tensor of another layout than strided (sparse), which torch's
# C++ checker never takes, runs its mode-blind reference meaning while a mode is on.
_property_reader: list[tuple[Any, Any]] = []
_attr_reader: list[tuple[Any, Any, frozenset[str]]] = []


def install_property_reader(active: Any, read: Any, read_attr: Any = None,
                            attrs: frozenset[str] = frozenset()) -> None:
    """[Note: Tensor properties past function modes]."""
    _property_reader[:] = [(active, read)]
    _attr_reader[:] = [(active, read_attr, attrs)] if read_attr is not None and attrs else []


@source_dataclass
class TensorPropertySource(Chained):
    """``L['x'].size()[1]``, ``L['x'].stride()[0]`` or ``L['x'].storage_offset()``.

    Duck-typed: any value with these methods works, so no torch import is needed."""

    prop: TensorProperty
    idx: Optional[int] = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.prop, TensorProperty):
            raise SourceTypeError(f"prop must be a TensorProperty, got {self.prop!r}")
        if self.prop is TensorProperty.STORAGE_OFFSET:
            if self.idx is not None:
                raise SourceError("storage_offset takes no index")
        elif type(self.idx) is not int:
            raise SourceTypeError(f"{self.prop.method_name()}() needs an int index, got {self.idx!r}")

    def access(self, base_value: Any) -> Any:
        method = self.prop.method_name()
        if _property_reader and _property_reader[0][0]():
            value = _property_reader[0][1](base_value, method)
        else:
            value = getattr(base_value, method)()
        return value if self.prop is TensorProperty.STORAGE_OFFSET else value[self.idx]

    def render(self, base: str, bind: Binder) -> str:
        if self.prop is TensorProperty.STORAGE_OFFSET:
            return f"{base}.storage_offset()"
        return f"{base}.{self.prop.method_name()}()[{bind(self.idx, 'dim')}]"

    def emit(self, base: str, bind: Binder) -> str:
        if not _property_reader:
            return self.render(base, bind)
        active, read = _property_reader[0]
        method = self.prop.method_name()
        value = (f"({base}.{method}() if not {bind(active, 'modes_on')}() else "
                 f"{bind(read, 'read_past_modes')}({base}, {bind(method, 'method')}))")
        if self.prop is TensorProperty.STORAGE_OFFSET:
            return value
        return f"{value}[{bind(self.idx, 'dim')}]"


# ---- nn-module flavours: the same value, a different GuardSource ---------------------


class Relabel(Chained):
    """Names and reads its base's value unchanged; only the guard source differs: the
    ``GuardSource`` member ``LOCAL_<_flavour>`` or ``GLOBAL_<_flavour>``, as the base's is
    local or not."""

    _flavour: ClassVar[str] = ""
    _local: ClassVar[GuardSource]
    _global: ClassVar[GuardSource]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls._flavour:
            cls._local = GuardSource["LOCAL_" + cls._flavour]
            cls._global = GuardSource["GLOBAL_" + cls._flavour]

    def guard_source(self) -> GuardSource:
        return self._local if self.base.guard_source().is_local() else self._global

    def access(self, base_value: Any) -> Any:
        return base_value

    def render(self, base: str, bind: Binder) -> str:
        return base


@source_dataclass
class NNModuleSource(Relabel):
    """A module whose parameters and structure the JIT specialized on."""

    _flavour = "SPECIALIZED_NN_MODULE"


@source_dataclass
class UnspecializedNNModuleSource(Relabel):
    """A user module traced like an ordinary object."""

    _flavour = "UNSPECIALIZED_NN_MODULE"


@source_dataclass
class UnspecializedBuiltinNNModuleSource(Relabel):
    """A library (built-in) module traced like an ordinary object."""

    _flavour = "UNSPECIALIZED_BUILTIN_NN_MODULE"


@source_dataclass
class FSDPNNModuleSource(Relabel):
    """A module managed by FSDP."""

    _flavour = "FSDP_MODULE"
