"""Key layouts (``Layout``, ``compute_layout``) and the Python expressions the generated
dispatcher computes a call's key with: the gated reads of derived sources, the key parts,
union parts ([Note: Key layout], [Note: Union dims]).

May import: _util, guards, compiler.kinds, dispatch.facts, dispatch.entry.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple, Optional

from .._util import SCALAR_TYPES
from ..compiler.kinds import DispatchFact, dispatch_fact
from ..guards import ChainedSource, Source
from .entry import CacheEntry
from .facts import Dim

__all__ = ["Layout", "compute_layout", "key_code", "note_static_types", "reads_code",
           "static_type", "typed_of"]

_SCALAR_TYPE_IDS = frozenset(id(t) for t in SCALAR_TYPES)

# [Note: Static types in the generated dispatcher]
# ``id(type(v))`` costs the pure-Python dispatcher an int allocation, and a dict lookup by
# that fresh int a hash and a compare by value: about a third of a hit. A type the
# interpreter never frees can be held and compared as itself instead: a *static* type (not
# a heap type: builtins, numpy's ndarray and scalar types, anything defined in C that way)
# lives as long as the process, so its id is never reused and holding it keeps nothing
# alive. ``_STATIC_TYPES`` maps the id of each such type seen in a call's parameters (the
# miss path notes them, ``note_static_types``; the builtin scalar types from the start) to
# the type, only when its metaclass is exactly ``type`` (hashed by address, compared by
# identity: no metaclass code can run or fake a match). With it the generated code tests a
# hoisted type as ``type(v) is T`` (not ``id(type(v)) == id(T)``), and, in a dispatcher
# whose index no C ``State`` reads ([Note: The C hot path] computes ids), keys a "type"
# part on the type object itself when every keyed entry's type there is static: the part
# is ``t if type(t := type(v)) is type else NOKEY``, so a type with another metaclass (whose
# ``__hash__`` or ``__eq__`` could run) is never hashed and has no key, as no keyed entry
# has its type. A heap type (a class defined in Python, which may die) keeps the id form.
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE
_type_flags = type.__dict__["__flags__"].__get__
_STATIC_TYPES: dict[int, type] = {id(t): t for t in SCALAR_TYPES}


def note_static_types(values: Sequence[Any]) -> None:
    """Remember the static types (with metaclass ``type``) of ``values`` ([Note: Static
    types in the generated dispatcher]); reads no attribute of a value."""
    known = _STATIC_TYPES
    for value in values:
        tp = type(value)
        if id(tp) not in known and type(tp) is type and not _type_flags(tp) & _HEAPTYPE:
            known[id(tp)] = tp


def static_type(tid: Any) -> Optional[type]:
    """The static type of id ``tid``, when one was noted ([Note: Static types in the
    generated dispatcher]); None otherwise."""
    return _STATIC_TYPES.get(tid) if type(tid) is int else None


def typed_of(dim: Dim) -> Optional[str]:
    """How an inline dim's first key part is the value's type ("type", "id"), or None."""
    spec = dim.spec
    return spec.typed if spec is not None else None


class Layout(NamedTuple):
    """How keys are laid out for one snapshot: the dims, for each dim the type all keyed
    entries share (hoisted out of the key into a precondition: ``("is", T)`` or
    ``("id", id(T))``) or None, and whether every first candidate is exact and no entry is
    linear (the dispatcher then reads no residual). See [Note: Key layout]."""

    dims: tuple[Dim, ...]
    hoisted: tuple[Optional[tuple[str, Any]], ...]
    exact: bool
    # Per dim, the ids of the types the keyed entries expect (a frozenset): the gate of a
    # "type_len" part ([Note: Key layout]); None in a layout made without them.
    types: Optional[tuple[frozenset[int], ...]] = None
    # The sources below derived dims (a parameter, the links between), bases first, each
    # with the ids of the exact types the keyed entries pin there: the gate of a read.
    bases: tuple[tuple[Source, frozenset[int]], ...] = ()


def _bases(dims: tuple[Dim, ...]) -> list[Source]:
    """The sources a derived dim's read goes through, each base before what it reads."""
    out: dict[Source, None] = {}
    for dim in dims:
        if dim.source is not None:
            for below in reversed(dim.source.chain()[1:]):
                out.setdefault(below)
    return list(out)


