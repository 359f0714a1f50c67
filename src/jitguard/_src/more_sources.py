"""More chained sources, for values a bytecode frontend (TorchDynamo) reads in ways the
core library (``sources``) has no source for. Each keeps the ``name()`` Dynamo gives the same
read, so a converted guard names its value as torch does.

May import: errors, guards, sources.

Every source here reads its value bypassing user overrides, exactly as the C++ accessor
torch uses for it does: ``DictGetItemSource`` through ``dict.__getitem__`` (a dict
subclass's ``__getitem__`` is not run), ``ListGetItemSource`` through ``list.__getitem__``,
``GenericAttrSource`` through ``object.__getattribute__``. Each follows
[Note: Source protocol] in sources.py: ``render`` writes its name, ``access`` reads its value,
and where the generated code must differ from the name (the read that bypasses overrides)
``emit`` too.
"""

from __future__ import annotations

from typing import Any

from .errors import SourceError, SourceTypeError
from .guards import source_dataclass
from .sources import Binder, Chained, ConstDictKeySource, has_literal_form

__all__ = [
    "ClosureCellSource",
    "DictGetItemSource",
    "DictSubclassGetItemSource",
    "GenericAttrSource",
    "ListGetItemSource",
    "TypeDictSource",
    "TypeMROSource",
]

# The getter of ``type.__dict__``: a class's own namespace (as a read-only mapping proxy of
# the real dict), whatever its metaclass says ``__dict__`` is.
_type_namespace = type.__dict__["__dict__"].__get__


@source_dataclass
class DictGetItemSource(Chained):
    """A dict item read with ``dict.__getitem__``: ``L['d']['k']``. ``index`` is a literal key
    or a ``ConstDictKeySource`` on the same dict (the item at that key position, named
    ``L['d'][list(dict.keys(L['d']))[0]]``)."""

    index: Any

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.index, ConstDictKeySource):
            if isinstance(self.base, TypeDictSource):
                raise SourceError("a class namespace item must be given by a literal key")
            if self.index.base != self.base:
                raise SourceError(
                    f"DictGetItemSource key {self.index.name()} is a key of another dict than "
                    f"{self.base.name()}"
                )
        elif not has_literal_form(self.index):
            raise SourceError(
                f"DictGetItemSource key {self.index!r} (a {type(self.index).__name__}) has no "
                f"literal form; use a ConstDictKeySource (the key by position) instead"
            )

    def render(self, base: str, bind: Binder) -> str:
        if isinstance(self.index, ConstDictKeySource):
            return f"{base}[{self.index.render(base, bind)}]"
        return f"{base}[{bind(self.index, 'key')}]"

    def access(self, base_value: Any) -> Any:
        if isinstance(self.base, TypeDictSource):
            # A class namespace: the proxy's lookup is the real dict's.
            return base_value[self.index]
        if isinstance(self.index, ConstDictKeySource):
            return dict.__getitem__(base_value, self.index.access(base_value))
        return dict.__getitem__(base_value, self.index)

    def emit(self, base: str, bind: Binder) -> str:
        if isinstance(self.base, TypeDictSource):
            return f"{base}[{bind(self.index, 'key')}]"
        getitem = bind(dict.__getitem__, "dict_getitem")
        if isinstance(self.index, ConstDictKeySource):
            return f"{getitem}({base}, {self.index.emit(base, bind)})"
        key = bind(self.index, 'key')
        # an exact dict's subscript is dict.__getitem__ itself, without a call (a subclass's
        # own __getitem__ or __missing__ is still bypassed)
        return (f"({base}[{key}] if {bind(type, 'type')}({base}) is {bind(dict, 'dict')} "
                f"else {getitem}({base}, {key}))")

    def emit_on(self, base: str, bind: Binder, base_type: type) -> str:
        # an exact dict, tested earlier in the check: its subscript is dict.__getitem__
        if base_type is dict and not isinstance(self.base, TypeDictSource) \
                and not isinstance(self.index, ConstDictKeySource):
            return f"{base}[{bind(self.index, 'key')}]"
        return self.emit(base, bind)


