"""The value codec of guard-set documents: JSON values and tagged objects, sources,
registered record types and codecs, and objects held by identity re-bound by name
([Note: Guard set schema] in compiler/schema.py says what a document holds).

May import: _util, errors, guards, compiler.values, compiler.schema_homes,
compiler.schema_registry (whose two public names it re-exports).

# [Note: Re-binding by name]
# A class, function, module, builtin (``torch.relu``: found at ``torch.relu`` though its
# qualname is ``_VariableFunctionsClass.relu``), a function's code object, found from the
# module-level function or class of its qualname (``F.layer_norm.__code__``), through the
# ``__wrapped__`` chain of a decorated one, and for a nested function
# (``deco.<locals>.wrapper``) as the one code object of that qualname among the outer
# code's constants (none or two, as for two lambdas, is not portable), or a member of a
# module-level enum class (``Color.RED``:
# the class found at its ``__module__``/``__qualname__``, the member by name, refused on
# reading unless its value is still the recorded one) is written by where it lives and
# read back as the object living there in the reading process. That is the meaning an
# identity guard on such an object has in a new process: "the object the program was built against, found again by
# name". It is sound only if the thing found again is the same program text: a guard set
# never carries code, so whoever stores an artifact alongside it must check that the code
# it was built from is unchanged (jitguard.torch.compile does: [Note: Stored captures]).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import enum
import json
import math
import struct
import sys
import types
from collections.abc import Iterator, Mapping
from typing import Any, Optional

from .._util import JSON_INT_BITS, all_subclasses
from ..errors import GuardSchemaError
from ..guards import Source
from .schema_homes import (
    class_home,
    class_key,
    code_home,
    decode_class,
    decode_code,
    decode_instance,
    instance_home,
)
from .schema_homes import lookup as _lookup
from .schema_registry import (
    codec_for,
    decoders,
    is_namedtuple,
    record_types,
    register_schema_codec,
    register_schema_type,
)
from .values import Ident, is_long_lived, type_name

__all__ = [
    "NotPortable",
    "register_schema_codec",
    "register_schema_type",
    "source_from_json",
    "source_table",
    "source_to_json",
]


@dataclasses.dataclass(frozen=True)
class NotPortable:
    """Stands, after import, for an expectation that belongs to the process that wrote it
    (an object held by identity, or a value with no JSON form)."""

    type: str
    id: Optional[int] = None

    def __repr__(self) -> str:
        at = f" at {hex(self.id)}" if self.id is not None else ""
        return f"<not portable: {self.type}{at}>"


class _Unencodable(Exception):
    def __init__(self, what: str, ident: Optional[int] = None) -> None:
        super().__init__(what)
        self.what = what
        self.ident = ident


# ---- values ----------------------------------------------------------------------------


def _encode(value: Any) -> Any:
    tp = type(value)
    if tp is int and value.bit_length() > JSON_INT_BITS:
        raise _Unencodable(f"an int of {value.bit_length()} bits (too long for JSON text)")
    if value is None or tp is bool or tp is int or tp is str:
        return value
    if tp is float:
        if math.isfinite(value):
            return value
        bits = struct.pack("<d", value)
        if math.isnan(value) and bits != struct.pack("<d", float("nan")):
            # "nan" reads back as float("nan"): a NaN of another sign or payload would come
            # back as another value (EQUALS_MATCH tells NaNs apart by their bits)
            raise _Unencodable(f"a NaN of bits {bits.hex()} (only float('nan') has a JSON form)")
        return {"$": "float", "value": "nan" if math.isnan(value) else str(value)}
    if tp is list:
        return [_encode(v) for v in value]
    if tp is Ident:
        return _encode_ident(value)
    if tp is NotPortable:
        raise _Unencodable(value.type, value.id)
    if isinstance(value, Source):
        written = _encode_source(value)
        return written if "$" in written else {"$": "source", "source": written}
    if tp is tuple:
        return {"$": "tuple", "items": [_encode(v) for v in value]}
    if tp is frozenset or tp is set:
        # Sorted by their JSON text: the same set gives the same document in every process.
        items = sorted((_encode(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
        return {"$": tp.__name__, "items": items}
    if tp is dict:
        return {"$": "dict", "items": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if tp is complex:
        return {"$": "complex", "real": _encode(value.real), "imag": _encode(value.imag)}
    if tp is bytes:
        return {"$": "bytes", "hex": value.hex()}
    if tp is slice or tp is range:
        return {
            "$": tp.__name__,
            "start": _encode(value.start),
            "stop": _encode(value.stop),
            "step": _encode(value.step),
        }
    if issubclass(tp, enum.Enum):
        if not is_long_lived(tp):
            raise _Unencodable(f"a member of {type_name(tp)}, a class of this process")
        return {"$": "enum", "class": class_key(tp), "member": value.name}
    codec = codec_for(tp)
    if codec is not None:
        key, encode = codec
        try:
            raw = encode(value)
        except TypeError as e:
            raise _Unencodable(str(e)) from None
        return {"$": "codec", "type": key, "value": _encode(raw)}
    if class_key(tp) in record_types:
        if is_namedtuple(tp):
            fields = dict(zip(tp._fields, value, strict=True))
        else:
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {
            "$": "record",
            "class": class_key(tp),
            "fields": {k: _encode(v) for k, v in fields.items()},
        }
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType,
                          types.CodeType)):
        return _encode_ident(Ident(value))
    raise _Unencodable(f"a {type_name(tp)} (no JSON form; see register_schema_type)")


def _encode_ident(ident: Ident) -> Any:
    obj = ident.get()
    if obj is None and ident.is_weak:
        raise _Unencodable(f"a deallocated {ident.type_name}", ident.id)
    if obj is None or obj is True or obj is False:
        return {"$": "object", "const": obj}
    if isinstance(obj, types.ModuleType) and is_long_lived(obj):
        return {"$": "object", "module": obj.__name__}
    if is_long_lived(obj):
        return {"$": "object", "class": f"{obj.__module__}:{obj.__qualname__}"}
    home = _home_by_name(obj)
    if home is not None:  # [Note: Re-binding by name]
        return home
    raise _Unencodable(f"a {ident.type_name} of this process, held by identity", ident.id)


def _home_by_name(obj: Any) -> Optional[dict[str, Any]]:
    """Where a builtin exported under another name, a module-level function's code
    object, or a member of a module-level enum class is found again ([Note: Re-binding by
    name]); None if nowhere."""
    if issubclass(type(obj), enum.Enum):  # type(), never __class__, which a proxy may fake
        return _enum_home(obj)
    if isinstance(obj, types.BuiltinFunctionType):
        module = getattr(obj, "__module__", None)
        name = getattr(obj, "__name__", None)
        mod = sys.modules.get(module) if isinstance(module, str) else None
        if mod is not None and isinstance(name, str) and vars(mod).get(name) is obj:
            return {"$": "object", "class": f"{module}:{name}"}
        return None
    if isinstance(obj, types.CodeType):
        return code_home(obj)
    if isinstance(obj, type):
        return class_home(obj)  # [Note: Classes made at run time]
    if isinstance(obj, (types.FunctionType, types.ModuleType)):
        return None
    return instance_home(obj)  # [Note: Objects found at module level]


def _enum_home(member: enum.Enum) -> Optional[dict[str, Any]]:
    """An enum member by its class's home, its name and its value; None when the class is
    not found at its ``__module__``/``__qualname__``, the member is not that class's
    member of its name, or its value has no JSON form (nothing to check it by)."""
    cls = type(member)
    if not is_long_lived(cls):
        return None
    name = member._name_
    if not isinstance(name, str) or cls.__members__.get(name) is not member:
        return None
    try:
        value = _encode(member._value_)
    except _Unencodable:
        return None
    return {"$": "object", "enum": class_key(cls), "member": name, "value": value}


def _decode_enum_member(data: Mapping[str, Any], where: str) -> enum.Enum:
    """The member ``_enum_home`` wrote, found again by class and name, refused unless its
    value is still the recorded one ([Note: Re-binding by name])."""
    module, _, qualname = data["enum"].partition(":")
    cls = _lookup(module, qualname)
    if not (isinstance(cls, type) and issubclass(cls, enum.Enum)):
        raise GuardSchemaError(f"{where}: {data['enum']} is not an enum class")
    member = cls.__members__.get(data["member"])
    if member is None:
        raise GuardSchemaError(f"{where}: {data['enum']} has no member {data['member']!r}")
    recorded = _decode(data["value"], where)
    if type(member._value_) is not type(recorded) or member._value_ != recorded:
        raise GuardSchemaError(
            f"{where}: {data['enum']}.{data['member']} is {member._value_!r} in this "
            f"process, {recorded!r} where the guard set was written (the enum changed)"
        )
    return member


def _decode_object(data: dict[str, Any], where: str) -> Ident:
    """An object held by identity (``{"$": "object", ...}``)."""
    if "const" in data:
        if data["const"] not in (None, True, False):
            raise GuardSchemaError(f"{where}: {data['const']!r} is not None, True or False")
        return Ident(data["const"])
    if "module" in data:
        obj = sys.modules.get(data["module"])
        if obj is None:
            raise GuardSchemaError(f"{where}: module {data['module']} is not loaded")
        return Ident(obj)
    if "enum" in data:
        return Ident(_decode_enum_member(data, where))
    if "code" in data:
        return Ident(decode_code(data, where))
    if "type_of" in data:
        return Ident(decode_class(data, where))
    if "instance_of" in data:
        return Ident(decode_instance(data, where))
    module, _, qualname = data["class"].partition(":")
    return Ident(_lookup(module, qualname))


def _decode(data: Any, where: str) -> Any:
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [_decode(v, where) for v in data]
    if not isinstance(data, dict) or "$" not in data:
        raise GuardSchemaError(f"{where}: {data!r} is not a guard-set value")
    tag = data["$"]
    try:
        if tag == "ref":  # the most common tags first
            return _decode_ref(data, where)
        if tag == "float":
            return float(data["value"])
        if tag == "tuple":
            return tuple(_decode(v, where) for v in data["items"])
        if tag == "frozenset":
            return frozenset(_decode(v, where) for v in data["items"])
        if tag == "set":
            return {_decode(v, where) for v in data["items"]}
        if tag == "dict":
            return {_decode(k, where): _decode(v, where) for k, v in data["items"]}
        if tag == "complex":
            return complex(_decode(data["real"], where), _decode(data["imag"], where))
        if tag == "bytes":
            return bytes.fromhex(data["hex"])
        if tag in ("slice", "range"):
            parts = [_decode(data[k], where) for k in ("start", "stop", "step")]
            return slice(*parts) if tag == "slice" else range(*parts)
        if tag == "enum":
            module, _, qualname = data["class"].partition(":")
            return _lookup(module, qualname)[data["member"]]
        if tag == "object":
            table = _table.get()
            if table is None:
                return _decode_object(data, where)
            try:
                key = tuple(data.items())
                got = table.objects.get(key)
            except TypeError:  # a nested spec (a code object's): not shared
                return _decode_object(data, where)
            if got is None:
                got = table.objects[key] = _decode_object(data, where)
            return got
        if tag == "source":
            return _decode_source(data["source"], where)
        if tag == "record":
            tp = record_types.get(data["class"])
            if tp is None:
                raise GuardSchemaError(
                    f"{where}: record type {data['class']} is not registered in this process "
                    f"(register_schema_type)"
                )
            fields = {k: _decode(v, where) for k, v in data["fields"].items()}
            return tp(**fields)
        if tag == "codec":
            decode = decoders.get(data["type"])
            if decode is None:
                raise GuardSchemaError(
                    f"{where}: no codec for {data['type']} in this process (import the "
                    f"module that registers it: register_schema_codec)"
                )
            try:
                return decode(_decode(data["value"], where))
            except (GuardSchemaError, TypeError, ValueError) as e:
                raise GuardSchemaError(f"{where}: {e}") from None
        if tag == "not_portable":
            return NotPortable(data["type"], data.get("id"))
    except GuardSchemaError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise GuardSchemaError(f"{where}: malformed {tag!r} value {data!r}: {e}") from None
    raise GuardSchemaError(f"{where}: unknown value tag {tag!r}")


# ---- sources ---------------------------------------------------------------------------


_classes_memo: dict[str, list[type]] = {}


def _source_classes(name: Optional[str] = None) -> dict[str, list[type]]:
    """Every loaded ``Source`` subclass by name and by ``module:qualname``. Walked again
    only when ``name`` is not among those already found (a module loaded since)."""
    if _classes_memo and (name is None or name in _classes_memo):
        return _classes_memo
    out: dict[str, list[type]] = {}
    for sub in all_subclasses(Source):
        out.setdefault(sub.__name__, []).append(sub)
        out.setdefault(class_key(sub), []).append(sub)
    _classes_memo.clear()
    _classes_memo.update(out)
    return out


def _source_type_name(cls: type) -> str:
    """Short for jitguard's own sources, ``module:qualname`` for anyone else's."""
    if cls.__module__.startswith("jitguard."):
        return cls.__name__
    return class_key(cls)


class _Table:
    """The source table of one document being written or read (schema_version 2,
    [Note: Guard set schema]): its rows, and each source's row (writing) or each row's
    source once built (reading), and (reading) each object held by identity found once by
    what names it (thousands of guards pin a few classes: one lookup and one ``Ident``
    each)."""

    __slots__ = ("built", "ceiling", "index", "objects", "rows")

    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows
        self.index: dict[Source, int] = {}
        self.built: dict[int, Source] = {}
        self.objects: dict[tuple[Any, ...], Ident] = {}
        self.ceiling = len(rows)  # a row may refer only to rows before it


_table: contextvars.ContextVar[Optional[_Table]] = contextvars.ContextVar(
    "jitguard_source_table", default=None)


@contextlib.contextmanager
def source_table(rows: Optional[list[Any]] = None) -> Iterator[list[Any]]:
    """While open, on this thread: each source written goes once into the table (the list
    yielded) and is written as ``{"$": "ref", "i": row}``; given the ``rows`` of a
    document read, its references are read from them."""
    token = _table.set(_Table([] if rows is None else rows))
    try:
        yield _table.get().rows  # type: ignore[union-attr]
    finally:
        _table.reset(token)


def _encode_source(source: Source) -> dict[str, Any]:
    table = _table.get()
    if table is None:
        return _source_row(source)
    row = table.index.get(source)
    if row is None:
        written = _source_row(source)  # its own sources first: a row refers back only
        row = table.index[source] = len(table.rows)
        table.rows.append(written)
    return {"$": "ref", "i": row}


def _source_row(source: Source) -> dict[str, Any]:
    if not dataclasses.is_dataclass(source):
        raise _Unencodable(f"a {type(source).__name__} source (not a dataclass)")
    fields = {
        f.name: _encode(getattr(source, f.name))
        for f in dataclasses.fields(source)
        if f.init
    }
    return {"type": _source_type_name(type(source)), "name": source.name(), "fields": fields}


def _decode_ref(data: Any, where: str) -> Source:
    """The source of table row ``data["i"]``, built once per document."""
    table = _table.get()
    i = data.get("i")
    if table is None or type(i) is not int or not 0 <= i < table.ceiling:
        raise GuardSchemaError(
            f"{where}: {data!r} refers to no earlier row of the document's source table")
    source = table.built.get(i)
    if source is None:
        outer, table.ceiling = table.ceiling, i
        try:
            source = table.built[i] = _decode_source(table.rows[i], where)
        finally:
            table.ceiling = outer
    return source


def _decode_source(data: Any, where: str) -> Source:
    if isinstance(data, dict) and data.get("$") == "ref":
        return _decode_ref(data, where)
    if not isinstance(data, dict) or "type" not in data or "fields" not in data:
        raise GuardSchemaError(f"{where}: {data!r} is not a source")
    classes = _source_classes(data["type"]).get(data["type"], [])
    if len(classes) != 1:
        what = "no loaded Source subclass" if not classes else "several Source subclasses"
        raise GuardSchemaError(
            f"{where}: {what} named {data['type']!r} (import the module that defines it)"
        )
    fields = {k: _decode(v, where) for k, v in data["fields"].items()}
    try:
        source = classes[0](**fields)
    except TypeError as e:
        raise GuardSchemaError(f"{where}: cannot rebuild {data['type']}: {e}") from None
    assert isinstance(source, Source)
    return source


def source_to_json(source: Source) -> dict[str, Any]:
    """A source as the guard-set documents write it (``GuardSchemaError`` when it has no
    JSON form)."""
    try:
        return _encode_source(source)
    except _Unencodable as e:
        raise GuardSchemaError(f"{source.name()} has no JSON form: {e.what}") from None


def source_from_json(data: Any) -> Source:
    """The source ``source_to_json`` wrote (looked up among loaded classes only)."""
    return _decode_source(data, "source")
