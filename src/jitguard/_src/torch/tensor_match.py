"""TENSOR_MATCH: one tensor's exact type and metadata, with torch's meaning and failure texts.

May import: jitguard._src.errors, jitguard._src.compiler.kinds, jitguard._src.compiler.values,
jitguard._src.torch.tensor_meta, jitguard._src.torch.adapter_runtime, torch.

# [Note: TENSOR_MATCH]
# A tensor passes when, against the tensor the guard was built from, it has
#   * the same exact Python type (a Parameter fails a Tensor slot, a subclass is distinct),
#   * the same dtype, device (type and index), requires_grad and layout,
#   * the same rank, sizes and strides, except the dims said to be dynamic,
#   * the same "dispatch flags": the negative bit, the conjugate bit (complex dtypes only)
#     and whether it is an inference tensor.
# torch compares the whole dispatch key set (``torch._C._dispatch_keys``) after folding in
# the thread-local include/exclude sets. Reading the key set costs one pybind call (~0.5 us
# here, as much as the rest of the check), so by default the keys are compared through the
# cheap tensor methods that expose the bits that differ between ordinary tensors of one
# type, device and layout: ``is_neg()``, ``is_conj()``, ``is_inference()``. The backend key
# follows from the device, the sparse/quantized/nested keys from layout and dtype, the
# Python key from the exact type. What that leaves out are keys that only torch's own
# transforms put on a plain ``torch.Tensor`` (functorch and functionalization wrappers,
# ZeroTensor): ``dispatch_keys="exact"`` compares the raw key set as well, and
# ``dispatch_keys="torch"`` the key set with the thread-local sets folded in, exactly as
# torch's checker (and TENSORS_MATCH, which runs that checker). In the default mode the
# thread-local part is guarded once per check, as global state (``inference_mode``, the
# autocast states), not per tensor.
#
# The generated check is one straight-line expression, the exact type first (every later
# read is then torch's own), then the reads most likely to differ (shape, dtype): a static
# shape is one tuple comparison (``x.shape == (3, 4)``, faster than per-dim reads or
# ``x.size()``); with dynamic dims it binds the shape once (``len(s := x.shape) == 2 and
# s[1] == 4``, several static dims through one ``itemgetter``); a CPU device is the
# ``is_cpu`` property, not a ``torch.device`` built and compared; strides are checked only
# for the strided layout (other layouts check ``layout`` instead).
#
# Dynamic dims (``functools.partial(GuardBuilder.TENSOR_MATCH, dynamic_dims=(0,))``): their
# sizes are unchecked, and so is every stride that grows with a dynamic size, i.e. the
# stride of a dim laid out outside a dynamic dim (``stride[i] > stride[d]``). The stride of
# the dynamic dim itself stays checked: a (5, 4) slice with strides (8, 1) must not pass
# for a contiguous (3, 4). ``sizes=``/``strides=`` (sequences with None for unchecked
# entries) say exactly what to check instead.
"""

from __future__ import annotations

import functools
import operator
import weakref
from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple, Optional

import torch

from ..compiler.kinds import EmitContext, GuardKind
from ..compiler.values import Ident, type_name
from ..errors import GuardKindError
from .adapter_runtime import mode_blind, mode_stack_len
from .tensor_meta import (
    MODES,
    dtype_name,
    fact_name,
    fact_tuple,
    flags,
    keys_of,
    parse_fact_name,
    raw_keys,
    tensor_fact,
)

__all__ = ["TensorMatch", "TensorSpec", "dtype_name", "keys_of"]

Dims = tuple[Optional[int], ...]

_dispatch_keys = torch._C._dispatch_keys
_STRIDED = torch.strided


class TensorSpec(NamedTuple):
    """What TENSOR_MATCH holds on to (a tuple, so the compiler finds the type's ``Ident``)."""

    type: Ident
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    layout: torch.layout
    sizes: Dims
    strides: Optional[Dims]  # None: not the strided layout, no strides to compare
    neg: bool
    conj: bool
    inference: bool
    keys: int  # raw dispatch key set at build time (TLS folded in for mode "torch")
    keys_text: str
    keys_mode: str  # "subset", "exact" or "torch"
    ref: Any  # weak reference to the build-time tensor, for export info (or None)


def _device_text(device: torch.device) -> str:
    return str(device)


def _dims(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in value)


def _auto_strides(sizes: Sequence[int], strides: Sequence[int], dynamic: set[int]) -> Dims:
    """Strides to check given dynamic dims: see [Note: TENSOR_MATCH]."""
    out: list[Optional[int]] = []
    for i, st in enumerate(strides):
        grows = any(d != i and strides[d] < st for d in dynamic)
        out.append(None if grows else st)
    return tuple(out)