def compute_layout(entries: Sequence[CacheEntry], dims: tuple[Dim, ...]) -> Layout:
    """The layout of ``entries`` (rank order) under ``dims``."""
    if not dims:
        return Layout((), (), False)
    keyed: list[CacheEntry] = []
    heads: dict[Hashable, CacheEntry] = {}
    linear = False
    for entry in entries:
        key = entry.key(dims)
        if key is None:
            linear = True
            continue
        keyed.append(entry)
        heads.setdefault(key, entry)
    hoisted: list[Optional[tuple[str, Any]]] = []
    types: list[frozenset[int]] = []
    for dim in dims:
        typed = typed_of(dim)
        firsts = {e.facts[dim][0] for e in keyed} if typed else set()
        # A fact typed "type" holds the type itself (a builtin scalar type), "id" its id.
        types.append(frozenset(id(f) if typed == "type" else f for f in firsts))
        if len(firsts) != 1:
            hoisted.append(None)
            continue
        (first,) = firsts
        hoisted.append(("is", first) if typed == "type" else ("id", first))
    exact = not linear and all(e.exact_under(dims) for e in heads.values())
    bases = tuple((b, frozenset(e.pins[b] for e in keyed if b in e.pins))
                  for b in _bases(dims))
    return Layout(dims, tuple(hoisted), exact, tuple(types), bases)


def reads_code(
    layout: Layout, p: str, g: int, ns: dict[str, Any]
) -> tuple[list[tuple[str, str]], dict[Source, str]]:
    """The gated reads of a layout's derived sources, as (statement, comment) in order, and
    the variable that holds each source's value ([Note: Key layout])."""
    names: dict[Source, str] = {}
    gates = dict(layout.bases)
    lines: list[tuple[str, str]] = []
    counter = itertools.count()

    def bind(obj: Any, hint: str) -> str:
        name = f"{p}c{g}_{next(counter)}"
        ns[name] = obj
        return name

    def var(source: Source) -> str:
        found = names.get(source)
        if found is not None:
            return found
        assert isinstance(source, ChainedSource)  # roots (the parameters) are named below
        base = var(source.base)
        gate = bind(gates[source.base], "gate")
        name = names[source] = f"{p}r{g}_{len(names)}"
        expr = source.emit(base, bind)
        lines.append((f"{name} = {expr} if {p}id({p}type({base})) in {gate} else {p}NOKEY",
                      f"{source.name()}, for the types pinned below it"))
        return name

    for dim in layout.dims:
        if dim.source is not None:
            names.setdefault(dim.source.chain()[-1], dim.param)
            var(dim.source)
    return lines, names


def _fact_expr(spec: DispatchFact, v: str, p: str, tag: str, ns: dict[str, Any]) -> str:
    """A declared fact's key expression over ``v``, its ``consts`` bound in ``ns`` (named
    per dim and fact: two facts may use one name)."""
    consts: dict[str, str] = {}
    for cname, obj in spec.consts:
        consts[cname] = f"{p}c{tag}_{cname}"
        ns[consts[cname]] = obj
    assert spec.expr is not None
    return spec.expr.format(**consts, v=v, type=f"{p}type", id=f"{p}id", len=f"{p}len",
                            tuple=f"{p}tuple", dict=f"{p}dict", tmp=f"{p}x{tag}_")


def _union_expr(dim: Dim, v: str, p: str, g: int, k: int, ns: dict[str, Any]) -> str:
    """The key part of a union dim: for the call's type, ``(id(type), *its fact)`` (the id
    alone for a fact that is the type), or ``NOKEY`` for a type with no fact chosen
    ([Note: Union dims])."""
    assert dim.union is not None
    by_fact: dict[str, set[int]] = {}
    for tid, fact in dim.union:
        by_fact.setdefault(fact, set()).add(tid)
    u = f"{p}u{g}_{k}"
    branches: list[str] = []
    for j, (fact, tids) in enumerate(sorted(by_fact.items())):
        spec = dispatch_fact(fact)
        assert spec is not None and spec.typed
        gate = f"{p}U{g}_{k}_{j}"
        ns[gate] = frozenset(tids)
        rest = [_fact_expr(spec, v, p, f"{g}_{k}_{j}", ns)] if spec.expr is not None else []
        part = "(" + ", ".join([u, *rest]) + ",)" if rest else u  # a type alone: its id
        test = f"({u} := {p}id({p}type({v}))) in {gate}" if j == 0 else f"{u} in {gate}"
        branches.append(f"{part} if {test} else ")
    return "(" + "".join(branches) + f"{p}NOKEY)"