@source_dataclass
class DictSubclassGetItemSource(DictGetItemSource):
    """An item of a dict subclass read with ``dict.__getitem__``, bypassing the subclass's
    own ``__getitem__`` and ``__missing__`` (Dynamo's ``DictSubclassGetItemSource``): the
    same read as ``DictGetItemSource``, under Dynamo's name for it. The item at a key
    position is ``dict.__getitem__(G['r'], list(dict.keys(G['r']))[0])``, so the name says
    the subclass's subscript is not what runs; an item at a literal key is ``G['r']['k']``."""

    def render(self, base: str, bind: Binder) -> str:
        if isinstance(self.index, ConstDictKeySource):
            return f"dict.__getitem__({base}, {self.index.render(base, bind)})"
        return super().render(base, bind)


@source_dataclass
class ListGetItemSource(Chained):
    """A list item read with ``list.__getitem__``: ``list.__getitem__(L['xs'], 3)``."""

    index: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if type(self.index) is not int:
            raise SourceTypeError(f"ListGetItemSource index must be an int, got {self.index!r}")

    def render(self, base: str, bind: Binder) -> str:
        return f"list.__getitem__({base}, {bind(self.index, 'index')})"

    def access(self, base_value: Any) -> Any:
        return list.__getitem__(base_value, self.index)

    def emit(self, base: str, bind: Binder) -> str:
        return f"{bind(list.__getitem__, 'list_getitem')}({base}, {bind(self.index, 'index')})"


@source_dataclass
class GenericAttrSource(Chained):
    """An attribute read with ``object.__getattribute__`` (no ``__getattr__`` or
    ``__getattribute__`` override runs): ``object.__getattribute__(L['o'], 'a')``."""

    member: str

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.member, str):
            raise SourceTypeError(f"GenericAttrSource member must be a str, got {self.member!r}")

    def render(self, base: str, bind: Binder) -> str:
        return f"object.__getattribute__({base}, {bind(self.member, 'attr')})"

    def access(self, base_value: Any) -> Any:
        return object.__getattribute__(base_value, self.member)

    def emit(self, base: str, bind: Binder) -> str:
        read = bind(object.__getattribute__, "getattribute")
        return f"{read}({base}, {bind(self.member, 'attr')})"


@source_dataclass
class TypeDictSource(Chained):
    """A class's own namespace, ``dict(L['c'].__dict__)`` as Dynamo names it: read as the
    mapping proxy of the class's real dict (``type.__dict__['__dict__']``, so no metaclass
    ``__dict__`` is consulted); items of it are read by key (``DictGetItemSource``)."""

    def render(self, base: str, bind: Binder) -> str:
        return f"dict({base}.__dict__)"

    def access(self, base_value: Any) -> Any:
        return _type_namespace(base_value)

    def emit(self, base: str, bind: Binder) -> str:
        return f"{bind(_type_namespace, 'type_namespace')}({base})"


@source_dataclass
class TypeMROSource(Chained):
    """A class's method resolution order: ``L['t'].__mro__``."""

    def render(self, base: str, bind: Binder) -> str:
        return f"{base}.__mro__"

    def access(self, base_value: Any) -> Any:
        return base_value.__mro__


@source_dataclass
class ClosureCellSource(Chained):
    """What a free variable of a function holds, named as the function's frame sees it:
    ``L['scale']``. ``base`` is a source for the function itself (wherever the caller keeps
    it); the value is ``base.__closure__[index].cell_contents``, read at check time, so a
    cell rebound after compiling is seen. ``var`` is the free variable's name."""

    var: str
    index: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.var, str) or type(self.index) is not int:
            raise SourceTypeError(
                f"ClosureCellSource needs a variable name (a str) and a cell index (an int), "
                f"got {self.var!r}, {self.index!r}"
            )
        if self.index < 0:
            raise SourceError(f"ClosureCellSource cell index must be >= 0, got {self.index!r}")

    def render(self, base: str, bind: Binder) -> str:
        return f"L[{bind(self.var, 'var')}]"  # the name the function's frame gives it

    def access(self, base_value: Any) -> Any:
        return base_value.__closure__[self.index].cell_contents

    def emit(self, base: str, bind: Binder) -> str:
        return f"{base}.__closure__[{bind(self.index, 'cell')}].cell_contents"

