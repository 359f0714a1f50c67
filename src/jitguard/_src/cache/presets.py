"""Policy presets: ``specialize(fn, policy="values")`` (the default: scalars by value),
``policy="types"`` (scalars by type, arrays by ARRAY_MATCH, as numba types its arguments)
and ``policy="triton"`` (ints by class, pointers by dtype and alignment, as Triton does).

May import: _util, integrations, guards, sources, compiler.*, cache.policy.

# [Note: Policy presets]
# "values" is the default policy ([Note: Argument rules]): an int is guarded by its value,
# so ``f(3)`` and ``f(4)`` are two entries until automatic dynamic relaxes it.
# "types" is what a type-specializing JIT (numba) needs, one entry per argument type:
#   * int, float, complex, str, bytes, bool, None: by exact type (TYPE_MATCH); by value
#     when ``specialize(..., static=[...])`` names them (numba's literal arguments);
#   * arrays (numpy ndarrays and their subclasses; objects with ``__array_interface__``;
#     objects with DLPack): ARRAY_MATCH with ``aligned=True``: exact type, dtype, ndim,
#     layout class (C, F, A), writeable, aligned: numba's ``Array(dtype, ndim, layout,
#     readonly)`` plus alignment, one exact dispatch fact. Arrays are left out of the
#     aliasing guards ([Note: Aliasing guards]): numba compiles the same code for
#     ``f(a, a)`` as for ``f(a, b)``, and an aliasing guard would cost a residual check on
#     every call; a compiler whose artifact depends on it guards it itself;
#   * numpy scalars: by exact type; those whose type does not fix the dtype
#     (datetime64, timedelta64, str_, bytes_, void) also by their dtype (EQUALS_MATCH on
#     ``.dtype``);
#   * tuples, lists, dicts: as in "values" (exact type, length or keys), each item by these
#     rules (so ``(1, 2.0)`` is a tuple of an int and a float);
#   * anything else: the default policy's rules (torch tensors by TENSOR_MATCH once the
#     torch integration is loaded; other objects by type and identity).
# "triton" is Triton's specialization of a kernel's arguments:
#   * int: by INT_CLASS (its width, and 1 / divisible by 16 / neither); by value if static;
#   * pointer arguments, a type with ``data_ptr`` (a torch tensor) or an array: exact type,
#     ``.dtype`` by value (and ``.device`` for a ``data_ptr`` type), DATA_PTR_ALIGNED (16
#     bytes), not the shape, strides or layout (a Triton kernel takes those as arguments);
#     before the base's rules, so a torch tensor is not guarded by TENSOR_MATCH; left out of
#     the aliasing guards. ``.dtype`` and ``.device`` are read as the kernel reads them,
#     wherever they live (an instance attribute, as on Triton's ``TensorWrapper``): a
#     constant by value, anything else by type and identity, a missing one by NOT_HASATTR;
#   * a value of an array-like or pointer type that cannot be read as one (an
#     ``__array_interface__`` that raises or is no dict, DLPack on another device, a
#     ``data_ptr()``, ``.dtype`` or ``.device`` that raises) is guarded as an object (type
#     and identity) in both
#     presets: a preset never makes a call fail that the plain function serves;
#   * everything else as in "types".
# Rules registered on a preset policy itself come first.
# The array and numpy rules are found by looking at the type (numpy is never imported for
# it: an ndarray cannot exist before numpy is).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Optional, Union

from .._util import SCALAR_TYPES
from ..compiler.array_facts import array_fact, data_pointer, numpy_or_none
from ..compiler.builder import GuardBuilder
from ..compiler.constants import is_constant
from ..guards import Source
from ..integrations import ensure_loaded
from ..sources import AttrSource
from .policy import _MISSING as MISSING
from .policy import (
    ArgContext,
    ArgPolicy,
    ArgRule,
    _static_lookup,
    default_policy,
    object_rule,
    real_mro,
)

__all__ = [
    "POLICY_PRESETS",
    "TritonPolicy",
    "TypesPolicy",
    "resolve_policy",
    "triton_policy",
    "types_policy",
]

_ARRAY_MATCH = functools.partial(GuardBuilder.ARRAY_MATCH, aligned=True)


def scalar_type_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """A builtin scalar by its exact type; by value where ``static=`` names it."""
    if ctx.is_static(source):
        ctx.by_value(source, value)
    else:
        ctx.by_type(source, value)


def _reads(read: Callable[[Any], Any], value: Any) -> bool:
    """Whether ``read(value)`` (an array fact, a data pointer) can be taken of ``value``:
    a type that looks like an array's may still refuse (an ``__array_interface__`` that
    raises or is no dict, DLPack on another device, a ``data_ptr()`` that is no int)."""
    try:
        read(value)
    except Exception:
        return False
    return True


def array_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """An array by ARRAY_MATCH (with alignment); neither its identity nor its aliasing with
    other arguments is guarded. A value of an array-like type that cannot be read as an
    array is guarded as an object (type and identity)."""
    if not _reads(array_fact, value):
        ctx.as_object(source, value)
        return
    ctx.guard(source, _ARRAY_MATCH)
    ctx.ignore_aliasing(source)


def numpy_scalar_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """A numpy scalar by exact type (and by dtype where the type does not fix it)."""
    ctx.by_type(source, value)
    np = numpy_or_none()
    tp = type(value)
    fixed = issubclass(tp, (np.number, np.bool_)) and not issubclass(tp, np.timedelta64)
    if not fixed:
        ctx.guard(AttrSource(source, "dtype"), GuardBuilder.EQUALS_MATCH)


def _is_array_type(tp: type) -> bool:
    np = numpy_or_none()
    if np is not None and issubclass(tp, np.ndarray):
        return True
    if _static_lookup(tp, "__array_interface__") is not MISSING:
        return True
    return (_static_lookup(tp, "__dlpack__") is not MISSING
            and _static_lookup(tp, "__dlpack_device__") is not MISSING)


class TypesPolicy(ArgPolicy):
    """The "types" preset ([Note: Policy presets]): scalars by type, arrays by ARRAY_MATCH.
    Rules registered on it come first; others fall through to its base (the default
    policy)."""

    def __init__(self, base: Optional[ArgPolicy] = None) -> None:
        super().__init__(base=base or default_policy)
        for tp in SCALAR_TYPES:
            self.register(tp, scalar_type_rule, subclasses=False)

    def rule_for(self, tp: type) -> ArgRule:
        for klass in real_mro(tp):  # this policy's own rules first
            found = self._rules.get(id(klass))
            if found is not None and found.tp is klass and (klass is tp or found.subclasses):
                return found.rule
        ensure_loaded()  # the torch integration's rules, once torch is imported
        np = numpy_or_none()
        if np is not None and issubclass(tp, np.generic):  # before arrays: it has an interface
            return numpy_scalar_rule
        early = self._array_rule(tp, before_base=True)
        if early is not None:
            return early
        base = self.base.rule_for(tp) if self.base is not None else object_rule
        if base is not object_rule:
            return base
        return self._array_rule(tp, before_base=False) or object_rule

    def _array_rule(self, tp: type, before_base: bool) -> Optional[ArgRule]:
        """The preset's rule for arrays: after the base's rules (a torch tensor keeps its
        own), ARRAY_MATCH."""
        return array_rule if not before_base and _is_array_type(tp) else None


def int_class_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """An int by its Triton class (INT_CLASS); by value where ``static=`` names it."""
    if ctx.is_static(source):
        ctx.by_value(source, value)
    else:
        ctx.guard(source, GuardBuilder.INT_CLASS)


_ABSENT: Any = object()


def _pointer_attr(value: Any, name: str) -> Any:
    """A pointer argument's ``name`` (``dtype``, ``device``) as Triton reads it (``x.dtype``,
    wherever it lives: the class, the instance, ``__getattr__``); ``_ABSENT`` when it has
    none. Any other exception of the read propagates."""
    try:
        return getattr(value, name)
    except AttributeError:
        return _ABSENT


def _guard_pointer_attr(ctx: ArgContext, source: Source, name: str, part: Any) -> None:
    """``part`` (read by ``_pointer_attr``) by value when it is a constant, else by type
    and identity; its absence by NOT_HASATTR."""
    attr = AttrSource(source, name)
    if part is _ABSENT:
        ctx.guard(attr, GuardBuilder.NOT_HASATTR)
    elif is_constant(part):
        ctx.guard(attr, GuardBuilder.EQUALS_MATCH)
    else:
        ctx.as_object(attr, part)


def pointer_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """What a Triton kernel's pointer argument is specialized on: exact type, dtype (and
    device, for a type with ``data_ptr``), and whether its data is 16-byte aligned. An
    array-like whose class has no ``dtype`` is guarded by ARRAY_MATCH (any layout); a value
    whose data pointer, dtype or device cannot be read, as an object (type and identity)."""
    tp = type(value)
    if not _reads(data_pointer, value):  # no pointer to classify: the object itself
        ctx.as_object(source, value)
        return
    has_ptr = _static_lookup(tp, "data_ptr") is not MISSING
    if not has_ptr and _static_lookup(tp, "dtype") is MISSING:
        ctx.guard(source, functools.partial(GuardBuilder.ARRAY_MATCH, layout="any"))
    else:
        names = ("dtype", "device") if has_ptr else ("dtype",)
        try:
            parts = [_pointer_attr(value, name) for name in names]
        except Exception:  # a property that raises: nothing to specialize on
            ctx.as_object(source, value)
            return
        ctx.by_type(source, value)
        for name, part in zip(names, parts, strict=True):
            _guard_pointer_attr(ctx, source, name, part)
    ctx.guard(source, GuardBuilder.DATA_PTR_ALIGNED)
    ctx.ignore_aliasing(source)


class TritonPolicy(TypesPolicy):
    """The "triton" preset ([Note: Policy presets]): ints by INT_CLASS, pointer arguments
    (a type with ``data_ptr``, such as a torch tensor, or an array) by type, dtype and
    DATA_PTR_ALIGNED; other scalars by type."""

    def __init__(self, base: Optional[ArgPolicy] = None) -> None:
        super().__init__(base)
        self.register(int, int_class_rule, subclasses=False, replace=True)

    def _array_rule(self, tp: type, before_base: bool) -> Optional[ArgRule]:
        if before_base and (_static_lookup(tp, "data_ptr") is not MISSING
                            or _is_array_type(tp)):
            return pointer_rule
        return None


_presets: dict[str, ArgPolicy] = {}
POLICY_PRESETS = ("values", "types", "triton")


def types_policy() -> TypesPolicy:
    """The shared "types" policy (what ``policy="types"`` means)."""
    policy = _presets.get("types")
    if policy is None:
        policy = _presets.setdefault("types", TypesPolicy())
    return policy  # type: ignore[return-value]


def triton_policy() -> TritonPolicy:
    """The shared "triton" policy (what ``policy="triton"`` means)."""
    policy = _presets.get("triton")
    if policy is None:
        policy = _presets.setdefault("triton", TritonPolicy())
    return policy  # type: ignore[return-value]


def resolve_policy(policy: Union[ArgPolicy, str, None]) -> ArgPolicy:
    """The policy ``specialize(policy=...)`` names: None or "values" is the default, "types"
    the types preset ([Note: Policy presets]), an ``ArgPolicy`` itself."""
    if isinstance(policy, ArgPolicy):
        return policy
    if policy is None or policy == "values":
        return default_policy
    if policy == "types":
        return types_policy()
    if policy == "triton":
        return triton_policy()
    raise ValueError(
        f"policy must be an ArgPolicy or one of {POLICY_PRESETS}, got {policy!r}"
    )
