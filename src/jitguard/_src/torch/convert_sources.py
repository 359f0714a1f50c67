"""Dynamo sources -> jitguard sources, through a registry keyed by the Dynamo source's class
name (``register_source_converter``). Every converted source has the same ``name()`` as the
Dynamo source it stands for; a source that has no jitguard equivalent raises
``Unconvertible``, and so does one whose converted name would differ.

May import: jitguard._src.errors, jitguard._src.guards, jitguard._src.sources,
jitguard._src.more_sources, jitguard._src.torch.adapter_sources.

# [Note: Converting sources]
# A converter gets the Dynamo source's fields (``adapter_sources.dynamo_source_fields``) and
# a ``SourceConverter`` to convert the sources among them (its ``base``, a
# ``ConstDictKeySource`` index, ...). Sources that only relabel their base for Dynamo's own
# bookkeeping and read the same value (``OptimizerSource``, the parameter/buffer flavours of
# ``AttrSource``, ``GradSource``) become the jitguard source that reads the same way. The
# nn-module flavours keep their own jitguard classes (the guard source differs, the value
# does not). A local that Dynamo read out of a closure cell (``LocalSource`` with
# ``is_derefed_cell_contents``) is not in the frame jitguard checks; it becomes a
# ``ClosureCellSource`` over the source the caller gives for the function itself, when the
# caller gives one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from ..errors import SourceError
from ..guards import Source
from ..more_sources import (
    ClosureCellSource,
    DictGetItemSource,
    DictSubclassGetItemSource,
    GenericAttrSource,
    ListGetItemSource,
    TypeDictSource,
    TypeMROSource,
)
from ..sources import (
    AttrSource,
    BackwardStateSource,
    CellContentsSource,
    ClosureSource,
    CodeSource,
    ConstDictKeySource,
    DefaultsSource,
    FSDPNNModuleSource,
    GetItemSource,
    GlobalSource,
    GlobalStateSource,
    LocalSource,
    NNModuleSource,
    RandomValueSource,
    ShapeEnvSource,
    SyntheticLocalSource,
    TensorProperty,
    TensorPropertySource,
    TypeSource,
    UnspecializedBuiltinNNModuleSource,
    UnspecializedNNModuleSource,
    WeakRefCallSource,
)
from . import adapter_sources as adapter

__all__ = ["SourceConverter", "Unconvertible", "register_source_converter", "source_converters"]


class Unconvertible(Exception):
    """A guard or source jitguard cannot state with the same meaning; ``str()`` says why."""


Fields = dict[str, Any]
ConvertFn = Callable[["SourceConverter", Fields], Source]
_converters: dict[str, ConvertFn] = {}


def register_source_converter(*class_names: str) -> Callable[[ConvertFn], ConvertFn]:
    """Register ``fn(converter, fields) -> jitguard Source`` for Dynamo source classes."""

    def deco(fn: ConvertFn) -> ConvertFn:
        for name in class_names:
            _converters[name] = fn
        return fn

    return deco


def source_converters() -> dict[str, ConvertFn]:
    """The registry, by Dynamo source class name."""
    return dict(_converters)


class SourceConverter:
    """Converts Dynamo sources (memoized by identity of the Dynamo source's name and class).

    ``function_source``: a jitguard source for the compiled function itself, so free
    variables of it can be read (see [Note: Converting sources]); ``freevars``: that
    function's ``co_freevars``.
    """

    def __init__(
        self, *, function_source: Optional[Source] = None, freevars: tuple[str, ...] = ()
    ) -> None:
        self.function_source = function_source
        self.freevars = freevars
        self._memo: dict[Any, Source] = {}
        self.by_name: dict[str, Source] = {}

    def convert(self, dsrc: Any) -> Source:
        try:
            key: Any = dsrc
            hash(key)
        except TypeError:
            key = id(dsrc)
        got = self._memo.get(key)
        if got is not None:
            return got
        cls = adapter.source_class_name(dsrc)
        fn = _converters.get(cls)
        if fn is None:
            raise Unconvertible(f"no jitguard source for Dynamo's {cls}")
        try:
            out = fn(self, adapter.dynamo_source_fields(dsrc))
        except SourceError as e:
            raise Unconvertible(f"{cls}: {e}") from None
        want = adapter.dynamo_source_name(dsrc)
        if out.name() != want:
            raise Unconvertible(
                f"{cls} {want!r} would be named {out.name()!r} by jitguard; refusing a source "
                f"under another name"
            )
        self._memo[key] = out
        self.by_name.setdefault(want, out)
        return out


# ---- roots -------------------------------------------------------------------------------


@register_source_converter("LocalSource")
def _local(c: SourceConverter, f: Fields) -> Source:
    name = f["local_name"]
    if f.get("is_derefed_cell_contents"):
        if c.function_source is None or name not in c.freevars:
            raise Unconvertible(
                f"L[{name!r}] is a closure variable of the compiled function and no source "
                f"for the function was given"
            )
        return ClosureCellSource(c.function_source, name, c.freevars.index(name))
    return LocalSource(name, is_input=bool(f.get("is_input")))


@register_source_converter("GlobalSource")
def _global(c: SourceConverter, f: Fields) -> Source:
    return GlobalSource(f["global_name"])


@register_source_converter("GlobalWeakRefSource")
def _global_weakref(c: SourceConverter, f: Fields) -> Source:
    return WeakRefCallSource(GlobalSource(f["global_name"]))


@register_source_converter("RandomValueSource")
def _random(c: SourceConverter, f: Fields) -> Source:
    return RandomValueSource(f["random_call_index"])


@register_source_converter("SyntheticLocalSource")
def _synthetic(c: SourceConverter, f: Fields) -> Source:
    return SyntheticLocalSource(f["local_name"])


@register_source_converter("GlobalStateSource")
def _global_state(c: SourceConverter, f: Fields) -> Source:
    return GlobalStateSource()


@register_source_converter("ShapeEnvSource")
def _shape_env(c: SourceConverter, f: Fields) -> Source:
    return ShapeEnvSource()


@register_source_converter("BackwardStateSource")
def _backward_state(c: SourceConverter, f: Fields) -> Source:
    return BackwardStateSource()


# ---- chained -------------------------------------------------------------------------------


@register_source_converter(
    "AttrSource", "ParamBufferSource", "UnspecializedParamBufferSource", "GradSource"
)
def _attr(c: SourceConverter, f: Fields) -> Source:
    return AttrSource(c.convert(f["base"]), f["member"])


@register_source_converter("CellContentsSource")
def _cell_contents(c: SourceConverter, f: Fields) -> Source:
    if f.get("member", "cell_contents") != "cell_contents":
        raise Unconvertible(f"CellContentsSource with member {f['member']!r}")
    return CellContentsSource(c.convert(f["base"]))


@register_source_converter("GenericAttrSource")
def _generic_attr(c: SourceConverter, f: Fields) -> Source:
    return GenericAttrSource(c.convert(f["base"]), f["member"])


@register_source_converter("ClosureSource")
def _closure(c: SourceConverter, f: Fields) -> Source:
    return ClosureSource(c.convert(f["base"]))


@register_source_converter("CodeSource")
def _code(c: SourceConverter, f: Fields) -> Source:
    return CodeSource(c.convert(f["base"]))


@register_source_converter("TypeSource")
def _type(c: SourceConverter, f: Fields) -> Source:
    return TypeSource(c.convert(f["base"]))


@register_source_converter("TypeDictSource")
def _type_dict(c: SourceConverter, f: Fields) -> Source:
    return TypeDictSource(c.convert(f["base"]))


@register_source_converter("TypeMROSource")
def _type_mro(c: SourceConverter, f: Fields) -> Source:
    return TypeMROSource(c.convert(f["base"]))


@register_source_converter("WeakRefCallSource", "CallFunctionNoArgsSource")
def _call(c: SourceConverter, f: Fields) -> Source:
    return WeakRefCallSource(c.convert(f["base"]))


@register_source_converter("DefaultsSource")
def _defaults(c: SourceConverter, f: Fields) -> Source:
    return DefaultsSource(c.convert(f["base"]), f["idx_key"], bool(f["is_kw"]))


@register_source_converter("GetItemSource")
def _getitem(c: SourceConverter, f: Fields) -> Source:
    index = f["index"]
    if adapter.is_dynamo_source(index):
        raise Unconvertible("GetItemSource with a source as its index")
    return GetItemSource(c.convert(f["base"]), index, bool(f.get("index_is_slice")))


@register_source_converter("ListGetItemSource")
def _list_getitem(c: SourceConverter, f: Fields) -> Source:
    if f.get("index_is_slice"):
        raise Unconvertible("ListGetItemSource of a slice")
    return ListGetItemSource(c.convert(f["base"]), f["index"])


@register_source_converter("DictGetItemSource")
def _dict_getitem(c: SourceConverter, f: Fields) -> Source:
    index = f["index"]
    if adapter.is_dynamo_source(index):
        index = c.convert(index)
    return DictGetItemSource(c.convert(f["base"]), index)


@register_source_converter("DictSubclassGetItemSource")
def _dict_subclass_getitem(c: SourceConverter, f: Fields) -> Source:
    index = f["index"]
    if adapter.is_dynamo_source(index):
        index = c.convert(index)
    return DictSubclassGetItemSource(c.convert(f["base"]), index)


@register_source_converter("ConstDictKeySource")
def _dict_key(c: SourceConverter, f: Fields) -> Source:
    return ConstDictKeySource(c.convert(f["base"]), f["index"])


@register_source_converter("TensorPropertySource")
def _tensor_property(c: SourceConverter, f: Fields) -> Source:
    prop = TensorProperty[adapter.tensor_property_name(f["prop"])]
    return TensorPropertySource(c.convert(f["base"]), prop, f["idx"])


@register_source_converter("OptimizerSource")
def _same_as_base(c: SourceConverter, f: Fields) -> Source:
    return c.convert(f["base"])


_RELABELS = {
    "NNModuleSource": NNModuleSource,
    "UnspecializedNNModuleSource": UnspecializedNNModuleSource,
    "UnspecializedBuiltinNNModuleSource": UnspecializedBuiltinNNModuleSource,
    "FSDPNNModuleSource": FSDPNNModuleSource,
}


def _relabel(cls: type) -> ConvertFn:
    def convert(c: SourceConverter, f: Fields) -> Source:
        return cls(c.convert(f["base"]))

    return convert


for _name, _cls in _RELABELS.items():
    register_source_converter(_name)(_relabel(_cls))
del _name, _cls
