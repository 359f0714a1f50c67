"""The versioned JSON form of a compiled guard set: ``export_guards`` / ``import_guards``,
the document and guard-record layer over the value codec of ``compiler/schema_values.py``
(whose names this module re-exports).

May import: errors, guards, sources, global_state, compiler.*.

# [Note: Guard set schema]
# A guard set is written as one JSON document (described by the JSON Schema
# ``guard_set.schema.json`` shipped beside this module). Each guard is one leaf of a check
# function: its kind's name, its sources, and what the kind expects (the params the kind
# took from the frame it was built in), plus the guard's display text.
#   * Sources are written by class and dataclass fields, recursively; a class is found
#     again by name among the loaded ``Source`` subclasses (so user and torch sources need
#     no registration, only to be imported).
#   * ``schema_version`` 1 writes each source in full wherever it is used. 2 (what the
#     store writes, ``shared_sources=True``) writes each distinct source once, as a row of
#     the document's ``source_table`` whose fields refer to earlier rows, and every use
#     (a guard's source, a source in an expectation or in another source) as
#     ``{"$": "ref", "i": row}``: a 12-layer GPT-2's 2,300 guard sources are 33,700
#     nested sources written in full, and a few thousand rows in the table. Reading builds
#     each row once; a reference to a row that is not earlier is refused, so a table
#     cannot loop.
#   * Expectations are JSON values, with tagged objects (``{"$": "tuple", ...}``) for what
#     JSON lacks: tuples, non-finite floats, bytes, enum members, dicts with non-string
#     keys, objects held by identity, and registered record types.
#   * An object held by identity is portable when it lives as long as its module (a
#     class, function or module found again at its ``__module__``/``__qualname__``:
#     [Note: Identity binding]), or is found again by name (a builtin, a function's code
#     object, a member of such an enum class: [Note: Re-binding by name]). Any other object belongs to this process: the guard is
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
#   * A document of a newer ``schema_version`` is refused with ``GuardSchemaError``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.resources
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional, Union

from ..errors import GuardSchemaError
from ..guards import Source
from .builder import Leaf
from .check import CheckFunction
from .kinds import GuardKind, create_fn_for, get_guard_kind
from .schema_homes import module_objects
from .schema_values import (
    NotPortable,
    _decode,
    _decode_source,
    _encode,
    _encode_source,
    _Unencodable,
    register_schema_codec,
    register_schema_type,
    source_from_json,
    source_table,
    source_to_json,
)

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
    "source_names",
    "source_to_json",
]

GUARD_SCHEMA_VERSION = 2  # the newest this jitguard writes and reads
_SCHEMA_FILE = "guard_set.schema.json"
_DOC_KIND = "jitguard.guard_set"


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
        """The kind that checks this record: the registered kind of its name (loading
        integrations when needed), or the one it says stands for a record with these params
        (``GuardKind.recorded_as``: a shape guard's leaf is of the unregistered kind that
        checks its expression, the registered SHAPE_ENV only the marker on ShapeEnvSource())."""
        try:
            kind, _ = get_guard_kind(create_fn_for(self.kind))
        except AttributeError:
            raise GuardSchemaError(
                f"the guard on {', '.join(self.names)} is of kind {self.kind}, which is not "
                f"registered in this process"
            ) from None
        return kind.recorded_as(self.params)

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
    sources = [source_to_json(s) for s in leaf.sources]  # GuardSchemaError if one has no form
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
    shared_sources: bool = False,
) -> dict[str, Any]:
    """The guard-set document (a JSON-ready dict) of a ``CheckFunction``, of leaves, or of
    imported ``GuardRecord``s; ``name``/``arg_names`` default to the check function's.
    ``shared_sources``: write each source once, in the document's ``source_table``
    (schema_version 2: smaller, and faster to read, where many guards share the bases of
    their sources); otherwise each source in full where it is used (schema_version 1).
    See [Note: Guard set schema]."""
    doc: dict[str, Any] = {"schema_version": 2 if shared_sources else 1, "kind": _DOC_KIND}
    if isinstance(guards, CheckFunction):
        name = guards.name if name is None else name
        arg_names = guards.arg_names if arg_names is None else arg_names
    if name is not None:
        doc["name"] = name
    doc["arg_names"] = list(arg_names) if arg_names is not None else None
    records = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(module_objects())  # [Note: Objects found at module level]
        if shared_sources:
            doc["source_table"] = stack.enter_context(source_table())
        for item in (guards.leaves if isinstance(guards, CheckFunction) else guards):
            if isinstance(item, GuardRecord):
                records.append(_record_of_record(item))
            else:
                records.append(_record_of(item))
    doc["guards"] = records
    return doc


def source_names(doc: Mapping[str, Any], guard: Mapping[str, Any]) -> list[str]:
    """The names of a written guard's sources, in a document of either schema version."""
    table = doc.get("source_table") or []
    rows = [table[s["i"]] if s.get("$") == "ref" else s for s in guard["sources"]]
    return [str(r["name"]) for r in rows]


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
    rows = doc.get("source_table", []) if version >= 2 else []
    if not isinstance(rows, list):
        raise GuardSchemaError(f"source_table is a list, got {type(rows).__name__}")
    with source_table(rows):
        return _import_records(doc["guards"])


