"""Triton's specialization classes as guard kinds: INT_CLASS (an int is 1, divisible by 16,
or neither; and its width: i32, i64, u64) and DATA_PTR_ALIGNED (an array's or tensor's data
pointer is 16-byte aligned, or not). Each guard is one exact dispatch fact, computed by
``int_class`` / ``data_ptr_aligned`` ([Note: Array facts]). Registered on import.

May import: errors, compiler.kinds, compiler.values, compiler.array_facts.

Other divisors or alignments are kinds of their own, made once with ``int_class_kind(
divisors)`` / ``data_ptr_kind(align)`` (each declares its own fact, whose expression binds
its options). Failure texts: ``int_class(L['n']) == ('i32', 16) failed: got ('i32', 0)
(n % 16 != 0)``; ``data_ptr(L['x']) % 16 == 0 failed: the pointer is 0x...8``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple, Optional

from ..errors import GuardKindError
from .array_facts import data_pointer, data_ptr_aligned, int_class
from .kinds import DispatchFact, EmitContext, GuardKind, create_fn_for, register_guard_kind
from .values import Ident, describe_ident, show, type_name

__all__ = ["DataPtrAligned", "IntClass", "PtrSpec", "data_ptr_kind", "int_class_kind"]


def _class_text(k: int) -> str:
    return "== 1" if k == 1 else (f"% {k} == 0" if k else "none of the classes")


class IntClass(GuardKind):
    """An int (exactly ``int``) in the same Triton class as at build time: ``int_class(v,
    divisors)`` equal ([Note: Array facts]): the same width, and 1, or first divisible by
    the same divisor, or by none."""

    name = "INT_CLASS"
    cost = 3
    specificity = 3
    divisors: tuple[int, ...] = (16,)
    dispatch_facts = (DispatchFact("int_class", "{int_class}({v})",
                                   consts=(("int_class", int_class),)),)

    def expect(self, value: Any, guard: Any, **options: Any) -> tuple[str, int]:
        super().expect(value, guard, **options)
        cls = int_class(value, self.divisors)
        if cls is None:
            raise GuardKindError(
                f"{self.name} on {guard.name}: expected an int, found {type_name(type(value))}"
            )
        return cls

    def holds(self, value: Any, params: tuple[str, int]) -> bool:
        return int_class(value, self.divisors) == params

    def emit(self, var: str, params: tuple[str, int], ctx: EmitContext) -> str:
        fn = ctx.const(int_class, "int_class")
        args = "" if self.divisors == (16,) else f", {ctx.const(self.divisors, 'divisors')}"
        return f"{fn}({var}{args}) == {ctx.const(params, 'int_class')}"

    def code(self, name: str, params: tuple[str, int]) -> str:
        divisors = "" if self.divisors == (16,) else f", {self.divisors}"
        return f"int_class({name}{divisors}) == {params!r}"

    def reason(self, name: str, value: Any, params: tuple[str, int]) -> str:
        got = int_class(value, self.divisors)
        head = f"{self.code(name, params)} failed: "
        if got is None:
            return f"{head}got {show(value)}, not an int"
        if got[0] != params[0]:
            return f"{head}got {got!r} ({show(value)} is {got[0]}, not {params[0]})"
        return f"{head}got {got!r} ({show(value)}: {_class_text(got[1])}, not {_class_text(params[1])})"

    def detail(self, params: tuple[str, int]) -> Optional[dict[str, Any]]:
        return {"width": params[0], "class": _class_text(params[1]),
                "divisors": list(self.divisors)}

    def fact(self, params: tuple[str, int]) -> Optional[tuple[str, Hashable]]:
        return (self.dispatch_facts[0].name, params)

    def fact_of(self, fact: str, value: Any) -> Hashable:
        return int_class(value, self.divisors)


class PtrSpec(NamedTuple):
    """What a DATA_PTR_ALIGNED guard expects: the exact type, whether the pointer is a
    multiple of ``align``."""

    type: Ident
    aligned: bool


class DataPtrAligned(GuardKind):
    """The value's exact type, and whether its data pointer is a multiple of 16, as at build
    time (``data_ptr_aligned``, [Note: Array facts]): Triton's ``"D"`` of a tensor."""

    name = "DATA_PTR_ALIGNED"
    cost = 4
    specificity = 3
    align: int = 16
    dispatch_facts = (DispatchFact("data_ptr_16", "{data_ptr_aligned}({v})", typed="id",
                                   gate="types", spread=True,
                                   consts=(("data_ptr_aligned", data_ptr_aligned),)),)

    def expect(self, value: Any, guard: Any, **options: Any) -> PtrSpec:
        super().expect(value, guard, **options)
        try:
            aligned = data_ptr_aligned(value, self.align)
        except Exception as e:
            raise GuardKindError(f"{self.name} on {guard.name}: no data pointer: {e}") from None
        return PtrSpec(Ident(type(value)), aligned)

    def holds(self, value: Any, params: PtrSpec) -> bool:
        if type(value) is not params.type.get():
            return False
        try:
            return data_ptr_aligned(value, self.align) is params.aligned
        except Exception:
            return False

    def emit(self, var: str, params: PtrSpec, ctx: EmitContext) -> str:
        type_ok = ctx.identical(f"type({var})", params.type, "type")
        fn = ctx.const(data_ptr_aligned, "data_ptr_aligned")
        args = "" if self.align == 16 else f", {ctx.const(self.align, 'align')}"
        return f"{type_ok} and {fn}({var}{args}) is {params.aligned}"

    def code(self, name: str, params: PtrSpec) -> str:
        op = "==" if params.aligned else "!="
        return f"data_ptr({name}) % {self.align} {op} 0"

    def reason(self, name: str, value: Any, params: PtrSpec) -> str:
        head = f"{self.code(name, params)} failed: "
        if type(value) is not params.type.get():
            return f"{head}expected type {describe_ident(params.type)}, got {type_name(type(value))}"
        try:
            ptr = data_pointer(value)
        except Exception as e:
            return f"{head}{type(e).__name__}: {e}"
        return f"{head}the pointer is {hex(ptr)}"

    def detail(self, params: PtrSpec) -> Optional[dict[str, Any]]:
        return {"type": describe_ident(params.type), "align": self.align,
                "aligned": params.aligned}

    def export(self, params: PtrSpec) -> tuple[Any, Any]:
        return (params.type.weakref(), None)

    def fact(self, params: PtrSpec) -> Optional[tuple[str, Hashable]]:
        return (self.dispatch_facts[0].name, (params.type.id, params.aligned))

    def fact_of(self, fact: str, value: Any) -> Hashable:
        return (id(type(value)), data_ptr_aligned(value, self.align))