def _explicit(spec: Any, actual: Sequence[int], what: str, guard: Any) -> Dims:
    dims = tuple(spec)
    if len(dims) != len(actual):
        raise GuardKindError(
            f"TENSOR_MATCH on {guard.name}: {what}={list(dims)} has {len(dims)} entries but "
            f"the tensor has rank {len(actual)}"
        )
    for i, (e, a) in enumerate(zip(dims, actual, strict=False)):
        if e is not None and (type(e) is not int or e != a):
            raise GuardKindError(
                f"TENSOR_MATCH on {guard.name}: {what}[{i}] = {e!r} but the tensor has {a} "
                f"(use None to leave an entry unchecked)"
            )
    return dims


class TensorMatch(GuardKind):
    """A tensor's exact type, dispatch flags, dtype, device, requires_grad, layout, sizes and
    strides (see [Note: TENSOR_MATCH]). Options: ``dynamic_dims=``, ``sizes=``,
    ``strides=``, ``dispatch_keys="subset"|"exact"``."""

    name = "TENSOR_MATCH"
    cost = 6

    @mode_blind
    def expect(self, value: Any, guard: Any, **options: Any) -> TensorSpec:
        unknown = set(options) - {"dynamic_dims", "sizes", "strides", "dispatch_keys"}
        if unknown:
            raise GuardKindError(
                f"TENSOR_MATCH on {guard.name}: unknown option(s) {sorted(unknown)}; it takes "
                f"dynamic_dims=, sizes=, strides=, dispatch_keys="
            )
        if not isinstance(value, torch.Tensor):
            raise GuardKindError(
                f"TENSOR_MATCH on {guard.name}: expected a torch.Tensor, found "
                f"{type_name(type(value))}"
            )
        mode = options.get("dispatch_keys", "subset")
        if mode not in MODES:
            raise GuardKindError(
                f"TENSOR_MATCH on {guard.name}: dispatch_keys must be one of {MODES}, got {mode!r}"
            )
        layout = value.layout
        try:
            actual_sizes = _dims(value.shape)
            actual_strides = _dims(value.stride()) if layout is _STRIDED else None
        except (AttributeError, TypeError, RuntimeError) as e:
            # a jagged nested tensor: its ragged dim is a nested int, no int to compare
            raise GuardKindError(
                f"TENSOR_MATCH on {guard.name}: its sizes {tuple(value.shape)} are not all "
                f"ints ({type_name(type(value))}, layout {layout}: a ragged dim is symbolic), "
                f"so TENSOR_MATCH cannot guard it; pass its components (for a jagged nested "
                f"tensor, x.values() and x.offsets()) as arguments instead"
            ) from e
        dynamic = set(options.get("dynamic_dims", ()) or ())
        for d in dynamic:
            if type(d) is not int or not 0 <= d < len(actual_sizes):
                raise GuardKindError(
                    f"TENSOR_MATCH on {guard.name}: dynamic dim {d!r} is not a dim of a rank "
                    f"{len(actual_sizes)} tensor"
                )
        if "sizes" in options:
            sizes = _explicit(options["sizes"], actual_sizes, "sizes", guard)
        else:
            sizes = tuple(None if i in dynamic else s for i, s in enumerate(actual_sizes))
        strides: Optional[Dims]
        if actual_strides is None:
            if options.get("strides") is not None:
                raise GuardKindError(
                    f"TENSOR_MATCH on {guard.name}: a {layout} tensor has no strides"
                )
            strides = None
        elif "strides" in options:
            strides = _explicit(options["strides"], actual_strides, "strides", guard)
        else:
            strides = _auto_strides(actual_sizes, actual_strides, dynamic)
        keys = keys_of(value, mode)
        neg, conj, inference = flags(value, value.dtype)
        try:
            ref: Any = weakref.ref(value)
        except TypeError:
            ref = None
        return TensorSpec(
            type=Ident(type(value)),
            dtype=value.dtype,
            device=value.device,
            requires_grad=bool(value.requires_grad),
            layout=layout,
            sizes=sizes,
            strides=strides,
            neg=neg,
            conj=conj,
            inference=inference,
            keys=keys.raw_repr(),
            keys_text=str(keys),
            keys_mode=mode,
            ref=ref,
        )

    # ---- reference meaning ----------------------------------------------------------

    @mode_blind
    def holds(self, value: Any, params: TensorSpec) -> bool:
        if not params.type.alive or type(value) is not params.type.get():
            return False
        if params.keys_mode != "subset":
            if raw_keys(value, params.keys_mode) != params.keys:
                return False
        elif flags(value, params.dtype) != (params.neg, params.conj, params.inference):
            return False
        if value.dtype is not params.dtype or not _device_ok(value, params.device):
            return False
        if bool(value.requires_grad) is not params.requires_grad:
            return False
        if value.layout is not params.layout:
            return False
        if not _dims_ok(tuple(value.shape), params.sizes):
            return False
        if params.strides is not None and not _dims_ok(tuple(value.stride()), params.strides):
            return False
        return True

    # ---- generated code -------------------------------------------------------------

    def emit(self, var: str, params: TensorSpec, ctx: EmitContext) -> str:
        parts = [ctx.identical(f"type({var})", params.type, "type")]
        walrus = var.isidentifier()
        parts.append(_emit_dims(f"{var}.shape", f"_s_{var}" if walrus else None, params.sizes, ctx, "sizes"))
        parts.append(f"{var}.dtype is {ctx.const(params.dtype, 'dtype')}")
        parts.append(f"{var}.requires_grad" if params.requires_grad else f"not {var}.requires_grad")
        if params.device.type == "cpu":
            parts.append(f"{var}.is_cpu")
        else:
            parts.append(f"{var}.device == {ctx.const(params.device, 'device')}")
        if params.strides is None:
            parts.append(f"{var}.layout is {ctx.const(params.layout, 'layout')}")
        else:
            stride_check = _emit_dims(
                f"{var}.stride()", f"_t_{var}" if walrus else None, params.strides, ctx, "strides"
            )
            if all(e is None for e in params.strides):
                # No stride is compared, so the layout is not implied by stride() succeeding.
                stride_check = f"{var}.layout is {ctx.const(params.layout, 'layout')}"
            parts.append(stride_check)
        if params.keys_mode == "exact":
            keys = ctx.const(_dispatch_keys, "dispatch_keys")
            parts.append(f"{keys}({var}).raw_repr() == {ctx.const(params.keys, 'keys')}")
        elif params.keys_mode == "torch":
            keys = ctx.const(raw_keys, "raw_keys")
            mode = ctx.const("torch", "mode")
            parts.append(f"{keys}({var}, {mode}) == {ctx.const(params.keys, 'keys')}")
        else:
            parts.append(f"{var}.is_neg()" if params.neg else f"not {var}.is_neg()")
            if params.dtype.is_complex:
                parts.append(f"{var}.is_conj()" if params.conj else f"not {var}.is_conj()")
            parts.append(f"{var}.is_inference()" if params.inference else f"not {var}.is_inference()")
        check = " and ".join(parts)
        if params.strides is None:
            # Not strided: never batched into TENSORS_MATCH's C++ checker, so under a torch
            # function mode the reads go through the (mode-blind) reference meaning instead
            # ([Note: Tensor properties past function modes]).
            modes = ctx.const(mode_stack_len, "mode_stack_len")
            holds = ctx.const(functools.partial(self.holds, params=params), "holds_past_modes")
            return f"(({check}) if not {modes}() else {holds}({var}))"
        return check

    # ---- display ----------------------------------------------------------------------

    def code(self, name: str, params: TensorSpec) -> str:
        tp = params.type.get()
        tname = tp.__name__ if isinstance(tp, type) else params.type.type_name
        strides = "None" if params.strides is None else _show_dims(params.strides)
        return (
            f"check_tensor({name}, {tname}, {params.keys_text}, {params.dtype}, "
            f"device={_device_text(params.device)}, requires_grad={params.requires_grad}, "
            f"size={_show_dims(params.sizes)}, stride={strides})"
        )

    @mode_blind
    def reason(self, name: str, value: Any, params: TensorSpec) -> str:
        expected_type = params.type.get()
        if type(value) is not expected_type:
            return (
                f"expected type of '{name}' to be {expected_type!r}, but found {type(value)!r}"
                if expected_type is not None
                else f"expected type of '{name}' to be a deallocated {params.type.type_name}"
            )
        head = f"tensor '{name}' "
        device = value.device
        if device.type != params.device.type:
            return (
                f"{head}device mismatch. expected {_device_text(params.device)}, "
                f"actual {_device_text(device)}"
            )
        now_flags = flags(value, params.dtype) if value.dtype is params.dtype else None
        subset = params.keys_mode == "subset"
        keys_differ = (
            now_flags is not None and now_flags != (params.neg, params.conj, params.inference)
            if subset
            else raw_keys(value, params.keys_mode) != params.keys
        )
        if keys_differ:
            text = (
                f"{head}dispatch key set mismatch. expected {params.keys_text}, actual "
                f"{keys_of(value, 'exact' if subset else params.keys_mode)}"
            )
            if now_flags is not None and subset:
                text += " (" + _flag_diff(now_flags, params) + ")"
            return text
        if value.dtype is not params.dtype:
            return (
                f"{head}dtype mismatch. expected {dtype_name(params.dtype)}, actual "
                f"{dtype_name(value.dtype)}"
            )
        if device.index != params.device.index:
            return (
                f"{head}Tensor device index mismatch. Expected device index to be "
                f"{params.device.index}, actual {device.index}"
            )
        if bool(value.requires_grad) is not params.requires_grad:
            return f"{head}requires_grad mismatch. expected requires_grad={int(params.requires_grad)}"
        if value.layout is not params.layout:
            return f"{head}layout mismatch. expected {params.layout}, actual {value.layout}"
        sizes = tuple(value.shape)
        if len(sizes) != len(params.sizes):
            return f"{head}rank mismatch. expected {len(params.sizes)}, actual {len(sizes)}"
        for i, (a, e) in enumerate(zip(sizes, params.sizes, strict=False)):
            if e is not None and a != e:
                return f"{head}size mismatch at index {i}. expected {e}, actual {a}"
        if params.strides is not None:
            for i, (a, e) in enumerate(zip(value.stride(), params.strides, strict=False)):
                if e is not None and a != e:
                    return f"{head}stride mismatch at index {i}. expected {e}, actual {a}"
        return f"{head}{self.code(name, params)} failed"

    def export(self, params: TensorSpec) -> tuple[Any, Any]:
        return (params.type.weakref(), params.ref)

    def detail(self, params: TensorSpec) -> dict[str, Any]:
        """The tensor's type, dtype, device, sizes and strides (None: not checked, e.g. a
        dynamic dim), requires_grad, layout and dispatch flags."""
        tp = params.type.get()
        return {
            "type": tp.__qualname__ if isinstance(tp, type) else params.type.type_name,
            "dtype": str(params.dtype),
            "device": _device_text(params.device),
            "sizes": list(params.sizes),
            "strides": None if params.strides is None else list(params.strides),
            "requires_grad": params.requires_grad,
            "layout": str(params.layout),
            "dispatch_keys": params.keys_text,
        }

    # ---- facts (dispatch for the specializing cache) -------------------------------------

    def fact(self, params: TensorSpec) -> Optional[tuple[str, Hashable]]:
        name = fact_name(params)
        return (name, fact_tuple(params))

    def fact_of(self, fact: str, value: Any) -> Hashable:
        return tensor_fact(parse_fact_name(fact), value)