def _import_records(guards: list[Any]) -> list[GuardRecord]:
    out = []
    for i, g in enumerate(guards):
        where = f"guard {i}"
        if not isinstance(g, Mapping) or not isinstance(g.get("sources"), list):
            raise GuardSchemaError(f"{where}: {g!r} is not a guard")
        try:
            kind, code, portable = str(g["kind"]), str(g["code"]), bool(g["portable"])
            expect = g["expect"]
        except KeyError as e:
            raise GuardSchemaError(f"{where}: missing {e.args[0]!r}") from None
        sources = tuple(_decode_source(s, where) for s in g["sources"])
        try:
            params = _decode(expect, where)
            if portable == isinstance(params, NotPortable):
                raise GuardSchemaError(f"{where}: 'portable' disagrees with its expectation")
        except GuardSchemaError as e:
            # named by its sources only when it is refused (naming thousands costs)
            message = str(e)
            if message.startswith(where):
                named = f"the {kind} guard on {', '.join(s.name() for s in sources)}"
                message = named + message[len(where):]
            raise GuardSchemaError(message) from None
        out.append(GuardRecord(kind, sources, params, code, portable, g.get("reason")))
    return out


def guards_to_json(
    guards: Union[CheckFunction, Iterable[Leaf], Iterable[GuardRecord]], *,
    shared_sources: bool = False, **dumps: Any
) -> str:
    """``export_guards`` as JSON text (other keyword arguments go to ``json.dumps``)."""
    doc = export_guards(guards, shared_sources=shared_sources)
    return json.dumps(doc, allow_nan=False, **dumps)


def compile_guard_records(
    records: Iterable[GuardRecord],
    *,
    arg_names: Optional[Sequence[str]] = None,
    f_globals: Optional[Mapping[str, Any]] = None,
    name: str = "guards",
    deferred: bool = False,
) -> CheckFunction:
    """A check function from imported records, with no frame to build from (what each guard
    expects is in the record). Every record must be portable. ``deferred``: generate its
    code when first needed ([Note: Deferred check code])."""
    from .codegen import leaf_order_key

    leaves = sorted((r.to_leaf() for r in records), key=leaf_order_key)
    args = tuple(arg_names) if arg_names is not None else None
    return CheckFunction(leaves, [], name=name, arg_names=args, f_globals=f_globals,
                         deferred=deferred)


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


# [Note: Class attributes re-bound through their class]
# CLASS_ATTRS_MATCH holds, for each name, the object the class lookup found. One with a
# portable form of its own (a function, a class) is written so. One without (a registry
# dict, a property, a descriptor made in the class body) is written as "what the
# namespace of MRO entry ``owner`` holds under this name", and read back as what that
# namespace holds in the reading process, where the value's type, and so its MRO, is found
# by name. That is [Note: Re-binding by name] for an object whose name is a class and an
# attribute: in the reading process the guard then pins the object found there, as it
# pinned the original in the writing one. What the program read through the object (a
# dict's keys and items, a property's getter code) has guards of its own in the set,
# checked on the object of the reading process.
_IN_CLASS = "in its class"


def _encode_class_attrs(spec: Any) -> Any:
    from .schema_values import _encode, _Unencodable

    tp = spec.type.get()
    mro = tp.__mro__ if isinstance(tp, type) else ()
    attrs = []
    for a in spec.attrs:
        found: Any = a.found
        if found is not None:
            try:
                _encode(found)
            except _Unencodable as e:
                obj = found.get()
                if not (a.owner < len(mro) and obj is not None
                        and mro[a.owner].__dict__.get(a.attr) is obj):
                    raise TypeError(e.what) from None
                found = _IN_CLASS
        attrs.append((a.attr, a.owner, found))
    return {"type": spec.type, "attrs": tuple(attrs)}


def _decode_class_attrs(data: Any) -> Any:
    from .attr_kinds import _ClassAttr, _ClassAttrsSpec
    from .values import Ident

    tp = data["type"].get() if isinstance(data.get("type"), Ident) else None
    if not isinstance(tp, type):
        raise GuardSchemaError("CLASS_ATTRS_MATCH: its type is not a class")
    out = []
    for attr, owner, found in data["attrs"]:
        if found == _IN_CLASS:
            mro = tp.__mro__
            obj = mro[owner].__dict__.get(attr) if type(owner) is int and 0 <= owner < len(mro) else None
            if obj is None:
                raise GuardSchemaError(
                    f"CLASS_ATTRS_MATCH: {tp.__qualname__}.__mro__[{owner}] has no {attr!r} "
                    f"in this process")
            found = Ident(obj)
        elif found is not None and not isinstance(found, Ident):
            raise GuardSchemaError(f"CLASS_ATTRS_MATCH: {found!r} is not an object")
        out.append(_ClassAttr(str(attr), owner, found))
    return _ClassAttrsSpec(data["type"], tuple(out))


def _register_core_types() -> None:
    from ..global_state import GlobalStateSnapshot
    from .attr_kinds import _AttrsSpec, _ClassAttrsSpec

    register_schema_codec(GlobalStateSnapshot, _encode_snapshot, _decode_snapshot,
                          name="jitguard:GlobalStateSnapshot")
    register_schema_type(_AttrsSpec)
    register_schema_codec(_ClassAttrsSpec, _encode_class_attrs, _decode_class_attrs,
                          name="jitguard:ClassAttrsSpec")


_register_core_types()