def type_keyed(layout: Layout) -> tuple[bool, ...]:
    """Per dim, whether a dispatcher whose index no C ``State`` reads keys it on the type
    object itself ([Note: Static types in the generated dispatcher]): a typed dim whose
    type is the whole fact, not hoisted, every keyed entry's type there static."""
    out = []
    for k, (dim, hoisted) in enumerate(zip(layout.dims, layout.hoisted, strict=True)):
        spec = dim.spec
        out.append(bool(
            hoisted is None and spec is not None and spec.typed == "id" and spec.expr is None
            and spec.gate is None and layout.types is not None and layout.types[k]
            and all(static_type(tid) is not None for tid in layout.types[k])))
    return tuple(out)


def key_code(
    layout: Layout, p: str, g: int, ns: dict[str, Any], names: dict[Source, str],
    type_keys: tuple[bool, ...] = (),
) -> tuple[list[str], list[str], str]:
    """(precondition expressions, key part expressions, key expression) of a layout; binds
    what they need in ``ns``. A derived dim's value is the variable of its read
    (``names``). ``type_keys`` (``type_keyed``): the dims keyed on the type object."""
    pre: list[str] = []
    parts: list[str] = []
    t, i = f"{p}type", f"{p}id"
    for k, (dim, hoisted) in enumerate(zip(layout.dims, layout.hoisted, strict=True)):
        v = dim.param
        if dim.source is not None:
            v = names[dim.source]
            pre.append(f"{v} is not {p}NOKEY")
        spec = dim.spec
        # A part that would run code of the value's type has a precondition on the type's
        # id (the fact's ``gate``): the ``hash`` of a "value" part only for builtin
        # scalars, the ``len`` of a "type_len" part only for the types the keyed entries
        # have. A guard runs that code only after its type test, and so must the
        # dispatcher: never a user type's ``__hash__``/``__len__`` (no keyed entry can hold
        # for another type anyway).
        if hoisted is not None:
            name = f"{p}T{g}_{k}"
            static = static_type(hoisted[1]) if hoisted[0] == "id" else None
            ns[name] = static if static is not None else hoisted[1]
            pre.append(f"{t}({v}) is {name}" if hoisted[0] == "is" or static is not None
                       else f"{i}({t}({v})) == {name}")
        elif k < len(type_keys) and type_keys[k]:
            tv = f"{p}t{g}_{k}"
            parts.append(f"({tv} if {t}({tv} := {t}({v})) is {t} else {p}NOKEY)")
        elif spec is not None and spec.typed:
            parts.append(f"{i}({t}({v}))")
            gate: Optional[frozenset[int]] = None
            if spec.gate == "scalar":
                gate = _SCALAR_TYPE_IDS
            elif spec.gate == "types" and layout.types is not None:
                gate = layout.types[k]
            if gate is not None:
                tname = f"{p}TS{g}_{k}"
                ns[tname] = gate
                pre.append(f"{i}({t}({v})) in {tname}")
        if dim.union is not None:
            parts.append(_union_expr(dim, v, p, g, k, ns))
            continue
        if dim.kind is not None:
            fname = f"{p}fact{g}_{k}"
            kind, fact = dim.kind, dim.fact
            ns[fname] = lambda value, _k=kind, _f=fact: _k.fact_of(_f, value)
            parts.append(f"{fname}({v})")
        elif spec is not None and spec.expr is not None:
            parts.append(_fact_expr(spec, v, p, f"{g}_{k}", ns))
    if len(parts) == 1:
        key = parts[0]
    else:
        key = "(" + ", ".join(parts) + ")"
    return pre, parts, key
