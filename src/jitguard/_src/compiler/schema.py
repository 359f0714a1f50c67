"""The versioned JSON form of a compiled guard set: ``export_guards`` / ``import_guards``.

May import: errors, guards, sources, global_state, compiler.*.

# [Note: Guard set schema]
# A guard set is written as one JSON document (``schema_version`` 1, described by the JSON
# Schema ``guard_set.schema.json`` shipped beside this module). Each guard is one leaf of
# a check function: its kind's name, its sources, and what the kind expects (the params
# the kind took from the frame it was built in), plus the guard's display text.
#   * Sources are written by class and dataclass fields, recursively; a class is found
#     again by name among the loaded ``Source`` subclasses (so user and torch sources need
#     no registration, only to be imported).
#   * Expectations are JSON values, with tagged objects (``{"$": "tuple", ...}``) for what
#     JSON lacks: tuples, non-finite floats, bytes, enum members, dicts with non-string
#     keys, objects held by identity, and registered record types.
#   * An object held by identity is portable when it lives as long as its module (a
#     class, function or module found again at its ``__module__``/``__qualname__``:
#     [Note: Identity binding]). Any other object belongs to this process: the guard is
#     written with ``"portable": false``, its sources and a reason, never dropped. So is a
#     guard whose expectation holds something with no JSON form. Importing keeps such
#     guards; compiling them (``compile_guard_records``) is refused with the reason.
#   * Importing looks classes, functions and modules up in ``sys.modules`` only: a document
#     never makes jitguard import anything.
#   * Types with no dataclass form (``torch.dtype``, a spec holding a C++ checker or a weak
#     reference) are written through a codec (``register_schema_codec``): ``encode`` gives
#     a writable value, ``decode`` rebuilds the object from it (``{"$": "codec", ...}``).
#     A GLOBAL_STATE snapshot is written as its states' names and values; reading it back
#     needs the same guarded states registered ([Note: Portable global state]).
#
# [Note: Re-binding by name]
# A class, function, module, builtin (``torch.relu``: found at ``torch.relu`` though its
# qualname is ``_VariableFunctionsClass.relu``) or a module-level function's code object
# (``F.layer_norm.__code__``) is written by where it lives and read back as the object
# living there in the reading process. That is the meaning an identity guard on such an
# object has in a new process: "the object the program was built against, found again by
# name". It is sound only if the thing found again is the same program text: a guard set
# never carries code, so whoever stores an artifact alongside it must check that the code
# it was built from is unchanged (jitguard.torch.compile does: [Note: Stored captures]).
# A document of a newer ``schema_version`` is refused with ``GuardSchemaError``.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.resources
import json
import math
import sys
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional, Union

from ..errors import GuardSchemaError
from ..guards import Source
from .builder import Leaf
from .check import CheckFunction
from .kinds import GuardKind, create_fn_for, get_guard_kind
from .values import Ident, is_long_lived, type_name

__all__ = [
    "GUARD_SCHEMA_VERSION",
    "GuardRecord",
    "NotPortable",
    "compile_guard_records",
    "export_guards",
    "guard_schema",
    "guards_to_json",
    "import_guards",
    "register_schema_codec",
    "register_schema_type",
    "source_from_json",
    "source_to_json",
]

GUARD_SCHEMA_VERSION = 1
_SCHEMA_FILE = "guard_set.schema.json"
_DOC_KIND = "jitguard.guard_set"


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


# ---- registered record types ----------------------------------------------------------

_record_types: dict[str, type] = {}


def register_schema_type(tp: type) -> type:
    """Let guard-set documents hold instances of ``tp``, a frozen dataclass or NamedTuple
    whose fields are themselves writable (returns ``tp``, so it works as a decorator)."""
    if not (dataclasses.is_dataclass(tp) or _is_namedtuple(tp)):
        raise TypeError(f"register_schema_type takes a dataclass or NamedTuple, got {tp!r}")
    _record_types[_class_key(tp)] = tp
    return tp


_codecs: dict[type, tuple[str, Callable[[Any], Any]]] = {}
_base_codecs: list[tuple[type, tuple[str, Callable[[Any], Any]]]] = []
_decoders: dict[str, Callable[[Any], Any]] = {}


def register_schema_codec(
    tp: type, encode: Callable[[Any], Any], decode: Callable[[Any], Any],
    *, name: Optional[str] = None, subclasses: bool = False,
) -> None:
    """Let guard-set documents hold instances of exactly ``tp`` (with ``subclasses``, of any
    subclass of it): ``encode(obj)`` returns a writable value (raising ``TypeError`` when
    this object has none: its guard is then not portable, with that message as the
    reason), ``decode(value)`` rebuilds the object (raising ``GuardSchemaError`` or
    ``ValueError`` when it cannot). ``name`` (default ``module:qualname`` of ``tp``) is
    what the document records."""
    key = name or _class_key(tp)
    if subclasses:
        _base_codecs.append((tp, (key, encode)))
    else:
        _codecs[tp] = (key, encode)
    _decoders[key] = decode


def _codec_for(tp: type) -> Optional[tuple[str, Callable[[Any], Any]]]:
    codec = _codecs.get(tp)
    if codec is None:
        for base, candidate in _base_codecs:
            if issubclass(tp, base):
                return candidate
    return codec


def _is_namedtuple(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields")


def _class_key(tp: type) -> str:
    return f"{tp.__module__}:{tp.__qualname__}"


def _lookup(module: str, qualname: str) -> Any:
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


# ---- values ----------------------------------------------------------------------------


def _encode(value: Any) -> Any:
    tp = type(value)
    if value is None or tp is bool or tp is int or tp is str:
        return value
    if tp is float:
        if math.isfinite(value):
            return value
        return {"$": "float", "value": "nan" if math.isnan(value) else str(value)}
    if tp is list:
        return [_encode(v) for v in value]
    if tp is Ident:
        return _encode_ident(value)
    if tp is NotPortable:
        raise _Unencodable(value.type, value.id)
    if isinstance(value, Source):
        return {"$": "source", "source": _encode_source(value)}
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
        return {"$": "enum", "class": _class_key(tp), "member": value.name}
    codec = _codec_for(tp)
    if codec is not None:
        key, encode = codec
        try:
            raw = encode(value)
        except TypeError as e:
            raise _Unencodable(str(e)) from None
        return {"$": "codec", "type": key, "value": _encode(raw)}
    if _class_key(tp) in _record_types:
        if _is_namedtuple(tp):
            fields = dict(zip(tp._fields, value, strict=True))
        else:
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {
            "$": "record",
            "class": _class_key(tp),
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
    """Where a builtin exported under another name, or a module-level function's code
    object, is found again ([Note: Re-binding by name]); None if nowhere."""
    if isinstance(obj, types.BuiltinFunctionType):
        module = getattr(obj, "__module__", None)
        name = getattr(obj, "__name__", None)
        mod = sys.modules.get(module) if isinstance(module, str) else None
        if mod is not None and isinstance(name, str) and vars(mod).get(name) is obj:
            return {"$": "object", "class": f"{module}:{name}"}
        return None
    if isinstance(obj, types.CodeType):
        qualname = getattr(obj, "co_qualname", obj.co_name)
        if "<" in qualname:
            return None
        for mod_name, mod in list(sys.modules.items()):
            if getattr(mod, "__file__", None) != obj.co_filename:
                continue
            try:
                fn = _lookup(mod_name, qualname)
            except GuardSchemaError:
                continue
            if getattr(fn, "__code__", None) is obj:
                return {"$": "object", "code": f"{mod_name}:{qualname}"}
    return None


def _decode(data: Any, where: str) -> Any:
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [_decode(v, where) for v in data]
    if not isinstance(data, dict) or "$" not in data:
        raise GuardSchemaError(f"{where}: {data!r} is not a guard-set value")
    tag = data["$"]
    try:
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
            if "const" in data:
                if data["const"] not in (None, True, False):
                    raise GuardSchemaError(f"{where}: {data['const']!r} is not None, True or False")
                return Ident(data["const"])
            if "module" in data:
                obj = sys.modules.get(data["module"])
                if obj is None:
                    raise GuardSchemaError(f"{where}: module {data['module']} is not loaded")
                return Ident(obj)
            if "code" in data:
                module, _, qualname = data["code"].partition(":")
                code = getattr(_lookup(module, qualname), "__code__", None)
                if not isinstance(code, types.CodeType):
                    raise GuardSchemaError(f"{where}: {data['code']} is not a Python function")
                return Ident(code)
            module, _, qualname = data["class"].partition(":")
            return Ident(_lookup(module, qualname))
        if tag == "source":
            return _decode_source(data["source"], where)
        if tag == "record":
            tp = _record_types.get(data["class"])
            if tp is None:
                raise GuardSchemaError(
                    f"{where}: record type {data['class']} is not registered in this process "
                    f"(register_schema_type)"
                )
            fields = {k: _decode(v, where) for k, v in data["fields"].items()}
            return tp(**fields)
        if tag == "codec":
            decode = _decoders.get(data["type"])
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
    todo = [Source]
    seen: set[type] = set()
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
                out.setdefault(sub.__name__, []).append(sub)
                out.setdefault(_class_key(sub), []).append(sub)
    _classes_memo.clear()
    _classes_memo.update(out)
    return out


def _source_type_name(cls: type) -> str:
    """Short for jitguard's own sources, ``module:qualname`` for anyone else's."""
    if cls.__module__.startswith("jitguard."):
        return cls.__name__
    return _class_key(cls)


def _encode_source(source: Source) -> dict[str, Any]:
    if not dataclasses.is_dataclass(source):
        raise _Unencodable(f"a {type(source).__name__} source (not a dataclass)")
    fields = {
        f.name: _encode(getattr(source, f.name))
        for f in dataclasses.fields(source)
        if f.init
    }
    return {"type": _source_type_name(type(source)), "name": source.name(), "fields": fields}


def _decode_source(data: Any, where: str) -> Source:
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


# ---- guard records ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class GuardRecord:
    """One guard of a guard-set document: a kind (by name), its sources, what it expects,
    and its display text. ``portable`` is False when the expectation belongs to the
    process that wrote it; ``reason`` then says why, and ``params`` holds ``NotPortable``.
    """

    kind: str
    sources: tuple[Source, ...]
    params: Any
    code: str
    portable: bool = True
    reason: Optional[str] = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name() for s in self.sources)

    def guard_kind(self) -> GuardKind:
        """The registered kind of this name (loading integrations when needed)."""
        if self.kind == "SHAPE_ENV" and self.params is not None:
            # A shape guard's leaf is of the unregistered kind that checks its expression;
            # the registered SHAPE_ENV is the marker on ShapeEnvSource(), which checks nothing.
            from .shape import _SHAPE

            return _SHAPE
        try:
            kind, _ = get_guard_kind(create_fn_for(self.kind))
        except AttributeError:
            raise GuardSchemaError(
                f"the guard on {', '.join(self.names)} is of kind {self.kind}, which is not "
                f"registered in this process"
            ) from None
        return kind

    def to_leaf(self) -> Leaf:
        """The check this record stands for, ready for ``compile_guard_records``."""
        if not self.portable:
            raise GuardSchemaError(
                f"the {self.kind} guard on {', '.join(self.names)} is not portable: "
                f"{self.reason}; it must be rebuilt from a live frame"
            )
        return Leaf(self.guard_kind(), self.sources, self.params)


def _leaves_of(guards: Union[CheckFunction, Iterable[Leaf]]) -> list[Leaf]:
    if isinstance(guards, CheckFunction):
        return list(guards.leaves)
    return list(guards)


def _record_of(leaf: Leaf) -> dict[str, Any]:
    code = leaf.code()
    sources = [_encode_source(s) for s in leaf.sources]
    out: dict[str, Any] = {"kind": leaf.kind.name, "sources": sources, "code": code}
    try:
        out["expect"] = _encode(leaf.params)
        out["portable"] = True
    except _Unencodable as e:
        out["expect"] = {"$": "not_portable", "type": e.what}
        if e.ident is not None:
            out["expect"]["id"] = e.ident
        out["portable"] = False
        out["reason"] = f"expects {e.what}"
    return out


def export_guards(
    guards: Union[CheckFunction, Iterable[Leaf], Iterable[GuardRecord]],
    *,
    name: Optional[str] = None,
    arg_names: Optional[Sequence[str]] = None,
) -> dict[str, Any]:
    """The guard-set document (a JSON-ready dict) of a ``CheckFunction``, of leaves, or of
    imported ``GuardRecord``s; ``name``/``arg_names`` default to the check function's.
    See [Note: Guard set schema]."""
    doc: dict[str, Any] = {"schema_version": GUARD_SCHEMA_VERSION, "kind": _DOC_KIND}
    if isinstance(guards, CheckFunction):
        name = guards.name if name is None else name
        arg_names = guards.arg_names if arg_names is None else arg_names
    if name is not None:
        doc["name"] = name
    doc["arg_names"] = list(arg_names) if arg_names is not None else None
    records = []
    for item in (guards.leaves if isinstance(guards, CheckFunction) else guards):
        if isinstance(item, GuardRecord):
            records.append(_record_of_record(item))
        else:
            records.append(_record_of(item))
    doc["guards"] = records
    return doc


def _record_of_record(rec: GuardRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": rec.kind,
        "sources": [_encode_source(s) for s in rec.sources],
        "code": rec.code,
    }
    if rec.portable:
        out["expect"] = _encode(rec.params)
        out["portable"] = True
    else:
        np = rec.params if isinstance(rec.params, NotPortable) else NotPortable("?")
        out["expect"] = {"$": "not_portable", "type": np.type}
        if np.id is not None:
            out["expect"]["id"] = np.id
        out["portable"] = False
        out["reason"] = rec.reason
    return out


def import_guards(doc: Union[Mapping[str, Any], str]) -> list[GuardRecord]:
    """The guards of a guard-set document (a dict, or its JSON text). Non-portable guards
    are kept (``portable=False``); a newer ``schema_version`` is refused."""
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except json.JSONDecodeError as e:
            raise GuardSchemaError(f"a guard set must be JSON: {e}") from None
    if not isinstance(doc, Mapping):
        raise GuardSchemaError(f"a guard set is a JSON object, got {type(doc).__name__}")
    version = doc.get("schema_version")
    if type(version) is not int:
        raise GuardSchemaError(f"not a jitguard guard set: schema_version is {version!r}")
    if version > GUARD_SCHEMA_VERSION:
        raise GuardSchemaError(
            f"this guard set has schema_version {version}, written by a newer jitguard; this "
            f"one reads up to {GUARD_SCHEMA_VERSION} (upgrade jitguard)"
        )
    if version < 1 or doc.get("kind") != _DOC_KIND or not isinstance(doc.get("guards"), list):
        raise GuardSchemaError(f"not a jitguard guard set (kind {doc.get('kind')!r})")
    out = []
    for i, g in enumerate(doc["guards"]):
        where = f"guard {i}"
        if not isinstance(g, Mapping) or not isinstance(g.get("sources"), list):
            raise GuardSchemaError(f"{where}: {g!r} is not a guard")
        try:
            kind, code, portable = str(g["kind"]), str(g["code"]), bool(g["portable"])
            expect = g["expect"]
        except KeyError as e:
            raise GuardSchemaError(f"{where}: missing {e.args[0]!r}") from None
        sources = tuple(_decode_source(s, where) for s in g["sources"])
        where = f"the {kind} guard on {', '.join(s.name() for s in sources)}"
        params = _decode(expect, where)
        if portable == isinstance(params, NotPortable):
            raise GuardSchemaError(f"{where}: 'portable' disagrees with its expectation")
        out.append(GuardRecord(kind, sources, params, code, portable, g.get("reason")))
    return out


def guards_to_json(
    guards: Union[CheckFunction, Iterable[Leaf], Iterable[GuardRecord]], **dumps: Any
) -> str:
    """``export_guards`` as JSON text (keyword arguments go to ``json.dumps``)."""
    return json.dumps(export_guards(guards), allow_nan=False, **dumps)


def compile_guard_records(
    records: Iterable[GuardRecord],
    *,
    arg_names: Optional[Sequence[str]] = None,
    f_globals: Optional[Mapping[str, Any]] = None,
    name: str = "guards",
) -> CheckFunction:
    """A check function from imported records, with no frame to build from (what each guard
    expects is in the record). Every record must be portable."""
    from .codegen import leaf_order_key

    leaves = sorted((r.to_leaf() for r in records), key=leaf_order_key)
    args = tuple(arg_names) if arg_names is not None else None
    return CheckFunction(leaves, [], name=name, arg_names=args, f_globals=f_globals)


def guard_schema() -> dict[str, Any]:
    """The JSON Schema of guard-set documents (shipped in the package)."""
    text = importlib.resources.files(__package__).joinpath(_SCHEMA_FILE).read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema




# ---- portable global state -------------------------------------------------------------

# [Note: Portable global state]
# A GLOBAL_STATE snapshot is written as the names of the states it checks with their
# values, and the names of every state registered in the writing process. Reading it
# rebuilds the snapshot over this process's registered states of those names: a checked
# name not registered here, or a state guarded here that the writer did not know of (a
# state the artifact may depend on that nobody looked at), makes the guard unreadable. A
# state the writer knew and left out (unguarded, or left out by the compiler with
# ``states=``) stays out. A group checker is used only when every member's value now is the
# recorded one (its snapshot then pins exactly the recorded values); otherwise those states
# are compared one by one against the recorded values.


def _encode_snapshot(snap: Any) -> Any:
    from ..global_state import global_states

    return {"values": [[state.name, value] for state, value in snap.values],
            "known": sorted(s.name for s in global_states.states())}


def _decode_snapshot(data: Any) -> Any:
    from ..global_state import GlobalStateSnapshot, global_states

    pairs, known = data["values"], set(data["known"])
    names = [str(name) for name, _ in pairs]
    recorded = {str(n): v for n, v in pairs}
    unknown = {s.name for s in global_states.guarded()} - known
    if unknown:
        raise GuardSchemaError(
            f"GLOBAL_STATE was written where the state(s) {sorted(unknown)} guarded in this "
            f"process did not exist; the stored entry may depend on them"
        )
    try:
        states = global_states.named(names)
    except Exception as e:
        raise GuardSchemaError(f"GLOBAL_STATE: {e}") from None
    values = tuple((s, recorded[s.name]) for s in states)
    checks = []
    covered: set[int] = set()
    for group in global_states.covering(states):
        try:
            same = all(m.read() == recorded[m.name] for m in group.members)
        except Exception:
            same = False
        if same:
            checks.append((group, group.snapshot()))
            covered.update(id(m) for m in group.members)
    rest = tuple((s, v) for s, v in values if id(s) not in covered)
    return GlobalStateSnapshot(values, tuple(checks), rest)


def _register_core_types() -> None:
    from ..global_state import GlobalStateSnapshot
    from .python_kinds import _AttrsSpec, _ClassAttr, _ClassAttrsSpec

    register_schema_codec(GlobalStateSnapshot, _encode_snapshot, _decode_snapshot,
                          name="jitguard:GlobalStateSnapshot")
    register_schema_type(_AttrsSpec)
    register_schema_type(_ClassAttr)
    register_schema_type(_ClassAttrsSpec)


_register_core_types()
