"""ARRAY_MATCH: a numpy array, or anything with ``__array_interface__`` or DLPack, guarded by
exact type, dtype, ndim, layout, writeability and (when asked) alignment, the way numba
types an array argument. Registered on import (``GuardBuilder.ARRAY_MATCH``); numpy is
imported only once an array is met ([Note: Array facts]).

May import: errors, compiler.kinds, compiler.values, compiler.array_facts.

One guard is one exact dispatch fact, ``(id(type(x)), array_token(x, layout, aligned))``
(the interned ``array_fact``, hashed and compared by identity): a call among entries for N
dtypes costs one key lookup, as among one.

Options (``functools.partial(GuardBuilder.ARRAY_MATCH, ...)``): ``layout=`` ``"C"``, ``"F"``
or ``"A"`` (the value's own layout, stated: a value of another layout is refused at build
time) or ``"any"`` (the layout is not guarded); ``aligned=True`` also guards numpy's
ALIGNED flag. Failure texts: ``check_array(L['x'], ndarray, float64, ndim=1, layout='C',
writeable=True) failed: expected dtype float64, got float32``.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, NamedTuple, Optional

from ..errors import GuardKindError
from . import array_facts
from .array_facts import TOKEN_FUNCTIONS, array_dtype, array_fact, array_token, intern_fact
from .kinds import DispatchFact, EmitContext, GuardKind, register_guard_kind
from .values import Ident, describe_ident, type_name

__all__ = ["ARRAY_FACTS", "ArrayMatch", "ArraySpec"]

# One fact per option set; see [Note: Kinds own their cache data]. The type is the fact's
# first part ("id"), so the dispatcher tests it (hoisted, or as a gate) before it computes
# array_token (bound to the options: one argument), which reads the value's attributes.
# The key part is array_token's own hot path written inline (a Python call costs about as
# much as the reads): for an exact ndarray whose dtype array_facts' cache holds, the token
# remembered for the code of its ndim and flags; anything else (another type, a dtype or a
# code not cached yet) calls array_token itself. Same reads, same answer.


def _token_expr(layout: bool, aligned: bool) -> str:
    sel = (1 if layout else 0) | (2 if aligned else 0)
    code = f"({{v}}.flags.num & {array_facts.MASKS[sel]}) | {sel << 4} | {{v}}.ndim << 16"
    return (f"(({{tmp}}h[2].get({code}) or {{array_token}}({{v}})) "
            f"if {{type}}({{v}}) is {{facts}}._ndarray "
            f"and ({{tmp}}h := {{dtype_keys}}.get({{id}}(({{tmp}}d := {{v}}.dtype)))) is not None "
            f"and {{tmp}}h[0] is {{tmp}}d else {{array_token}}({{v}}))")


ARRAY_FACTS = {
    (layout, aligned): DispatchFact(
        name, _token_expr(layout, aligned), typed="id", gate="types", spread=True,
        consts=(("array_token", TOKEN_FUNCTIONS[layout, aligned]), ("facts", array_facts),
                ("dtype_keys", array_facts.dtype_cache())))
    for (layout, aligned), name in (((True, False), "array"), ((True, True), "array_aligned"),
                                    ((False, False), "array_any_layout"),
                                    ((False, True), "array_any_layout_aligned"))
}
_LAYOUT_TEXT = {"C": "C (C-contiguous)", "F": "F (Fortran-contiguous)",
                "A": "A (neither C- nor Fortran-contiguous)"}


class ArraySpec(NamedTuple):
    """What an ARRAY_MATCH guard expects: the exact type, the dtype (for display), and the
    fact ``array_fact(x, layout, aligned)`` of the value it was built on."""

    type: Ident
    dtype: Any
    fact: tuple[Any, ...]
    layout: bool
    aligned: bool


def _dtype_text(d: Any) -> str:
    return str(d)


def _dtype_diff(want: Any, got: Any) -> str:
    """``expected dtype X, got Y``, saying what differs when both print alike."""
    a, b = _dtype_text(want), _dtype_text(got)
    if a != b:
        return f"expected dtype {a}, got {b}"
    if type(want) is not type(got):
        return (f"expected dtype {a} of class {type(want).__name__}, got {b} of class "
                f"{type(got).__name__}")
    if bool(getattr(want, "isalignedstruct", False)) != bool(getattr(got, "isalignedstruct", False)):
        how = {True: "an aligned struct", False: "a packed struct"}
        return (f"expected dtype {a} as {how[bool(want.isalignedstruct)]}, got "
                f"{how[bool(got.isalignedstruct)]}")
    ma, mb = want.metadata, got.metadata
    if (dict(ma) if ma else None) != (dict(mb) if mb else None):
        return (f"expected dtype {a} with metadata {dict(ma) if ma else None}, got metadata "
                f"{dict(mb) if mb else None}")
    return f"expected dtype {a!r}, got {got!r}"


class ArrayMatch(GuardKind):
    """An array (numpy, ``__array_interface__`` or DLPack) of one exact type, dtype, ndim
    and layout, writeable or not, and aligned or not if asked ([Note: Array facts])."""

    name = "ARRAY_MATCH"
    cost = 3
    specificity = 4
    dispatch_facts = tuple(ARRAY_FACTS.values())

    def expect(self, value: Any, guard: Any, **options: Any) -> ArraySpec:
        layout = options.pop("layout", None)
        aligned = options.pop("aligned", False)
        if options or layout not in (None, "C", "F", "A", "any") or type(aligned) is not bool:
            raise GuardKindError(
                f"ARRAY_MATCH on {guard.name} takes layout= ('C', 'F', 'A' or 'any') and "
                f"aligned= (a bool), got {sorted(options) or {'layout': layout, 'aligned': aligned}}"
            )
        by_layout = layout != "any"
        try:
            dtype = array_dtype(value)
            fact = array_fact(value, by_layout, aligned)
        except Exception as e:
            raise GuardKindError(f"ARRAY_MATCH on {guard.name}: {e}") from None
        if layout in ("C", "F", "A") and fact[2] != layout:
            raise GuardKindError(
                f"ARRAY_MATCH on {guard.name}: layout={layout!r} asked, but the array's "
                f"layout is {_LAYOUT_TEXT[fact[2]]}"
            )
        array_token(value, by_layout, aligned)  # its token, ready for the first hit
        return ArraySpec(Ident(type(value)), dtype, fact, by_layout, aligned)

    def holds(self, value: Any, params: ArraySpec) -> bool:
        if type(value) is not params.type.get():
            return False
        try:
            return bool(array_fact(value, params.layout, params.aligned) == params.fact)
        except Exception:
            return False

    def emit(self, var: str, params: ArraySpec, ctx: EmitContext) -> str:
        type_ok = ctx.identical(f"type({var})", params.type, "type")
        fn = ctx.const(array_fact, "array_fact")
        args = "" if (params.layout, params.aligned) == (True, False) else (
            f", {params.layout}, {params.aligned}")
        return f"{type_ok} and {fn}({var}{args}) == {ctx.const(params.fact, 'array')}"

    def code(self, name: str, params: ArraySpec) -> str:
        _, ndim, layout, writeable, aligned = params.fact
        extra = f", aligned={aligned}" if params.aligned else ""
        return (
            f"check_array({name}, {describe_ident(params.type)}, "
            f"{_dtype_text(params.dtype)}, ndim={ndim}, "
            f"layout={layout if params.layout else 'any'!r}, writeable={writeable}{extra})"
        )

    def reason(self, name: str, value: Any, params: ArraySpec) -> str:
        head = f"{self.code(name, params)} failed: "
        if type(value) is not params.type.get():
            return f"{head}expected type {describe_ident(params.type)}, got {type_name(type(value))}"
        try:
            dtype = array_dtype(value)
            got = array_fact(value, params.layout, params.aligned)
        except Exception as e:
            return f"{head}{type(e).__name__}: {e}"
        want = params.fact
        if got[0] != want[0]:
            return head + _dtype_diff(params.dtype, dtype)
        if got[1] != want[1]:
            return f"{head}expected ndim {want[1]}, got {got[1]}"
        if got[2] != want[2]:
            return f"{head}expected layout {_LAYOUT_TEXT[want[2]]}, got {_LAYOUT_TEXT[got[2]]}"
        if got[3] != want[3]:
            what = {True: "a writeable array", False: "a read-only array"}
            return f"{head}expected {what[want[3]]}, got {what[got[3]]}"
        if got[4] != want[4]:
            what = {True: "an aligned array", False: "an unaligned array"}
            return f"{head}expected {what[want[4]]}, got {what[got[4]]}"
        return head.rstrip(": ")

    def detail(self, params: ArraySpec) -> Optional[dict[str, Any]]:
        _, ndim, layout, writeable, aligned = params.fact
        out = {"type": describe_ident(params.type), "dtype": _dtype_text(params.dtype),
               "ndim": ndim, "layout": layout if params.layout else "any",
               "writeable": writeable}
        if params.aligned:
            out["aligned"] = aligned
        return out

    def export(self, params: ArraySpec) -> tuple[Any, Any]:
        return (params.type.weakref(), None)

    def fact(self, params: ArraySpec) -> Optional[tuple[str, Hashable]]:
        return (ARRAY_FACTS[params.layout, params.aligned].name,
                (params.type.id, intern_fact(params.fact)))

    def fact_of(self, fact: str, value: Any) -> Hashable:
        for (layout, aligned), spec in ARRAY_FACTS.items():
            if spec.name == fact:
                return (id(type(value)), array_token(value, layout, aligned))
        raise KeyError(fact)

    def sample_options(self, value: Any) -> list[dict[str, Any]]:
        return [{}, {"layout": "any"}, {"aligned": True}]


ARRAY_MATCH = ArrayMatch()
register_guard_kind(ARRAY_MATCH)