def _device_ok(value: Any, device: torch.device) -> bool:
    if device.type == "cpu":
        return bool(value.is_cpu)
    return bool(value.device == device)


def _dims_ok(actual: tuple[int, ...], spec: Dims) -> bool:
    return len(actual) == len(spec) and all(e is None or a == e for a, e in zip(actual, spec, strict=False))


def _show_dims(dims: Dims) -> str:
    return "[" + ", ".join("None" if d is None else str(d) for d in dims) + "]"


def _flag_diff(got: tuple[bool, bool, bool], params: TensorSpec) -> str:
    names = ("is_neg()", "is_conj()", "is_inference()")
    want = (params.neg, params.conj, params.inference)
    return ", ".join(
        f"{n} expected {w}, actual {g}" for n, g, w in zip(names, got, want, strict=False) if g != w
    )


def _emit_dims(read: str, bind: Optional[str], spec: Dims, ctx: EmitContext, what: str) -> str:
    """Python test that the dims read by ``read`` match ``spec`` (None entries unchecked)."""
    n = len(spec)
    static = [(i, e) for i, e in enumerate(spec) if e is not None]
    if len(static) == n:
        return f"{read} == {ctx.const(tuple(spec), what)}"
    rank = ctx.const(n, "rank")
    if not static:
        return f"len({read}) == {rank}"
    if bind is None:
        # No variable to bind to: compare through the read each time (slower, still exact).
        checks = [f"len({read}) == {rank}"]
        checks += [f"{read}[{ctx.const(i, 'dim')}] == {ctx.const(e, 'n')}" for i, e in static]
        return " and ".join(checks)
    head = f"len({bind} := {read}) == {rank}"
    if len(static) == 1:
        i, e = static[0]
        return f"{head} and {bind}[{ctx.const(i, 'dim')}] == {ctx.const(e, 'n')}"
    getter = ctx.const(operator.itemgetter(*(i for i, _ in static)), "dims")
    return f"{head} and {getter}({bind}) == {ctx.const(tuple(e for _, e in static), what)}"