_made: dict[tuple[str, Any], Callable[..., Any]] = {}
_made_lock = threading.Lock()


def _divisors_ok(divisors: Any) -> tuple[int, ...]:
    if (type(divisors) is not tuple or not divisors
            or not all(type(d) is int and d >= 2 for d in divisors)):
        raise GuardKindError(f"divisors must be a non-empty tuple of ints >= 2, got {divisors!r}")
    return divisors


def int_class_kind(divisors: tuple[int, ...]) -> Callable[..., Any]:
    """The create_fn of an INT_CLASS kind with other divisors (``(16, 8)``: divisible by 16,
    else by 8, else neither), registered once as ``INT_CLASS_16_8`` with its own exact
    dispatch fact ``int_class_16_8``. ``(16,)`` is ``GuardBuilder.INT_CLASS`` itself."""
    divisors = _divisors_ok(divisors)
    if divisors == (16,):
        return create_fn_for(INT_CLASS.name)
    suffix = "_".join(map(str, divisors))
    with _made_lock:
        made = _made.get(("int", divisors))
        if made is None:
            fact = DispatchFact(f"int_class_{suffix}", "{int_class}({v}, {divisors})",
                                consts=(("int_class", int_class), ("divisors", divisors)))
            kind_type = type(f"IntClass_{suffix}", (IntClass,), {
                "name": f"INT_CLASS_{suffix}", "divisors": divisors, "dispatch_facts": (fact,),
                "__doc__": f"INT_CLASS with divisors {divisors}.",
            })
            made = _made[("int", divisors)] = register_guard_kind(kind_type())
    return made


def data_ptr_kind(align: int) -> Callable[..., Any]:
    """The create_fn of a DATA_PTR_ALIGNED kind for another alignment (a power of two),
    registered once as ``DATA_PTR_ALIGNED_<align>`` with its own exact fact. ``16`` is
    ``GuardBuilder.DATA_PTR_ALIGNED`` itself."""
    if type(align) is not int or align < 2 or align & (align - 1):
        raise GuardKindError(f"align must be a power of two >= 2, got {align!r}")
    if align == 16:
        return create_fn_for(DATA_PTR_ALIGNED.name)
    with _made_lock:
        made = _made.get(("ptr", align))
        if made is None:
            fact = DispatchFact(f"data_ptr_{align}", "{data_ptr_aligned}({v}, {align})",
                                typed="id", gate="types", spread=True,
                                consts=(("data_ptr_aligned", data_ptr_aligned),
                                        ("align", align)))
            kind_type = type(f"DataPtrAligned_{align}", (DataPtrAligned,), {
                "name": f"DATA_PTR_ALIGNED_{align}", "align": align, "dispatch_facts": (fact,),
                "__doc__": f"DATA_PTR_ALIGNED to {align} bytes.",
            })
            made = _made[("ptr", align)] = register_guard_kind(kind_type())
    return made


INT_CLASS = IntClass()
DATA_PTR_ALIGNED = DataPtrAligned()
for _kind in (INT_CLASS, DATA_PTR_ALIGNED):
    register_guard_kind(_kind)
del _kind
